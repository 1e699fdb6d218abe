package task_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/runtime/task"
)

const good = `# comment
id: nightly
prompt: do it
agent: MARS
autonomy: 2
budget: {toolCalls: 7, wallClock: 8h}
workspace: ./work
agents:
  MARS:  {driver: command, command: [claude, -p], tools: [read_file, bash], completionPromise: TASK_COMPLETE, maxIterations: 4}
  PLUTO: {driver: openai, endpoint: "http://127.0.0.1:8080/v1", model: qwen2.5-coder, tools: [read_file, grep]}
  S:
    driver: script
    script:
      steps:
        "*": [{output: done}, {sleep: 50ms}, {fail: transient, message: m, times: 2}, {tool: read_file, args: {path: a}}, {promise: P}]
tools:
  deploy: {command: [./tools/deploy.sh], timeout: 30s, sideEffects: true, replay: ask}
plan:
  - {id: step-1, description: Create data model, agent: PLUTO}
  - {id: step-2, description: Implement mutation, agent: MARS, dependsOn: [step-1], critical: true}
`

// fakeOnPath puts executables with these names on PATH for the test.
func fakeOnPath(t *testing.T, names ...string) {
	bin := t.TempDir()
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(bin, n), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+string(filepath.ListSeparator)+os.Getenv("PATH"))
}

func TestParseGoodFileAndDefaults(t *testing.T) {
	fakeOnPath(t, "claude") // loading checks that command agents' executables exist
	dir := t.TempDir()
	path := filepath.Join(dir, "task.yaml")
	if err := os.WriteFile(path, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	tk, err := task.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if tk.ID != "nightly" || tk.Autonomy != 2 || tk.Budget.ToolCalls != 7 || tk.Budget.WallClock.Duration != 8*time.Hour ||
		tk.Workspace.Path != filepath.Join(dir, "work") || !*tk.LongRunning || tk.Checkpoint.Interval.Duration != task.DefaultCheckpointInterval ||
		tk.Retry.Retries() != task.DefaultMaxRetries || tk.MaxDepth != task.DefaultMaxDepth || tk.Agents["MARS"].MaxIterations != 4 || tk.Agents["PLUTO"].MaxTurns != task.DefaultMaxTurns ||
		tk.Agents["PLUTO"].DoomLoop != task.DefaultDoomLoop || tk.Agents["MARS"].PromptVia != "stdin" || tk.Agents["MARS"].CircuitBreaker.NoProgress != task.DefaultNoProgress ||
		tk.Tools["deploy"].Timeout.Duration != 30*time.Second || tk.Tools["deploy"].MaxOutput != task.DefaultMaxOutput || !tk.Plan[1].Critical {
		t.Fatalf("parsed %+v", tk)
	}
	acts := tk.Agents["S"].Script.Steps["*"]
	var kinds []string
	for _, a := range acts {
		kinds = append(kinds, a.Kind())
	}
	if strings.Join(kinds, ",") != "output,sleep,fail,tool,promise" || acts[1].Sleep.Duration != 50*time.Millisecond {
		t.Fatalf("actions %v", kinds)
	}
	// JSON is accepted too: the same task as JSON parses to the same values.
	tk2, err := task.Parse("task.json", []byte(`{"agent": "A", "agents": {"A": {"driver": "script", "script": {"plan": [{"id": "a", "description": "d", "agent": "A"}]}}}, "checkpoint": {"interval": "90s"}}`))
	if err != nil || tk2.Checkpoint.Interval.Duration != 90*time.Second || tk2.Plan != nil || tk2.Agents["A"].Script.Plan[0].ID != "a" {
		t.Fatalf("json: %+v %v", tk2, err)
	}
}

func TestByteOrderMarkIsAccepted(t *testing.T) {
	tk, err := task.Parse("t.yaml", []byte("\ufeffid: x\nagent: A\nagents:\n  A: {driver: script, script: {}}\n"))
	if err != nil || tk.ID != "x" {
		t.Fatalf("%+v %v", tk, err)
	}
}

func TestBadFilesNameFileLineAndField(t *testing.T) {
	for _, c := range []struct {
		name, src string
		want      []string
	}{
		{"empty", "  \n", []string{"t.yaml: the task file is empty"}},
		{"unknown key", "agent: A\nagents:\n  A: {driver: script, script: {}}\nbogus: 1\n", []string{"t.yaml:4:", `unknown field "bogus"`}},
		{"nested unknown key", "agent: A\nagents:\n  A:\n    driver: script\n    scrip: {}\n", []string{"t.yaml:5:", `unknown field "scrip"`}},
		{"wrong type", "agent: A\nautonomy: high\nagents:\n  A: {driver: script, script: {}}\n", []string{"t.yaml:2:", "autonomy"}},
		{"autonomy range", "agent: A\nautonomy: 9\nagents:\n  A: {driver: script, script: {}}\n", []string{"t.yaml:2: autonomy: 9 is outside 1..5"}},
		{"bad duration", "agent: A\ncheckpoint:\n  interval: 5 minutes\nagents:\n  A: {driver: script, script: {}}\n", []string{"t.yaml:3: checkpoint.interval:", "not a duration"}},
		{"unknown owner", "agent: B\nagents:\n  A: {driver: script, script: {}}\n", []string{"t.yaml:1: agent:", `"B" is not one of the task's agents [A]`}},
		{"unknown driver", "agent: A\nagents:\n  A: {driver: robot}\n", []string{"t.yaml:3: agents.A.driver:", `"robot" is not one of`}},
		{"plan cycle", "agent: A\nagents:\n  A: {driver: script, script: {}}\nplan:\n  - {id: a, description: x, agent: A, dependsOn: [b]}\n  - {id: b, description: y, agent: A, dependsOn: [a]}\n",
			[]string{"t.yaml:5: plan[0].dependsOn: dependency cycle: a -> b -> a"}},
		{"plan unknown dependency", "agent: A\nagents:\n  A: {driver: script, script: {}}\nplan:\n  - {id: a, description: x, agent: A, dependsOn: [zz]}\n",
			[]string{"t.yaml:5: plan[0].dependsOn:", `"zz" is not a step`}},
		{"plan cycle and unknown dependency at once", "agent: A\nagents:\n  A: {driver: script, script: {}}\nplan:\n  - {id: a, description: x, agent: A, dependsOn: [c]}\n  - {id: b, description: y, agent: A, dependsOn: [a, nosuch, b]}\n  - {id: c, description: z, agent: A, dependsOn: [b]}\n",
			[]string{"t.yaml:6: plan[1].dependsOn:", `"nosuch" is not a step`, "a step cannot depend on itself", "t.yaml:5: plan[0].dependsOn: dependency cycle: a -> c -> b -> a"}},
		{"plan duplicate id and agent", "agent: A\nagents:\n  A: {driver: script, script: {}}\nplan:\n  - {id: a, description: x, agent: A}\n  - {id: a, description: y, agent: Q}\n",
			[]string{"plan[1].id:", "also the id of step 0", "plan[1].agent:", `"Q" is not an agent`}},
		{"two actions in one", "agent: A\nagents:\n  A:\n    driver: script\n    script:\n      steps:\n        s: [{output: a, sleep: 1s}]\n",
			[]string{"t.yaml:7: agents.A.script.steps.s[0]:", "exactly one of"}},
		{"unknown tool", "agent: A\nagents:\n  A: {driver: script, script: {}, tools: [read_file, teleport]}\n", []string{"t.yaml:3: agents.A.tools[1]:", `"teleport" is neither a built-in`}},
		{"command on a builtin", "agent: A\nagents:\n  A: {driver: script, script: {}}\ntools:\n  bash: {command: [x]}\n", []string{"t.yaml:5: tools.bash.command:", "built-in"}},
		{"rules on a non-bash tool", "agent: A\nagents:\n  A: {driver: script, script: {}}\ntools:\n  t: {command: [x], deny: [rm]}\n", []string{"tools.t:", "bash's"}},
		{"slow backoff", "agent: A\nretry: {factor: 1.5}\nagents:\n  A: {driver: script, script: {}}\n", []string{"t.yaml:2: retry.factor:", "outside 2..10"}},
		{"replay without side effects", "agent: A\nagents:\n  A: {driver: script, script: {}}\ntools:\n  t: {command: [x], replay: skip}\n", []string{"t.yaml:5: tools.t.replay:", "sideEffects"}},
		{"another driver's setting", "agent: A\nagents:\n  A: {driver: command, command: [x], model: m, doomLoop: 2}\n",
			[]string{"agents.A.model: is a setting of the openai driver", "agents.A.doomLoop: is a setting of the openai driver"}},
		{"bad promise", "agent: A\nagents:\n  A: {driver: command, command: [x], completionPromise: \"</promise>\"}\n", []string{"agents.A.completionPromise:", "without '<'"}},
		{"bad promptVia", "agent: A\nagents:\n  A: {driver: command, command: [x], promptVia: pipe}\n", []string{"agents.A.promptVia:", "stdin or arg"}},
		{"bad rate-limit pattern", "agent: A\nagents:\n  A:\n    driver: command\n    command: [x]\n    rateLimit: {patterns: [\"(\"]}\n",
			[]string{"agents.A.rateLimit.patterns[0]:", "not a regular expression"}},
		{"handoff outside", "agent: A\nagents:\n  A: {driver: command, command: [x], handoffFile: ../h.json}\n", []string{"agents.A.handoffFile:", "inside the workspace"}},
		{"bad threshold", "agent: A\nagents:\n  A: {driver: openai, endpoint: \"http://x/v1\", model: m, compaction: {threshold: 3}}\n", []string{"agents.A.compaction.threshold:", "outside 0.1..1"}},
		{"bad endpoint", "agent: A\nagents:\n  A: {driver: openai, endpoint: \"ftp://x\", model: m}\n", []string{"agents.A.endpoint:", "not an http"}},
		{"hook without command", "agent: A\nagents:\n  A: {driver: script, script: {}}\nhooks:\n  preTool: [{tools: [bash]}]\n", []string{"hooks.preTool[0].command:", "needs a command"}},
		{"hook on unknown tool", "agent: A\nagents:\n  A: {driver: script, script: {}}\nhooks:\n  postTool: [{command: [x], tools: [nope]}]\n", []string{"t.yaml:5: hooks.postTool[0].tools[0]:", `"nope" is neither`}},
		{"type errors all reported with their fields", "agent: C\nagents:\n  C:\n    driver: command\n    command: [sh]\n    maxIterations: four\n    tools: write_file\nautonomy: 9\nbogus: 1\n",
			[]string{"t.yaml:6: agents.C.maxIterations: want an integer, found the string \"four\"", "t.yaml:7: agents.C.tools: want a list", "t.yaml:8: autonomy: 9 is outside 1..5", `t.yaml:9: unknown field "bogus"`}},
		{"nested type error", "agent: A\nagents:\n  A: {driver: script, script: {steps: {s: {sleep: 1s}}}}\n", []string{"t.yaml:3: agents.A.script.steps.s: want a list"}},
		{"NaN factor", "agent: A\nretry: {factor: .nan}\nagents:\n  A: {driver: script, script: {}}\n", []string{"t.yaml:2: retry.factor: .nan is not a finite number"}},
		{"number too large", "agent: A\nbudget: {costUSD: 1e400}\nagents:\n  A: {driver: script, script: {}}\n", []string{"t.yaml:2: budget.costUSD: 1e400 is not a finite number"}},
		{"infinite temperature", "agent: A\nagents:\n  A: {driver: openai, endpoint: \"http://x/v1\", model: m, temperature: -.inf}\n", []string{"t.yaml:3: agents.A.temperature: -.inf is not a finite number"}},
		{"NaN argument", "agent: A\nagents:\n  A:\n    driver: script\n    script: {steps: {s: [{tool: glob, args: {n: .NaN}}]}}\n", []string{"t.yaml:5: agents.A.script.steps.s[0].args.n: .NaN is not a finite number"}},
		{"second document", "agent: A\nagents:\n  A: {driver: script, script: {}}\n---\nagent: B\n", []string{"t.yaml:5: a second YAML document"}},
		{"empty second document", "agent: A\nagents:\n  A: {driver: script, script: {}}\n---\n", []string{"t.yaml:4: a second YAML document"}},
		{"key written twice", "agent: A\nagents:\n  A: {driver: script, script: {}}\nagent: B\n", []string{`t.yaml:4: key "agent" is written twice`}},
		{"syntax error", "agent: A\nagents: {A: {driver: script\n", []string{"t.yaml:"}},
		{"bad sharing", "agent: A\nworkspace: {path: w, shared: everyone}\nagents:\n  A: {driver: script, script: {}}\n", []string{"t.yaml:2: workspace.shared:", `"everyone" is not exclusive or read-only`}},
		{"bad commit", "agent: A\nworkspace:\n  commit: always\nagents:\n  A: {driver: script, script: {}}\n", []string{"t.yaml:3: workspace.commit:", `"always" is not step`}},
		{"unknown workspace option", "agent: A\nworkspace: {path: w, lock: no}\nagents:\n  A: {driver: script, script: {}}\n", []string{"t.yaml:2: workspace:", `unknown field "lock"`}},
		{"read-only with a write tool", "agent: A\nworkspace: {shared: read-only}\nagents:\n  A: {driver: script, script: {}, tools: [read_file, write_file]}\n",
			[]string{"t.yaml:4: agents.A.tools[1]:", "write_file writes to the workspace, which the task shares read-only"}},
		{"read-only and committed", "agent: A\nworkspace: {shared: read-only, commit: step}\nagents:\n  A: {driver: script, script: {}}\n", []string{"t.yaml:2: workspace.commit:", "cannot be committed"}},
		{"worktree without a repo", "agent: A\nworkspace: {isolate: worktree}\nagents:\n  A: {driver: script, script: {}}\n", []string{"t.yaml:2: workspace.repo:", "isolate: worktree needs repo"}},
		{"repo without isolation", "agent: A\nworkspace: {repo: r}\nagents:\n  A: {driver: script, script: {}}\n", []string{"t.yaml:2: workspace.repo:", "name the workspace with path"}},
		{"worktree and a path", "agent: A\nworkspace: {repo: r, isolate: worktree, path: p}\nagents:\n  A: {driver: script, script: {}}\n", []string{"t.yaml:2: workspace.path:", "drop path"}},
		{"bad isolation", "agent: A\nworkspace: {repo: r, isolate: container}\nagents:\n  A: {driver: script, script: {}}\n", []string{"t.yaml:2: workspace.isolate:", `"container" is not worktree`}},
		{"ref like an option", "agent: A\nworkspace: {repo: r, isolate: worktree, ref: --orphan}\nagents:\n  A: {driver: script, script: {}}\n", []string{"t.yaml:2: workspace.ref:", "is not a ref"}},
		{"merge without isolation", "agent: A\nworkspace: {path: p, merge: fast-forward}\nagents:\n  A: {driver: script, script: {}}\n", []string{"t.yaml:2: workspace.merge:", "isolate: worktree"}},
		{"sub-agent worktrees of an unknown kind", "agent: A\nworkspace: {repo: r, isolate: worktree, commit: step, subAgents: clone}\nagents:\n  A: {driver: script, script: {}}\n", []string{"t.yaml:2: workspace.subAgents:", `"clone" is not worktree`}},
		{"sub-agent worktrees without isolation", "agent: A\nworkspace: {path: p, commit: step, subAgents: worktree}\nagents:\n  A: {driver: script, script: {}}\n", []string{"t.yaml:2: workspace.subAgents:", "add isolate: worktree"}},
		{"sub-agent worktrees without commits", "agent: A\nworkspace: {repo: r, isolate: worktree, subAgents: worktree}\nagents:\n  A: {driver: script, script: {}}\n", []string{"t.yaml:2: workspace.subAgents:", "needs commit: step"}},
		{"worktree on the direct path", "agent: A\nlongRunning: false\nworkspace: {repo: r, isolate: worktree}\nagents:\n  A: {driver: script, script: {}}\n", []string{"workspace.isolate:", "needs a harness"}},
		{"bad replay", "agent: A\nagents:\n  A: {driver: script, script: {}}\ntools:\n  t: {command: [x], sideEffects: true, replay: sometimes}\n", []string{"t.yaml:5: tools.t.replay:", "retry, skip or ask"}},
	} {
		_, err := task.Parse("t.yaml", []byte(c.src))
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not contain %q", c.name, err, w)
			}
		}
	}
}

// Loading a task to run looks up the executables of command agents, command tools and hooks on
// the PATH their subprocesses get, and names the field and line of each one missing; reading a
// stored task back (Parse) does not.
func TestMissingExecutablesAreFoundWhenLoading(t *testing.T) {
	fakeOnPath(t, "present-agent")
	src := `agent: A
agents:
  A: {driver: command, command: [claudee, -p]}
  B: {driver: command, command: [present-agent]}
  C: {driver: command, command: [/nonexistent/agent]}
  D: {driver: command, command: [./made-by-the-task.sh]}
tools:
  t: {command: [deploi]}
  bash: {timeout: 1m}
hooks:
  preTool: [{command: [sh, -c, "true"]}, {command: [gaurd]}]
`
	_, err := task.ParseAt("t.yaml", []byte(src), t.TempDir())
	if err == nil {
		t.Fatal("accepted")
	}
	for _, w := range []string{`t.yaml:3: agents.A.command[0]: "claudee" was not found on PATH (`, `t.yaml:5: agents.C.command[0]: "/nonexistent/agent" is not found`,
		`t.yaml:8: tools.t.command[0]: "deploi" was not found on PATH`, `t.yaml:11: hooks.preTool[1].command[0]: "gaurd" was not found on PATH`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != 4 {
		t.Errorf("%d problems reported, want 4: %v", n, err)
	}
	if _, err := task.Parse("stored", []byte(src)); err != nil {
		t.Errorf("reading back checked executables: %v", err)
	}
}

// Anchors, aliases and merge keys work, a key replacing what the merge gave it as a whole.
func TestAliasesAndMerges(t *testing.T) {
	tk, err := task.Parse("t.yaml", []byte(`agent: B
agents:
  base: &base {driver: command, command: [sh], circuitBreaker: {noProgress: 7, sameError: 2}}
  B:
    <<: *base
    circuitBreaker: {sameError: 4}
    env: &env [HOME]
  C: {<<: *base, env: *env}
`))
	if err != nil {
		t.Fatal(err)
	}
	b, c := tk.Agents["B"], tk.Agents["C"]
	if b.Driver != "command" || b.CircuitBreaker.SameError != 4 || b.CircuitBreaker.NoProgress != task.DefaultNoProgress ||
		c.CircuitBreaker.NoProgress != 7 || len(c.Env) != 1 || c.Env[0] != "HOME" {
		t.Fatalf("B %+v C %+v", b, c)
	}
	// An alias cycle or a billion laughs is refused, not followed.
	_, err = task.Parse("t.yaml", []byte("agent: A\nagents:\n  A: &a {driver: script, script: {}, tools: [*a]}\n"))
	if err == nil {
		t.Fatal("a cycle was accepted")
	}
	var laughs strings.Builder
	laughs.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 9; i++ {
		fmt.Fprintf(&laughs, "a%d: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	laughs.WriteString("agent: A\nagents:\n  A: {driver: script, script: {steps: {s: [{tool: glob, args: {x: *a8}}]}}}\n")
	if _, err = task.Parse("t.yaml", []byte(laughs.String())); err == nil || !strings.Contains(err.Error(), "expand too far") {
		t.Fatalf("a billion laughs: %v", err)
	}
}

// Deep nesting is refused at a bounded depth, with its line, in YAML and JSON alike: a prompt
// of 20,000 unquoted brackets is a nested sequence, not text.
func TestDeepNestingIsRefused(t *testing.T) {
	deep := strings.Repeat("[", 20_000) + strings.Repeat("]", 20_000)
	for name, src := range map[string]string{
		"t.yaml": "agent: A\nprompt: " + deep + "\n",
		"t.json": `{"agent": "A", "prompt": ` + deep + `}`,
	} {
		_, err := task.Parse(name, []byte(src))
		if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "depth") {
			t.Errorf("%s: %v, want a refusal naming the file and the depth", name, err)
		}
	}
	// Quoted, the same brackets are just text.
	if tk, err := task.Parse("t.yaml", []byte("agent: A\nprompt: '"+deep+"'\nagents: {A: {driver: script, script: {plan: [{id: s, description: d, agent: A}]}}}\n")); err != nil || len(tk.Prompt) != len(deep) {
		t.Errorf("quoted brackets: %v", err)
	}
}

// A workspace is a path or a mapping with options; stored (JSON), one without options stays a
// plain path, as stored tasks have always had it, and one with options keeps them.
func TestWorkspaceFormsAndHowTheyAreStored(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		src, stored string
		readOnly    bool
		commits     bool
	}{
		{"workspace: ./w", `"workspace":"` + filepath.Join(dir, "w") + `"`, false, false},
		{"workspace: {path: ./w}", `"workspace":"` + filepath.Join(dir, "w") + `"`, false, false},
		{"workspace: {path: w, shared: read-only}", `"workspace":{"path":"` + filepath.Join(dir, "w") + `","shared":"read-only"}`, true, false},
		{"workspace: {commit: step}", `"workspace":{"path":"` + dir + `","commit":"step"}`, false, true},
		{"workspace: {repo: r, isolate: worktree}", `"workspace":{"repo":"` + filepath.Join(dir, "r") + `","isolate":"worktree"}`, false, false},
	} {
		tk, err := task.ParseAt("t.yaml", []byte(c.src+"\nagent: A\nagents:\n  A: {driver: script, script: {}}\n"), dir)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		if tk.Workspace.ReadOnly() != c.readOnly || tk.Workspace.CommitsSteps() != c.commits {
			t.Errorf("%s: read-only %v, commits %v", c.src, tk.Workspace.ReadOnly(), tk.Workspace.CommitsSteps())
		}
		b, err := json.Marshal(tk)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), c.stored) {
			t.Errorf("%s: stored as %s, want %s in it", c.src, b, c.stored)
		}
		back, err := task.Parse("stored", b)
		if err != nil {
			t.Fatalf("%s: the stored task is refused: %v", c.src, err)
		}
		if back.Workspace != tk.Workspace {
			t.Errorf("%s: read back as %+v, want %+v", c.src, back.Workspace, tk.Workspace)
		}
	}
}

// A file with the same mistake on every one of thousands of steps lists the first MaxErrors
// problems and says how many more there are.
func TestThousandsOfProblemsAreListedUpToALimit(t *testing.T) {
	var b strings.Builder
	b.WriteString("id: big\nagent: A\nagents:\n  A: {driver: script, script: {}}\nplan:\n")
	for i := range 3000 {
		fmt.Fprintf(&b, "  - {id: s%d, description: d, agent: A, colour: red}\n", i)
	}
	_, err := task.Parse("big.yaml", []byte(b.String()))
	if err == nil {
		t.Fatal("a task with an unknown field on every step parsed")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != task.MaxErrors+1 || !strings.HasPrefix(lines[0], "big.yaml:6: ") ||
		lines[task.MaxErrors] != fmt.Sprintf("big.yaml: and %d more problems like these (the first %d are listed)", 3000-task.MaxErrors, task.MaxErrors) {
		t.Fatalf("%d lines, first %q, last %q", len(lines), lines[0], lines[len(lines)-1])
	}
}

func TestALongDependencyCycleNamesTenStepsAndWhereItCloses(t *testing.T) {
	var b strings.Builder
	b.WriteString("agent: A\nagents:\n  A: {driver: script, script: {}}\nplan:\n")
	const n = 5000
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "  - {id: s%d, description: x, agent: A, dependsOn: [s%d]}\n", i, i%n+1)
	}
	_, err := task.Parse("t.yaml", []byte(b.String()))
	want := "t.yaml:5: plan[0].dependsOn: dependency cycle: s1 -> s2 -> s3 -> s4 -> s5 -> s6 -> s7 -> s8 -> s9 -> s10 -> (4,990 more steps) -> s1"
	if err == nil || err.Error() != want {
		t.Fatalf("a cycle through %d steps: %.400v\nwant %s", n, err, want)
	}
}
