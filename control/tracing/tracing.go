// Package tracing turns a daemon's harness events into OpenTelemetry traces exported over
// OTLP/HTTP: a harness is a trace, each step attempt a span in it, each tool call a span under
// its step. It is an event sink: the harness never waits for it. Spans go to the SDK's batch
// processor, which drops rather than blocks when its queue is full, and are exported from its
// own goroutine.
package tracing

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
)

// Config says where traces go.
type Config struct {
	// Endpoint is the OTLP/HTTP endpoint's URL (http://collector:4318; the path /v1/traces is
	// added when it has none). Empty: the standard OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
	// OTEL_EXPORTER_OTLP_ENDPOINT, and the exporter's other OTEL_EXPORTER_OTLP_* variables.
	Endpoint string
	// Version is the service's version, a resource attribute.
	Version string
	// Logger receives the exporter's failures (a collector down, refusing), at warn level
	// (default: none). It is set for the whole process: OpenTelemetry has one error handler.
	Logger *slog.Logger
}

// Enabled says whether c, with the environment, asks for traces: an endpoint given, or one
// in the standard variables (and OTEL_SDK_DISABLED is not true).
func (c Config) Enabled() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	return c.Endpoint != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
}

// Tracer is the event sink that makes the spans.
type Tracer struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer

	mu   sync.Mutex
	runs map[string]*run
	// parents is the step span that spawned each sub-agent not yet seen running here.
	parents map[string]trace.SpanContext
}

// run is what the tracer keeps of a harness it saw run in this process.
type run struct {
	id    string
	start time.Time
	steps []*step
	// trace is the trace the harness is in: its own, or its parent's for a sub-agent, whose
	// span is then a child of parent (the step that spawned it).
	trace  trace.TraceID
	parent trace.SpanContext
	// events are the span events of the harness's own span (gates, and checkpoints outside
	// any one step), kept until it ends; dropped counts those past maxRootEvents.
	events  []spanEvent
	dropped int
	// final is the harness's completion or failure: its span ends with the checkpoint that
	// stored it, the event that follows.
	final *event.Event
}

type spanEvent struct {
	name  string
	at    time.Time
	attrs []attribute.KeyValue
}

// maxRootEvents bounds the events kept for a harness's span (the SDK's default limit of
// events on a span).
const maxRootEvents = 128

type step struct {
	id         string
	span       trace.Span
	start, end time.Time
	open       bool
	// closing: the attempt ended, and its span waits for the checkpoint that stored its end
	// (the next checkpoint event), to carry it.
	closing bool
	// input and output are the tokens of the model turns in the attempt.
	input, output int64
}

// New starts a tracer that exports to c's endpoint. Nothing is sent until a span ends; an
// endpoint that does not answer costs the exporter's retries, never a step's time.
func New(ctx context.Context, c Config) (*Tracer, error) {
	exp, err := newExporter(c.Endpoint)
	if err != nil {
		return nil, err
	}
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("traces export", "err", err) }))
	res := resource.NewSchemaless(attribute.String("service.name", "harness-edge"), attribute.String("service.version", c.Version))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res), sdktrace.WithIDGenerator(ids{}),
		sdktrace.WithSampler(sdktrace.AlwaysSample()))
	return &Tracer{tp: tp, tracer: tp.Tracer("github.com/harness-edge/harness-edge"), runs: map[string]*run{},
		parents: map[string]trace.SpanContext{}}, nil
}

// Shutdown ends the spans that wait only for a checkpoint event and exports what is left,
// within ctx.
func (t *Tracer) Shutdown(ctx context.Context) error {
	t.mu.Lock()
	for _, r := range t.runs {
		if r.final != nil {
			t.endRun(r)
		} else {
			r.flush()
		}
	}
	t.mu.Unlock()
	return t.tp.Shutdown(ctx)
}

// TraceID is the trace of harness id: the same in every process that runs it, so a harness
// resumed by another daemon goes on in the same trace.
func TraceID(id string) trace.TraceID {
	var t trace.TraceID
	sum := sha256.Sum256([]byte("harness-edge trace " + id))
	copy(t[:], sum[:])
	return t
}

