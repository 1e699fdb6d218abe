package harness_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/harness-edge/harness-edge/runtime/tools"

	"github.com/harness-edge/harness-edge/statefmt/event"

	"github.com/harness-edge/harness-edge/internal/openaitest"
	"github.com/harness-edge/harness-edge/runtime/harness"
	"github.com/harness-edge/harness-edge/statefmt"
)

// HookTask: one step calling write_file twice (once on a "secret" path) and bash twice with the
// same command, with a shell pre-hook that blocks secrets (exit 2), interrupts bash (JSON
// answer), and a post-hook that logs every call.
func hookTask(ws string) string {
	return fmt.Sprintf(`id: hk
agent: A
autonomy: 4
workspace: %s
agents:
  A:
    driver: script
    tools: [write_file, bash]
    script:
      steps:
        s:
          - {tool: write_file, args: {path: secret.txt, content: x}}
          - {tool: write_file, args: {path: ok.txt, content: fine}}
          - {tool: bash, args: {command: "echo ran >> bash.log"}}
          - {tool: bash, args: {command: "echo ran >> bash.log"}}
          - {output: done}
hooks:
  preTool:
    - command: [sh, -c, 'in=$(cat); case $in in *secret*) echo "no secrets, please" >&2; exit 2;; esac']
      tools: [write_file]
    - command: [sh, -c, 'cat > /dev/null; echo "{\"decision\": \"interrupt\", \"reason\": \"bash needs a human\"}"']
      tools: [bash]
  postTool:
    - command: [sh, -c, 'cat >> ../post.log; echo >> ../post.log']
plan: [{id: s, description: hooks, agent: A}]
`, ws)
}

// Shell hooks: block (the call is refused unexecuted, recorded, the agent told why), interrupt
// (a durable gate: the harness pauses; approved, the call runs, and the approval covers the same
// call again in that step; rejected, it is blocked), post-hooks see every call that ran.
func TestShellHooks(t *testing.T) {
	for _, decision := range []string{"approve", "reject"} {
		t.Run(decision, func(t *testing.T) {
			e := newEnv(t)
			ws := filepath.Join(e.dir, "ws")
			tk := parseTask(t, hookTask(ws))
			// The script agent fails its step on a refused call: let it go on past the block.
			tk.Agents["A"].Script.Steps["s"] = tk.Agents["A"].Script.Steps["s"][1:]
			secret := parseTask(t, hookTask(ws))
			h, err := e.m.Create(tk)
			if err != nil {
				t.Fatal(err)
			}
			if err := h.Run(context.Background()); !errors.Is(err, harness.ErrWaiting) {
				t.Fatalf("run: %v", err)
			}
			gates, _ := e.m.PendingGates("hk")
			if len(gates) != 1 || !strings.HasPrefix(gates[0].Gate.Kind, "hook:bash:") {
				t.Fatalf("gates %+v", gates)
			}
			if exists(filepath.Join(ws, "bash.log")) {
				t.Fatal("the interrupted call ran before a human decided")
			}
			e.open() // the decision and the resume in a new process
			if _, err := e.m.Decide("hk", "", decision == "approve", "not today"); err != nil {
				t.Fatal(err)
			}
			h, err = e.m.ResumeFromCheckpoint("hk")
			if err != nil {
				t.Fatal(err)
			}
			_ = h.Run(context.Background())
			st := h.State()
			bashLog, _ := os.ReadFile(filepath.Join(ws, "bash.log"))
			switch decision {
			case "approve":
				// Both identical bash calls ran on the one approval.
				if st.Status != statefmt.StatusCompleted || string(bashLog) != "ran\nran\n" || len(st.Gates) != 1 {
					t.Fatalf("status %s (%s), bash.log %q, gates %d", st.Status, st.StatusReason, bashLog, len(st.Gates))
				}
			case "reject":
				last := st.ToolCallHistory[len(st.ToolCallHistory)-1]
				if st.Status != statefmt.StatusFailed || len(bashLog) != 0 || last.Result.ErrorKind != "blocked" ||
					!strings.Contains(last.Result.Error, "a human rejected this call at gate g1: not today") {
					t.Fatalf("status %s (%s), bash.log %q, last call %+v", st.Status, st.StatusReason, bashLog, last.Result)
				}
			}
			// The post-hook saw every call that ran: the attempt re-ran from its start after the
			// gate (a script agent saves no loop snapshot), so write_file ran twice.
			post, _ := os.ReadFile(filepath.Join(e.dir, "post.log"))
			if want := map[string]int{"approve": 4, "reject": 2}[decision]; strings.Count(string(post), `"event":"postTool"`) != want {
				t.Fatalf("post-hook saw %d calls, want %d:\n%s", strings.Count(string(post), `"event":"postTool"`), want, post)
			}

			// The blocked call: with the secret write first, the step fails, the file is not
			// written, and the record says why.
			e2 := newEnv(t)
			ws2 := filepath.Join(e2.dir, "ws")
			secret.Workspace.Path = ws2
			h2, _ := e2.m.Create(secret)
			_ = h2.Run(context.Background())
			st2 := h2.State()
			r := st2.ToolCallHistory[0]
			if st2.Status != statefmt.StatusFailed || exists(filepath.Join(ws2, "secret.txt")) || r.Result.ErrorKind != "blocked" ||
				!strings.Contains(r.Result.Error, "no secrets, please") || st2.TotalToolCalls != 0 {
				t.Fatalf("blocked call: status %s, record %+v, calls %d", st2.Status, r.Result, st2.TotalToolCalls)
			}
		})
	}
}

