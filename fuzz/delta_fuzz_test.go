package fuzz

import (
	"bytes"
	"testing"

	"github.com/harness-edge/harness-edge/bridge"
	"github.com/harness-edge/harness-edge/internal/enginetest"
	"github.com/harness-edge/harness-edge/internal/fuzzseed"
)

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

// TestSeedCorpus fails when the committed corpus differs from seeds.go; -rewrite updates it.
func TestSeedCorpus(t *testing.T) {
	apply, roundTrip := DeltaSeeds()
	fuzzseed.Check(t, "./fuzz", map[string][]fuzzseed.Seed{"FuzzDeltaApply": apply, "FuzzDeltaRoundTrip": roundTrip,
		"FuzzAgentOutput": AgentOutputSeeds(), "FuzzTaskFile": TaskFileSeeds()})
}
