//go:build !otel

package cli

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"

	"github.com/harness-edge/harness-edge/statefmt/event"
)

// errNoOtel is serve --otlp-endpoint in a binary built without OpenTelemetry.
var errNoOtel = errors.New("--otlp-endpoint: this binary was built without OpenTelemetry (it adds 8.7 MB, past the device binary's 30 MiB): build it with `make build TAGS=otel`")

// startTracing, in a binary without OpenTelemetry: the flag is refused; the standard
// variables, which may be set for other programs, get a warning.
func startTracing(_ context.Context, endpoint string, log *slog.Logger) (event.Sink, func(), error) {
	if endpoint != "" {
		return nil, nil, errNoOtel
	}
	if !strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") &&
		(os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "") {
		log.Warn("OTEL_EXPORTER_OTLP_ENDPOINT is set, but this binary was built without OpenTelemetry (make build TAGS=otel): no traces")
	}
	return nil, func() {}, nil
}