// RootSpanID is the span of harness id itself, the parent of its steps.
func RootSpanID(id string) trace.SpanID {
	var s trace.SpanID
	sum := sha256.Sum256([]byte("harness-edge root span " + id))
	copy(s[:], sum[:])
	return s
}

// rootContext is the harness's span as a parent, before (or without) this process ending it.
func (r *run) rootContext() context.Context {
	return trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: r.trace, SpanID: RootSpanID(r.id), TraceFlags: trace.FlagsSampled, Remote: true}))
}

// ids gives a harness's span its fixed IDs (asked for through the context) and every other
// span a random one.
type ids struct{}

type fixedKey struct{}

func (ids) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if id, ok := ctx.Value(fixedKey{}).(string); ok {
		return TraceID(id), RootSpanID(id)
	}
	var t trace.TraceID
	_, _ = rand.Read(t[:])
	return t, randomSpanID()
}

// NewSpanID is a span's id in a trace that exists: a sub-agent's span (under its parent's
// step) has its fixed one too.
func (ids) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if id, ok := ctx.Value(fixedKey{}).(string); ok {
		return RootSpanID(id)
	}
	return randomSpanID()
}

func randomSpanID() trace.SpanID {
	var s trace.SpanID
	_, _ = rand.Read(s[:])
	return s
}

// Emit makes spans of the events: a step's span from step_started to its step_completed,
// step_failed or step_retry; a tool call's span (it ends at its event, and lasted its
// duration) under the step it ran in; a model turn's span, with its token use, under its step;
// the harness's span when it completes or fails, from the first event this process saw of it.
// Checkpoints, gates and sub-agents are span events: a checkpoint on the one step running (on
// the harness's span when none or several are), a gate on the harness's span (it waits
// before its step starts), a sub-agent on the step that spawned it, whose span is the
// sub-agent's parent.
func (t *Tracer) Emit(e event.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.runs[e.HarnessID]
	if r != nil && r.final != nil {
		// The checkpoint that stored the harness's end: the last event of this run.
		if e.Type == event.Checkpoint {
			r.checkpoint(e)
		}
		t.endRun(r)
		if e.Type == event.Checkpoint {
			return
		}
		r = nil
	}
	if r == nil {
		r = &run{id: e.HarnessID, start: e.Time, trace: TraceID(e.HarnessID)}
		if p, ok := t.parents[e.HarnessID]; ok {
			r.trace, r.parent = p.TraceID(), p
			delete(t.parents, e.HarnessID)
		}
		t.runs[e.HarnessID] = r
	}
	switch e.Type {
	case event.StepStarted:
		_, span := t.tracer.Start(r.rootContext(), "step "+e.StepID, trace.WithTimestamp(e.Time), trace.WithAttributes(
			attribute.String("harness.id", e.HarnessID), attribute.String("step.id", e.StepID), attribute.Int("step.attempt", e.Attempt)))
		r.steps = append(r.steps, &step{id: e.StepID, span: span, start: e.Time, open: true})
	case event.StepCompleted, event.StepFailed, event.StepRetry:
		for _, s := range r.steps {
			if s.open && s.id == e.StepID {
				if e.Type != event.StepCompleted {
					s.span.SetStatus(codes.Error, e.Message)
				}
				s.span.SetAttributes(attribute.String("step.outcome", string(e.Type)))
				s.finish(e.Time)
			}
		}
	case event.ToolCall:
		start := e.Time.Add(-time.Duration(e.DurationMs * float64(time.Millisecond)))
		parent := r.stepAt(start)
		if parent == nil {
			return // a call outside any step this process saw: no span to hang it on
		}
		ctx := trace.ContextWithSpanContext(context.Background(), parent.span.SpanContext())
		_, span := t.tracer.Start(ctx, "tool "+e.Tool, trace.WithTimestamp(start), trace.WithAttributes(
			attribute.String("harness.id", e.HarnessID), attribute.String("tool.name", e.Tool), attribute.Int("tool.retries", e.Attempt)))
		if e.Success != nil && !*e.Success {
			span.SetStatus(codes.Error, e.Message)
		}
		span.End(trace.WithTimestamp(e.Time))
	case event.Iteration:
		if e.Usage != nil {
			t.modelTurn(r, e)
		}
	case event.Checkpoint:
		r.checkpoint(e)
	case event.Gate:
		attrs := []attribute.KeyValue{attribute.String("gate.id", e.GateID), attribute.String("gate.kind", e.Kind),
			attribute.String("step.id", e.StepID)}
		switch e.Action {
		case "waiting_for_human":
			attrs = append(attrs, attribute.String("gate.why", e.Message))
		default:
			attrs = append(attrs, attribute.Float64("gate.wait_ms", e.WaitMs), attribute.String("gate.reason", e.Reason))
		}
		r.addEvent("gate "+e.Action, e.Time, attrs)
	case event.SubAgent:
		attrs := []attribute.KeyValue{attribute.String("sub_agent.id", e.SubAgentID), attribute.String("sub_agent.agent", e.Agent),
			attribute.String("step.id", e.StepID)}
		if e.Message != "" {
			attrs = append(attrs, attribute.String("sub_agent.message", e.Message))
		}
		s := r.open(e.StepID)
		if s == nil {
			r.addEvent("sub_agent "+e.Outcome, e.Time, attrs)
			return
		}
		s.span.AddEvent("sub_agent "+e.Outcome, trace.WithTimestamp(e.Time), trace.WithAttributes(attrs...))
		if e.Outcome == "spawned" {
			if _, running := t.runs[e.SubAgentID]; !running {
				t.parents[e.SubAgentID] = s.span.SpanContext()
			}
		}
	case event.StateTransition:
		switch e.To {
		case statefmt.StatusPaused:
			r.endSteps(e.Time, "paused: "+e.Reason)
		case statefmt.StatusCompleted, statefmt.StatusFailed:
			r.endSteps(e.Time, string(e.To))
			r.final = &e
		}
	}
}

