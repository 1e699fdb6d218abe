package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/klauspost/compress/zstd"

	"github.com/harness-edge/harness-edge/internal/syncfs"
	"github.com/harness-edge/harness-edge/internal/workload"
	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
	"github.com/harness-edge/harness-edge/store"
)

// textDirs are where a Linux machine keeps plain text that no one wrote for this benchmark.
var textDirs = []string{"/usr/share/common-licenses", "/usr/share/doc"}

// textCorpus copies up to limit bytes of real text found on this machine into dir (files of at
// least 60 lines, as read_file reads them) and returns their names with their line counts and
// where the text came from. With none found it writes generated text and says so.
func textCorpus(dir string, limit int) (files []string, lines []int, source string, err error) {
	total := 0
	add := func(name string, b []byte) error {
		n := bytes.Count(b, []byte("\n"))
		if n < 60 || !utf8Text(b) {
			return nil
		}
		f := fmt.Sprintf("t%04d.txt", len(files))
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			return err
		}
		files, lines, total = append(files, f), append(lines, n), total+len(b)
		return nil
	}
	for _, root := range textDirs {
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, werr error) error {
			if werr != nil || total >= limit {
				return filepath.SkipDir
			}
			if d.IsDir() || !d.Type().IsRegular() {
				return nil
			}
			if fi, err := d.Info(); err != nil || fi.Size() > 256<<10 {
				return nil
			}
			b, rerr := os.ReadFile(p)
			if rerr != nil {
				return nil
			}
			return add(p, b)
		})
		if err != nil {
			return nil, nil, "", err
		}
	}
	if len(files) >= 3 {
		return files, lines, fmt.Sprintf("%d text files of this machine's %v, %d KB", len(files), textDirs, total>>10), nil
	}
	files, lines = nil, nil
	r := rand.New(rand.NewPCG(5, 5))
	for range 8 {
		var b []byte
		for range 400 {
			b = append(append(b, workload.Text(r, 30+r.IntN(70))...), '\n')
		}
		if err := add("generated", b); err != nil {
			return nil, nil, "", err
		}
	}
	return files, lines, "generated text (no text files found under " + fmt.Sprint(textDirs) + ")", nil
}

func utf8Text(b []byte) bool { return utf8.Valid(b) && !bytes.ContainsRune(b, 0) }

// e2eTask is a task of n steps, each reading 20-60 lines of the corpus through read_file and
// recording them as its output, each depending on the one before.
func e2eTask(id, workspace string, files []string, lines []int, n int, seed uint64) ([]byte, error) {
	type action struct {
		Tool string         `json:"tool"`
		Args map[string]any `json:"args"`
	}
	r := rand.New(rand.NewPCG(seed, 11))
	steps := make(map[string][]action, n)
	plan := make([]map[string]any, 0, n)
	for i := range n {
		sid := fmt.Sprintf("s%05d", i+1)
		f := r.IntN(len(files))
		limit := 20 + r.IntN(41)
		steps[sid] = []action{{Tool: "read_file", Args: map[string]any{"path": files[f], "offset": 1 + r.IntN(max(1, lines[f]-limit)), "limit": limit}}}
		s := map[string]any{"id": sid, "description": "read " + files[f], "agent": "A"}
		if i > 0 {
			s["dependsOn"] = []string{fmt.Sprintf("s%05d", i)}
		}
		plan = append(plan, s)
	}
	return json.Marshal(map[string]any{
		"id": id, "agent": "A", "autonomy": 5, "workspace": map[string]any{"path": workspace, "shared": "read-only"}, "budget": map[string]any{"toolCalls": n},
		"agents": map[string]any{"A": map[string]any{"driver": "script", "tools": []string{"read_file"},
			"script": map[string]any{"steps": steps}}},
		"plan": plan,
	})
}

