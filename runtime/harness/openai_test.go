package harness_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/internal/openaitest"
	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/statefmt"
	"github.com/harness-edge/harness-edge/statefmt/event"
)

// OpenaiTask is a one-step task for an openai agent at the fake server; extra goes into the
// agent's settings, tools into the task.
func openaiTask(ws, endpoint, extra, tools string) string {
	return fmt.Sprintf(`id: oa
prompt: keep notes
agent: M
autonomy: 3
workspace: %s
agents:
  M:
    driver: openai
    endpoint: %q
    model: fake-model
    apiKeyEnv: FAKE_OPENAI_KEY
    tools: [read_file, write_file, slow]
%s
tools:
  slow: {command: [sh, -c, 'echo run >> ledger; while [ ! -f go ]; do sleep 0.005; done; echo slow done'], description: "a slow tool"}
%s
plan: [{id: notes, description: write the notes, agent: M}]
`, ws, endpoint, extra, tools)
}

func call(name, args string) openaitest.Reply {
	return openaitest.Reply{Calls: []openaitest.Call{{Name: name, Args: args}}}
}

// A conversation with tool calls end to end: the model's calls run through the tool-call
// manager (recorded, budgeted), results go back as tool messages, tokens count, the final answer
// is the step's output, and the API key is sent but never stored.
func TestOpenAIToolLoop(t *testing.T) {
	e := newDiskEnv(t) // the test reads the store's files
	ws := filepath.Join(e.dir, "ws")
	srv := openaitest.New()
	defer srv.Close()
	t.Setenv("FAKE_OPENAI_KEY", "sk-test-secret-123")
	srv.Push(call("write_file", `{"path": "notes.md", "content": "hello"}`),
		call("read_file", `{"path":"notes.md"}`),
		call("read_file", `{"path": "nope.md"}`),
		openaitest.Reply{Content: "Notes written and checked."})
	h, err := e.m.Create(parseTask(t, openaiTask(ws, srv.Endpoint(), "", "")))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := h.State()
	if st.Status != statefmt.StatusCompleted || *st.Plan.Steps[0].Output != "Notes written and checked." {
		t.Fatalf("status %s: %s, output %v", st.Status, st.StatusReason, st.Plan.Steps[0].Output)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "notes.md")); string(b) != "hello" {
		t.Fatalf("notes.md %q", b)
	}
	reqs := srv.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests", len(reqs))
	}
	last := reqs[3].Messages
	if last[0].Role != "system" || last[1].Role != "user" || !strings.Contains(last[1].Text(), "Step notes: write the notes") {
		t.Fatalf("conversation head: %+v", last[:2])
	}
	// assistant call, tool result, three times over
	if len(last) != 8 || last[3].Role != "tool" || last[3].ToolCallID != last[2].ToolCalls[0].ID || last[5].Text() != "hello" ||
		!strings.Contains(last[7].Text(), "error (permanent)") {
		t.Fatalf("conversation: %+v", last)
	}
	var names []string
	for _, tool := range reqs[0].Tools {
		names = append(names, tool.Function.Name)
	}
	if strings.Join(names, ",") != "read_file,write_file,slow" || reqs[0].Tools[0].Function.Parameters["required"] == nil || reqs[0].Auth != "Bearer sk-test-secret-123" {
		t.Fatalf("tools %v, schema %v, auth %q", names, reqs[0].Tools[0].Function.Parameters, reqs[0].Auth)
	}
	if st.TotalToolCalls != 3 || len(st.ToolCallHistory) != 3 || st.Iterations != 4 || st.AgentLoopSnapshot != nil {
		t.Fatalf("calls %d, history %d, iterations %d, snapshot %v", st.TotalToolCalls, len(st.ToolCallHistory), st.Iterations, st.AgentLoopSnapshot != nil)
	}
	if st.Budget.TokensUsed < 4*10 {
		t.Fatalf("tokens used %d", st.Budget.TokensUsed)
	}
	if msg := checkEvents(e); msg != "" {
		t.Fatal(msg)
	}
	// The key is nowhere in the store: not in any checkpoint, nor in the event log.
	storeBytes := readTree(t, filepath.Join(e.dir, "store"))
	if strings.Contains(storeBytes, "sk-test-secret-123") {
		t.Fatal("the API key is in the store")
	}
}

