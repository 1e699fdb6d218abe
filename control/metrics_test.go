package control_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"

	dto "github.com/prometheus/client_model/go"

	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
)

// busyFor is a governor that says the machine is busy for its first n checks.
type busyFor struct {
	mu sync.Mutex
	n  int
}

func (b *busyFor) Check() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n > 0 {
		b.n--
		return "available memory 1 MiB is under 256 MiB"
	}
	return ""
}

// scrape reads /metrics at base with header and parses it as Prometheus text.
func scrape(t *testing.T, base string, header map[string]string) map[string]*dto.MetricFamily {
	t.Helper()
	req, _ := http.NewRequest("GET", base+control.MetricsPath, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain; version=0.0.4") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /metrics: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics is not Prometheus text: %v", err)
	}
	return fams
}

// value is the metric of fams named name whose labels include the given name=value pairs.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		t.Fatalf("no metric %s", name)
	}
next:
	for _, m := range f.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			return m.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			return m.GetGauge().GetValue()
		}
		t.Fatalf("%s has type %s", name, f.GetType())
	}
	t.Fatalf("no %s with labels %v", name, labels)
	return 0
}

func TestMetricsMatchTheReportAndCountGovernorWaits(t *testing.T) {
	dir := storeDir(t)
	ctx, cancel := context.WithCancel(context.Background())
	d, err := control.StartDaemon(ctx, control.DaemonConfig{Dir: dir, HTTPAddr: "127.0.0.1:0", Concurrency: 2, Grace: 20 * time.Second, Version: "test",
		Logger: slog.New(slog.DiscardHandler), Options: harness.Options{Governor: &busyFor{n: 2}, GovernorPoll: time.Millisecond}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); d.Wait() })
	base := "http://" + d.HTTPAddr().String()
	tok, err := control.Token(dir)
	if err != nil {
		t.Fatal(err)
	}
	api := control.NewHTTPClient(base, tok)
	bearer := map[string]string{"Authorization": "Bearer " + tok}

	// Before anything runs every count is there, at zero.
	fams := scrape(t, base, bearer)
	for _, s := range statefmt.Statuses {
		if v := value(t, fams, "harness_edge_harnesses", "status", string(s)); v != 0 {
			t.Fatalf("harnesses %s = %v in an empty store", s, v)
		}
	}

	// One harness completes (its first step held back by the governor), one fails on a tool
	// call that fails, one waits at a gate.
	if _, err := api.Submit(ctx, control.Submission{Task: []byte(fmt.Sprintf(`id: done
agent: A
autonomy: 5
workspace: %s
agents:
  A:
    driver: script
    tools: [write_file]
    script: {steps: {"*": [{tool: write_file, args: {path: a.txt, content: a}}, {tool: write_file, args: {path: b.txt, content: b}}, {output: ok}]}}
plan: [{id: s1, description: one, agent: A}, {id: s2, description: two, agent: A, dependsOn: [s1]}]
`, t.TempDir()))}); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, api, "done", func(e event.Event) bool { return e.Type == event.StateTransition && e.To == statefmt.StatusCompleted })
	if _, err := api.Submit(ctx, control.Submission{Task: []byte(fmt.Sprintf(`id: broken
agent: A
autonomy: 5
workspace: %s
agents:
  A:
    driver: script
    tools: [read_file]
    script: {steps: {"*": [{tool: read_file, args: {path: missing.txt}}, {output: never}]}}
plan: [{id: s1, description: read, agent: A, critical: true}, {id: s2, description: after, agent: A, dependsOn: [s1]}]
`, t.TempDir()))}); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, api, "broken", func(e event.Event) bool { return e.Type == event.StateTransition && e.To == statefmt.StatusFailed })
	submitToGate(t, api, "gated")

	rep, err := api.Report(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	fams = scrape(t, base, bearer)
	for _, s := range statefmt.Statuses {
		if got, want := value(t, fams, "harness_edge_harnesses", "status", string(s)), float64(rep.Counts[s]); got != want {
			t.Errorf("harnesses %s: metrics %v, report %v", s, got, want)
		}
	}
	if rep.Counts[statefmt.StatusCompleted] != 1 || rep.Counts[statefmt.StatusFailed] != 1 || rep.Counts[statefmt.StatusPaused] != 1 {
		t.Fatalf("the report's counts: %v", rep.Counts)
	}
	stepsDone, steps, toolCalls := 0, 0, 0
	for _, h := range rep.Harnesses {
		stepsDone += h.StepsDone
		steps += h.Steps
		toolCalls += h.ToolCalls
	}
	stepSum := 0.0
	for _, s := range statefmt.StepStatuses {
		stepSum += value(t, fams, "harness_edge_steps", "status", string(s))
	}
	ok, failed := value(t, fams, "harness_edge_tool_calls", "outcome", "success"), value(t, fams, "harness_edge_tool_calls", "outcome", "error")
	for _, c := range []struct {
		what      string
		got, want float64
	}{
		{"completed steps", value(t, fams, "harness_edge_steps", "status", "completed"), float64(stepsDone)},
		{"steps", stepSum, float64(steps)},
		{"tool calls", ok + failed, float64(toolCalls)},
		{"failed tool calls", failed, 1},
		{"checkpoints", value(t, fams, "harness_edge_checkpoints"), float64(rep.Checkpoints)},
		{"stored bytes", value(t, fams, "harness_edge_stored_bytes"), float64(rep.StoredBytes)},
		{"gates waiting", value(t, fams, "harness_edge_gates_waiting"), float64(len(rep.Waiting))},
		{"gates waiting (at least the one)", value(t, fams, "harness_edge_gates_waiting"), 1},
		{"governor waits", value(t, fams, "harness_edge_governor_waits_total"), 1},
		{"frozen", value(t, fams, "harness_edge_frozen"), 0},
	} {
		if c.got != c.want {
			t.Errorf("%s: metrics %v, want %v (report %+v)", c.what, c.got, c.want, rep)
		}
	}
	if w := value(t, fams, "harness_edge_governor_wait_seconds_total"); w <= 0 {
		t.Errorf("governor wait seconds %v after a wait", w)
	}
	if rep.Checkpoints == 0 || rep.StoredBytes == 0 || stepsDone == 0 {
		t.Fatalf("the report counted nothing: %+v", rep)
	}
}

