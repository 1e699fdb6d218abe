//go:build agents

package agents

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/harness-edge/harness-edge/internal/anthropictest"
	"github.com/harness-edge/harness-edge/statefmt"
)

// claudeEnv is the environment of a Claude Code run against a local server: the server's URL, a
// dummy key, a fresh HOME, and every switch that keeps the CLI from calling anywhere else
// (telemetry, error reports, updates, feedback surveys).
func claudeEnv(t *testing.T, baseURL string) []string {
	home := t.TempDir()
	return []string{
		"HOME=" + home,
		"ANTHROPIC_BASE_URL=" + baseURL,
		"ANTHROPIC_API_KEY=sk-ant-test-not-a-real-key",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_ERROR_REPORTING=1",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_BUG_COMMAND=1",
		"CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY=1",
		"CLAUDE_CODE_DISABLE_TERMINAL_TITLE=1",
		// Claude Code refuses --dangerously-skip-permissions as root outside a sandbox.
		"IS_SANDBOX=1",
	}
}

// claudeEnvNames are the variables of claudeEnv the loop passes on to the agent (HOME it passes
// on by itself).
var claudeEnvNames = []string{"ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
	"DISABLE_TELEMETRY", "DISABLE_ERROR_REPORTING", "DISABLE_AUTOUPDATER", "DISABLE_BUG_COMMAND",
	"CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY", "CLAUDE_CODE_DISABLE_TERMINAL_TITLE", "IS_SANDBOX"}

// The real Claude Code, run by `loop`: in its first session it writes a file with its Write tool
// as the model asked and stops short of the promise; the second session, whose prompt carries
// what the first said, keeps it. The tokens the model server reported and the cost Claude Code
// computed from them are stored with each iteration and charged to the budget.
func TestLoopAroundTheRealClaudeCodeWritesTheFileAndKeepsThePromise(t *testing.T) {
	claude := cli(t, "claude")
	dir := t.TempDir()
	db, ws := filepath.Join(dir, "store"), filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(ws, "notes", "hello.txt")
	const content = "Hello from the scripted model.\nSecond line.\n"
	write := anthropictest.Usage{InputTokens: 1200, OutputTokens: 80, CacheReadInputTokens: 300, CacheCreationInputTokens: 40}
	wrote := anthropictest.Usage{InputTokens: 1400, OutputTokens: 20}
	done := anthropictest.Usage{InputTokens: 900, OutputTokens: 15, CacheReadInputTokens: 700}
	srv := anthropictest.New(
		// Iteration 1: two turns, the tool call and its answer.
		anthropictest.ToolUse("Write", map[string]any{"file_path": target, "content": content}, write),
		anthropictest.Text("I wrote notes/hello.txt; checking it is next.", wrote),
		// Iteration 2: one turn.
		anthropictest.Text("notes/hello.txt is there.\n<promise>NOTES_WRITTEN</promise>", done),
	)
	defer srv.Close()
	env := claudeEnv(t, srv.URL)

	args := []string{"--store", db, "--id", "claude1", "--promise", "NOTES_WRITTEN", "--max-iterations", "3",
		"--iteration-timeout", "2m", "--prompt", "Write notes/hello.txt.", "--workspace", ws}
	for _, n := range claudeEnvNames {
		args = append(args, "--env", n)
	}
	args = append(args, "--", claude, "-p", "--output-format", "json", "--dangerously-skip-permissions", "--model", "claude-sonnet-4-5")
	code, out := loop(t, env, args...)
	if code != 0 {
		t.Fatalf("loop: exit %d\n%s\nrequests:\n%s\nagent log:\n%s", code, out, srv.Log(), agentLog(t, env, db, "claude1"))
	}
	if got, err := os.ReadFile(target); err != nil || string(got) != content {
		t.Fatalf("the file the model's Write call gave: %q, %v", got, err)
	}
	if srv.Turns() != 3 {
		t.Fatalf("the model was asked %d agent turns, not 3\n%s", srv.Turns(), srv.Log())
	}
	reqs := srv.Requests()
	// The tool's result went back to the model.
	if second := string(reqs[len(reqs)-2].Body); !strings.Contains(second, `"type":"tool_result"`) {
		t.Fatalf("the second turn does not carry the tool's result:\n%.2000s", second)
	}
	// The second session is a fresh one whose prompt carries the first one's answer.
	if last := string(reqs[len(reqs)-1].Body); !strings.Contains(last, "I wrote notes/hello.txt; checking it is next.") ||
		!strings.Contains(last, "iteration 2 of at most 3") || strings.Contains(last, "toolu_") {
		t.Fatalf("iteration 2's request does not carry iteration 1's feedback in a fresh session:\n%.3000s", last)
	}

	st := state(t, env, db, "claude1")
	if st.Status != statefmt.StatusCompleted || st.Iterations != 2 || st.Plan == nil || len(st.Plan.Steps) != 1 ||
		st.Plan.Steps[0].Output == nil || !strings.Contains(*st.Plan.Steps[0].Output, "notes/hello.txt is there.") {
		t.Fatalf("status %s, iterations %d, plan %+v", st.Status, st.Iterations, st.Plan)
	}
	us := usages(t, env, db, "claude1")
	if len(us) != 2 {
		t.Fatalf("%d iteration usages, not 2: %+v", len(us), us)
	}
	// Claude Code adds up the usage of every turn of a session.
	sent := []anthropictest.Usage{
		{InputTokens: write.InputTokens + wrote.InputTokens, OutputTokens: write.OutputTokens + wrote.OutputTokens,
			CacheReadInputTokens: write.CacheReadInputTokens, CacheCreationInputTokens: write.CacheCreationInputTokens},
		done,
	}
	var tokens int64
	var cost float64
	for i, u := range us {
		if u.InputTokens != sent[i].InputTokens || u.OutputTokens != sent[i].OutputTokens || u.CacheReadTokens != sent[i].CacheReadInputTokens ||
			u.CacheWriteTokens != sent[i].CacheCreationInputTokens || u.SessionID == "" {
			t.Fatalf("iteration %d: recorded usage %+v; the server sent %+v", i+1, u, sent[i])
		}
		// The cost is Claude Code's own, from its price list: for claude-sonnet-4-5, $3 per
		// million input tokens, $15 per million output tokens, $0.30 per million read from the
		// cache and $3.75 per million written to it.
		if want := (3*float64(u.InputTokens) + 15*float64(u.OutputTokens) + 0.3*float64(u.CacheReadTokens) + 3.75*float64(u.CacheWriteTokens)) / 1e6; !near(u.CostUSD, want) {
			t.Fatalf("iteration %d: recorded cost $%v; its tokens at claude-sonnet-4-5's prices cost $%v", i+1, u.CostUSD, want)
		}
		tokens += u.Tokens()
		cost += u.CostUSD
	}
	if us[0].SessionID == us[1].SessionID {
		t.Fatalf("both iterations ran in session %s", us[0].SessionID)
	}
	if st.Budget == nil || st.Budget.TokensUsed != tokens || !near(statefmt.USD(st.Budget.CostMicroUSDUsed), cost) {
		t.Fatalf("budget %+v; the iterations reported %d tokens, $%v", st.Budget, tokens, cost)
	}
	t.Logf("Claude Code reported %d tokens, $%v; requests:\n%s", tokens, cost, srv.Log())
}
