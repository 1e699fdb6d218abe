package bench

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/harness-edge/harness-edge/bridge"
	"github.com/harness-edge/harness-edge/internal/workload"
)

var sizes = []int{100 << 10, 1 << 20, 10 << 20}

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMB", n>>20)
	}
	return fmt.Sprintf("%dKB", n>>10)
}

// pair is a state and the same state after 10 scattered small edits.
func pair(n int) (base, target []byte) {
	r := rand.New(rand.NewPCG(uint64(n), 42))
	base = workload.Text(r, n)
	return base, workload.ScatteredEdits(r, base, 10)
}

var sink int

// BenchmarkMemcmp is the yardstick: one bytes.Equal pass over two equal buffers of each size.
func BenchmarkMemcmp(b *testing.B) {
	for _, n := range sizes {
		x, _ := pair(n)
		y := bytes.Clone(x)
		b.Run(sizeName(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				if bytes.Equal(x, y) {
					sink++
				}
			}
		})
	}
}

// BenchmarkDeltaEncode encodes the 10-edit delta through each backend; delta-bytes is its size.
func BenchmarkDeltaEncode(b *testing.B) {
	engines, _ := bridge.Available()
	for _, e := range engines {
		enc, err := e.NewEncoder()
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range sizes {
			base, target := pair(n)
			b.Run(fmt.Sprintf("%s/%s", e.Backend(), sizeName(n)), func(b *testing.B) {
				b.SetBytes(int64(n))
				var d []byte
				for b.Loop() {
					d, err = enc.Encode(base, target)
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(d)), "delta-bytes")
			})
		}
		enc.Close()
	}
}

// BenchmarkDeltaApply rebuilds the target from the best engine's delta through each backend.
func BenchmarkDeltaApply(b *testing.B) {
	best, _ := bridge.Load()
	engines, _ := bridge.Available()
	enc, err := best.NewEncoder()
	if err != nil {
		b.Fatal(err)
	}
	defer enc.Close()
	for _, n := range sizes {
		base, target := pair(n)
		d, err := enc.Encode(base, target)
		if err != nil {
			b.Fatal(err)
		}
		for _, e := range engines {
			// Steady state of a chain replay: the output buffer is reused from call to call.
			b.Run(fmt.Sprintf("%s/%s", e.Backend(), sizeName(n)), func(b *testing.B) {
				b.SetBytes(int64(n))
				var buf []byte
				for b.Loop() {
					buf, err = e.ApplyDelta(buf[:0], base, d, bridge.DefaultMaxTarget)
					if err != nil {
						b.Fatal(err)
					}
				}
				sink += len(buf)
			})
		}
	}
}

// BenchmarkHash64 is the content hash through each backend.
func BenchmarkHash64(b *testing.B) {
	engines, _ := bridge.Available()
	x, _ := pair(1 << 20)
	for _, e := range engines {
		b.Run(fmt.Sprintf("%s/1MB", e.Backend()), func(b *testing.B) {
			b.SetBytes(int64(len(x)))
			for b.Loop() {
				sink += int(e.Hash64(x))
			}
		})
	}
}