// modelTurn is the span of one model turn (an iteration with the model's use), in the GenAI
// semantic conventions: "chat MODEL" with the tokens in and out, under its step; the step's
// span carries the attempt's totals.
func (t *Tracer) modelTurn(r *run, e event.Event) {
	s := r.open(e.StepID)
	if s == nil {
		start := e.Time.Add(-time.Duration(e.DurationMs * float64(time.Millisecond)))
		if s = r.stepAt(start); s == nil {
			return
		}
	}
	u := e.Usage
	name := "chat"
	attrs := []attribute.KeyValue{attribute.String("gen_ai.operation.name", "chat"),
		attribute.Int64("gen_ai.usage.input_tokens", u.InputTokens+u.CacheReadTokens+u.CacheWriteTokens),
		attribute.Int64("gen_ai.usage.output_tokens", u.OutputTokens), attribute.Int("agent.iteration", e.Iteration)}
	if u.Model != "" {
		name += " " + u.Model
		attrs = append(attrs, attribute.String("gen_ai.request.model", u.Model), attribute.String("gen_ai.response.model", u.Model))
	}
	if u.CacheReadTokens > 0 {
		attrs = append(attrs, attribute.Int64("gen_ai.usage.cache_read.input_tokens", u.CacheReadTokens))
	}
	if u.CacheWriteTokens > 0 {
		attrs = append(attrs, attribute.Int64("gen_ai.usage.cache_creation.input_tokens", u.CacheWriteTokens))
	}
	if u.SessionID != "" {
		attrs = append(attrs, attribute.String("gen_ai.conversation.id", u.SessionID))
	}
	ctx := trace.ContextWithSpanContext(context.Background(), s.span.SpanContext())
	_, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithTimestamp(e.Time.Add(-time.Duration(e.DurationMs*float64(time.Millisecond)))), trace.WithAttributes(attrs...))
	span.End(trace.WithTimestamp(e.Time))
	s.input += u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens
	s.output += u.OutputTokens
	s.span.SetAttributes(attribute.Int64("gen_ai.usage.input_tokens", s.input), attribute.Int64("gen_ai.usage.output_tokens", s.output))
}

