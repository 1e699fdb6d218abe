package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/harness-edge/harness-edge/runtime/clock"

	"github.com/harness-edge/harness-edge/store"

	"github.com/cockroachdb/pebble/v2"
	"github.com/klauspost/compress/zstd"

	"github.com/harness-edge/harness-edge/bridge"
	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/internal/stategen"
	"github.com/harness-edge/harness-edge/internal/taskgen"
	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/sysinfo"
)

// Options configures a run of the suite.
type Options struct {
	// Quick runs fewer steps and skips the 10,000-checkpoint restore (for CI: well under a
	// minute natively).
	Quick bool
	// Dir is the scratch directory; put it on the disk to measure (the store's).
	Dir string
	// Binary is the harness-edge binary whose runs, idle daemon and size are measured ("": skip).
	Binary string
	// Emulated names the emulator the suite runs under ("qemu-user"), "" on real hardware.
	Emulated string
	// Version is the build's version, for the report.
	Version string
	// Log receives a line per measurement as it goes (nil: quiet).
	Log io.Writer
}

// Figure is one measured figure beside its bar.
type Figure struct {
	ID    string  `json:"id"`
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	// Bar is the bar as people read it ("<= 1 ms"); Limit and Max/Min say how Pass was decided.
	Bar   string  `json:"bar,omitempty"`
	Limit float64 `json:"limit,omitempty"`
	Pass  *bool   `json:"pass,omitempty"`
	// Enforced figures are robust on noisy shared machines: `bench --check` (and CI) fails on
	// them. The others are timing-sensitive: reported, not enforced.
	Enforced bool   `json:"enforced"`
	Note     string `json:"note,omitempty"`
}

// Report is a run of the suite.
type Report struct {
	Version     string    `json:"version"`
	Arch        string    `json:"arch"`
	Engine      string    `json:"engine"`
	GoVersion   string    `json:"goVersion"`
	CPUs        int       `json:"cpus"`
	Emulated    string    `json:"emulated,omitempty"`
	Quick       bool      `json:"quick"`
	Started     time.Time `json:"started"`
	DurationSec float64   `json:"durationSec"`
	Figures     []Figure  `json:"figures"`
}

// Failed lists the figures that broke their bar (only the enforced ones when enforced).
func (r *Report) Failed(enforced bool) []Figure {
	var out []Figure
	for _, f := range r.Figures {
		if f.Pass != nil && !*f.Pass && (f.Enforced || !enforced) {
			out = append(out, f)
		}
	}
	return out
}

func (r *Report) add(f Figure) { r.Figures = append(r.Figures, f) }

// atMost makes a figure with an upper bar.
func atMost(id, name string, v float64, unit string, limit float64, enforced bool, note string) Figure {
	pass := v <= limit
	return Figure{ID: id, Name: name, Value: v, Unit: unit, Bar: "<= " + num(limit) + " " + unit, Limit: limit, Pass: &pass, Enforced: enforced, Note: note}
}

// atLeast makes a figure with a lower bar.
func atLeast(id, name string, v float64, unit string, limit float64, enforced bool, note string) Figure {
	pass := v >= limit
	return Figure{ID: id, Name: name, Value: v, Unit: unit, Bar: ">= " + num(limit) + " " + unit, Limit: limit, Pass: &pass, Enforced: enforced, Note: note}
}

func info(id, name string, v float64, unit, note string) Figure {
	return Figure{ID: id, Name: name, Value: v, Unit: unit, Note: note}
}