// A hook that fails (not exit 0 or 2) or answers nonsense blocks the call: a guard that cannot
// answer does not let calls through. A post-hook that fails becomes a warning.
func TestFailingHooksBlock(t *testing.T) {
	for _, c := range []struct{ name, pre, want string }{
		{"crash", `[sh, -c, 'echo boom >&2; exit 1']`, "the hook failed, so the call is blocked: exit status 1: boom"},
		{"nonsense", `[sh, -c, 'echo "{\"decision\": \"maybe\"}"']`, `decision "maybe" is not continue, block or interrupt`},
		{"not json", `[sh, -c, 'echo yes']`, "the hook's answer is not"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			ws := filepath.Join(e.dir, "ws")
			h, _ := e.m.Create(parseTask(t, fmt.Sprintf(`id: fh
agent: A
autonomy: 4
workspace: %s
agents:
  A:
    driver: script
    tools: [write_file]
    script: {steps: {s: [{tool: write_file, args: {path: a.txt, content: a}}]}}
hooks:
  preTool: [{command: %s}]
plan: [{id: s, description: s, agent: A}]
`, ws, c.pre)))
			_ = h.Run(context.Background())
			st := h.State()
			if exists(filepath.Join(ws, "a.txt")) || !strings.Contains(st.ToolCallHistory[0].Result.Error, c.want) {
				t.Fatalf("record %+v", st.ToolCallHistory[0].Result)
			}
		})
	}
	t.Run("post-hook failure warns", func(t *testing.T) {
		e := newEnv(t)
		ws := filepath.Join(e.dir, "ws")
		h, _ := e.m.Create(parseTask(t, fmt.Sprintf(`id: ph
agent: A
autonomy: 4
workspace: %s
agents:
  A:
    driver: script
    tools: [write_file]
    script: {steps: {s: [{tool: write_file, args: {path: a.txt, content: a}}, {output: ok}]}}
hooks:
  postTool: [{command: [sh, -c, 'exit 7']}]
plan: [{id: s, description: s, agent: A}]
`, ws)))
		if err := h.Run(context.Background()); err != nil || h.Status() != statefmt.StatusCompleted {
			t.Fatalf("run: %v, %s", err, h.Status())
		}
		if w := e.rec.toolWarnings(); len(w) != 1 || !strings.Contains(w[0].Message, "hooks.postTool[0] sh: exit status 7") {
			t.Fatalf("warnings %+v", w)
		}
	})
}

// Go hooks (Options.Hooks) run before the task's; an openai agent is told why its call was
// blocked and goes on.
func TestGoHooksAndTheModelIsTold(t *testing.T) {
	e := newEnv(t)
	ws := filepath.Join(e.dir, "ws")
	var seen []string
	e.m = harness.NewManager(e.store, harness.Options{Clock: e.clock, Sinks: []event.Sink{e.rec}, Hooks: tools.Hooks{
		Pre: []tools.PreToolHook{func(_ context.Context, r tools.ToolRequest) (tools.HookDecision, string) {
			if strings.Contains(string(r.Arguments), "rm -rf") {
				return tools.HookBlock, "no rm -rf here"
			}
			return tools.HookContinue, ""
		}},
		Post: []tools.PostToolHook{func(_ context.Context, r tools.ToolRequest, res statefmt.ToolResult) {
			seen = append(seen, fmt.Sprintf("%s/%s/%s:%v", r.HarnessID, r.StepID, r.Tool, res.Success))
		}},
	}})
	srv := openaitest.New()
	defer srv.Close()
	t.Setenv("FAKE_OPENAI_KEY", "k")
	srv.Push(call("write_file", `{"path": "keep.txt", "content": "keep"}`),
		call("bash", `{"command": "rm -rf keep.txt"}`),
		openaitest.Reply{Content: "I will not delete it then."})
	src := strings.Replace(openaiTask(ws, srv.Endpoint(), "", ""), "tools: [read_file, write_file, slow]", "tools: [write_file, bash]", 1)
	h, err := e.m.Create(parseTask(t, src))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	told := reqs[2].Messages[len(reqs[2].Messages)-1]
	if h.Status() != statefmt.StatusCompleted || !exists(filepath.Join(ws, "keep.txt")) || told.Role != "tool" ||
		!strings.Contains(told.Text(), "error (blocked): blocked by a hook: no rm -rf here") {
		t.Fatalf("status %s, told %+v", h.Status(), told)
	}
	if strings.Join(seen, " ") != "oa/notes/write_file:true" {
		t.Fatalf("post-hook saw %v", seen)
	}
}
