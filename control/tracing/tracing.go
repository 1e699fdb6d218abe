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
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
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
}

// run is what the tracer keeps of a harness it saw run in this process.
type run struct {
	start time.Time
	steps []*step
}

type step struct {
	id         string
	span       trace.Span
	start, end time.Time
	open       bool
}

// New starts a tracer that exports to c's endpoint. Nothing is sent until a span ends; an
// endpoint that does not answer costs the exporter's retries, never a step's time.
func New(ctx context.Context, c Config) (*Tracer, error) {
	var opts []otlptracehttp.Option
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("--otlp-endpoint %q: not an http:// or https:// URL of a collector (like http://127.0.0.1:4318)", c.Endpoint)
		}
		if u.Path == "" || u.Path == "/" {
			u.Path = "/v1/traces"
		}
		opts = append(opts, otlptracehttp.WithEndpointURL(u.String()))
	}
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("traces export", "err", err) }))
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("--otlp-endpoint %q: %w", c.Endpoint, err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", "harness-edge"), attribute.String("service.version", c.Version))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res), sdktrace.WithIDGenerator(ids{}),
		sdktrace.WithSampler(sdktrace.AlwaysSample()))
	return &Tracer{tp: tp, tracer: tp.Tracer("github.com/harness-edge/harness-edge"), runs: map[string]*run{}}, nil
}

// Shutdown exports what is left, within ctx.
func (t *Tracer) Shutdown(ctx context.Context) error { return t.tp.Shutdown(ctx) }

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

// root is the harness's span as a parent, before (or without) this process ending it.
func root(id string) trace.SpanContext {
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: TraceID(id), SpanID: RootSpanID(id), TraceFlags: trace.FlagsSampled, Remote: true})
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

func (ids) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return randomSpanID() }

func randomSpanID() trace.SpanID {
	var s trace.SpanID
	_, _ = rand.Read(s[:])
	return s
}

// Emit makes spans of the events: a step's span from step_started to its step_completed,
// step_failed or step_retry; a tool call's span (it ends at its event, and lasted its
// duration) under the step it ran in; the harness's span when it completes or fails, from the
// first event this process saw of it.
func (t *Tracer) Emit(e event.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.runs[e.HarnessID]
	if r == nil {
		r = &run{start: e.Time}
		t.runs[e.HarnessID] = r
	}
	switch e.Type {
	case event.StepStarted:
		ctx := trace.ContextWithRemoteSpanContext(context.Background(), root(e.HarnessID))
		_, span := t.tracer.Start(ctx, "step "+e.StepID, trace.WithTimestamp(e.Time), trace.WithAttributes(
			attribute.String("harness.id", e.HarnessID), attribute.String("step.id", e.StepID), attribute.Int("step.attempt", e.Attempt)))
		r.steps = append(r.steps, &step{id: e.StepID, span: span, start: e.Time, open: true})
	case event.StepCompleted, event.StepFailed, event.StepRetry:
		for _, s := range r.steps {
			if s.open && s.id == e.StepID {
				if e.Type != event.StepCompleted {
					s.span.SetStatus(codes.Error, e.Message)
				}
				s.span.SetAttributes(attribute.String("step.outcome", string(e.Type)))
				s.span.End(trace.WithTimestamp(e.Time))
				s.open, s.end = false, e.Time
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
	case event.StateTransition:
		switch e.To {
		case statefmt.StatusPaused:
			r.endSteps(e.Time, "paused: "+e.Reason)
		case statefmt.StatusCompleted, statefmt.StatusFailed:
			r.endSteps(e.Time, string(e.To))
			ctx := context.WithValue(context.Background(), fixedKey{}, e.HarnessID)
			_, span := t.tracer.Start(ctx, "harness "+e.HarnessID, trace.WithNewRoot(), trace.WithTimestamp(r.start),
				trace.WithAttributes(attribute.String("harness.id", e.HarnessID), attribute.String("harness.status", string(e.To))))
			if e.To == statefmt.StatusFailed {
				span.SetStatus(codes.Error, e.Reason)
			}
			span.End(trace.WithTimestamp(e.Time))
			delete(t.runs, e.HarnessID)
		}
	}
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
			s.span.End(trace.WithTimestamp(at))
			s.open, s.end = false, at
		}
	}
}
