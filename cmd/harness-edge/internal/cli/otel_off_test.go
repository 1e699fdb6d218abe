//go:build !otel

package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// A binary without OpenTelemetry refuses --otlp-endpoint, saying how to get it, before it
// touches the store.
func TestServeWithoutOpenTelemetryRefusesAnOTLPEndpoint(t *testing.T) {
	db := filepath.Join(t.TempDir(), "store")
	code, out, stderr := run(t, "--store", db, "serve", "--otlp-endpoint", "http://127.0.0.1:4318")
	if code != ExitUsage || !strings.Contains(stderr, "built without OpenTelemetry") || !strings.Contains(stderr, "TAGS=otel") {
		t.Fatalf("serve --otlp-endpoint: exit %d: %s%s", code, out, stderr)
	}
	if _, err := filepath.Glob(filepath.Join(db, "*")); err == nil {
		if m, _ := filepath.Glob(filepath.Join(db, "*")); len(m) != 0 {
			t.Fatalf("the refused serve made %v", m)
		}
	}
}
