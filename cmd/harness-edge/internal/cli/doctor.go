package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/harness-edge/harness-edge/bridge"
	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/internal/workload"
	"github.com/harness-edge/harness-edge/store"
	"github.com/harness-edge/harness-edge/sysinfo"
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
	Machine     sysinfo.Machine  `json:"machine"`
	Owner       OwnerInfo        `json:"owner"`
	// Repair is what --repair did (before the store was verified).
	Repair *store.RepairReport `json:"repair,omitempty"`
}

// OwnerInfo says whether a process owns the store (the daemon, or a foreground run).
type OwnerInfo struct {
	Running bool   `json:"running"`
	Kind    string `json:"kind,omitempty"` // daemon or run
	PID     int    `json:"pid,omitempty"`
	Frozen  bool   `json:"frozen,omitempty"`
	Active  int    `json:"active"`
	Queued  int    `json:"queued"`
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

// StoreInfo says where the store lives, whether it exists yet, how healthy it is (verify), and
// what its disk has to give: free space and the latency of an fsync, which every durable
// checkpoint pays.
type StoreInfo struct {
	Dir       string `json:"dir"`
	Exists    bool   `json:"exists"`
	Harnesses int    `json:"harnesses"`
	// SizeBytes is what the store's files take on disk.
	SizeBytes uint64   `json:"sizeBytes"`
	Problems  []string `json:"problems,omitempty"`
	Error     string   `json:"error,omitempty"`
	DiskFree  uint64   `json:"diskFreeBytes"`
	DiskTotal uint64   `json:"diskTotalBytes"`
	// FsyncP50Micros and FsyncP99Micros are over FsyncProbes synced 4 KiB writes.
	FsyncProbes    int     `json:"fsyncProbes"`
	FsyncP50Micros float64 `json:"fsyncP50Micros"`
	FsyncP99Micros float64 `json:"fsyncP99Micros"`
}

func newDoctorCmd(g *globals, stdout io.Writer) *cobra.Command {
	var asJSON, repair bool
	c := &cobra.Command{
		Use:   "doctor",
		Short: "Check the engine (backend, ABI, a delta self-check), the store (verify, free disk, fsync latency), the machine and the daemon",
		Long: `Check the engine (backend, ABI, a delta self-check), the store (verify, free disk, fsync
latency), the machine and the daemon.

With --repair, first recover or quarantine every damaged harness: each one's readable data is
copied to quarantine/ID-TIME.jsonl in the store directory; a harness with a checkpoint that still
replays is rewritten from the newest such checkpoint, with its readable events and a warning
event; one without is removed. A damaged heads file is rewritten. The store must not be owned
(stop the daemon first).`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			var fixed *store.RepairReport
			if repair {
				r, err := repairStore(g)
				if err != nil {
					return err
				}
				fixed = &r
			}
			rep := doctor(g)
			rep.Repair = fixed
			if asJSON {
				if err := writeJSON(stdout, rep); err != nil {
					return err
				}
			} else {
				printDoctor(stdout, rep)
			}
			if !rep.OK {
				why := rep.SelfCheck.Error
				switch {
				case rep.Store.Error != "":
					why = rep.Store.Error
				case len(rep.Store.Problems) > 0:
					why = fmt.Sprintf("verify found %s in the store", plural(len(rep.Store.Problems), "problem"))
				}
				return exitError{ExitError, errors.New("doctor found a problem: " + why)}
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	c.Flags().BoolVar(&repair, "repair", false, "recover or quarantine damaged harnesses first (the store must not be owned)")
	return c
}

// repairStore owns the store and repairs it (see store.Store.Repair).
func repairStore(g *globals) (store.RepairReport, error) {
	dir, err := g.storeDir()
	if err != nil {
		return store.RepairReport{}, err
	}
	if _, err := os.Stat(dir); err != nil {
		return store.RepairReport{}, fmt.Errorf("doctor --repair: %w", err)
	}
	o, err := control.Own(dir, control.Config{})
	if err != nil {
		return store.RepairReport{}, fmt.Errorf("doctor --repair needs the store to itself: %w", err)
	}
	rep, err := o.Server().Store().Repair()
	if cerr := o.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return rep, fmt.Errorf("doctor --repair: %w", err)
	}
	return rep, nil
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
	rep.Machine = sysinfo.Read()
	if dir, err := g.storeDir(); err == nil {
		rep.Store, rep.Owner = storeHealth(g, dir)
	}
	rep.OK = rep.SelfCheck.OK && len(rep.Store.Problems) == 0 && rep.Store.Error == ""
	return rep
}

// storeHealth verifies the store (through its owner when one runs), and measures its disk.
func storeHealth(g *globals, dir string) (si StoreInfo, oi OwnerInfo) {
	_, statErr := os.Stat(dir)
	si = StoreInfo{Dir: dir, Exists: statErr == nil}
	if c, err := control.Dial(dir); err == nil {
		oi = OwnerInfo{Running: true, Kind: string(c.Owner.Owner), PID: c.Owner.PID, Frozen: c.Owner.Frozen, Active: len(c.Owner.Running), Queued: len(c.Owner.Queued)}
	}
	if si.Exists {
		si.SizeBytes = store.DirUsage(dir)
		err := g.do(func(api *control.Conn) error {
			ctx := context.Background()
			l, err := api.List(ctx)
			if err != nil {
				return err
			}
			si.Harnesses = len(l)
			probs, err := api.Verify(ctx, "")
			for _, p := range probs {
				si.Problems = append(si.Problems, fmt.Sprintf("%s record %d: %s", p.ID, p.Seq, p.Reason))
			}
			return err
		})
		if err != nil {
			si.Error = err.Error()
		}
	}
	var err error
	if si.DiskFree, si.DiskTotal, err = sysinfo.DiskFree(dir); err != nil && si.Error == "" {
		si.Error = "disk: " + err.Error()
	}
	si.FsyncProbes = 20
	if lat, err := sysinfo.FsyncLatency(dir, si.FsyncProbes); err == nil {
		si.FsyncP50Micros = float64(lat[len(lat)/2].Nanoseconds()) / 1e3
		si.FsyncP99Micros = float64(lat[len(lat)*99/100].Nanoseconds()) / 1e3
	} else if si.Error == "" {
		si.Error = "fsync probe: " + err.Error()
	}
	return si, oi
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
	if r := rep.Repair; r != nil {
		if len(r.Harnesses) == 0 && !r.HeadsRewritten {
			fmt.Fprintf(w, "repair      nothing to repair\n")
		}
		for _, h := range r.Harnesses {
			switch {
			case h.Action == "recovered" && h.Quarantine == "" && h.Acknowledged > h.Seq:
				fmt.Fprintf(w, "repair      %s: recovered in place at checkpoint %d (checkpoints %d to %d were acknowledged and are lost)\n", h.ID, h.Seq, h.Seq+1, h.Acknowledged)
			case h.Action == "recovered" && h.Quarantine == "":
				fmt.Fprintf(w, "repair      %s: whole again at checkpoint %d (the damage it met was in data the repair removed)\n", h.ID, h.Seq)
			case h.Action == "recovered":
				fmt.Fprintf(w, "repair      %s: recovered to checkpoint %d with %s; what could be read is kept in %s\n", h.ID, h.Seq, plural(h.Events, "event"), h.Quarantine)
			default:
				fmt.Fprintf(w, "repair      %s: quarantined (no checkpoint replays): removed from the store; what could be read is kept in %s\n", h.ID, h.Quarantine)
			}
			fmt.Fprintf(w, "            damage: %s\n", h.Damage)
		}
		if r.HeadsRewritten {
			fmt.Fprintf(w, "repair      the heads file was damaged: written again from the index\n")
		}
	}
	st := rep.Store
	switch {
	case !st.Exists:
		fmt.Fprintf(w, "store       %s (not created yet)\n", st.Dir)
	case st.Error == "" && len(st.Problems) == 0:
		fmt.Fprintf(w, "store       %s: ok, %s, %s on disk; every chain replays and every hash matches\n", st.Dir, plural(st.Harnesses, "harness"), sysinfo.FormatBytes(st.SizeBytes))
	default:
		fmt.Fprintf(w, "store       %s: FAIL, %s, %s on disk\n", st.Dir, plural(st.Harnesses, "harness"), sysinfo.FormatBytes(st.SizeBytes))
		for _, p := range st.Problems {
			fmt.Fprintf(w, "            %s\n", p)
		}
	}
	if st.Error != "" {
		fmt.Fprintf(w, "            %s\n", st.Error)
	}
	fmt.Fprintf(w, "disk        %s free of %s; fsync of 4 KiB: p50 %.0f µs, p99 %.0f µs (%d probes; every checkpoint pays one)\n",
		sysinfo.FormatBytes(st.DiskFree), sysinfo.FormatBytes(st.DiskTotal), st.FsyncP50Micros, st.FsyncP99Micros, st.FsyncProbes)
	m := rep.Machine
	temp := "no temperature sensor"
	if m.TempSensor != "" {
		temp = fmt.Sprintf("hottest sensor %s at %.0f °C", m.TempSensor, m.MaxTempCelsius)
	}
	fmt.Fprintf(w, "machine     %d CPUs, load %.2f; memory %s available of %s; %s\n", m.CPUs, m.Load1,
		sysinfo.FormatBytes(m.MemAvailable), sysinfo.FormatBytes(m.MemTotal), temp)
	o := rep.Owner
	if o.Running {
		fmt.Fprintf(w, "owner       %s running (pid %d): %s running, %d queued, frozen=%v\n", o.Kind, o.PID, plural(o.Active, "harness"), o.Queued, o.Frozen)
	} else {
		fmt.Fprintln(w, "owner       none: no daemon or foreground run owns the store")
	}
}
