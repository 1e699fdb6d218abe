// Command peers runs one real-text workload, durable step by durable step, on harness-edge and
// on the systems its users would otherwise use, in one process and one time window, and
// reports them side by side (`make bench-peers`). See docs/bench.md.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	var (
		steps   = flag.String("n", "300,1000", "step counts, comma-separated")
		rounds  = flag.Int("rounds", 5, "timed rounds per system and step count (the figures are medians)")
		seed    = flag.Uint64("seed", 1, "chooses the files and lines the steps read")
		dir     = flag.String("dir", "", "scratch directory, on the disk to measure (default: a temporary directory)")
		out     = flag.String("out", "", "write the report to OUT.md and OUT.json")
		goroot  = flag.String("goroot", goruntime.GOROOT(), "the Go distribution whose src/ is the text")
		version = flag.String("version", "", "harness-edge's version, for the report")
		lg      = flag.String("langgraph", "langgraph", "directory of the LangGraph.js runner and its packages (\"\": skip LangGraph.js)")
		lgRound = flag.Int("langgraph-rounds", 3, "timed rounds of LangGraph.js (its 1,000-step run takes a minute or more)")
	)
	flag.Parse()
	var ns []int
	for _, f := range strings.Split(*steps, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			fatalf("-n: %q is not a step count", f)
		}
		ns = append(ns, n)
	}
	if *rounds < 1 {
		fatalf("-rounds must be at least 1")
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "peers-")
		if err != nil {
			fatalf("%v", err)
		}
		defer os.RemoveAll(d)
		*dir = d
	} else if err := mkdirAll(*dir); err != nil {
		fatalf("%v", err)
	}
	rep, err := bench(context.Background(), options{steps: ns, rounds: *rounds, seed: *seed, dir: *dir,
		src: filepath.Join(*goroot, "src"), version: *version, langGraph: *lg, langGraphRounds: *lgRound})
	if err != nil {
		fatalf("%v", err)
	}
	md := rep.markdown()
	fmt.Print(md)
	if *out != "" {
		js, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(*out+".json", append(js, '\n'), 0o644); err != nil {
			fatalf("%v", err)
		}
		if err := os.WriteFile(*out+".md", []byte(md), 0o644); err != nil {
			fatalf("%v", err)
		}
	}
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench-peers: "+format+"\n", args...)
	os.Exit(1)
}

func mkdirAll(d string) error { return os.MkdirAll(d, 0o700) }

type options struct {
	steps   []int
	rounds  int
	seed    uint64
	dir     string
	src     string
	version string
	// langGraph is the LangGraph.js runner's directory ("": skip it).
	langGraph       string
	langGraphRounds int
}

// Figures is one system at one step count: medians over the timed rounds.
type Figures struct {
	MsPerStep     float64   `json:"msPerStep"`
	CPUMsPerStep  float64   `json:"cpuMsPerStep"`
	FsyncsPerStep *float64  `json:"fsyncsPerStep,omitempty"` // from the counting round; nil: not counted
	DiskBytes     int64     `json:"diskBytes"`
	RatioToHE     float64   `json:"msRatioToHarnessEdge"`
	RoundsMs      []float64 `json:"roundsMsPerStep"`
	OutputsSHA256 string    `json:"outputsSha256"`
}

// Row is a system's figures at every step count.
type Row struct {
	system
	At map[int]*Figures `json:"at"`
}

// Report is a run of the peer benchmark.
type Report struct {
	Started     time.Time `json:"started"`
	DurationSec float64   `json:"durationSec"`
	Version     string    `json:"harnessEdgeVersion,omitempty"`
	GoVersion   string    `json:"goVersion"`
	CPUs        int       `json:"cpus"`
	Steps       []int     `json:"steps"`
	Rounds      int       `json:"rounds"`
	Seed        uint64    `json:"seed"`
	// AppendedPerStep is the output each step records, on average, per step count.
	AppendedPerStep map[int]float64 `json:"appendedBytesPerStep"`
	Rows            []*Row          `json:"systems"`
	Skipped         []string        `json:"skipped,omitempty"`
}