// checkpoint is a checkpoint's span event: on the steps whose end it stored, else on the one
// step running, else on the harness's span. Then the steps it stored the end of end.
func (r *run) checkpoint(e event.Event) {
	attrs := []attribute.KeyValue{attribute.Int64("checkpoint.seq", int64(e.Seq)), attribute.String("checkpoint.kind", e.Kind),
		attribute.Int("checkpoint.stored_bytes", e.StoredBytes)}
	if e.Reason != "" {
		attrs = append(attrs, attribute.String("checkpoint.reason", e.Reason))
	}
	on := 0
	for _, s := range r.steps {
		if s.closing {
			s.span.AddEvent("checkpoint", trace.WithTimestamp(e.Time), trace.WithAttributes(attrs...))
			on++
		}
	}
	if on == 0 {
		if s := r.only(); s != nil {
			s.span.AddEvent("checkpoint", trace.WithTimestamp(e.Time), trace.WithAttributes(attrs...))
		} else {
			r.addEvent("checkpoint", e.Time, attrs)
		}
	}
	r.flush()
}

// flush ends the spans of the attempts that ended, and forgets them (their tool calls came
// before the checkpoint).
func (r *run) flush() {
	kept := r.steps[:0]
	for _, s := range r.steps {
		if s.closing {
			s.span.End(trace.WithTimestamp(s.end))
			s.closing = false
		}
		if s.open {
			kept = append(kept, s)
		}
	}
	clear(r.steps[len(kept):])
	r.steps = kept
}

// endRun sends the harness's span: the root of its trace, or a sub-agent's span under the
// step that spawned it.
func (t *Tracer) endRun(r *run) {
	r.flush()
	e := *r.final
	ctx := context.WithValue(context.Background(), fixedKey{}, e.HarnessID)
	opts := []trace.SpanStartOption{trace.WithTimestamp(r.start), trace.WithAttributes(attribute.String("harness.id", e.HarnessID),
		attribute.String("harness.status", string(e.To)))}
	if r.parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, r.parent)
	} else {
		opts = append(opts, trace.WithNewRoot())
	}
	if r.dropped > 0 {
		opts = append(opts, trace.WithAttributes(attribute.Int("harness.events_dropped", r.dropped)))
	}
	_, span := t.tracer.Start(ctx, "harness "+e.HarnessID, opts...)
	for _, ev := range r.events {
		span.AddEvent(ev.name, trace.WithTimestamp(ev.at), trace.WithAttributes(ev.attrs...))
	}
	if e.To == statefmt.StatusFailed {
		span.SetStatus(codes.Error, e.Reason)
	}
	span.End(trace.WithTimestamp(e.Time))
	delete(t.runs, e.HarnessID)
}

// addEvent keeps an event for the harness's span.
func (r *run) addEvent(name string, at time.Time, attrs []attribute.KeyValue) {
	if len(r.events) >= maxRootEvents {
		r.dropped++
		return
	}
	r.events = append(r.events, spanEvent{name, at, attrs})
}

// open is the running attempt of step id (nil when none is).
func (r *run) open(id string) *step {
	for i := len(r.steps) - 1; i >= 0; i-- {
		if s := r.steps[i]; s.open && s.id == id {
			return s
		}
	}
	return nil
}

// only is the one step running (nil when none or several are).
func (r *run) only() *step {
	var one *step
	for _, s := range r.steps {
		if s.open {
			if one != nil {
				return nil
			}
			one = s
		}
	}
	return one
}

func (s *step) finish(at time.Time) {
	s.open, s.closing, s.end = false, true, at
}

// stepAt is the step whose span covers at (the latest started before it if none does).
func (r *run) stepAt(at time.Time) *step {
	var best *step
	for _, s := range r.steps {
		if s.start.After(at) {
			continue
		}
		if s.open || !s.end.Before(at) {
			best = s
		} else if best == nil || s.start.After(best.start) && !best.open && best.end.Before(at) {
			best = s
		}
	}
	return best
}

// endSteps ends the steps still open (the harness stopped in them).
func (r *run) endSteps(at time.Time, why string) {
	for _, s := range r.steps {
		if s.open {
			s.span.SetStatus(codes.Error, why)
			s.finish(at)
		}
	}
}