// ReadTree concatenates every file under dir.
// Parallel tool calls that the server sent with the same id (or none) all run, and each gets its
// own result, matched to its call by an id of its own.
func TestOpenAIParallelCallsWithTheSameIDAllRun(t *testing.T) {
	e := newEnv(t)
	ws := filepath.Join(t.TempDir(), "ws")
	srv := openaitest.New()
	defer srv.Close()
	t.Setenv("FAKE_OPENAI_KEY", "sk-test-secret-123")
	srv.Push(openaitest.Reply{Calls: []openaitest.Call{
		{Name: "write_file", Args: `{"path": "a.md", "content": "A"}`, ID: "call_0"},
		{Name: "write_file", Args: `{"path": "b.md", "content": "B"}`, ID: "call_0"},
		{Name: "write_file", Args: `{"path": "c.md", "content": "C"}`, ID: "call_0_1"},
	}}, openaitest.Reply{Content: "three files"})
	h, err := e.m.Create(parseTask(t, openaiTask(ws, srv.Endpoint(), "", "")))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := h.State(); st.Status != statefmt.StatusCompleted {
		t.Fatalf("status %s: %s", st.Status, st.StatusReason)
	}
	for name, want := range map[string]string{"a.md": "A", "b.md": "B", "c.md": "C"} {
		if b, err := os.ReadFile(filepath.Join(ws, name)); err != nil || string(b) != want {
			t.Errorf("%s: %q %v", name, b, err)
		}
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	msgs := reqs[1].Messages
	asked := msgs[2].ToolCalls
	if len(asked) != 3 || len(msgs) != 6 {
		t.Fatalf("the conversation sent back: %+v", msgs)
	}
	ids := map[string]bool{}
	for i, m := range msgs[3:] {
		if m.Role != "tool" || m.ToolCallID != asked[i].ID || ids[m.ToolCallID] {
			t.Errorf("tool message %d answers %q; the calls: %+v", i, m.ToolCallID, asked)
		}
		ids[m.ToolCallID] = true
	}
}

// Every request's tokens are charged, the compaction summary's too, when the server reports
// prompt and completion tokens without their total.
func TestOpenAIChargesTheSummaryWithoutATotal(t *testing.T) {
	e := newEnv(t)
	ws := filepath.Join(e.dir, "ws")
	srv := openaitest.New()
	defer srv.Close()
	t.Setenv("FAKE_OPENAI_KEY", "k")
	var want atomic.Int64
	main := 0
	srv.Respond = func(r openaitest.Request) openaitest.Reply {
		if len(r.Tools) == 0 { // the summary request
			want.Add(1000 + 50)
			return openaitest.Reply{Content: "SUMMARY: wrote the notes.", PromptTokens: 1000, CompletionTokens: 50, NoTotal: true}
		}
		want.Add(100 + 10)
		main++
		if main <= 4 {
			return openaitest.Reply{Calls: []openaitest.Call{{Name: "write_file", Args: fmt.Sprintf(`{"path": "n%d.md", "content": "x"}`, main)}},
				PromptTokens: 100, CompletionTokens: 10, NoTotal: true}
		}
		return openaitest.Reply{Content: "done", PromptTokens: 100, CompletionTokens: 10, NoTotal: true}
	}
	h, _ := e.m.Create(parseTask(t, openaiTask(ws, srv.Endpoint(), "    contextWindow: 200\n    compaction: {threshold: 0.5, protectTurns: 1}", "")))
	if err := h.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := h.State()
	if st.Status != statefmt.StatusCompleted {
		t.Fatalf("status %s: %s", st.Status, st.StatusReason)
	}
	if len(e.rec.of(event.Compaction)) == 0 {
		t.Fatal("no compaction")
	}
	if st.Budget.TokensUsed != want.Load() {
		t.Fatalf("tokens charged %d, the server reported %d", st.Budget.TokensUsed, want.Load())
	}
}

func readTree(t *testing.T, dir string) string {
	var b strings.Builder
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			data, _ := os.ReadFile(p)
			b.Write(data)
		}
		return nil
	})
	return b.String()
}