func num(v float64) string {
	switch {
	case v == float64(int64(v)):
		return fmt.Sprintf("%d", int64(v))
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	case v >= 1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

func us(d time.Duration) float64  { return float64(d.Nanoseconds()) / 1e3 }
func msf(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

func pct(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// Run runs the suite.
func Run(ctx context.Context, o Options) (*Report, error) {
	e, _ := bridge.Load()
	r := &Report{Version: o.Version, Arch: bridge.Arch(), Engine: string(e.Backend()), GoVersion: goruntime.Version(),
		CPUs: goruntime.NumCPU(), Emulated: o.Emulated, Quick: o.Quick, Started: time.Now().UTC()}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, err
	}
	logf := func(format string, args ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, format+"\n", args...)
		}
	}
	for _, part := range []struct {
		name string
		run  func(context.Context, Options, *Report) error
	}{
		{"per-step overhead", stepOverhead},
		{"reference workload", referenceWorkload},
		{"end-to-end step", endToEnd},
		{"restore", restore},
		{"fsync", fsync},
		{"direct path", directPath},
		{"processes", processes},
		{"read-back", readBack},
		{"task files", taskFiles},
	} {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		t0 := time.Now()
		n := len(r.Figures)
		if err := part.run(ctx, o, r); err != nil {
			return nil, fmt.Errorf("bench %s: %w", part.name, err)
		}
		logf("%s: %d figures in %.1fs", part.name, len(r.Figures)-n, time.Since(t0).Seconds())
	}
	r.DurationSec = time.Since(r.Started).Seconds()
	return r, nil
}

// scratch makes a fresh directory under o.Dir for one measurement.
func scratch(o Options, name string) (string, func(), error) {
	d, err := os.MkdirTemp(o.Dir, name+"-")
	if err != nil {
		return "", nil, err
	}
	return d, func() { os.RemoveAll(d) }, nil
}

// referenceStep advances the reference workload: one tool call with a 300-2000 byte result,
// counters, status and timestamps edited. It returns the bytes appended.
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

// stepOverhead: the state-management cost of a checkpoint (store.Checkpoint.Prepare:
// everything but the Pebble commit) at 100 KB, 1 MB and 10 MB states, each step appending one
// reference tool call, through the real store.
func stepOverhead(_ context.Context, o Options, rep *Report) error {
	steps := map[int]int{100 << 10: 400, 1 << 20: 400, 10 << 20: 200}
	if o.Quick {
		steps = map[int]int{100 << 10: 150, 1 << 20: 150, 10 << 20: 100}
	}
	p50 := map[int]time.Duration{}
	for _, size := range []int{100 << 10, 1 << 20, 10 << 20} {
		var d []time.Duration
		err := referenceSteps(o, size, 3, bridge.ChainPolicy{}, func(n int, cp store.Checkpoint) bool {
			if n > 10 { // the first record is a keyframe of the whole state; a few warm the caches
				d = append(d, cp.Prepare)
			}
			return n < steps[size]+10
		})
		if err != nil {
			return err
		}
		label := map[int]string{100 << 10: "100KB", 1 << 20: "1MB", 10 << 20: "10MB"}[size]
		p50[size] = pct(d, .5)
		rep.add(info("step_overhead_p50_"+label, "per-step state-management overhead, p50, "+label+" state", us(p50[size]), "µs",
			fmt.Sprintf("%d steps, each appending a 300-2000 byte tool result; everything but the Pebble commit", len(d))))
		p99 := us(pct(d, .99))
		switch {
		case o.Emulated != "" && size == 10<<20:
			rep.add(atMost("step_overhead_p99_"+label, "per-step overhead, p99, 10MB state, under "+o.Emulated, p99/1000, "ms", 50, true,
				"the requirement's bar, under emulation (a pessimistic stand-in for a real ARM board)"))
		case o.Emulated != "":
			rep.add(info("step_overhead_p99_"+label, "per-step overhead, p99, "+label+" state, under "+o.Emulated, p99, "µs", "no bar under emulation"))
		case size == 1<<20:
			rep.add(atMost("step_overhead_p99_1MB", "per-step overhead, p99, 1MB state", p99, "µs", 100, false, "timing-sensitive: reported, not enforced"))
		case size == 10<<20:
			rep.add(atMost("step_overhead_p99_10MB", "per-step overhead, p99, 10MB state", p99/1000, "ms", 1, false, "timing-sensitive: reported, not enforced"))
			rep.add(atMost("step_overhead_p99_10MB_requirement", "per-step overhead, p99, 10MB state (the requirement)", p99/1000, "ms", 50, true, "the seed requirement: < 50 ms per step"))
		default:
			rep.add(info("step_overhead_p99_"+label, "per-step overhead, p99, "+label+" state", p99, "µs", ""))
		}
	}
	if err := keyframeSteps(o, rep); err != nil {
		return err
	}
	ratio := float64(p50[10<<20]) / float64(p50[100<<10])
	rep.add(atMost("step_overhead_flatness", "per-step overhead p50, 10MB / 100KB", ratio, "x", 3, true,
		"cost grows with the change, not the state"))
	return nil
}

// referenceSteps persists reference steps of a state of size bytes (its generator seeded with
// size and seed) through a real store with the keyframe policy, in a scratch directory, and
// hands f each checkpoint, numbered from 1, until f says to stop.
func referenceSteps(o Options, size int, seed uint64, policy bridge.ChainPolicy, f func(n int, cp store.Checkpoint) bool) error {
	dir, done, err := scratch(o, "steps")
	if err != nil {
		return err
	}
	defer done()
	s, err := store.OpenStore(dir, store.StoreOptions{Policy: policy})
	if err != nil {
		return err
	}
	defer s.Close()
	r := rand.New(rand.NewPCG(uint64(size), seed))
	st := stategen.Reference(r, size)
	for n := 1; ; n++ {
		referenceStep(r, st, n)
		cp, err := s.Persist(st)
		if err != nil {
			return err
		}
		if !f(n, cp) {
			return nil
		}
	}
}

// keyframeSteps: the state-management cost of the step that writes a keyframe, the slowest
// step there is (once per 1,000 checkpoints by default, so no p99 sees it): the state is
// encoded and compressed whole. Measured through the real store with a replay bound of 4, the
// median of the keyframes after the first.
func keyframeSteps(o Options, rep *Report) error {
	keyframes := 3
	if o.Quick {
		keyframes = 2
	}
	for _, size := range []int{1 << 20, 10 << 20} {
		var d []time.Duration
		err := referenceSteps(o, size, 5, bridge.ChainPolicy{MaxReplay: 4}, func(n int, cp store.Checkpoint) bool {
			if n > 1 && cp.Kind == statefmt.KindKeyframe {
				d = append(d, cp.Prepare)
			}
			return len(d) < keyframes
		})
		if err != nil {
			return err
		}
		label := map[int]string{1 << 20: "1MB", 10 << 20: "10MB"}[size]
		name := "the step that writes a keyframe, " + label + " state, median of " + fmt.Sprint(keyframes)
		note := "the state encoded and compressed whole (at most every 1,000 checkpoints); everything but the Pebble commit"
		if o.Emulated != "" {
			rep.add(info("keyframe_step_"+label, name+", under "+o.Emulated, msf(medianOf(d)), "ms", "no bar under emulation; "+note))
			continue
		}
		rep.add(atMost("keyframe_step_"+label, name, msf(medianOf(d)), "ms", 50, false,
			"the requirement: < 50 ms per step; timing-sensitive: reported, not enforced; "+note))
	}
	return nil
}

// taskFiles: task.Parse of big task files, as `run` and the daemon's API take them: YAML of
// 100 KiB and 1 MiB (whose ratio says whether the time grows with the size alone), and the same
// task as JSON.
func taskFiles(_ context.Context, o Options, rep *Report) error {
	runs := 5
	if o.Quick {
		runs = 3
	}
	parse := func(name string, data []byte) (time.Duration, int, error) {
		var d []time.Duration
		steps := 0
		for range runs {
			t0 := time.Now()
			t, err := task.Parse(name, data)
			d = append(d, time.Since(t0))
			if err != nil {
				return 0, 0, err
			}
			steps = len(t.Plan)
		}
		return medianOf(d), steps, nil
	}
	small, _, err := parse("small.yaml", taskgen.Big(100<<10))
	if err != nil {
		return err
	}
	yamlFile := taskgen.Big(1 << 20)
	big, steps, err := parse("big.yaml", yamlFile)
	if err != nil {
		return err
	}
	jsonFile, err := taskgen.BigJSON(1 << 20)
	if err != nil {
		return err
	}
	asJSON, jsonSteps, err := parse("big.json", jsonFile)
	if err != nil {
		return err
	}
	yamlNote := fmt.Sprintf("%d KiB of YAML, a plan of %d steps, agents of every driver, script steps full of durations; median of %d", len(yamlFile)>>10, steps, runs)
	jsonNote := fmt.Sprintf("%d KiB of JSON, indented: the same kind of task (a plan of %d steps); median of %d", len(jsonFile)>>10, jsonSteps, runs)
	ratio := float64(big) / float64(small)
	ratioNote := "10 times the size (1 MiB against 100 KiB) should take at most 12 times the time"
	if o.Emulated != "" {
		rep.add(info("task_parse_yaml_1MiB", "a 1 MiB YAML task file parsed, under "+o.Emulated, msf(big), "ms", "no bar under emulation; "+yamlNote))
		rep.add(info("task_parse_json_1MiB", "a 1 MiB JSON task file parsed, under "+o.Emulated, msf(asJSON), "ms", "no bar under emulation; "+jsonNote))
		rep.add(info("task_parse_linear", "task file parse time, 1 MiB / 100 KiB, under "+o.Emulated, ratio, "x", ratioNote))
		return nil
	}
	rep.add(atMost("task_parse_yaml_1MiB", "a 1 MiB YAML task file parsed", msf(big), "ms", 200, false, "timing-sensitive: reported, not enforced; "+yamlNote))
	rep.add(atMost("task_parse_json_1MiB", "a 1 MiB JSON task file parsed", msf(asJSON), "ms", 200, false, "timing-sensitive: reported, not enforced; "+jsonNote))
	rep.add(atMost("task_parse_linear", "task file parse time, 1 MiB / 100 KiB (YAML)", ratio, "x", 12, false, "timing-sensitive: reported, not enforced; "+ratioNote))
	return nil
}

// WorkloadResult is the reference workload's figures (BenchmarkReferenceWorkload reports them too).
type WorkloadResult struct {
	Steps                          int
	StoredPerStep                  float64 // bytes the store wrote per step
	StoredPerAppended              float64 // ... per appended byte
	StoreOverStateZstd             float64 // retained store bytes / the final state compressed alone
	SnapshotPerStep                float64 // a full zstd snapshot per step
	CPUPerStep, SnapshotCPU        time.Duration
	DurableP50, DurableP99         time.Duration
	BareSyncP50, BareSyncP99       time.Duration
	FinalStateBytes, RetainedBytes int
}

// ReferenceWorkload runs the reference workload through the store in dir (every checkpoint
// synced), and in the same run through full zstd snapshots and bare Pebble Sync commits of the
// store's own record bytes.
func ReferenceWorkload(dir string, steps int) (WorkloadResult, error) {
	res := WorkloadResult{Steps: steps}
	s, err := store.OpenStore(filepath.Join(dir, "store"), store.StoreOptions{})
	if err != nil {
		return res, err
	}
	defer s.Close()
	bare, err := pebble.Open(filepath.Join(dir, "bare"), &pebble.Options{Logger: quiet{}})
	if err != nil {
		return res, err
	}
	defer bare.Close()
	zenc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
	defer zenc.Close()
	r := rand.New(rand.NewPCG(1000, 1))
	st := stategen.Reference(r, 0)
	var stored, appended, snapBytes int
	var durable, bareSync []time.Duration
	var cpuStore, cpuSnap time.Duration
	for n := 1; n <= steps; n++ {
		appended += referenceStep(r, st, n)
		c0, t0 := cpuTime(), time.Now()
		cp, err := s.Persist(st)
		durable = append(durable, time.Since(t0))
		cpuStore += cpuTime() - c0
		if err != nil {
			return res, err
		}
		stored += cp.StoredBytes
		// The same bytes through a bare Pebble batch (record + a small index value), synced.
		val := make([]byte, cp.StoredBytes)
		t1 := time.Now()
		bb := bare.NewBatch()
		_ = bb.Set(fmt.Appendf(nil, "c/%08d", n), val, nil)
		_ = bb.Set([]byte("i/x"), val[:min(200, len(val))], nil)
		if err := bb.Commit(pebble.Sync); err != nil {
			return res, err
		}
		bareSync = append(bareSync, time.Since(t1))
		bb.Close()
	}
	// The baseline, in its own pass over the same workload so the CPU figures stay apart: a full
	// zstd snapshot of the state per step.
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
		return res, err
	}
	for _, r := range recs {
		res.RetainedBytes += r.StoredBytes
	}
	res.FinalStateBytes = len(full)
	res.StoredPerStep = float64(stored) / float64(steps)
	res.StoredPerAppended = float64(stored) / float64(appended)
	res.StoreOverStateZstd = float64(res.RetainedBytes) / float64(fullZ)
	res.SnapshotPerStep = float64(snapBytes) / float64(steps)
	res.CPUPerStep, res.SnapshotCPU = cpuStore/time.Duration(steps), cpuSnap/time.Duration(steps)
	res.DurableP50, res.DurableP99 = pct(durable, .5), pct(durable, .99)
	res.BareSyncP50, res.BareSyncP99 = pct(bareSync, .5), pct(bareSync, .99)
	return res, nil
}

