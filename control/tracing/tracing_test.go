package tracing_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/control/tracing"
	"github.com/harness-edge/harness-edge/internal/openaitest"
	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
)

// receiver is an OTLP/HTTP trace receiver: it decodes each export as a collector does.
type receiver struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	paths []string
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	var req coltrace.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(b, &req)
	}
	if err != nil || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, fmt.Sprintf("not an OTLP export: %v %s", err, r.Header.Get("Content-Type")), 400)
		return
	}
	rc.mu.Lock()
	rc.paths = append(rc.paths, r.URL.Path)
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			rc.spans = append(rc.spans, ss.GetSpans()...)
		}
	}
	rc.mu.Unlock()
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

var errDone = errors.New("done")

// A harness of two steps, each with one tool call, run by a real daemon: one trace (the
// harness's own id), the harness's span at its root, a span per step under it, a span per
// tool call under its step.
func TestTracesAreAHarnessWithItsStepsAndToolCalls(t *testing.T) {
	td := startTracedDaemon(t)
	rc, c := td.rc, td.c
	ctx := context.Background()
	ws := t.TempDir()
	if _, err := c.Submit(ctx, control.Submission{Task: []byte(fmt.Sprintf(`id: traced
agent: A
autonomy: 5
workspace: %s
agents:
  A:
    driver: script
    tools: [write_file, read_file]
    script:
      steps:
        s1: [{tool: write_file, args: {path: a.txt, content: a}}, {output: one}]
        s2: [{tool: read_file, args: {path: missing.txt}}, {output: two}]
plan: [{id: s1, description: write, agent: A}, {id: s2, description: read, agent: A, dependsOn: [s1]}]
`, ws))}); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	var final statefmt.Status
	err := c.Events(wctx, "traced", 0, true, func(e event.Event) error {
		if e.Type == event.StateTransition && (e.To == statefmt.StatusCompleted || e.To == statefmt.StatusFailed) {
			final = e.To
			return errDone
		}
		return nil
	})
	if !errors.Is(err, errDone) {
		t.Fatalf("following the harness: %v", err)
	}
	// The live sinks get an event just after the log the stream reads: the daemon's stop waits
	// for its harnesses, and so for their last events.
	td.stop()

	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, p := range rc.paths {
		if p != "/v1/traces" {
			t.Fatalf("exported to %s, want /v1/traces", p)
		}
	}
	traceID := tracing.TraceID("traced")
	rootID := tracing.RootSpanID("traced")
	byID := map[string]*tracepb.Span{}
	var tree []string
	for _, s := range rc.spans {
		if !bytes.Equal(s.GetTraceId(), traceID[:]) {
			t.Fatalf("span %q in trace %x, want %s", s.GetName(), s.GetTraceId(), traceID)
		}
		byID[hex.EncodeToString(s.GetSpanId())] = s
	}
	for _, s := range rc.spans {
		parent := "-"
		if p, ok := byID[hex.EncodeToString(s.GetParentSpanId())]; ok {
			parent = p.GetName()
		} else if len(s.GetParentSpanId()) > 0 {
			parent = "missing " + hex.EncodeToString(s.GetParentSpanId())
		}
		status := ""
		if s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR {
			status = " (error)"
		}
		tree = append(tree, s.GetName()+status+" <- "+parent)
		if s.GetEndTimeUnixNano() < s.GetStartTimeUnixNano() || s.GetStartTimeUnixNano() == 0 {
			t.Errorf("span %q ends before it starts", s.GetName())
		}
	}
	sort.Strings(tree)
	// The harness fails: its second step's tool call fails, and so the step (its read is all it
	// does), after its retries.
	got := strings.Join(tree, "\n")
	t.Logf("harness %s; span tree:\n%s", final, got)
	for _, want := range []string{
		"harness traced" + map[bool]string{true: " (error)", false: ""}[final == statefmt.StatusFailed] + " <- -",
		"step s1 <- harness traced",
		"tool write_file <- step s1",
		"tool read_file (error) <- step s2",
	} {
		if !strings.Contains(got+"\n", want+"\n") {
			t.Errorf("no span %q in the tree:\n%s", want, got)
		}
	}
	if root, ok := byID[hex.EncodeToString(rootID[:])]; !ok || len(root.GetParentSpanId()) != 0 {
		t.Errorf("the harness's span is not the root with its fixed id:\n%s", got)
	}
	for _, s := range rc.spans {
		if strings.HasPrefix(s.GetName(), "step ") && !bytes.Equal(s.GetParentSpanId(), rootID[:]) {
			t.Errorf("step span %q is not under the harness's span", s.GetName())
		}
	}
}