// An interruption while a tool the model asked for runs: on resume the conversation goes on
// where it stopped: the pending call runs again (it is not side-effecting) and the model is not
// asked that turn again.
func TestOpenAIResumesTheConversation(t *testing.T) {
	e := newEnv(t)
	ws := filepath.Join(e.dir, "ws")
	srv := openaitest.New()
	defer srv.Close()
	t.Setenv("FAKE_OPENAI_KEY", "k")
	srv.Push(call("write_file", `{"path": "a.md", "content": "a"}`), call("slow", `{}`))
	h, err := e.m.Create(parseTask(t, openaiTask(ws, srv.Endpoint(), "", "")))
	if err != nil {
		t.Fatal(err)
	}
	if err := interruptWhen(t, h, ws, "ledger"); !errors.Is(err, harness.ErrPaused) {
		t.Fatalf("run: %v", err)
	}
	if snap := h.State().AgentLoopSnapshot; snap == nil || snap.Iteration != 2 || len(snap.Messages) != 5 {
		t.Fatalf("snapshot %+v", snap)
	}
	e.open()
	touch(t, filepath.Join(ws, "go"))
	srv.Push(openaitest.Reply{Content: "all done"})
	h, err = e.m.ResumeFromCheckpoint("oa")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := h.State()
	if st.Status != statefmt.StatusCompleted || *st.Plan.Steps[0].Output != "all done" || st.Iterations != 3 {
		t.Fatalf("status %s (%s), iterations %d", st.Status, st.StatusReason, st.Iterations)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3 (the interrupted turn is not asked again)", len(reqs))
	}
	final := reqs[2].Messages
	if len(final) != 6 || final[3].Text() != "wrote 1 bytes to a.md" || final[5].Role != "tool" || final[5].Text() != "slow done" {
		t.Fatalf("the resumed conversation: %+v", final)
	}
	if ledger, _ := os.ReadFile(filepath.Join(ws, "ledger")); string(ledger) != "run\nrun\n" {
		t.Fatalf("ledger %q", ledger)
	}
}

// HTTP errors: 429 and 5xx are transient (Retry-After honoured), so are malformed bodies and
// requests that time out (the request is cancelled); other statuses fail the step with the
// body's message.
func TestOpenAIHTTPErrors(t *testing.T) {
	t.Setenv("FAKE_OPENAI_KEY", "k")
	t.Run("transient", func(t *testing.T) {
		e := newEnv(t)
		srv := openaitest.New()
		defer srv.Close()
		srv.Push(openaitest.Reply{Status: 429, ErrorMsg: "slow down", RetryAfter: "7"},
			openaitest.Reply{Status: 503, ErrorMsg: "overloaded"},
			openaitest.Reply{Body: `{"choices": [{"message": {"content": "trunc`},
			openaitest.Reply{Hang: true},
			openaitest.Reply{Content: "fine"})
		go func() {
			for n := range srv.Arrived() {
				if n == 4 { // the request timer was set before the request was sent
					e.clock.Advance(31 * time.Second)
				}
			}
		}()
		h, _ := e.m.Create(parseTask(t, openaiTask(filepath.Join(e.dir, "ws"), srv.Endpoint(), "    requestTimeout: 30s", "retry: {maxRetries: 5}")))
		if err := h.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		if st := h.State(); st.Status != statefmt.StatusCompleted || *st.Plan.Steps[0].Output != "fine" {
			t.Fatalf("status %s: %s", st.Status, st.StatusReason)
		}
		sl := e.clock.Sleeps()
		if len(sl) != 4 || sl[0] != 7*time.Second {
			t.Fatalf("waits %v: the first should be Retry-After's 7s", sl)
		}
		var warnings []string
		for _, w := range e.rec.of(event.Warning) {
			warnings = append(warnings, w.Message)
		}
		all := strings.Join(warnings, "\n")
		for _, want := range []string{"429 Too Many Requests: slow down", "503 Service Unavailable: overloaded", "not chat-completions JSON", "did not answer within 30s"} {
			if !strings.Contains(all, want) {
				t.Errorf("no retry warning with %q in:\n%s", want, all)
			}
		}
	})
	t.Run("permanent", func(t *testing.T) {
		e := newEnv(t)
		srv := openaitest.New()
		defer srv.Close()
		srv.Push(openaitest.Reply{Status: 404, ErrorMsg: "model fake-model not found"})
		h, _ := e.m.Create(parseTask(t, openaiTask(filepath.Join(e.dir, "ws"), srv.Endpoint(), "", "")))
		if err := h.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		st := h.State()
		if st.Status != statefmt.StatusFailed || !strings.Contains(st.StatusReason, "404 Not Found: model fake-model not found") || len(srv.Requests()) != 1 {
			t.Fatalf("status %s: %s (%d requests)", st.Status, st.StatusReason, len(srv.Requests()))
		}
	})
	t.Run("no key", func(t *testing.T) {
		e := newEnv(t)
		t.Setenv("FAKE_OPENAI_KEY", "")
		h, _ := e.m.Create(parseTask(t, openaiTask(filepath.Join(e.dir, "ws"), "http://127.0.0.1:1/v1", "", "")))
		_ = h.Run(context.Background())
		if st := h.State(); !strings.Contains(st.StatusReason, "FAKE_OPENAI_KEY (apiKeyEnv) is not set") {
			t.Fatalf("reason %q", st.StatusReason)
		}
	})
}

