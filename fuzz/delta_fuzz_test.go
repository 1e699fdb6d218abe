package fuzz

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/harness-edge/harness-edge/bridge"
	"github.com/harness-edge/harness-edge/internal/enginetest"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the seed corpus files under testdata/fuzz")

// maxFuzzTarget keeps forged lengths from making a fuzz run allocate much.
const maxFuzzTarget = 1 << 20

// FuzzDeltaApply feeds arbitrary (base, delta) pairs to every backend: none may panic, all must
// agree on the status and, on success, on the bytes.
func FuzzDeltaApply(f *testing.F) {
	engines, _ := bridge.Available()
	f.Fuzz(func(t *testing.T, base, delta []byte) {
		enginetest.Agree(t, engines, base, delta, maxFuzzTarget)
	})
}

// FuzzDeltaRoundTrip encodes arbitrary (base, target) pairs with every backend's encoder and
// applies each delta with every backend: all must rebuild the target exactly.
func FuzzDeltaRoundTrip(f *testing.F) {
	engines, _ := bridge.Available()
	f.Fuzz(func(t *testing.T, base, target []byte) {
		for _, e := range engines {
			enc, err := e.NewEncoder()
			if err != nil {
				t.Fatal(err)
			}
			d, err := enc.Encode(base, target)
			enc.Close()
			if err != nil {
				t.Fatalf("%s encode: %v", e.Backend(), err)
			}
			for _, a := range engines {
				got, err := a.ApplyDelta(nil, base, d, bridge.DefaultMaxTarget)
				if err != nil || !bytes.Equal(got, target) {
					t.Fatalf("%s applying %s's delta: %v", a.Backend(), e.Backend(), err)
				}
			}
		}
	})
}

// corpusFile renders a seed in the `go test fuzz v1` format.
func corpusFile(s Seed) []byte {
	var b strings.Builder
	b.WriteString("go test fuzz v1\n")
	for _, a := range s.Args {
		b.WriteString("[]byte(" + strconv.Quote(string(a)) + ")\n")
	}
	return []byte(b.String())
}

// TestSeedCorpus fails when the committed corpus differs from seeds.go; -rewrite updates it.
func TestSeedCorpus(t *testing.T) {
	apply, roundTrip := DeltaSeeds()
	seedJSON, err := os.ReadFile("../statefmt/testdata/seed-example.json")
	if err != nil {
		t.Fatal(err)
	}
	v0JSON, err := os.ReadFile("../statefmt/testdata/v0-draft.json")
	if err != nil {
		t.Fatal(err)
	}
	js, bin, rec := StateSeeds(seedJSON, v0JSON)
	for target, seeds := range map[string][]Seed{"FuzzDeltaApply": apply, "FuzzDeltaRoundTrip": roundTrip,
		"FuzzStateJSON": js, "FuzzStateBinary": bin, "FuzzRecord": rec, "FuzzFrames": FrameSeeds(),
		"FuzzAgentOutput": AgentOutputSeeds()} {
		dir := filepath.Join("testdata", "fuzz", target)
		for _, s := range seeds {
			path := filepath.Join(dir, s.Name)
			want := corpusFile(s)
			if *rewrite {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, want, 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("%v: run `go test ./fuzz -run TestSeedCorpus -rewrite`", err)
			} else if !bytes.Equal(got, want) {
				t.Errorf("%s is stale: run `go test ./fuzz -run TestSeedCorpus -rewrite`", path)
			}
		}
	}
}
