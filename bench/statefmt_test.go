package bench

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/internal/stategen"
	"github.com/harness-edge/harness-edge/statefmt"
)

func refState(b *testing.B, n int) (*statefmt.HarnessState, []byte, []byte) {
	b.Helper()
	s := stategen.Reference(rand.New(rand.NewPCG(uint64(n), 1)), n)
	bin, err := statefmt.EncodeBinary(s)
	if err != nil {
		b.Fatal(err)
	}
	js, err := statefmt.EncodeJSON(s)
	if err != nil {
		b.Fatal(err)
	}
	return s, bin, js
}

// BenchmarkStateEncode is a full encoding of reference states (MB/s of the encoded size).
func BenchmarkStateEncode(b *testing.B) {
	for _, n := range sizes {
		s, bin, js := refState(b, n)
		b.Run("binary/"+sizeName(n), func(b *testing.B) {
			b.SetBytes(int64(len(bin)))
			for b.Loop() {
				if _, err := statefmt.EncodeBinary(s); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("json/"+sizeName(n), func(b *testing.B) {
			b.SetBytes(int64(len(js)))
			for b.Loop() {
				if _, err := statefmt.EncodeJSON(s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkStateDecode decodes reference states (MB/s of the encoded size).
func BenchmarkStateDecode(b *testing.B) {
	for _, n := range sizes {
		_, bin, js := refState(b, n)
		b.Run("binary/"+sizeName(n), func(b *testing.B) {
			b.SetBytes(int64(len(bin)))
			for b.Loop() {
				if _, err := statefmt.DecodeBinary(bin); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("json/"+sizeName(n), func(b *testing.B) {
			b.SetBytes(int64(len(js)))
			for b.Loop() {
				if _, err := statefmt.DecodeJSON(js); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkStateIncrementalEncode is one step of the reference workload: append one tool call,
// bump the counters, encode with the harness's BinaryEncoder. Its ns/op must not grow with the
// state. Every 20 steps the state is put back to its starting size, off the clock.
func BenchmarkStateIncrementalEncode(b *testing.B) {
	for _, n := range sizes {
		s, _, _ := refState(b, n)
		base := len(s.ToolCallHistory)
		r := rand.New(rand.NewPCG(9, 9))
		pool := make([]statefmt.ToolCallRecord, 20)
		for i := range pool {
			pool[i] = stategen.ReferenceRecord(r, s.UpdatedAt.Add(time.Duration(i)*time.Second))
		}
		b.Run(sizeName(n), func(b *testing.B) {
			var enc statefmt.BinaryEncoder
			if _, err := enc.Encode(s); err != nil {
				b.Fatal(err)
			}
			i := 0
			for b.Loop() {
				if i == len(pool) {
					b.StopTimer()
					s.ToolCallHistory = s.ToolCallHistory[:base]
					enc.Reset()
					if _, err := enc.Encode(s); err != nil {
						b.Fatal(err)
					}
					i = 0
					b.StartTimer()
				}
				s.ToolCallHistory = append(s.ToolCallHistory, pool[i])
				s.TotalToolCalls = len(s.ToolCallHistory)
				s.CheckpointCount++
				s.UpdatedAt = pool[i].Timestamp
				inc, err := enc.Encode(s)
				if err != nil {
					b.Fatal(err)
				}
				sink += inc.Prefix
				i++
			}
			s.ToolCallHistory = s.ToolCallHistory[:base]
		})
	}
}