func TestABadEndpointIsRefusedClearly(t *testing.T) {
	for _, bad := range []string{"::bad", "127.0.0.1:4318", "ftp://collector/", "http://"} {
		if _, err := tracing.New(context.Background(), tracing.Config{Endpoint: bad}); err == nil || !strings.Contains(err.Error(), "not an http:// or https:// URL") {
			t.Errorf("endpoint %q: %v", bad, err)
		}
	}
}

// Without an endpoint, in the flag or the standard variables, there are no traces.
func TestTracingIsOffUnlessConfigured(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	if (tracing.Config{}).Enabled() {
		t.Fatal("tracing on with nothing configured")
	}
	if !(tracing.Config{Endpoint: "http://127.0.0.1:4318"}).Enabled() {
		t.Fatal("tracing off with an endpoint")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
	if !(tracing.Config{}).Enabled() {
		t.Fatal("tracing off with OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	t.Setenv("OTEL_SDK_DISABLED", "true")
	if (tracing.Config{}).Enabled() {
		t.Fatal("tracing on with OTEL_SDK_DISABLED=true")
	}
}

// A collector that takes the connection and never answers holds no step back: the harness
// completes while the export still waits.
func TestAnExportThatHangsDoesNotHoldAStepBack(t *testing.T) {
	// Small batches sent at once and a small queue: the first export hangs at once and the
	// queue fills, so every later span meets a full queue.
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "1")
	t.Setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "2")
	t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "4")
	hang := make(chan struct{})
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { requests.Add(1); <-hang }))
	defer srv.Close()
	defer close(hang)
	ctx := context.Background()
	tr, err := tracing.New(ctx, tracing.Config{Endpoint: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		_ = tr.Shutdown(sctx) // the collector never answers: give up on what is left
	}()
	dir := filepath.Join(t.TempDir(), "store")
	dctx, cancel := context.WithCancel(ctx)
	d, err := control.StartDaemon(dctx, control.DaemonConfig{Dir: dir, Concurrency: 1, Version: "test", Logger: slog.New(slog.DiscardHandler),
		Options: harness.Options{Sinks: []event.Sink{tr}}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	defer func() { cancel(); d.Wait() }()
	c, err := control.Connect(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var plan strings.Builder
	for i := range 20 {
		fmt.Fprintf(&plan, "  - {id: s%d, description: step %d, agent: A}\n", i, i)
	}
	start := time.Now()
	if _, err := c.Submit(ctx, control.Submission{Task: []byte(fmt.Sprintf(`id: quick
agent: A
autonomy: 5
workspace: %s
agents:
  A:
    driver: script
    tools: [write_file]
    script: {steps: {"*": [{tool: write_file, args: {path: a.txt, content: a}}, {output: ok}]}}
plan:
%s`, t.TempDir(), plan.String()))}); err != nil {
		t.Fatal(err)
	}
	// The exporter's own timeout is 10 s: a step that waited for it would take at least that.
	wctx, wcancel := context.WithTimeout(ctx, 8*time.Second)
	defer wcancel()
	err = c.Events(wctx, "quick", 0, true, func(e event.Event) error {
		if e.Type == event.StateTransition && e.To == statefmt.StatusCompleted {
			return errDone
		}
		return nil
	})
	if !errors.Is(err, errDone) {
		t.Fatalf("20 steps with a hanging collector: %v after %v", err, time.Since(start))
	}
	if requests.Load() == 0 {
		t.Fatal("no export was attempted: the test proves nothing")
	}
	t.Logf("20 steps in %v with a collector that never answers (%d exports hanging)", time.Since(start).Round(time.Millisecond), requests.Load())
}

// tracedDaemon is a daemon whose harnesses are traced to an in-process OTLP/HTTP receiver.
type tracedDaemon struct {
	rc   *receiver
	tr   *tracing.Tracer
	c    *control.Conn
	stop func()
}

func startTracedDaemon(t *testing.T) *tracedDaemon {
	t.Helper()
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	ctx := context.Background()
	tr, err := tracing.New(ctx, tracing.Config{Endpoint: srv.URL, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "store")
	dctx, cancel := context.WithCancel(ctx)
	d, err := control.StartDaemon(dctx, control.DaemonConfig{Dir: dir, Concurrency: 1, Version: "test", Logger: slog.New(slog.DiscardHandler),
		Options: harness.Options{Sinks: []event.Sink{tr}}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	c, err := control.Connect(dir)
	if err != nil {
		cancel()
		d.Wait()
		t.Fatal(err)
	}
	var once sync.Once
	td := &tracedDaemon{rc: rc, tr: tr, c: c}
	// stop ends the daemon (which waits for its harnesses, and so for their last events), then
	// sends every span left.
	td.stop = func() {
		once.Do(func() {
			c.Close()
			cancel()
			d.Wait()
			sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
			defer scancel()
			if err := tr.Shutdown(sctx); err != nil {
				t.Errorf("traces export at the end: %v", err)
			}
		})
	}
	t.Cleanup(td.stop)
	return td
}

// spanPath is a span's name after its ancestors' ("harness h / step s / tool t"); a parent
// not received shows as "?".
func spanPath(byID map[string]*tracepb.Span, s *tracepb.Span) string {
	path := s.GetName()
	for seen := 0; len(s.GetParentSpanId()) > 0 && seen < 16; seen++ {
		p, ok := byID[hex.EncodeToString(s.GetParentSpanId())]
		if !ok {
			return "? / " + path
		}
		path, s = p.GetName()+" / "+path, p
	}
	return path
}

func attrOf(kvs []*commonpb.KeyValue, key string) (*commonpb.AnyValue, bool) {
	for _, kv := range kvs {
		if kv.GetKey() == key {
			return kv.GetValue(), true
		}
	}
	return nil, false
}

func eventsNamed(s *tracepb.Span, name string) []*tracepb.Span_Event {
	var out []*tracepb.Span_Event
	for _, e := range s.GetEvents() {
		if e.GetName() == name {
			out = append(out, e)
		}
	}
	return out
}

// A harness whose first step is delegated to a sub-agent (an openai agent) and whose second,
// critical, waits at a gate that is approved: one trace, the sub-agent's harness span under the
// step that spawned it and its own steps under that, each model turn a GenAI "chat" span with
// its tokens, the gate's wait and decision and the checkpoints as span events.
func TestTracesOfASubAgentAndAGate(t *testing.T) {
	model := openaitest.New()
	defer model.Close()
	t.Setenv("FAKE_OPENAI_KEY", "sk-test")
	model.Push(openaitest.Reply{Calls: []openaitest.Call{{Name: "write_file", Args: `{"path": "notes.md", "content": "hi"}`}}, PromptTokens: 100, CompletionTokens: 20},
		openaitest.Reply{Content: "notes written", PromptTokens: 130, CompletionTokens: 5})
	td := startTracedDaemon(t)
	ctx := context.Background()
	if _, err := td.c.Submit(ctx, control.Submission{Task: []byte(fmt.Sprintf(`id: tree
agent: A
autonomy: 3
workspace: %s
agents:
  A:
    driver: script
    tools: [write_file]
    script:
      steps:
        ship: [{tool: write_file, args: {path: shipped.txt, content: yes}}, {output: shipped}]
  M:
    driver: openai
    endpoint: %q
    model: fake-model
    apiKeyEnv: FAKE_OPENAI_KEY
    tools: [write_file]
plan:
  - {id: notes, description: write the notes, agent: M}
  - {id: ship, description: ship it, agent: A, critical: true, dependsOn: [notes]}
`, t.TempDir(), model.Endpoint()))}); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	approved := false
	err := td.c.Events(wctx, "tree", 0, true, func(e event.Event) error {
		switch {
		case e.Type == event.Gate && e.Action == "waiting_for_human":
			// A human takes a moment: the wait is measurable.
			time.Sleep(20 * time.Millisecond)
			if _, err := td.c.Decide(ctx, "tree", e.GateID, true, ""); err != nil {
				return err
			}
			approved = true
		case e.Type == event.StateTransition && e.To == statefmt.StatusFailed:
			return fmt.Errorf("the harness failed: %s", e.Reason)
		case e.Type == event.StateTransition && e.To == statefmt.StatusCompleted:
			return errDone
		}
		return nil
	})
	if !errors.Is(err, errDone) || !approved {
		t.Fatalf("following the harness (gate approved: %v): %v", approved, err)
	}
	td.stop()

	rc := td.rc
	rc.mu.Lock()
	defer rc.mu.Unlock()
	traceID := tracing.TraceID("tree")
	byID := map[string]*tracepb.Span{}
	for _, s := range rc.spans {
		byID[hex.EncodeToString(s.GetSpanId())] = s
	}
	var paths []string
	byPath := map[string]*tracepb.Span{}
	for _, s := range rc.spans {
		if !bytes.Equal(s.GetTraceId(), traceID[:]) {
			t.Errorf("span %q in trace %x, want the harness's %s", s.GetName(), s.GetTraceId(), traceID)
		}
		p := spanPath(byID, s)
		paths = append(paths, p)
		byPath[p] = s
	}
	sort.Strings(paths)
	got := strings.Join(paths, "\n")
	t.Logf("span tree:\n%s", got)
	const (
		root   = "harness tree"
		notes  = root + " / step notes"
		child  = notes + " / harness tree.notes"
		cstep  = child + " / step notes"
		chat   = cstep + " / chat fake-model"
		ship   = root + " / step ship"
		shipWF = ship + " / tool write_file"
	)
	for _, want := range []string{root, notes, child, cstep, chat, cstep + " / tool write_file", ship, shipWF} {
		if byPath[want] == nil {
			t.Errorf("no span %q in the tree:\n%s", want, got)
		}
	}
	if t.Failed() {
		return
	}
	if n := strings.Count(got+"\n", chat+"\n"); n != 2 {
		t.Errorf("%d model-turn spans, want 2 (one per reply):\n%s", n, got)
	}

	// The model turns: GenAI attributes, client spans, the tokens the server reported.
	var turns [][2]int64
	for _, s := range rc.spans {
		if spanPath(byID, s) != chat {
			continue
		}
		if s.GetKind() != tracepb.Span_SPAN_KIND_CLIENT {
			t.Errorf("model turn span of kind %s, want client", s.GetKind())
		}
		for key, want := range map[string]string{"gen_ai.operation.name": "chat", "gen_ai.request.model": "fake-model"} {
			if v, _ := attrOf(s.GetAttributes(), key); v.GetStringValue() != want {
				t.Errorf("model turn %s = %v, want %q", key, v, want)
			}
		}
		in, _ := attrOf(s.GetAttributes(), "gen_ai.usage.input_tokens")
		out, _ := attrOf(s.GetAttributes(), "gen_ai.usage.output_tokens")
		turns = append(turns, [2]int64{in.GetIntValue(), out.GetIntValue()})
	}
	sort.Slice(turns, func(i, j int) bool { return turns[i][0] < turns[j][0] })
	if fmt.Sprint(turns) != "[[100 20] [130 5]]" {
		t.Errorf("model turns' tokens (input, output) %v, want [[100 20] [130 5]]", turns)
	}
	in, _ := attrOf(byPath[cstep].GetAttributes(), "gen_ai.usage.input_tokens")
	out, _ := attrOf(byPath[cstep].GetAttributes(), "gen_ai.usage.output_tokens")
	if in.GetIntValue() != 230 || out.GetIntValue() != 25 {
		t.Errorf("the sub-agent's step has %v input and %v output tokens, want 230 and 25", in, out)
	}

	// The sub-agent: an event on the step that spawned it, and its span inside that step's.
	spawned := eventsNamed(byPath[notes], "sub_agent spawned")
	if len(spawned) != 1 {
		t.Fatalf("step notes has %d sub_agent spawned events, want 1: %v", len(spawned), byPath[notes].GetEvents())
	}
	if v, _ := attrOf(spawned[0].GetAttributes(), "sub_agent.id"); v.GetStringValue() != "tree.notes" {
		t.Errorf("spawned sub-agent %v, want tree.notes", v)
	}
	if len(eventsNamed(byPath[notes], "sub_agent completed")) != 1 {
		t.Errorf("step notes has no sub_agent completed event: %v", byPath[notes].GetEvents())
	}
	if c, p := byPath[child], byPath[notes]; c.GetStartTimeUnixNano() < p.GetStartTimeUnixNano() || c.GetEndTimeUnixNano() > p.GetEndTimeUnixNano() {
		t.Errorf("the sub-agent's span (%d..%d) is not within its step's (%d..%d)", c.GetStartTimeUnixNano(), c.GetEndTimeUnixNano(),
			p.GetStartTimeUnixNano(), p.GetEndTimeUnixNano())
	}

	// The gate: its wait and its approval on the harness's span, before step ship starts.
	waiting, decided := eventsNamed(byPath[root], "gate waiting_for_human"), eventsNamed(byPath[root], "gate approved")
	if len(waiting) != 1 || len(decided) != 1 {
		t.Fatalf("harness span has %d gate waiting and %d gate approved events, want 1 each: %v", len(waiting), len(decided), byPath[root].GetEvents())
	}
	if v, _ := attrOf(waiting[0].GetAttributes(), "step.id"); v.GetStringValue() != "ship" {
		t.Errorf("the gate waits at step %v, want ship", v)
	}
	if v, _ := attrOf(decided[0].GetAttributes(), "gate.wait_ms"); v.GetDoubleValue() < 20 {
		t.Errorf("the gate waited %v ms, want at least the 20 ms before its approval", v)
	}
	if w, d, s := waiting[0].GetTimeUnixNano(), decided[0].GetTimeUnixNano(), byPath[ship].GetStartTimeUnixNano(); w >= d || d > s {
		t.Errorf("gate waiting at %d, approved at %d, step ship starts at %d: not in that order", w, d, s)
	}

	// Checkpoints: span events with their sequence numbers, on the steps that made them.
	var seqs []int64
	for _, p := range []string{cstep, ship, root, child} {
		for _, e := range eventsNamed(byPath[p], "checkpoint") {
			v, _ := attrOf(e.GetAttributes(), "checkpoint.seq")
			seqs = append(seqs, v.GetIntValue())
			if v.GetIntValue() <= 0 {
				t.Errorf("a checkpoint event on %q without its sequence number: %v", p, e.GetAttributes())
			}
		}
	}
	if len(eventsNamed(byPath[cstep], "checkpoint")) == 0 || len(eventsNamed(byPath[ship], "checkpoint")) == 0 {
		t.Errorf("no checkpoint events on the steps (seqs %v): sub-agent's step %v; ship %v", seqs,
			byPath[cstep].GetEvents(), byPath[ship].GetEvents())
	}
}