type quiet struct{}

func (quiet) Infof(string, ...any)      {}
func (quiet) Errorf(string, ...any)     {}
func (quiet) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func referenceWorkload(_ context.Context, o Options, rep *Report) error {
	dir, done, err := scratch(o, "reference")
	if err != nil {
		return err
	}
	defer done()
	w, err := ReferenceWorkload(dir, 1000)
	if err != nil {
		return err
	}
	rep.add(info("stored_bytes_per_step", "stored bytes per checkpoint, reference workload", w.StoredPerStep, "B",
		fmt.Sprintf("1,000 synced steps; a full zstd snapshot per step: %.0f B", w.SnapshotPerStep)))
	rep.add(atMost("stored_per_appended", "stored bytes per appended byte", w.StoredPerAppended, "x", 0.5, true, ""))
	rep.add(atMost("store_over_state_zstd", "store after 1,000 steps / final state zstd-compressed alone", w.StoreOverStateZstd, "x", 2, true,
		fmt.Sprintf("final state %d B, %d B retained", w.FinalStateBytes, w.RetainedBytes)))
	rep.add(info("snapshot_bytes_per_step", "full zstd snapshot per step (the baseline)", w.SnapshotPerStep, "B", "same run"))
	rep.add(info("checkpoint_cpu_per_step", "CPU per checkpoint (store) vs full zstd snapshot", us(w.CPUPerStep), "µs",
		fmt.Sprintf("snapshot: %.0f µs", us(w.SnapshotCPU))))
	rep.add(info("durable_step_p50", "durable step latency (Persist with Sync), p50", us(w.DurableP50), "µs",
		fmt.Sprintf("p99 %.0f µs; bare Pebble Sync of the same bytes p50 %.0f µs, p99 %.0f µs", us(w.DurableP99), us(w.BareSyncP50), us(w.BareSyncP99))))
	rep.add(atMost("durable_over_bare", "durable step / bare Pebble Sync commit, p50", float64(w.DurableP50)/float64(w.BareSyncP50), "x", 1.5, false,
		"timing-sensitive (fsync noise): reported, not enforced"))
	return nil
}

