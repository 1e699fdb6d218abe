package bench

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/store"

	"github.com/harness-edge/harness-edge/internal/stategen"
)

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
		w, err := ReferenceWorkload(b.TempDir(), 1000)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(w.StoredPerStep, "stored-B/step")
		b.ReportMetric(w.StoredPerAppended, "stored/appended")
		b.ReportMetric(w.StoreOverStateZstd, "store/state-zstd")
		b.ReportMetric(w.SnapshotPerStep, "snapshot-B/step")
		b.ReportMetric(float64(w.CPUPerStep.Microseconds()), "cpu-us/step")
		b.ReportMetric(float64(w.SnapshotCPU.Microseconds()), "snapshot-cpu-us/step")
		b.ReportMetric(float64(w.DurableP50.Microseconds()), "durable-p50-us")
		b.ReportMetric(float64(w.DurableP99.Microseconds()), "durable-p99-us")
		b.ReportMetric(float64(w.BareSyncP50.Microseconds()), "bare-sync-p50-us")
		b.ReportMetric(float64(w.BareSyncP99.Microseconds()), "bare-sync-p99-us")
		b.ReportMetric(float64(w.DurableP50)/float64(w.BareSyncP50), "durable/bare-p50")
	}
}

// BenchmarkRestore opens a store holding a harness with N checkpoints of the reference workload
// (built once, untimed) and restores it, as a restarted process does.
func BenchmarkRestore(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("%dcheckpoints", n), func(b *testing.B) {
			for b.Loop() {
				d, first, err := RestoreTime(b.TempDir(), n, 5)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(d.Microseconds()), "restore-us")
				b.ReportMetric(float64(first.Microseconds()), "first-restore-us")
			}
		})
	}
}

// BenchmarkPersistStep is one reference step's checkpoint at each state size; prepare-us is its
// state-management cost (everything but the Pebble commit).
func BenchmarkPersistStep(b *testing.B) {
	for _, size := range sizes {
		b.Run(sizeName(size), func(b *testing.B) {
			s, err := store.OpenStore(b.TempDir(), store.StoreOptions{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			r := rand.New(rand.NewPCG(uint64(size), 3))
			st := stategen.Reference(r, size)
			var prep time.Duration
			n := 0
			for b.Loop() {
				n++
				referenceStep(r, st, n)
				cp, err := s.Persist(st)
				if err != nil {
					b.Fatal(err)
				}
				prep += cp.Prepare
			}
			b.ReportMetric(float64(prep.Microseconds())/float64(n), "prepare-us")
		})
	}
}

// The keyframe-step figures time real keyframes: one per size, each the median of keyframes
// the replay bound forced after the first, with the requirement's bar where not emulated.
func TestKeyframeStepsTimeTheKeyframesTheBoundForces(t *testing.T) {
	for _, emulated := range []string{"", "qemu-user"} {
		rep := &Report{}
		if err := keyframeSteps(Options{Dir: t.TempDir(), Quick: true, Emulated: emulated}, rep); err != nil {
			t.Fatal(err)
		}
		if len(rep.Figures) != 2 {
			t.Fatalf("%d figures, want one per size", len(rep.Figures))
		}
		for i, label := range []string{"1MB", "10MB"} {
			f := rep.Figures[i]
			// Encoding and compressing a whole state of a megabyte or more takes some time.
			if f.ID != "keyframe_step_"+label || f.Unit != "ms" || f.Value < 0.1 {
				t.Fatalf("figure %+v", f)
			}
			if hasBar := f.Bar != ""; hasBar != (emulated == "") {
				t.Fatalf("emulated %q: figure %s has bar %q", emulated, f.ID, f.Bar)
			}
		}
	}
}
