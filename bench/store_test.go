package bench

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/klauspost/compress/zstd"

	"github.com/harness-edge/harness-edge/bridge"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/stategen"
)

type quiet struct{}

func (quiet) Infof(string, ...any)      {}
func (quiet) Errorf(string, ...any)     {}
func (quiet) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func pct(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// referenceStep advances the reference workload: one tool call with a 300-2000 byte result,
// counters, status and timestamps edited.
func referenceStep(r *rand.Rand, s *statefmt.HarnessState, n int) int {
	rec := stategen.ReferenceRecord(r, s.CreatedAt.Add(time.Duration(n)*time.Second))
	s.ToolCallHistory = append(s.ToolCallHistory, rec)
	s.TotalToolCalls = len(s.ToolCallHistory)
	s.CheckpointCount = n
	s.Iterations = n
	s.UpdatedAt = rec.Timestamp
	s.AgentLoopSnapshot.Iteration = n
	s.Plan.Steps[1].Attempts = n % 7
	return len(rec.Result.Output)
}

// BenchmarkReferenceWorkload runs 1,000 reference steps through the store (every checkpoint
// synced), and in the same run through full zstd snapshots and bare Pebble Sync commits of the
// store's own record bytes. Metrics (medians per step unless said):
//
//	stored-B/step, stored/appended     bytes the store wrote per step, and per appended byte
//	store/state-zstd                   retained store bytes after 1,000 steps / the final state zstd-compressed
//	snapshot-B/step                    a full zstd snapshot per step
//	cpu-us/step, snapshot-cpu-us/step  process CPU per step (store; snapshot compression)
//	durable-p50-us, durable-p99-us     Persist latency
//	bare-sync-p50-us, bare-sync-p99-us a bare Pebble batch of the same bytes with pebble.Sync
//	durable/bare-p50                   the ratio (bar: <= 1.5)
func BenchmarkReferenceWorkload(b *testing.B) {
	for b.Loop() {
		dir := b.TempDir()
		s, err := bridge.OpenStore(filepath.Join(dir, "store"), bridge.StoreOptions{})
		if err != nil {
			b.Fatal(err)
		}
		bare, err := pebble.Open(filepath.Join(dir, "bare"), &pebble.Options{Logger: quiet{}})
		if err != nil {
			b.Fatal(err)
		}
		zenc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
		r := rand.New(rand.NewPCG(1000, 1))
		st := stategen.Reference(r, 0)
		var stored, appended, snapBytes int
		var durable, bareSync []time.Duration
		var cpuStore, cpuSnap time.Duration
		const steps = 1000
		for n := 1; n <= steps; n++ {
			appended += referenceStep(r, st, n)
			c0, t0 := cpuTime(), time.Now()
			cp, err := s.Persist(st)
			durable = append(durable, time.Since(t0))
			cpuStore += cpuTime() - c0
			if err != nil {
				b.Fatal(err)
			}
			stored += cp.StoredBytes
			// The same bytes through a bare Pebble batch (record + a small index value), synced.
			val := make([]byte, cp.StoredBytes)
			t1 := time.Now()
			bb := bare.NewBatch()
			_ = bb.Set([]byte(fmt.Sprintf("c/%08d", n)), val, nil)
			_ = bb.Set([]byte("i/x"), val[:min(200, len(val))], nil)
			if err := bb.Commit(pebble.Sync); err != nil {
				b.Fatal(err)
			}
			bareSync = append(bareSync, time.Since(t1))
			bb.Close()
		}
		// The baseline, in its own pass over the same workload so the CPU figures stay apart:
		// a full zstd snapshot of the state per step.
		r2 := rand.New(rand.NewPCG(1000, 1))
		st2 := stategen.Reference(r2, 0)
		for n := 1; n <= steps; n++ {
			referenceStep(r2, st2, n)
			c1 := cpuTime()
			full, _ := statefmt.EncodeBinary(st2)
			snapBytes += len(zenc.EncodeAll(full, nil))
			cpuSnap += cpuTime() - c1
		}
		full, _ := statefmt.EncodeBinary(st)
		fullZ := len(zenc.EncodeAll(full, nil))
		recs, err := s.Inspect(st.HarnessID)
		if err != nil {
			b.Fatal(err)
		}
		retained := 0
		for _, r := range recs {
			retained += r.StoredBytes
		}
		b.ReportMetric(float64(stored)/steps, "stored-B/step")
		b.ReportMetric(float64(stored)/float64(appended), "stored/appended")
		b.ReportMetric(float64(retained)/float64(fullZ), "store/state-zstd")
		b.ReportMetric(float64(snapBytes)/steps, "snapshot-B/step")
		b.ReportMetric(float64(cpuStore.Microseconds())/steps, "cpu-us/step")
		b.ReportMetric(float64(cpuSnap.Microseconds())/steps, "snapshot-cpu-us/step")
		b.ReportMetric(float64(pct(durable, .5).Microseconds()), "durable-p50-us")
		b.ReportMetric(float64(pct(durable, .99).Microseconds()), "durable-p99-us")
		b.ReportMetric(float64(pct(bareSync, .5).Microseconds()), "bare-sync-p50-us")
		b.ReportMetric(float64(pct(bareSync, .99).Microseconds()), "bare-sync-p99-us")
		b.ReportMetric(float64(pct(durable, .5))/float64(pct(bareSync, .5)), "durable/bare-p50")
		s.Close()
		bare.Close()
		zenc.Close()
	}
}

// BenchmarkRestore opens a store holding a harness with N checkpoints of the reference workload
// (built once, untimed) and restores it, as a restarted process does.
func BenchmarkRestore(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		dir := b.TempDir()
		s, err := bridge.OpenStore(dir, bridge.StoreOptions{})
		if err != nil {
			b.Fatal(err)
		}
		r := rand.New(rand.NewPCG(uint64(n), 2))
		st := stategen.Reference(r, 0)
		for i := 1; i <= n; i++ {
			referenceStep(r, st, i)
			if _, err := s.Persist(st); err != nil {
				b.Fatal(err)
			}
		}
		s.Close()
		b.Run(fmt.Sprintf("%dcheckpoints", n), func(b *testing.B) {
			for b.Loop() {
				s, err := bridge.OpenStore(dir, bridge.StoreOptions{})
				if err != nil {
					b.Fatal(err)
				}
				got, err := s.Restore(st.HarnessID)
				if err != nil || got.CheckpointCount != n {
					b.Fatalf("restore: %v", err)
				}
				s.Close()
			}
		})
	}
}
