package cli

import (
	"context"
	"log/slog"
	"time"

	"github.com/harness-edge/harness-edge/control/tracing"
	"github.com/harness-edge/harness-edge/statefmt/event"
)

// startTracing starts the OpenTelemetry tracer when an endpoint is configured (the flag or
// the standard variables); stop sends what is left, within 5 s.
func startTracing(ctx context.Context, endpoint string, log *slog.Logger) (sink event.Sink, stop func(), err error) {
	tc := tracing.Config{Endpoint: endpoint, Version: version, Logger: log}
	if !tc.Enabled() {
		return nil, func() {}, nil
	}
	tr, err := tracing.New(ctx, tc)
	if err != nil {
		return nil, nil, err
	}
	return tr, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tr.Shutdown(sctx); err != nil {
			log.Warn("traces export at exit", "err", err)
		}
	}, nil
}