func TestMetricsNeedTheTokenUnlessPublic(t *testing.T) {
	for _, public := range []bool{false, true} {
		t.Run(fmt.Sprintf("public=%v", public), func(t *testing.T) {
			dir := storeDir(t)
			ctx, cancel := context.WithCancel(context.Background())
			d, err := control.StartDaemon(ctx, control.DaemonConfig{Dir: dir, HTTPAddr: "127.0.0.1:0", MetricsPublic: public, Concurrency: 1, Version: "test"})
			if err != nil {
				cancel()
				t.Fatal(err)
			}
			t.Cleanup(func() { cancel(); d.Wait() })
			base := "http://" + d.HTTPAddr().String()
			tok, err := control.Token(dir)
			if err != nil {
				t.Fatal(err)
			}
			get := func(auth string) (int, string) {
				req, _ := http.NewRequest("GET", base+"/metrics", nil)
				if auth != "" {
					req.Header.Set("Authorization", auth)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b)
			}
			for _, auth := range []string{"", "Bearer " + strings.Repeat("0", len(tok)), tok} {
				code, body := get(auth)
				if public && code != 200 || !public && (code != 401 || !strings.Contains(body, "missing or wrong bearer token")) {
					t.Fatalf("metrics with Authorization %q: %d %s", auth, code, body)
				}
			}
			if code, body := get("Bearer " + tok); code != 200 || !strings.Contains(body, "# TYPE harness_edge_harnesses gauge") {
				t.Fatalf("metrics with the token: %d %s", code, body)
			}
			// Public metrics open nothing else.
			if code, _ := get(""); public && code == 200 {
				req, _ := http.NewRequest("GET", base+"/v1/harnesses", nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != 401 {
					t.Fatalf("list beside public metrics: %d", resp.StatusCode)
				}
			}
			req, _ := http.NewRequest("POST", base+"/metrics", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 405 {
				t.Fatalf("POST /metrics: %d", resp.StatusCode)
			}
		})
	}
	if err := (control.DaemonConfig{Dir: t.TempDir(), MetricsPublic: true, Concurrency: 1}).Validate(); err == nil || !strings.Contains(err.Error(), "--metrics-public") {
		t.Fatalf("--metrics-public without --http: %v", err)
	}
}