// stepClock records, for every harness, when each of its steps completed and the process's CPU
// time then; it cancels a harness's run once it has completed enough steps.
type stepClock struct {
	// upTo is the steps a harness completes before it is cancelled, unless it is the whole
	// plan (planSize): then the harness runs to its end.
	upTo, planSize int
	// series has one entry per harness, made before any runs (so that Emit only reads the map):
	// each harness's completions are recorded under its own lock, and the harnesses do not
	// wait on each other to be measured.
	series map[string]*stepSeries
}

// stepSeries is one harness's completions: when each came, and the process's CPU time at the
// first and the last (0 between them).
type stepSeries struct {
	mu     sync.Mutex
	at     []time.Time
	cpu    []time.Duration
	cancel context.CancelFunc
}

func (c *stepClock) Emit(e event.Event) {
	if e.Type != event.StepCompleted {
		return
	}
	now := time.Now()
	s := c.series[e.HarnessID]
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// The process's CPU time is read at a harness's first and last measured completions only
	// (the figures use nothing else): a getrusage at every step put 10-30 µs of the clock's own
	// into every step measured, its time and its CPU.
	var cpu time.Duration
	if n := len(s.at); n == 0 || n+1 >= min(c.upTo, c.planSize) {
		cpu = cpuTime()
	}
	s.at = append(s.at, now)
	s.cpu = append(s.cpu, cpu)
	if len(s.at) >= c.upTo && c.upTo < c.planSize && s.cancel != nil {
		s.cancel()
	}
}

// e2eRun is what running harnesses of a plan size measured: the times between consecutive step
// completions (every harness's), wall time and CPU over the measured steps, bytes on disk.
type e2eRun struct {
	gaps      []time.Duration
	steps     int
	wall, cpu time.Duration
	// together is the steps per second over the window in which every harness was running (from
	// the last harness's second completed step to the first harness's last): the start of the
	// harnesses (tasks, first keyframes) and the end of the last ones are not in it.
	together float64
	window   time.Duration // what together counts over
	disk     int64
	outputs  [][]byte // each measured step's output, for the floor
	// chain is what the harnesses that completed keep in the store (their records).
	chain int
	// fsyncs are those of the harnesses' runs, from their creation to their completion (the
	// store's open and close left out), when runE2E was given a *syncfs.FS.
	fsyncs int64
}

