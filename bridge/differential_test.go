package bridge_test

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"

	"github.com/harness-edge/harness-edge/bridge"
	"github.com/harness-edge/harness-edge/internal/workload"
)

// edit is one step of a generated edit script.
type edit struct {
	Kind, At, Len int
}

func genEdit() gopter.Gen {
	return gopter.CombineGens(gen.IntRange(0, 3), gen.IntRange(0, 1<<20), gen.IntRange(1, 3000)).
		Map(func(v []any) edit { return edit{v[0].(int), v[1].(int), v[2].(int)} })
}

func applyEdits(r *rand.Rand, base []byte, edits []edit) []byte {
	t := bytes.Clone(base)
	for _, e := range edits {
		if len(t) == 0 {
			t = workload.Text(r, e.Len)
			continue
		}
		at := e.At % len(t)
		end := min(at+e.Len, len(t))
		switch e.Kind {
		case 0: // substitute
			for i := at; i < end && i < at+8; i++ {
				t[i] ^= 0xa5
			}
		case 1: // insert
			t = append(t[:at], append(workload.Text(r, e.Len), t[at:]...)...)
		case 2: // delete
			t = append(t[:at], t[end:]...)
		default: // move a block to the end
			moved := bytes.Clone(t[at:end])
			t = append(append(t[:at], t[end:]...), moved...)
		}
	}
	return t
}

// TestDifferentialCrossApply: for generated bases and edit scripts, every backend's delta is
// applied by every backend to byte-identical targets (1,000 cases).
func TestDifferentialCrossApply(t *testing.T) {
	engines, _ := bridge.Available()
	encoders := make([]bridge.Encoder, len(engines))
	for i, e := range engines {
		enc, err := e.NewEncoder()
		if err != nil {
			t.Fatal(err)
		}
		defer enc.Close()
		encoders[i] = enc
	}
	params := gopter.DefaultTestParametersWithSeed(20261121)
	params.MinSuccessfulTests = 1000
	props := gopter.NewProperties(params)
	props.Property("deltas cross-apply byte for byte", prop.ForAll(
		func(seed uint64, size int, text bool, edits []edit) bool {
			r := rand.New(rand.NewPCG(seed, 1))
			var base []byte
			if text {
				base = workload.Text(r, size)
			} else {
				base = workload.Random(r, size)
			}
			target := applyEdits(r, base, edits)
			for i, enc := range encoders {
				d, err := enc.Encode(base, target)
				if err != nil {
					t.Logf("%s encode: %v", engines[i].Backend(), err)
					return false
				}
				for _, a := range engines {
					got, err := a.ApplyDelta(nil, base, d, bridge.DefaultMaxTarget)
					if err != nil || !bytes.Equal(got, target) {
						t.Logf("%s applying %s's delta: %v", a.Backend(), engines[i].Backend(), err)
						return false
					}
				}
			}
			return true
		},
		gen.UInt64(), gen.IntRange(0, 100_000), gen.Bool(), gen.SliceOfN(6, genEdit()),
	))
	props.TestingRun(t)
}
