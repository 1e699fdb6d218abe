package cli

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// The built binary's daemon, with --otlp-endpoint, sends a harness's trace to an OTLP/HTTP
// collector: a span for the harness and one per step, in the protobuf a collector decodes.
func TestServeExportsTracesToAnOTLPCollector(t *testing.T) {
	var mu sync.Mutex
	names := map[string]int{}
	col := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req coltrace.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(b, &req) != nil {
			http.Error(w, "not an OTLP trace export", 400)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					names[s.GetName()]++
				}
			}
		}
	}))
	defer col.Close()
	dir := t.TempDir()
	db := filepath.Join(dir, "store")
	startDaemon(t, db, "--otlp-endpoint", col.URL)
	if code, out, stderr := run(t, "--store", db, "submit", writeTask(t, dir, "tr.yaml", daemonTask("tr", t.TempDir(), 3, "1ms", false))); code != ExitOK {
		t.Fatalf("submit: %d %s%s", code, out, stderr)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		got := names["harness tr"] == 1 && names["step s0"] == 1 && names["step s2"] == 1
		seen := fmt.Sprint(names)
		mu.Unlock()
		if got {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the collector received the spans %s", seen)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