// runE2E runs `harnesses` harnesses of a plan of planSize steps at once in one manager on a fresh
// store, each up to `upTo` completed steps, and measures from every harness's second completed
// step (the first carries the plan's keyframe and warms the caches).
func runE2E(ctx context.Context, o Options, files []string, lines []int, ws string, planSize, upTo, harnesses int, counted *syncfs.FS) (e2eRun, error) {
	var res e2eRun
	dir, done, err := scratch(o, "e2e")
	if err != nil {
		return res, err
	}
	defer done()
	var fs vfs.FS
	if counted != nil {
		fs = counted
	}
	s, err := store.OpenStore(filepath.Join(dir, "store"), store.StoreOptions{FS: fs})
	if err != nil {
		return res, err
	}
	defer s.Close()
	if counted != nil {
		counted.Reset()
	}
	clk := &stepClock{upTo: upTo, planSize: planSize, series: map[string]*stepSeries{}}
	m := harness.NewManager(s, harness.Options{Sinks: []event.Sink{clk}})
	var hs []*harness.Harness
	for i := range harnesses {
		src, err := e2eTask(fmt.Sprintf("e2e-%d", i), ws, files, lines, planSize, uint64(i))
		if err != nil {
			return res, err
		}
		t, err := task.ParseAt("e2e.json", src, dir)
		if err != nil {
			return res, err
		}
		h, err := m.Create(t)
		if err != nil {
			return res, err
		}
		hs = append(hs, h)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(hs))
	ctxs := make([]context.Context, len(hs))
	for i, h := range hs {
		var cancel context.CancelFunc
		ctxs[i], cancel = context.WithCancel(ctx)
		clk.series[h.ID()] = &stepSeries{cancel: cancel}
	}
	for i, h := range hs {
		rctx, cancel := ctxs[i], clk.series[h.ID()].cancel
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cancel()
			if err := h.Run(rctx); err != nil && rctx.Err() == nil {
				errs[i] = fmt.Errorf("harness %s: %w", h.ID(), err)
			}
		}()
	}
	wg.Wait()
	if counted != nil {
		res.fsyncs = counted.Count()
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	for _, err := range errs {
		if err != nil {
			return res, err
		}
	}
	var first, last, from, to time.Time
	var cpu0, cpu1 time.Duration
	for _, h := range hs {
		if at := clk.series[h.ID()].at; len(at) > 1 {
			if from.IsZero() || at[1].After(from) {
				from = at[1]
			}
			if to.IsZero() || at[len(at)-1].Before(to) {
				to = at[len(at)-1]
			}
		}
	}
	for _, h := range hs {
		at, cpu := clk.series[h.ID()].at, clk.series[h.ID()].cpu
		if len(at) < min(upTo, planSize) {
			st := h.State()
			return res, fmt.Errorf("harness %s completed %d steps of %d: %s (%s)", h.ID(), len(at), min(upTo, planSize), st.Status, st.StatusReason)
		}
		for i := 2; i < len(at); i++ {
			res.gaps = append(res.gaps, at[i].Sub(at[i-1]))
		}
		for _, t := range at {
			if t.After(from) && !t.After(to) {
				res.together++
			}
		}
		res.steps += len(at) - 1
		if first.IsZero() || at[0].Before(first) {
			first, cpu0 = at[0], cpu[0]
		}
		if at[len(at)-1].After(last) {
			last, cpu1 = at[len(at)-1], cpu[len(cpu)-1]
		}
		st, err := s.Restore(h.ID())
		if err != nil {
			return res, err
		}
		if st.Status == statefmt.StatusCompleted {
			n, err := s.ChainBytes(h.ID())
			if err != nil {
				return res, err
			}
			res.chain += n
		}
		for _, ps := range st.Plan.Steps {
			if ps.Output != nil && len(res.outputs) < 2000 {
				res.outputs = append(res.outputs, []byte(*ps.Output))
			}
		}
	}
	res.wall, res.cpu = last.Sub(first), cpu1-cpu0
	if to.After(from) {
		res.window = to.Sub(from)
		res.together /= res.window.Seconds()
	} else {
		res.together = 0
	}
	res.disk = int64(store.DirUsage(filepath.Join(dir, "store")))
	return res, nil
}

// bareFloor commits each output in its own synced Pebble batch on a fresh store: one fsync per
// step and nothing else, the floor a durable step cannot go under. It returns each commit's time.
func bareFloor(o Options, outputs [][]byte) ([]time.Duration, error) {
	dir, done, err := scratch(o, "floor")
	if err != nil {
		return nil, err
	}
	defer done()
	db, err := pebble.Open(dir, &pebble.Options{Logger: quiet{}})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var d []time.Duration
	for i, out := range outputs {
		t0 := time.Now()
		if err := db.Set(fmt.Appendf(nil, "step/%08d", i), out, pebble.Sync); err != nil {
			return nil, err
		}
		d = append(d, time.Since(t0))
	}
	return d, nil
}

func medianOf(d []time.Duration) time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	return d[len(d)/2]
}

