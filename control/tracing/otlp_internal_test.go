package tracing

import (
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// The exporter's requests decode as the collector's own ExportTraceServiceRequest, with every
// kind of attribute, events, links, parents and statuses, and it follows the standard
// variables: the traces endpoint as given, headers, gzip.
func TestExporterSpeaksOTLPAndFollowsTheStandardVariables(t *testing.T) {
	var mu sync.Mutex
	var got []*coltrace.ExportTraceServiceRequest
	var paths, auth, enc []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			body = zr
		}
		b, _ := io.ReadAll(body)
		var req coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "not an OTLP export", 400)
			return
		}
		mu.Lock()
		got, paths = append(got, &req), append(paths, r.URL.Path)
		auth, enc = append(auth, r.Header.Get("Authorization")), append(enc, r.Header.Get("Content-Encoding"))
		mu.Unlock()
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://ignored.invalid:1")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", srv.URL+"/custom/traces")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Bearer%20abc,X-Team=edge")
	t.Setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
	exp, err := newExporter("")
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "harness-edge"))))
	tr := tp.Tracer("scope-a")
	ctx, root := tr.Start(context.Background(), "root", trace.WithAttributes(
		attribute.Bool("b", true), attribute.Int64("i", -7), attribute.Float64("f", 2.5), attribute.String("s", "ü"),
		attribute.StringSlice("ss", []string{"x", "y"}), attribute.Int64Slice("is", []int64{1, 2})))
	_, child := tr.Start(ctx, "child", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithLinks(trace.Link{SpanContext: root.SpanContext(), Attributes: []attribute.KeyValue{attribute.String("why", "x")}}))
	child.AddEvent("gate", trace.WithAttributes(attribute.Int64("wait_ms", 5)))
	child.SetStatus(codes.Error, "it broke")
	child.End()
	root.SetStatus(codes.Ok, "")
	root.End()
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || paths[0] != "/custom/traces" || auth[0] != "Bearer abc" || enc[0] != "gzip" {
		t.Fatalf("%d requests, paths %v, authorization %v, encodings %v", len(got), paths, auth, enc)
	}
	spans := map[string]*tracepb.Span{}
	for _, req := range got {
		rs := req.GetResourceSpans()
		if len(rs) != 1 || rs[0].GetResource().GetAttributes()[0].GetValue().GetStringValue() != "harness-edge" ||
			rs[0].GetScopeSpans()[0].GetScope().GetName() != "scope-a" {
			t.Fatalf("resource or scope: %v", rs)
		}
		for _, s := range rs[0].GetScopeSpans()[0].GetSpans() {
			spans[s.GetName()] = s
		}
	}
	r, c := spans["root"], spans["child"]
	if r == nil || c == nil {
		t.Fatalf("spans: %v", spans)
	}
	attrs := map[string]string{}
	for _, kv := range r.GetAttributes() {
		attrs[kv.GetKey()] = kv.GetValue().String()
	}
	for k, want := range map[string]string{"b": "bool_value:true", "i": "int_value:-7", "f": "double_value:2.5", "s": `string_value:"ü"`,
		"ss": `array_value:{values:{string_value:"x"} values:{string_value:"y"}}`, "is": "array_value:{values:{int_value:1} values:{int_value:2}}"} {
		if got := strings.Join(strings.Fields(attrs[k]), " "); got != strings.Join(strings.Fields(want), " ") {
			t.Errorf("attribute %s: %q, want %q", k, got, want)
		}
	}
	rsc, csc := root.SpanContext(), child.SpanContext()
	rid, rtid, cid := rsc.SpanID(), rsc.TraceID(), csc.SpanID()
	switch {
	case string(c.GetParentSpanId()) != string(rid[:]) || string(c.GetTraceId()) != string(rtid[:]) || string(c.GetSpanId()) != string(cid[:]):
		t.Error("the child's ids do not name its parent and trace")
	case c.GetKind() != tracepb.Span_SPAN_KIND_CLIENT || r.GetKind() != tracepb.Span_SPAN_KIND_INTERNAL:
		t.Errorf("kinds %v %v", c.GetKind(), r.GetKind())
	case c.GetStatus().GetCode() != tracepb.Status_STATUS_CODE_ERROR || c.GetStatus().GetMessage() != "it broke" || r.GetStatus().GetCode() != tracepb.Status_STATUS_CODE_OK:
		t.Errorf("statuses %v %v", c.GetStatus(), r.GetStatus())
	case len(c.GetEvents()) != 1 || c.GetEvents()[0].GetName() != "gate" || c.GetEvents()[0].GetAttributes()[0].GetValue().GetIntValue() != 5:
		t.Errorf("events %v", c.GetEvents())
	case len(c.GetLinks()) != 1 || string(c.GetLinks()[0].GetSpanId()) != string(rid[:]):
		t.Errorf("links %v", c.GetLinks())
	case c.GetStartTimeUnixNano() == 0 || c.GetEndTimeUnixNano() < c.GetStartTimeUnixNano() || len(r.GetParentSpanId()) != 0:
		t.Errorf("times or the root's parent: %v", c)
	}
}

// Bad standard variables are refused, saying which and why.
func TestExporterRefusesBadStandardVariables(t *testing.T) {
	for _, c := range []struct{ name, value, want string }{
		{"OTEL_EXPORTER_OTLP_HEADERS", "novalue", "is not key=value"},
		{"OTEL_EXPORTER_OTLP_TIMEOUT", "soon", "not a positive number of milliseconds"},
		{"OTEL_EXPORTER_OTLP_COMPRESSION", "zstd", "gzip or none"},
		{"OTEL_EXPORTER_OTLP_CERTIFICATE", "/nonexistent/ca.pem", "OTEL_EXPORTER_OTLP_CERTIFICATE"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "collector:4318", "not an http:// or https:// URL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(c.name, c.value)
			if _, err := newExporter(""); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%s=%s: %v", c.name, c.value, err)
			}
		})
	}
}
