//go:build agents

package agents

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/harness-edge/harness-edge/internal/responsestest"
	"github.com/harness-edge/harness-edge/statefmt"
)

// codexEnv is the environment of a Codex run against a local server: a CODEX_HOME whose
// config.toml makes the server the model provider (Codex speaks the Responses API to it), a
// dummy key for it, and a fresh HOME.
func codexEnv(t *testing.T, baseURL string) []string {
	home, codexHome := t.TempDir(), t.TempDir()
	config := `check_for_update_on_startup = false
model = "gpt-5.5"
model_provider = "scripted"

[model_providers.scripted]
name = "scripted model server"
base_url = "` + baseURL + `/v1"
wire_api = "responses"
env_key = "SCRIPTED_MODEL_API_KEY"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false
`
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"HOME=" + home, "CODEX_HOME=" + codexHome, "SCRIPTED_MODEL_API_KEY=not-a-real-key"}
}

// The real Codex, run by `loop`: in its first session it writes a file with a shell command as
// the model asked and stops short of the promise; the second session, whose prompt carries what
// the first said, keeps it. The tokens the model server reported are stored with each iteration
// and charged to the budget (Codex reports no cost).
func TestLoopAroundTheRealCodexWritesTheFileAndKeepsThePromise(t *testing.T) {
	codex := cli(t, "codex")
	dir := t.TempDir()
	db, ws := filepath.Join(dir, "store"), filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	const content = "Hello from the scripted model.\nSecond line.\n"
	write := responsestest.Usage{InputTokens: 5200, CachedInputTokens: 3000, OutputTokens: 90}
	wrote := responsestest.Usage{InputTokens: 5600, CachedInputTokens: 5100, OutputTokens: 25}
	done := responsestest.Usage{InputTokens: 4800, CachedInputTokens: 1000, OutputTokens: 12}
	srv := responsestest.New(
		// Iteration 1: two turns. Codex's shell tool (exec_command) runs the command in the
		// workspace.
		responsestest.Call("exec_command", map[string]any{"cmd": "mkdir -p notes && printf 'Hello from the scripted model.\\nSecond line.\\n' > notes/hello.txt", "tty": false}, write),
		responsestest.Text("I wrote notes/hello.txt; checking it is next.", wrote),
		// Iteration 2: one turn.
		responsestest.Text("notes/hello.txt is there.\n<promise>NOTES_WRITTEN</promise>", done),
	)
	defer srv.Close()
	env := codexEnv(t, srv.URL)

	code, out := loop(t, env, "--store", db, "--id", "codex1", "--promise", "NOTES_WRITTEN", "--max-iterations", "3",
		"--iteration-timeout", "2m", "--prompt", "Write notes/hello.txt.", "--workspace", ws,
		"--env", "CODEX_HOME", "--env", "SCRIPTED_MODEL_API_KEY",
		"--", codex, "exec", "--json", "--skip-git-repo-check", "-s", "workspace-write", "-")
	if code != 0 {
		t.Fatalf("loop: exit %d\n%s\nrequests:\n%s\nagent log:\n%s", code, out, srv.Log(), agentLog(t, env, db, "codex1"))
	}
	if got, err := os.ReadFile(filepath.Join(ws, "notes", "hello.txt")); err != nil || string(got) != content {
		t.Fatalf("the file the model's shell call wrote: %q, %v\nagent log:\n%s", got, err, agentLog(t, env, db, "codex1"))
	}
	if srv.Turns() != 3 {
		t.Fatalf("the model was asked %d agent turns, not 3\n%s", srv.Turns(), srv.Log())
	}
	reqs := srv.Requests()
	// The command's output went back to the model as the call's result.
	if second := string(reqs[len(reqs)-2].Body); !strings.Contains(second, `"type":"function_call_output"`) {
		t.Fatalf("the second turn does not carry the call's output:\n%.2000s", second)
	}
	// The second session is a fresh one whose prompt carries the first one's answer.
	if last := string(reqs[len(reqs)-1].Body); !strings.Contains(last, "I wrote notes/hello.txt; checking it is next.") ||
		!strings.Contains(last, "iteration 2 of at most 3") || strings.Contains(last, `"type":"function_call_output"`) {
		t.Fatalf("iteration 2's request does not carry iteration 1's feedback in a fresh session:\n%.3000s", last)
	}

	st := state(t, env, db, "codex1")
	if st.Status != statefmt.StatusCompleted || st.Iterations != 2 || st.Plan == nil || len(st.Plan.Steps) != 1 ||
		st.Plan.Steps[0].Output == nil || !strings.Contains(*st.Plan.Steps[0].Output, "notes/hello.txt is there.") {
		t.Fatalf("status %s, iterations %d, plan %+v", st.Status, st.Iterations, st.Plan)
	}
	us := usages(t, env, db, "codex1")
	if len(us) != 2 {
		t.Fatalf("%d iteration usages, not 2: %+v", len(us), us)
	}
	// Codex adds up the usage of every turn of a session; the loop counts the cached input
	// apart from the rest.
	sent := []responsestest.Usage{
		{InputTokens: write.InputTokens + wrote.InputTokens, CachedInputTokens: write.CachedInputTokens + wrote.CachedInputTokens, OutputTokens: write.OutputTokens + wrote.OutputTokens},
		done,
	}
	var tokens int64
	for i, u := range us {
		if u.InputTokens != sent[i].InputTokens-sent[i].CachedInputTokens || u.CacheReadTokens != sent[i].CachedInputTokens ||
			u.OutputTokens != sent[i].OutputTokens || u.CacheWriteTokens != 0 || u.CostUSD != 0 || u.SessionID == "" {
			t.Fatalf("iteration %d: recorded usage %+v; the server sent %+v", i+1, u, sent[i])
		}
		tokens += u.Tokens()
	}
	if us[0].SessionID == us[1].SessionID {
		t.Fatalf("both iterations ran in thread %s", us[0].SessionID)
	}
	if st.Budget == nil || st.Budget.TokensUsed != tokens || st.Budget.CostMicroUSDUsed != 0 {
		t.Fatalf("budget %+v; the iterations reported %d tokens", st.Budget, tokens)
	}
	t.Logf("Codex reported %d tokens; requests:\n%s", tokens, srv.Log())
}