// Doom loops: the same call with the same arguments is blocked from the third time in a row
// (the model is told why), and when the model keeps at it, a human decides.
func TestOpenAIDoomLoop(t *testing.T) {
	t.Setenv("FAKE_OPENAI_KEY", "k")
	for _, decision := range []string{"approve", "reject"} {
		t.Run(decision, func(t *testing.T) {
			e := newEnv(t)
			ws := filepath.Join(e.dir, "ws")
			srv := openaitest.New()
			defer srv.Close()
			for range 6 {
				srv.Push(call("read_file", `{"path": "notes.md"}`))
			}
			if err := os.MkdirAll(ws, 0o755); err != nil {
				t.Fatal(err)
			}
			touch(t, filepath.Join(ws, "notes.md"))
			h, _ := e.m.Create(parseTask(t, openaiTask(ws, srv.Endpoint(), "", "")))
			if err := h.Run(context.Background()); !errors.Is(err, harness.ErrWaiting) {
				t.Fatalf("run: %v", err)
			}
			gates, _ := e.m.PendingGates("oa")
			if len(gates) != 1 || gates[0].Gate.Kind != "doom_loop:6" {
				t.Fatalf("gates %+v", gates)
			}
			if _, err := e.m.Decide("oa", "", decision == "approve", "looping"); err != nil {
				t.Fatal(err)
			}
			srv.Push(openaitest.Reply{Content: "ok, stopping"})
			if err := h.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			st := h.State()
			var told int
			for _, m := range srv.Requests()[len(srv.Requests())-1].Messages {
				if m.Role == "tool" && strings.HasPrefix(m.Text(), "blocked: you have called read_file with these same arguments") {
					told++
				}
			}
			ran := 0
			for _, r := range st.ToolCallHistory {
				if r.CallName == "read_file" {
					ran++
				}
			}
			switch decision {
			case "approve":
				if st.Status != statefmt.StatusCompleted || told != 3 || ran != 3 {
					t.Fatalf("status %s (%s), told %d, ran %d", st.Status, st.StatusReason, told, ran)
				}
			case "reject":
				if st.Status != statefmt.StatusFailed || !strings.Contains(st.StatusReason, "stuck calling read_file") || ran != 2 {
					t.Fatalf("status %s (%s), ran %d", st.Status, st.StatusReason, ran)
				}
			}
			if w := e.rec.toolWarnings(); len(w) != 3 || !strings.Contains(w[0].Message, "doom loop") {
				t.Fatalf("warnings %+v", w)
			}
		})
	}
}