// endToEnd measures a durable step as `run` makes it, whole: the script driver reads real text
// through read_file, the harness records the output, writes its events and index, and
// checkpoints, fsync included, on a real store. At plan sizes 10, 1,000 and 10,000 (the first
// steps of the larger plans), then 50 harnesses at once in one manager, beside the floor (a bare
// Pebble Sync batch of the same outputs) measured in the same run.
func endToEnd(ctx context.Context, o Options, rep *Report) error {
	ws, done, err := scratch(o, "e2e-text")
	if err != nil {
		return err
	}
	defer done()
	// The task's workspace must not depend on where the task file is (a relative --dir).
	if ws, err = filepath.Abs(ws); err != nil {
		return err
	}
	files, lines, source, err := textCorpus(ws, 2<<20)
	if err != nil {
		return err
	}
	upTo, many, manyUpTo := 300, 50, 100
	sizes := []int{10, 1000, 10000}
	if o.Quick {
		upTo, many, manyUpTo = 120, 20, 40
	}
	if o.Emulated != "" {
		sizes = sizes[:2] // parsing and planning 10,000 steps under an emulator takes minutes
	}
	per := map[int]time.Duration{}
	var floor []time.Duration // the floor's commits, measured between the runs of the plan of 1,000
	var oneRate float64       // one harness's steps per second, plan of 1,000, measured as `together` is
	var oneCPU float64        // the CPUs one harness keeps busy, plan of 1,000
	for _, size := range sizes {
		// A 10-step plan is run again and again, so that its figure has as many steps as the
		// others. The plan of 1,000 is run in three rounds too, the floor measured after each on
		// the outputs it read: the ratio of the two then compares the disk as it was at the same
		// minutes (a shared machine's fsync drifts by half over a run of the suite). A run's
		// first two steps give no gap.
		runUpTo := min(upTo, size)
		if size == 1000 {
			runUpTo = upTo/3 + 2
		}
		var gaps []time.Duration
		var steps, runs int
		var cpu time.Duration
		var wall time.Duration
		var rate float64
		for len(gaps) < upTo-2 {
			r, err := runE2E(ctx, o, files, lines, ws, size, runUpTo, 1, nil)
			if err != nil {
				return fmt.Errorf("plan of %d steps: %w", size, err)
			}
			gaps, steps, cpu, wall = append(gaps, r.gaps...), steps+r.steps, cpu+r.cpu, wall+r.wall
			runs, rate = runs+1, rate+r.together
			if size == 1000 {
				d, err := bareFloor(o, r.outputs)
				if err != nil {
					return err
				}
				floor = append(floor, d...)
			}
		}
		if size == 1000 {
			oneRate = rate / float64(runs)
		}
		per[size] = medianOf(gaps)
		if size == 1000 {
			oneCPU = cpu.Seconds() / max(wall.Seconds(), 1e-9)
		}
		label := fmt.Sprintf("plan%d", size)
		rep.add(info("e2e_step_ms_"+label, fmt.Sprintf("end-to-end durable step, p50, plan of %d steps", size), msf(per[size]), "ms",
			fmt.Sprintf("%d steps of read_file on %s, script driver, one harness", len(gaps), source)))
		rep.add(info("e2e_step_cpu_ms_"+label, fmt.Sprintf("end-to-end CPU per step, plan of %d steps", size), msf(cpu)/float64(max(1, steps)), "ms",
			"the whole process's CPU over the measured steps, fdatasync's kernel time included"))
	}
	// The fsyncs, counted through the store's file system in runs of their own (the timed runs
	// go straight to the disk): one harness, then several at once, whose commits share them.
	for _, n := range []int{1, 20} {
		r, err := runE2E(ctx, o, files, lines, ws, 100, 100, n, syncfs.New())
		if err != nil {
			return fmt.Errorf("counting fsyncs, %d harnesses: %w", n, err)
		}
		steps := n * 100
		each := float64(r.fsyncs) / float64(steps)
		if n == 1 {
			rep.add(atMost("e2e_fsyncs_per_step", "end-to-end fsyncs per step, one harness", each, "fsyncs", 1.1, false,
				fmt.Sprintf("%d fsyncs for a 100-step plan, counted from the harness's creation to its completion, both included (the store's heads file, rewritten at most every 10 s with its directory, adds two)", r.fsyncs)))
			continue
		}
		rep.add(info(fmt.Sprintf("e2e_fsyncs_per_step_%d", n), fmt.Sprintf("end-to-end fsyncs per step, %d harnesses at once", n), each, "fsyncs",
			fmt.Sprintf("%d fsyncs for %d steps (%d harnesses of 100 steps at once, from their creation to their completion): commits that wait at the same moment share one (Pebble's group commit)", r.fsyncs, steps, n)))
	}
	flat := float64(per[sizes[len(sizes)-1]]) / float64(per[10])
	rep.add(atMost("e2e_plan_flatness", fmt.Sprintf("end-to-end step p50, plan of %d / plan of 10", sizes[len(sizes)-1]), flat, "x", 1.3, false,
		"per-step cost flat in the plan's size; timing-sensitive: reported, not enforced"))
	// A long run: the last steps, with the whole history and every earlier output in the state,
	// against the first ones of the same run.
	histN := 1000
	if o.Quick {
		histN = 400
	}
	hr, err := runE2E(ctx, o, files, lines, ws, histN, histN, 1, nil)
	if err != nil {
		return fmt.Errorf("a run of %d steps: %w", histN, err)
	}
	// Over a whole run, so that what a store holds once (the task, the plan's first keyframe)
	// is spread over the steps as a user's run spreads it.
	rep.add(info("e2e_disk_per_step_plan1000", fmt.Sprintf("store on disk per step, a run of %d steps", histN), float64(hr.disk)/float64(histN), "B",
		"every file of the store after the run, before any compaction, over its steps"))
	early, late := medianOf(hr.gaps[:100]), medianOf(hr.gaps[len(hr.gaps)-100:])
	rep.add(info("e2e_step_ms_late", fmt.Sprintf("end-to-end durable step, p50 of steps %d-%d of a %d-step run", histN-99, histN, histN), msf(late), "ms",
		fmt.Sprintf("the first 100 steps of the same run: %.3f ms", msf(early))))
	rep.add(atMost("e2e_history_flatness", fmt.Sprintf("end-to-end step p50, last 100 / first 100 steps of a %d-step run", histN), float64(late)/float64(early), "x", 1.3, false,
		"per-step cost flat in the history's length; timing-sensitive: reported, not enforced"))
	if hr.chain == 0 {
		return fmt.Errorf("a run of %d steps did not complete", histN)
	}
	text := bytes.Join(hr.outputs, nil)
	z, how, err := zstd3(text)
	if err != nil {
		return err
	}
	rep.add(info("e2e_chain_bytes", fmt.Sprintf("finished chain of the %d-step run", histN), float64(hr.chain), "B",
		fmt.Sprintf("its records in the store once it completed; the text its steps read: %d B, %d B under %s", len(text), z, how)))
	rep.add(atMost("e2e_chain_over_zstd", fmt.Sprintf("finished chain of the %d-step run / zstd -3 of the text its steps read", histN), float64(hr.chain)/float64(z), "x", 1.5, false,
		"the text alone is the compressor's floor; the chain holds the tool calls, the plan and the state around it too"))
	floorP50 := medianOf(floor)
	rep.add(info("e2e_floor_ms", "bare Pebble Sync batch of one step's output, p50", msf(floorP50), "ms",
		fmt.Sprintf("the floor: one fsync per step, %d commits measured between the runs of the plan of 1,000", len(floor))))
	rep.add(atMost("e2e_over_floor", "end-to-end step p50 (plan of 1,000) / the floor", float64(per[1000])/float64(floorP50), "x", 1.2, false,
		"timing-sensitive: reported, not enforced"))

	r, err := runE2E(ctx, o, files, lines, ws, 100, manyUpTo, many, nil)
	if err != nil {
		return fmt.Errorf("%d harnesses at once: %w", many, err)
	}
	agg := r.together
	rep.add(info(fmt.Sprintf("e2e_harnesses%d_steps_per_s", many), fmt.Sprintf("%d harnesses at once in one process: steps per second, all together", many), agg, "steps/s",
		fmt.Sprintf("%d steps in all, counted while all %d ran; one harness alone does %.0f (plan of 1,000, counted the same way); the %d harnesses kept %.1f of %d CPUs busy, %.2f ms of CPU per step",
			r.steps, many, oneRate, many, r.cpu.Seconds()/max(r.wall.Seconds(), 1e-9), runtime.NumCPU(), msf(r.cpu)/float64(max(1, r.steps)))))
	rep.add(atMost(fmt.Sprintf("e2e_harnesses%d_p99_ms", many), fmt.Sprintf("%d harnesses at once: time between a harness's steps, p99", many), msf(pct(r.gaps, .99)), "ms", 50, false,
		"timing-sensitive: reported, not enforced"))
	rep.add(info(fmt.Sprintf("e2e_harnesses%d_speedup", many), fmt.Sprintf("%d harnesses at once: aggregate steps/s over one harness's, this machine's disk", many), agg/oneRate, "x",
		fmt.Sprintf("several harnesses' checkpoints share fsyncs (Pebble's group commit); one harness uses %.0f%% of a CPU, so %d CPUs bound this at about %.1fx; the bar is on a slow disk (next figure)",
			100*oneCPU, runtime.NumCPU(), float64(runtime.NumCPU())/max(oneCPU, 0.01))))
	return manyOnASlowDisk(ctx, o, rep, files, lines, ws, many, manyUpTo)
}