func restore(_ context.Context, o Options, rep *Report) error {
	counts := []int{1000, 10000}
	if o.Quick {
		counts = []int{1000}
	}
	for _, n := range counts {
		dir, done, err := scratch(o, "restore")
		if err != nil {
			return err
		}
		d, first, err := RestoreTime(dir, n, 5)
		done()
		if err != nil {
			return err
		}
		cold := fmt.Sprintf("the first of the five, into memory the process had not used yet (as a restarted process does): %.1f ms", msf(first))
		if n == 10000 {
			rep.add(atMost("restore_10000", "resume of a harness with 10,000 checkpoints (open + restore), median", msf(d), "ms", 50, false,
				"timing-sensitive: reported, not enforced; "+cold))
		} else {
			note := cold
			if o.Quick {
				note += "; --quick skips the 10,000-checkpoint figure"
			}
			rep.add(info(fmt.Sprintf("restore_%d", n), fmt.Sprintf("resume of a harness with %d checkpoints (open + restore), median", n), msf(d), "ms", note))
		}
	}
	return nil
}

// RestoreTime builds a store in dir holding one harness with n reference checkpoints, then
// opens it and restores the harness `runs` times, as a restarted process does; it returns the
// median, and the first: the later ones reuse memory the first one mapped in, which on a
// virtual machine is most of the difference (see docs/bench.md).
func RestoreTime(dir string, n, runs int) (median, first time.Duration, err error) {
	s, err := store.OpenStore(dir, store.StoreOptions{})
	if err != nil {
		return 0, 0, err
	}
	r := rand.New(rand.NewPCG(uint64(n), 2))
	st := stategen.Reference(r, 0)
	for i := 1; i <= n; i++ {
		referenceStep(r, st, i)
		if _, err := s.Persist(st); err != nil {
			s.Close()
			return 0, 0, err
		}
	}
	s.Close()
	var ds []time.Duration
	for range runs {
		t0 := time.Now()
		s, err := store.OpenStore(dir, store.StoreOptions{})
		if err != nil {
			return 0, 0, err
		}
		got, err := s.Restore(st.HarnessID)
		ds = append(ds, time.Since(t0))
		s.Close()
		if err != nil {
			return 0, 0, err
		}
		if got.CheckpointCount != n {
			return 0, 0, fmt.Errorf("restored checkpoint %d, want %d", got.CheckpointCount, n)
		}
	}
	return pct(ds, .5), ds[0], nil
}

