package tracing_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/harness-edge/harness-edge/control/tracing"
	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
	"github.com/harness-edge/harness-edge/store"
)

// closedPort is a loopback address where nothing listens: a collector that is down.
func closedPort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// stepsTask is a task of n script steps, each with one tool call.
func stepsTask(t testing.TB, id string, n int) *task.Task {
	t.Helper()
	var plan strings.Builder
	for i := range n {
		fmt.Fprintf(&plan, "  - {id: s%d, description: step %d, agent: A}\n", i, i)
	}
	tk, err := task.Parse("bench.yaml", []byte(fmt.Sprintf(`id: %s
agent: A
autonomy: 5
workspace: %s
agents:
  A:
    driver: script
    tools: [write_file]
    script: {steps: {"*": [{tool: write_file, args: {path: a.txt, content: a}}, {output: ok}]}}
plan:
%s`, id, t.TempDir(), plan.String())))
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// runSteps runs harness id (n steps) to its end on a store on disk, with sinks.
func runSteps(t testing.TB, db *store.Store, sinks []event.Sink, id string, n int) {
	t.Helper()
	m := harness.NewManager(db, harness.Options{Sinks: sinks})
	h, err := m.Create(stepsTask(t, id, n))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := h.State(); st.Status != statefmt.StatusCompleted {
		t.Fatalf("harness %s: %s (%s)", id, st.Status, st.StatusReason)
	}
}

// openStore opens a store on disk, or in memory (Pebble's in-memory file system: no fsync).
func openStore(t testing.TB, mem bool) *store.Store {
	t.Helper()
	var o store.StoreOptions
	dir := filepath.Join(t.TempDir(), "store")
	if mem {
		o.FS = vfs.NewMem()
		if err := o.FS.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	db, err := store.OpenStore(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// With the collector down (a closed port, so every export fails at once and is retried with
// backoff), a harness completes as fast as without traces: no step waits for the exporter,
// whose retries go on for up to a minute.
func TestAHarnessCompletesWithTheCollectorDown(t *testing.T) {
	// Batches sent every millisecond: the exports fail while the harness runs.
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "1")
	endpoint := closedPort(t)
	var log lockedBuffer
	tr, err := tracing.New(context.Background(), tracing.Config{Endpoint: endpoint, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_ = tr.Shutdown(ctx)
		// The spans were sent, and refused: the test measured a collector that was down.
		if out := log.String(); !strings.Contains(out, "traces export") || !strings.Contains(out, "connection refused") {
			t.Errorf("no refused export in the log:\n%s", out)
		}
	}()
	db := openStore(t, false)
	start := time.Now()
	runSteps(t, db, []event.Sink{tr}, "down", 50)
	took := time.Since(start)
	if out := log.String(); !strings.Contains(out, "connection refused") {
		t.Errorf("no export was refused while the harness ran: the test proves nothing\n%s", out)
	}
	// The exporter's first retry waits 5 s and its timeout is 10 s: a step that waited for
	// it would take the harness past either.
	if took > 4*time.Second {
		t.Fatalf("50 steps took %v with the collector down", took)
	}
	t.Logf("50 steps in %v with the collector at a closed port (%s)", took.Round(time.Millisecond), endpoint)
}

// BenchmarkStepsTraced is a harness of 20 steps, each one tool call, on a store on disk and
// in memory (where no fsync hides the tracer's own cost): without a tracer (off), tracing to a
// collector that answers (on), and to a closed port (down).
// The figure per op is one whole harness; ns/step is what each step took. Batches go every
// 50 ms, so that exports (and, down, their failures) happen while the steps run.
func BenchmarkStepsTraced(b *testing.B) {
	const steps = 20
	b.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	for _, where := range []string{"disk", "mem"} {
		for _, mode := range []string{"off", "on", "down"} {
			b.Run(where+"/"+mode, func(b *testing.B) { benchSteps(b, where == "mem", mode, steps) })
		}
	}
}

func benchSteps(b *testing.B, mem bool, mode string, steps int) {
	var sinks []event.Sink
	switch mode {
	case "on":
		srv := httptest.NewServer(&receiver{})
		defer srv.Close()
		tr, err := tracing.New(context.Background(), tracing.Config{Endpoint: srv.URL})
		if err != nil {
			b.Fatal(err)
		}
		defer tr.Shutdown(context.Background())
		sinks = []event.Sink{tr}
	case "down":
		tr, err := tracing.New(context.Background(), tracing.Config{Endpoint: closedPort(b)})
		if err != nil {
			b.Fatal(err)
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			_ = tr.Shutdown(ctx)
		}()
		sinks = []event.Sink{tr}
	}
	db := openStore(b, mem)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		runSteps(b, db, sinks, fmt.Sprintf("bench-%d", i), steps)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*steps), "ns/step")
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// BenchmarkTracerEmitPerStep is the tracer's own cost for one step, as the harness pays it: the
// Emit calls of a step's events (started, a tool call, completed, its checkpoint), to a
// collector that answers (on) and to a closed port (down).
func BenchmarkTracerEmitPerStep(b *testing.B) {
	for _, mode := range []string{"on", "down"} {
		b.Run(mode, func(b *testing.B) {
			endpoint := closedPort(b)
			if mode == "on" {
				srv := httptest.NewServer(&receiver{})
				defer srv.Close()
				endpoint = srv.URL
			}
			tr, err := tracing.New(context.Background(), tracing.Config{Endpoint: endpoint})
			if err != nil {
				b.Fatal(err)
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				defer cancel()
				_ = tr.Shutdown(ctx)
			}()
			ok := true
			at := time.Now()
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				step := fmt.Sprintf("s%d", i)
				at = at.Add(time.Millisecond)
				tr.Emit(event.Event{Type: event.StepStarted, HarnessID: "h", Time: at, StepID: step, Attempt: 1})
				tr.Emit(event.Event{Type: event.ToolCall, HarnessID: "h", Time: at.Add(500 * time.Microsecond), Tool: "write_file", DurationMs: 0.2, Success: &ok})
				tr.Emit(event.Event{Type: event.StepCompleted, HarnessID: "h", Time: at.Add(900 * time.Microsecond), StepID: step, Attempt: 1})
				tr.Emit(event.Event{Type: event.Checkpoint, HarnessID: "h", Time: at.Add(950 * time.Microsecond), Seq: uint64(i + 1), Kind: "delta", StoredBytes: 300})
			}
		})
	}
}