// slowSync is what the slow-disk figures add to every fsync: about what an SD card or an eMMC
// of a small board takes for one.
const slowSync = 2 * time.Millisecond

// manyOnASlowDisk runs one harness, then `many` at once, on a store whose every fsync takes
// slowSync longer. A lone harness then waits on its disk, not on a CPU, as on a small board's
// flash; the many share each fsync (Pebble's group commit) and are bounded by the CPUs instead.
// Their ratio is what sharing fsyncs buys where the fsync is the cost; on this machine's own disk
// (the figure before) one harness already keeps a CPU busy, and the CPUs bound the ratio there.
func manyOnASlowDisk(ctx context.Context, o Options, rep *Report, files []string, lines []int, ws string, many, upTo int) error {
	one, err := runE2E(ctx, o, files, lines, ws, 100, upTo, 1, syncfs.Slow(slowSync))
	if err != nil {
		return fmt.Errorf("one harness on a slow disk: %w", err)
	}
	r, err := runE2E(ctx, o, files, lines, ws, 100, upTo, many, syncfs.Slow(slowSync))
	if err != nil {
		return fmt.Errorf("%d harnesses at once on a slow disk: %w", many, err)
	}
	if one.together <= 0 || r.together <= 0 {
		return fmt.Errorf("slow disk: no window in which every harness ran (%d harnesses: %.0f steps/s; one: %.0f)", many, r.together, one.together)
	}
	slow := fmt.Sprintf("%s more per fsync", slowSync)
	rep.add(atLeast(fmt.Sprintf("e2e_harnesses%d_speedup_slow_disk", many), fmt.Sprintf("%d harnesses at once over one harness, aggregate steps/s, fsync %s", many, slow), r.together/one.together, "x", 5, false,
		fmt.Sprintf("as on an SD card or eMMC: one harness %.0f steps/s (%.2f ms a step), %d at once %.0f steps/s, %.2f fsyncs a step over the runs, their creation and end included (one alone: %.2f); timing-sensitive: reported, not enforced",
			one.together, 1e3/one.together, many, r.together, float64(r.fsyncs)/float64(many*upTo), float64(one.fsyncs)/float64(upTo))))
	rep.add(atMost(fmt.Sprintf("e2e_harnesses%d_p99_ms_slow_disk", many), fmt.Sprintf("%d harnesses at once, fsync %s: time between a harness's steps, p99", many, slow), msf(pct(r.gaps, .99)), "ms", 50, false,
		"timing-sensitive: reported, not enforced"))
	return nil
}

// zstd3 is the size of b compressed as `zstd -3` does, by the zstd command when it is installed,
// else by the Go zstd's level 3 equivalent (0.5 % larger on real text); how says which.
func zstd3(b []byte) (n int, how string, err error) {
	if path, err := exec.LookPath("zstd"); err == nil {
		cmd := exec.Command(path, "-3", "-c", "-q")
		cmd.Stdin = bytes.NewReader(b)
		out, err := cmd.Output()
		if err != nil {
			return 0, "", fmt.Errorf("zstd -3: %w", err)
		}
		return len(out), "zstd -3", nil
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return 0, "", err
	}
	defer enc.Close()
	return len(enc.EncodeAll(b, nil)), "Go zstd SpeedDefault (no zstd command here)", nil
}
