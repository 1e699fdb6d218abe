package control

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
)

// MetricsPath is where the daemon serves its metrics (Prometheus text format 0.0.4).
const MetricsPath = "/metrics"

// metricsContentType is the Prometheus text exposition format's.
const metricsContentType = "text/plain; version=0.0.4; charset=utf-8"

// liveCounters count what this process saw happen and the store keeps in no form a scrape can
// sum cheaply: governor waits. They start at zero with the process, as Prometheus counters do.
type liveCounters struct {
	governorWaits  atomic.Uint64
	governorWaitUs atomic.Uint64
}

// Emit is the counters' event sink.
func (c *liveCounters) Emit(e event.Event) {
	if e.Type != event.Governor {
		return
	}
	switch e.Action {
	case "waiting":
		c.governorWaits.Add(1)
	case "resumed":
		c.governorWaitUs.Add(uint64(e.WaitMs * 1000))
	}
}

// WriteMetrics writes the metrics of api's store in the Prometheus text format: the morning
// report over everything (the same top-level harnesses and sums `report --since 0` shows),
// the owner's health, and live, what this process counted since it started (nil: none).
func WriteMetrics(ctx context.Context, w io.Writer, api API, live *liveCounters) error {
	rep, err := api.Report(ctx, 0)
	if err != nil {
		return err
	}
	hl, err := api.Health(ctx)
	if err != nil {
		return err
	}
	steps := map[statefmt.StepStatus]int{}
	var calls = map[string]int{"success": 0, "error": 0}
	for _, h := range rep.Harnesses {
		for s, n := range h.StepCounts {
			steps[s] += n
		}
		calls["success"] += h.CallsOK
		calls["error"] += h.CallsFailed
	}
	var b strings.Builder
	metric := func(name, typ, help string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	}
	metric("harness_edge_harnesses", "gauge", "Top-level harnesses by status.")
	// Every status is listed, 0 when no harness has it, so a query need not know which exist.
	for _, s := range statefmt.Statuses {
		fmt.Fprintf(&b, "harness_edge_harnesses{status=%q} %d\n", s, rep.Counts[s])
	}
	metric("harness_edge_steps", "gauge", "Plan steps of the top-level harnesses by status.")
	for _, s := range statefmt.StepStatuses {
		fmt.Fprintf(&b, "harness_edge_steps{status=%q} %d\n", s, steps[s])
	}
	metric("harness_edge_tool_calls", "gauge", "Recorded tool calls of the top-level harnesses by outcome.")
	fmt.Fprintf(&b, "harness_edge_tool_calls{outcome=\"success\"} %d\nharness_edge_tool_calls{outcome=\"error\"} %d\n", calls["success"], calls["error"])
	metric("harness_edge_checkpoints", "gauge", "Checkpoints of the top-level harnesses.")
	fmt.Fprintf(&b, "harness_edge_checkpoints %d\n", rep.Checkpoints)
	metric("harness_edge_stored_bytes", "gauge", "Bytes stored for the top-level harnesses and their sub-agents.")
	fmt.Fprintf(&b, "harness_edge_stored_bytes %d\n", rep.StoredBytes)
	metric("harness_edge_gates_waiting", "gauge", "Gates waiting for a human.")
	fmt.Fprintf(&b, "harness_edge_gates_waiting %d\n", len(rep.Waiting))
	metric("harness_edge_damaged_harnesses", "gauge", "Harnesses whose stored data is damaged.")
	fmt.Fprintf(&b, "harness_edge_damaged_harnesses %d\n", len(rep.Damaged))
	metric("harness_edge_running", "gauge", "Harnesses the owner runs now.")
	fmt.Fprintf(&b, "harness_edge_running %d\n", len(hl.Running))
	metric("harness_edge_queued", "gauge", "Harnesses queued to run.")
	fmt.Fprintf(&b, "harness_edge_queued %d\n", len(hl.Queued))
	metric("harness_edge_frozen", "gauge", "1 when the daemon is frozen (starts nothing new).")
	frozen := 0
	if hl.Frozen {
		frozen = 1
	}
	fmt.Fprintf(&b, "harness_edge_frozen %d\n", frozen)
	if live != nil {
		metric("harness_edge_governor_waits_total", "counter", "Times the governor held a step back for a busy machine, since the daemon started.")
		fmt.Fprintf(&b, "harness_edge_governor_waits_total %d\n", live.governorWaits.Load())
		metric("harness_edge_governor_wait_seconds_total", "counter", "Time steps waited for the governor, since the daemon started.")
		fmt.Fprintf(&b, "harness_edge_governor_wait_seconds_total %g\n", float64(live.governorWaitUs.Load())/1e6)
	}
	_, err = io.WriteString(w, b.String())
	return err
}

// withMetrics serves GET /metrics before next. With a token and not public, the request needs
// it as a bearer token (compared in constant time), as the API does; every other request goes
// to next.
func withMetrics(next http.Handler, api API, live *liveCounters, token string, public bool) http.Handler {
	want := []byte(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != MetricsPath {
			next.ServeHTTP(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, fmt.Errorf("%s %s: metrics are read with GET", r.Method, r.URL.Path))
			return
		}
		if token != "" && !public {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(got), want) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="harness-edge"`)
				writeError(w, http.StatusUnauthorized, errors.New("missing or wrong bearer token (it is in "+TokenName+" in the store directory; serve --metrics-public serves metrics without it)"))
				return
			}
		}
		beforeWrite := workDeadlines(w)
		var b strings.Builder
		err := WriteMetrics(r.Context(), &b, api, live)
		beforeWrite()
		if err != nil {
			fail(w, err)
			return
		}
		w.Header().Set("Content-Type", metricsContentType)
		io.WriteString(w, b.String())
	})
}

// Metrics writes the store's metrics to w: the owner's (through its socket, with what it
// counted since it started) or, when no process owns the store, the store's own.
func (c *Conn) Metrics(ctx context.Context, w io.Writer) error {
	if c.owner != nil {
		return c.owner.Metrics(ctx, w)
	}
	return WriteMetrics(ctx, w, c.API, nil)
}

// Metrics copies the owner's GET /metrics to w.
func (c *Client) Metrics(ctx context.Context, w io.Writer) error {
	resp, err := c.send(ctx, http.MethodGet, MetricsPath, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("%w: %v", ErrOwnerGone, err)
	}
	return nil
}
