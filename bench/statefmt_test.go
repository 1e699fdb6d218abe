package bench

import (
	"fmt"
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

// BenchmarkPlanStepEncode is a checkpoint of a plan of 10, 1,000 and 10,000 steps in which one
// step changed: compared step by step with what the log holds (every), or told which one
// changed (told), as a running harness tells the store.
func BenchmarkPlanStepEncode(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		for _, told := range []bool{false, true} {
			name := fmt.Sprintf("%d/every", n)
			if told {
				name = fmt.Sprintf("%d/told", n)
			}
			b.Run(name, func(b *testing.B) {
				s := &statefmt.HarnessState{HarnessID: "h", TaskID: "t", AgentName: "a", Status: statefmt.StatusRunning, Plan: &statefmt.ExecutionPlan{TaskID: "t"}}
				for i := range n {
					deps := []string{}
					if i > 0 {
						deps = []string{s.Plan.Steps[i-1].ID}
					}
					s.Plan.Steps = append(s.Plan.Steps, statefmt.ExecutionStep{ID: fmt.Sprintf("s%05d", i),
						Description: fmt.Sprintf("read lines %d-%d of a file and record them", i, i+40), AssignedAgent: "a",
						Dependencies: deps, Status: statefmt.StepPending})
				}
				var enc statefmt.BinaryEncoder
				if _, err := enc.Encode(s); err != nil {
					b.Fatal(err)
				}
				i := 0
				for b.Loop() {
					st := &s.Plan.Steps[i%n]
					out := "the lines read"
					st.Output, st.Attempts = &out, st.Attempts+1
					_, err := enc.EncodeChanged(s, statefmt.StepChanges{Known: told, Indexes: []int{i % n}})
					if err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
		}
	}
}