// Compaction near the context window: older turns become the model's summary, or, when
// summarising fails, a note that they were dropped; the system prompt, the step's prompt and
// the latest turn stay as they were.
func TestOpenAICompaction(t *testing.T) {
	t.Setenv("FAKE_OPENAI_KEY", "k")
	for _, summaryFails := range []bool{false, true} {
		t.Run(fmt.Sprintf("summary fails %v", summaryFails), func(t *testing.T) {
			e := newEnv(t)
			ws := filepath.Join(e.dir, "ws")
			if err := os.MkdirAll(ws, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(ws, "big.txt"), []byte(strings.Repeat("a line of the big file\n", 40)), 0o644); err != nil {
				t.Fatal(err)
			}
			srv := openaitest.New()
			defer srv.Close()
			main := 0
			srv.Respond = func(r openaitest.Request) openaitest.Reply {
				if len(r.Tools) == 0 { // the summary request
					if summaryFails {
						return openaitest.Reply{Status: 400, ErrorMsg: "context too long"}
					}
					return openaitest.Reply{Content: "SUMMARY: read big.txt several times."}
				}
				main++
				if main <= 6 {
					return call("read_file", fmt.Sprintf(`{"path": "big.txt", "offset": %d}`, main))
				}
				return openaitest.Reply{Content: "done reading"}
			}
			h, _ := e.m.Create(parseTask(t, openaiTask(ws, srv.Endpoint(), "    contextWindow: 1000\n    compaction: {threshold: 0.5, protectTurns: 1}", "")))
			if err := h.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if st := h.State(); st.Status != statefmt.StatusCompleted {
				t.Fatalf("status %s: %s", st.Status, st.StatusReason)
			}
			if msg := checkEvents(e); msg != "" {
				t.Fatal(msg)
			}
			comp := e.rec.of(event.Compaction)
			want := map[bool]string{false: "summarised", true: "dropped"}[summaryFails]
			if len(comp) == 0 || comp[0].Outcome != want {
				t.Fatalf("compactions %+v", comp)
			}
			reqs := srv.Requests()
			last := reqs[len(reqs)-1].Messages
			note := map[bool]string{false: "SUMMARY: read big.txt", true: "were dropped to fit the context window (summarising them failed"}[summaryFails]
			if last[0].Role != "system" || !strings.Contains(last[1].Text(), "Step notes") || !strings.Contains(last[2].Text(), note) {
				t.Fatalf("compacted conversation head: %+v", last[:3])
			}
			if len(last) > 8 {
				t.Fatalf("%d messages: not compacted", len(last))
			}
		})
	}
}

// An openai agent that owns a task without a plan asks the model for one; an answer that is not
// a valid plan goes back once with what is wrong.
func TestOpenAIPlans(t *testing.T) {
	t.Setenv("FAKE_OPENAI_KEY", "k")
	e := newEnv(t)
	srv := openaitest.New()
	defer srv.Close()
	plans := 0
	srv.Respond = func(r openaitest.Request) openaitest.Reply {
		if strings.HasPrefix(r.Messages[0].Text(), "You plan work") {
			plans++
			if plans == 1 {
				return openaitest.Reply{Content: `{"steps": [{"id": "a", "description": "first", "agent": "NOBODY"}]}`}
			}
			return openaitest.Reply{Content: "Here is the plan:\n```json\n" +
				`{"steps": [{"id": "a", "description": "first", "agent": "M"}, {"id": "b", "description": "second", "agent": "M", "dependsOn": ["a"]}]}` + "\n```"}
		}
		return openaitest.Reply{Content: "did " + strings.Fields(r.Messages[1].Text())[len(strings.Fields(r.Messages[1].Text()))-1]}
	}
	src := strings.Replace(openaiTask(filepath.Join(e.dir, "ws"), srv.Endpoint(), "", ""), "plan: [{id: notes, description: write the notes, agent: M}]\n", "", 1)
	h, err := e.m.Create(parseTask(t, src))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := h.State()
	if st.Status != statefmt.StatusCompleted || len(st.Plan.Steps) != 2 || st.Plan.Steps[1].Dependencies[0] != "a" || plans != 2 {
		t.Fatalf("status %s (%s), plan %+v, plan requests %d", st.Status, st.StatusReason, st.Plan, plans)
	}
	if fix := srv.Requests()[1].Messages; !strings.HasPrefix(fix[len(fix)-1].Text(), "That is not a valid plan: ") ||
		!strings.Contains(fix[len(fix)-1].Text(), `"NOBODY"`) {
		t.Fatalf("the correction request: %+v", fix)
	}
}