func fsync(_ context.Context, o Options, rep *Report) error {
	n := 100
	if o.Quick {
		n = 30
	}
	lat, err := sysinfo.FsyncLatency(o.Dir, n)
	if err != nil {
		return err
	}
	rep.add(info("fsync_p50", "fsync of a 4 KiB write on the store's disk, p50", us(lat[len(lat)/2]), "µs",
		fmt.Sprintf("p99 %.0f µs over %d probes: every durable checkpoint pays one", us(lat[len(lat)*99/100]), n)))
	return nil
}

// directPath: a longRunning: false task whose agent is a command, against running that command
// with the same prompt directly. The agent sleeps 50 ms, a fast stand-in for a real CLI agent
// (which takes seconds), so the percentage is pessimistic; the absolute overhead is the figure
// that carries over.
func directPath(ctx context.Context, o Options, rep *Report) error {
	dir, done, err := scratch(o, "direct")
	if err != nil {
		return err
	}
	defer done()
	argv := []string{"sh", "-c", "cat >/dev/null; sleep 0.05; echo '<promise>DONE</promise>'"}
	t, err := task.ParseAt("bench-direct.yaml", fmt.Appendf(nil, `
id: direct
agent: A
longRunning: false
prompt: say done
agents:
  A: {driver: command, command: [%q, %q, %q], completionPromise: DONE, maxIterations: 1}
plan: [{id: s1, description: say done, agent: A}]
`, argv[0], argv[1], argv[2]), dir)
	if err != nil {
		return err
	}
	runs := 40
	if o.Quick {
		runs = 12
	}
	// The two run in pairs, in alternating order, and the figure is the median of the pairs'
	// differences: a 50 ms sleep wanders by a millisecond or two from run to run (the machine's
	// timers), ten times the overhead measured, and the difference of two medians of a few runs
	// carries that noise whole.
	runDirect := func() (time.Duration, error) {
		t0 := time.Now()
		out, err := harness.RunDirect(ctx, t, clock.RealClock{})
		if err != nil || out.Status != statefmt.StatusCompleted {
			return 0, fmt.Errorf("direct path: %v (%s: %s)", err, out.Status, out.Reason)
		}
		return time.Since(t0), nil
	}
	runBare := func() (time.Duration, error) {
		t0 := time.Now()
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Dir = dir
		cmd.Stdin = strings.NewReader("say done")
		var stdout bytes.Buffer
		cmd.Stdout = &stdout
		err := cmd.Run()
		return time.Since(t0), err
	}
	var bare, over []time.Duration
	for i := range runs {
		first, second := runDirect, runBare
		if i%2 == 1 {
			first, second = runBare, runDirect
		}
		a, err := first()
		if err != nil {
			return err
		}
		b, err := second()
		if err != nil {
			return err
		}
		if i%2 == 1 {
			a, b = b, a
		}
		bare, over = append(bare, b), append(over, a-b)
	}
	agent := pct(bare, .5)
	d := pct(over, .5)
	rep.add(atMost("direct_path_overhead", "direct path (longRunning: false) over calling the agent itself, median", 100*float64(d)/float64(agent), "%", 1, false,
		fmt.Sprintf("%.2f ms over a %.1f ms agent (a command that sleeps 50 ms; real agents take seconds, so the share shrinks): the median of %d paired runs' differences; timing-sensitive", msf(d), msf(agent), runs)))
	return nil
}