func bench(ctx context.Context, o options) (*Report, error) {
	rep := &Report{Started: time.Now().UTC(), Version: o.version, GoVersion: goruntime.Version(), CPUs: goruntime.NumCPU(),
		Steps: o.steps, Rounds: o.rounds, Seed: o.seed, AppendedPerStep: map[int]float64{}}
	systems := slices.Clone(systems)
	if o.langGraph == "" {
		rep.Skipped = append(rep.Skipped, "LangGraph.js + SqliteSaver: not run (-langgraph \"\")")
	} else if dir, err := filepath.Abs(o.langGraph); err != nil {
		return nil, err
	} else if lg, why := langGraph(dir, min(o.langGraphRounds, o.rounds)); why != "" {
		rep.Skipped = append(rep.Skipped, why)
	} else {
		systems = append(systems, lg)
	}
	for _, s := range systems {
		rep.Rows = append(rep.Rows, &Row{system: s, At: map[int]*Figures{}})
	}
	for _, n := range o.steps {
		ws := filepath.Join(o.dir, fmt.Sprintf("workspace-%d", n))
		w, err := newWorkload(o.src, ws, n, o.seed)
		if err != nil {
			return nil, err
		}
		rep.AppendedPerStep[n] = float64(w.Appended) / float64(n)
		want := digest(w.Want)
		ms := make([][]float64, len(systems))
		cpu := make([][]float64, len(systems))
		disk := make([][]int64, len(systems))
		// Round 0 counts fsyncs (and warms the page cache); rounds 1.. are timed. Each round
		// runs every system once, starting with a different one, so that a noisy moment on a
		// shared machine does not fall on one system only.
		for round := 0; round <= o.rounds; round++ {
			for k := range systems {
				i := (k + round) % len(systems)
				s := systems[i]
				if round == 0 && !s.CanCount || s.Rounds > 0 && round > s.Rounds {
					continue
				}
				d, err := os.MkdirTemp(o.dir, "run-")
				if err != nil {
					return nil, err
				}
				goruntime.GC()
				r, err := s.run(ctx, w, d, round == 0)
				os.RemoveAll(d)
				// Write back what the run left dirty in the page cache now, so that the next
				// system's fsyncs do not wait behind it.
				syscall.Sync()
				if err != nil {
					return nil, fmt.Errorf("%s, %d steps: %w", s.Name, n, err)
				}
				if err := w.check(s.Name, r.Outputs); err != nil {
					return nil, err
				}
				f := rep.Rows[i].At[n]
				if f == nil {
					f = &Figures{}
					rep.Rows[i].At[n] = f
				}
				f.OutputsSHA256 = digest(r.Outputs)
				if round == 0 {
					if r.Fsyncs >= 0 {
						v := float64(r.Fsyncs) / float64(n)
						f.FsyncsPerStep = &v
					}
					continue
				}
				ms[i] = append(ms[i], msPer(r.Elapsed, n))
				cpu[i] = append(cpu[i], msPer(r.CPU, n))
				disk[i] = append(disk[i], r.Bytes)
				fmt.Fprintf(os.Stderr, "  n=%d round %d %-24s %7.3f ms/step  cpu %7.3f ms/step  %8d B\n", n, round, s.Name, msPer(r.Elapsed, n), msPer(r.CPU, n), r.Bytes)
			}
		}
		for i, row := range rep.Rows {
			f := row.At[n]
			if f.OutputsSHA256 != want {
				return nil, fmt.Errorf("%s: outputs differ from the workload's", row.Name)
			}
			f.RoundsMs, f.MsPerStep, f.CPUMsPerStep = ms[i], median(ms[i]), median(cpu[i])
			f.DiskBytes = medianInt(disk[i])
		}
		os.RemoveAll(ws)
		he := rep.Rows[0].At[n].MsPerStep
		for _, row := range rep.Rows {
			row.At[n].RatioToHE = row.At[n].MsPerStep / he
		}
	}
	rep.DurationSec = time.Since(rep.Started).Seconds()
	return rep, nil
}

func msPer(d time.Duration, n int) float64 { return float64(d.Nanoseconds()) / 1e6 / float64(n) }

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func medianInt(v []int64) int64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type quiet struct{}

func (quiet) Infof(string, ...any)      {}
func (quiet) Errorf(string, ...any)     {}
func (quiet) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }
