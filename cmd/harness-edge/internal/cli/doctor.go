package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/harness-edge/harness-edge/bridge"
	"github.com/harness-edge/harness-edge/bridge/workload"
)

// DoctorReport is what `harness-edge doctor --json` prints.
type DoctorReport struct {
	OK          bool             `json:"ok"`
	Version     string           `json:"version"`
	Arch        string           `json:"arch"`
	Engine      EngineInfo       `json:"engine"`
	Backends    []bridge.Backend `json:"backends"`
	Unavailable []string         `json:"unavailable,omitempty"`
	Warnings    []bridge.Warning `json:"warnings,omitempty"`
	SelfCheck   SelfCheck        `json:"selfCheck"`
	Store       StoreInfo        `json:"store"`
}

// SelfCheck is the engine self-check: a 1 MiB text state with scattered edits, encoded by the
// engine in use and rebuilt by every backend in this build, plus forged deltas that must fail.
type SelfCheck struct {
	OK            bool             `json:"ok"`
	Error         string           `json:"error,omitempty"`
	StateBytes    int              `json:"stateBytes"`
	Edits         int              `json:"edits"`
	DeltaBytes    int              `json:"deltaBytes"`
	EncodeMicros  float64          `json:"encodeMicros"`
	ApplyMicros   float64          `json:"applyMicros"`
	RebuiltBy     []bridge.Backend `json:"rebuiltBy"`
	ForgedRefused int              `json:"forgedRefused"`
}

// StoreInfo says where the store lives and whether it exists yet.
type StoreInfo struct {
	Dir    string `json:"dir"`
	Exists bool   `json:"exists"`
}

func newDoctorCmd(g *globals, stdout io.Writer) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "doctor",
		Short: "Check the engine (backend, ABI, a delta self-check across every backend) and the store location",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			rep := doctor(g)
			if asJSON {
				if err := writeJSON(stdout, rep); err != nil {
					return err
				}
			} else {
				printDoctor(stdout, rep)
			}
			if !rep.OK {
				return exitError{ExitError, errors.New("doctor found a problem: " + rep.SelfCheck.Error)}
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return c
}

func doctor(g *globals) DoctorReport {
	e, warns := bridge.Load()
	engines, errs := bridge.Available()
	rep := DoctorReport{
		Version:  version,
		Arch:     bridge.Arch(),
		Engine:   EngineInfo{Backend: e.Backend(), ABIVersion: e.ABIVersion()},
		Warnings: warns,
	}
	for _, x := range engines {
		rep.Backends = append(rep.Backends, x.Backend())
	}
	for _, err := range errs {
		rep.Unavailable = append(rep.Unavailable, err.Error())
	}
	rep.SelfCheck = selfCheck(e, engines)
	if dir, err := g.storeDir(); err == nil {
		_, statErr := os.Stat(dir)
		rep.Store = StoreInfo{Dir: dir, Exists: statErr == nil}
	}
	rep.OK = rep.SelfCheck.OK
	return rep
}

// median runs f n times and returns the median duration.
func median(n int, f func() error) (time.Duration, error) {
	ds := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		if err := f(); err != nil {
			return 0, err
		}
		ds = append(ds, time.Since(t0))
	}
	slices.Sort(ds)
	return ds[len(ds)/2], nil
}

func selfCheck(e bridge.Engine, all []bridge.Engine) (sc SelfCheck) {
	fail := func(format string, args ...any) SelfCheck {
		sc.OK, sc.Error = false, fmt.Sprintf(format, args...)
		return sc
	}
	r := rand.New(rand.NewPCG(2026, 11))
	base := workload.Text(r, 1<<20)
	sc.Edits = 10
	target := workload.ScatteredEdits(r, base, sc.Edits)
	sc.StateBytes = len(target)
	enc, err := e.NewEncoder()
	if err != nil {
		return fail("encoder: %v", err)
	}
	defer enc.Close()
	var delta []byte
	d, err := median(5, func() (err error) { delta, err = enc.Encode(base, target); return err })
	if err != nil {
		return fail("encode: %v", err)
	}
	sc.DeltaBytes, sc.EncodeMicros = len(delta), float64(d.Nanoseconds())/1e3
	want := e.Hash64(target)
	for _, x := range all {
		// The output buffer is reused across runs, as a chain replay reuses it: the figure is the
		// steady-state cost, not the first touch of fresh pages.
		var got []byte
		d, err := median(5, func() (err error) { got, err = x.ApplyDelta(got[:0], base, delta, bridge.DefaultMaxTarget); return err })
		if err != nil {
			return fail("%s could not apply a %s delta: %v", x.Backend(), e.Backend(), err)
		}
		if !bytes.Equal(got, target) || x.Hash64(got) != want {
			return fail("%s rebuilt a different state from a %s delta", x.Backend(), e.Backend())
		}
		if x == e {
			sc.ApplyMicros = float64(d.Nanoseconds()) / 1e3
		}
		sc.RebuiltBy = append(sc.RebuiltBy, x.Backend())
	}
	for _, forged := range [][]byte{delta[:len(delta)/2], append(bytes.Clone(delta), 1), []byte("garbage")} {
		if _, err := e.ApplyDelta(nil, base, forged, bridge.DefaultMaxTarget); err == nil {
			return fail("a forged delta was accepted")
		}
		sc.ForgedRefused++
	}
	sc.OK = true
	return sc
}

func printDoctor(w io.Writer, rep DoctorReport) {
	mark := func(ok bool) string {
		if ok {
			return "ok"
		}
		return "FAIL"
	}
	fmt.Fprintf(w, "harness-edge %s on %s\n", rep.Version, rep.Arch)
	fmt.Fprintf(w, "engine      %s (ABI %d); backends in this build: %v\n", rep.Engine.Backend, rep.Engine.ABIVersion, rep.Backends)
	for _, u := range rep.Unavailable {
		fmt.Fprintf(w, "            not loaded: %s\n", u)
	}
	for _, wn := range rep.Warnings {
		fmt.Fprintf(w, "warning     %s: %s\n", wn.Code, wn.Message)
	}
	sc := rep.SelfCheck
	fmt.Fprintf(w, "self-check  %s: %d-byte state, %d scattered edits -> %d-byte delta; encode %.0f µs, apply %.0f µs (median of 5); rebuilt by %v; %d forged deltas refused\n",
		mark(sc.OK), sc.StateBytes, sc.Edits, sc.DeltaBytes, sc.EncodeMicros, sc.ApplyMicros, sc.RebuiltBy, sc.ForgedRefused)
	if sc.Error != "" {
		fmt.Fprintf(w, "            %s\n", sc.Error)
	}
	exists := "not created yet"
	if rep.Store.Exists {
		exists = "exists"
	}
	fmt.Fprintf(w, "store       %s (%s)\n", rep.Store.Dir, exists)
}