// processes: a harness run of the binary (peak RSS, CPU), an idle daemon (RSS, CPU after a
// second), the binary's size.
func processes(ctx context.Context, o Options, rep *Report) error {
	if o.Binary == "" {
		return nil
	}
	fi, err := os.Stat(o.Binary)
	if err != nil {
		return err
	}
	rep.add(atMost("binary_size", "binary size ("+filepath.Base(o.Binary)+")", float64(fi.Size())/(1<<20), "MiB", 30, true, ""))
	dir, done, err := scratch(o, "proc")
	if err != nil {
		return err
	}
	defer done()
	db := filepath.Join(dir, "store")
	taskFile := filepath.Join(dir, "run.yaml")
	var steps strings.Builder
	for i := range 20 {
		fmt.Fprintf(&steps, "  - {id: s%d, description: step %d, agent: A}\n", i, i)
	}
	src := fmt.Sprintf(`id: run
agent: A
autonomy: 5
workspace: %s
agents:
  A:
    driver: script
    tools: [write_file, read_file]
    script:
      steps:
        "*":
          - {tool: write_file, args: {path: notes.md, content: "%s"}}
          - {tool: read_file, args: {path: notes.md}}
          - {sleep: 10ms}
          - {output: done}
plan:
%s`, dir, strings.Repeat("a line of notes ", 64), steps.String())
	if err := os.WriteFile(taskFile, []byte(src), 0o600); err != nil {
		return err
	}
	cmd := command(o.Binary, "--store", db, "run", taskFile)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return err
	}
	// The peak RSS is VmHWM, read until the process ends (the rusage maxrss of a child started
	// from a big process carries that process's high-water mark across exec).
	var peak uint64
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var werr error
poll:
	for {
		if v := vmHWM(cmd.Process.Pid); v > peak {
			peak = v
		}
		select {
		case werr = <-exited:
			break poll
		case <-time.After(2 * time.Millisecond):
		}
	}
	if werr != nil {
		return fmt.Errorf("harness run: %v: %s", werr, out.String())
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	note := "20 steps, 40 tool calls, synced checkpoints"
	if o.Emulated != "" {
		note += "; under emulation the figures include the emulator's own"
	}
	rep.add(info("run_peak_rss", "harness run: peak RSS (VmHWM)", float64(peak)/(1<<20), "MiB", note))
	rep.add(info("run_cpu", "harness run: CPU time", msf(cpu), "ms", note))

	d := command(o.Binary, "--store", db, "serve")
	d.Stdout, d.Stderr = io.Discard, io.Discard
	if err := d.Start(); err != nil {
		return err
	}
	defer d.Process.Kill()
	var c *control.Client
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err = control.Dial(db); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("the daemon did not start")
		}
	}
	if c.Owner.Owner != "daemon" {
		return fmt.Errorf("the store's owner is %s, not the daemon", c.Owner.Owner)
	}
	time.Sleep(time.Second)
	rss, dcpu, err := sysinfo.Of(d.Process.Pid)
	if err != nil {
		return err
	}
	rep.add(atMost("idle_daemon_rss", "idle daemon RSS (gopsutil, 1 s after start)", float64(rss)/(1<<20), "MiB", 30, false, idleNote(o)))
	rep.add(info("idle_daemon_cpu", "idle daemon CPU time, first second", msf(dcpu), "ms", ""))
	_ = d.Process.Signal(syscall.SIGTERM)
	_ = d.Wait()
	return ctx.Err()
}

func idleNote(o Options) string {
	if o.Emulated != "" {
		return "includes the emulator's own memory: not the figure of a real board"
	}
	return "memory is steady on a quiet machine, but the Go runtime's heap goal moves it a little"
}

// command runs the binary, through HARNESS_EDGE_EXEC_WRAPPER when set (under qemu: see
// cross/qemu-run).
func command(bin string, args ...string) *exec.Cmd {
	if w := strings.Fields(os.Getenv("HARNESS_EDGE_EXEC_WRAPPER")); len(w) > 0 {
		return exec.Command(w[0], append(append(w[1:], bin), args...)...)
	}
	return exec.Command(bin, args...)
}

// vmHWM is a process's peak resident memory so far (0 when unknown).
func vmHWM(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb uint64
			fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb)
			return kb << 10
		}
	}
	return 0
}
