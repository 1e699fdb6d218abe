package task_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/prop"
	"go.yaml.in/yaml/v3"

	"github.com/harness-edge/harness-edge/internal/proptest"
	"github.com/harness-edge/harness-edge/runtime/task"
)

// taskGen builds valid task files at random: every driver, plans with phases, script actions
// of every kind, command tools and bash settings, hooks, budgets, retries, durations
// (zeros included) and unicode text; written as YAML, or as JSON, sometimes behind a byte order
// mark.
type taskGen struct{ r *rand.Rand }

var durations = []string{"0s", "0ms", "0", "1ns", "250us", "50ms", "1.5s", "5m", "8h", "1h2m3s"}

func (g taskGen) pick(xs ...string) string { return xs[g.r.Intn(len(xs))] }
func (g taskGen) coin() bool               { return g.r.Intn(2) == 0 }
func (g taskGen) dur() string              { return g.pick(durations...) }

// text is a string of runes from many scripts, with quotes, escapes, colons and line breaks.
func (g taskGen) text() string {
	pools := []string{"abcXYZ 09", "éüßçñÅ", "日本語中文한국어", "עבריתالعربية", "🙂🚀👩‍💻", "\"'\\:#-{}[],&*!|>%@`", "\t\n\u2028\u00a0\u0301"}
	var b strings.Builder
	for range g.r.Intn(24) {
		p := []rune(pools[g.r.Intn(len(pools))])
		b.WriteRune(p[g.r.Intn(len(p))])
	}
	return b.String()
}

// name is a map key: ASCII or not.
func (g taskGen) name(prefix string, i int) string {
	return fmt.Sprintf("%s%s%d", prefix, g.pick("", "é", "代理", "-x", "_y", " z"), i)
}

func (g taskGen) plan(agents []string, idPrefix string) []any {
	n := 1 + g.r.Intn(5)
	phased := g.r.Intn(3) == 0
	var steps []any
	for i := range n {
		s := map[string]any{"id": fmt.Sprintf("%s%d", idPrefix, i), "description": "d " + g.text(), "agent": agents[g.r.Intn(len(agents))]}
		var deps []any
		for j := range i {
			if g.r.Intn(3) == 0 {
				deps = append(deps, fmt.Sprintf("%s%d", idPrefix, j))
			}
		}
		if deps != nil || g.coin() {
			s["dependsOn"] = append([]any{}, deps...)
		}
		if g.coin() {
			s["critical"] = g.coin()
		}
		if phased {
			s["phase"] = fmt.Sprintf("p%d", i/2)
		}
		steps = append(steps, s)
	}
	return steps
}

func (g taskGen) action(tools []string) map[string]any {
	switch g.r.Intn(7) {
	case 0:
		return map[string]any{"sleep": g.dur()}
	case 1:
		return map[string]any{"output": g.text()}
	case 2:
		return map[string]any{"promise": "P" + g.text()}
	case 3:
		a := map[string]any{"fail": g.pick("transient", "permanent"), "message": g.text()}
		if g.coin() {
			a["times"] = g.r.Intn(3)
		}
		return a
	case 4:
		return map[string]any{"tokens": 1 + g.r.Intn(1000)}
	}
	a := map[string]any{"tool": tools[g.r.Intn(len(tools))]}
	if g.coin() {
		a["args"] = g.args()
	}
	return a
}

// args are free-form values: nested, empty, numbers of every kind, null.
func (g taskGen) args() map[string]any {
	m := map[string]any{}
	for range g.r.Intn(4) {
		var v any
		switch g.r.Intn(8) {
		case 0:
			v = g.text()
		case 1:
			v = g.r.Int63n(1<<40) - 1<<39
		case 2:
			v = float64(g.r.Intn(1000)) / 8
		case 3:
			v = g.coin()
		case 4:
			v = nil
		case 5:
			v = map[string]any{}
		case 6:
			v = []any{}
		default:
			v = map[string]any{"k": []any{g.text(), 1, 2.5}}
		}
		m[g.name("a", g.r.Intn(9))] = v
	}
	return m
}

func (g taskGen) agent(driver string, agents, tools []string) map[string]any {
	a := map[string]any{"driver": driver}
	if g.coin() {
		a["tools"] = append([]any{}, anySlice(tools[:g.r.Intn(len(tools)+1)])...)
	}
	if g.coin() {
		a["instructions"] = g.text()
	}
	switch driver {
	case "script":
		s := map[string]any{}
		if g.coin() {
			s["plan"] = g.plan(agents, "q")
		}
		steps := map[string]any{}
		for i := range g.r.Intn(4) {
			var acts []any
			for range g.r.Intn(4) {
				acts = append(acts, g.action(tools))
			}
			steps[g.pick("*", fmt.Sprintf("s%d", i), fmt.Sprintf("q%d", i))] = append([]any{}, acts...)
		}
		if len(steps) > 0 || g.coin() {
			s["steps"] = steps
		}
		a["script"] = s
	case "command":
		a["command"] = []any{"sh", "-c", g.text()}
		for k, v := range map[string]any{"promptVia": g.pick("stdin", "arg"), "env": []any{"HOME", "GOPATH"}, "iterationTimeout": g.dur(),
			"maxOutput": g.r.Intn(1 << 20), "completionPromise": "DONE" + fmt.Sprint(g.r.Intn(9)), "maxIterations": g.r.Intn(20),
			"handoffFile": g.pick("handoff.json", "notes/h.md"), "continuationPrompt": g.text(),
			"circuitBreaker": map[string]any{"noProgress": g.r.Intn(5), "sameError": g.r.Intn(5), "rateLimits": g.r.Intn(5)},
			"rateLimit":      map[string]any{"patterns": []any{"(?i)slow down", "429"}, "wait": g.dur(), "maxWait": g.dur()}} {
			if g.coin() {
				a[k] = v
			}
		}
	case "openai":
		a["endpoint"] = g.pick("http://127.0.0.1:8080/v1", "https://example.invalid/v1")
		a["model"] = g.pick("qwen2.5-coder", "m-"+g.text())
		for k, v := range map[string]any{"apiKeyEnv": "KEY", "contextWindow": g.r.Intn(1 << 16), "maxTurns": g.r.Intn(99), "requestTimeout": g.dur(),
			"temperature": float64(g.r.Intn(9)) / 4, "compaction": map[string]any{"threshold": 0.1 + float64(g.r.Intn(10))/10, "protectTurns": g.r.Intn(9)},
			"doomLoop": g.r.Intn(5)} {
			if g.coin() {
				a[k] = v
			}
		}
	}
	return a
}

func anySlice(xs []string) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

// file is one random task file and the format it is written in.
func (g taskGen) file() []byte {
	tools := []string{"read_file", "write_file", "bash"}
	toolCfg := map[string]any{}
	for i := range g.r.Intn(3) {
		name := g.name("tool", i)
		tc := map[string]any{"command": []any{"sh", "-c", "cat"}}
		if g.coin() {
			tc["timeout"] = g.dur()
		}
		if g.coin() {
			tc["sideEffects"] = true
			if g.coin() {
				tc["replay"] = g.pick("retry", "skip", "ask")
			}
		}
		if g.coin() {
			tc["env"] = []any{"GOPATH"}
		}
		if g.coin() {
			tc["maxOutput"] = g.r.Intn(1 << 16)
		}
		if g.coin() {
			tc["description"] = g.text()
			tc["parameters"] = g.args()
		}
		toolCfg[name] = tc
		tools = append(tools, name)
	}
	if g.coin() {
		toolCfg["bash"] = map[string]any{"allow": []any{"go *"}, "deny": []any{"git push*"}, "timeout": g.dur(), "env": []any{}}
	}
	var agents []string
	n := 1 + g.r.Intn(4)
	for i := range n {
		agents = append(agents, g.name("A", i))
	}
	ag := map[string]any{}
	for i, name := range agents {
		driver := []string{"script", "command", "openai"}[(i+g.r.Intn(3))%3]
		ag[name] = g.agent(driver, agents, tools)
	}
	t := map[string]any{"agent": agents[0], "agents": ag}
	if len(toolCfg) > 0 || g.coin() {
		t["tools"] = toolCfg
	}
	opt := map[string]any{
		"id": g.pick("t-1", "nightly.2", "X_9"), "prompt": g.text(), "longRunning": g.coin(), "autonomy": 1 + g.r.Intn(5), "dream": g.coin(),
		"checkpoint": map[string]any{"interval": g.pick("0s", "100ms", "5m", "1h")},
		"budget":     map[string]any{"toolCalls": g.r.Intn(500), "tokens": g.r.Intn(1 << 20), "wallClock": g.dur()},
		"retry":      map[string]any{"maxRetries": g.r.Intn(6), "base": g.dur(), "factor": 2 + float64(g.r.Intn(33))/4, "maxDelay": g.dur()},
		"maxDepth":   g.r.Intn(17), "workspace": g.workspace(),
		"plan": g.plan(agents, "s"),
	}
	for k, v := range opt {
		if g.coin() {
			t[k] = v
		}
	}
	if w, ok := t["workspace"].(map[string]any); ok && w["isolate"] != nil {
		t["longRunning"] = true // a worktree is named after its harness
	}
	if g.coin() {
		hook := func() map[string]any {
			h := map[string]any{"command": []any{"sh", "-c", "cat >/dev/null"}}
			if g.coin() {
				h["tools"] = anySlice(tools[:1+g.r.Intn(len(tools))])
			}
			if g.coin() {
				h["timeout"] = g.dur()
			}
			return h
		}
		t["hooks"] = map[string]any{"preTool": []any{hook()}, "postTool": []any{hook(), hook()}}
	}
	var out []byte
	if g.r.Intn(4) == 0 {
		out, _ = json.MarshalIndent(t, "", " ")
	} else {
		// Built as nodes so that text with tabs or line breaks is double-quoted: the YAML
		// emitter writes some of it as literal blocks its own parser refuses.
		n := toNode(t)
		out, _ = yaml.Marshal(n)
	}
	if g.r.Intn(8) == 0 {
		out = append([]byte("\ufeff"), out...)
	}
	return out
}

func toNode(v any) *yaml.Node {
	switch v := v.(type) {
	case map[string]any:
		n := &yaml.Node{Kind: yaml.MappingNode}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			n.Content = append(n.Content, toNode(k), toNode(v[k]))
		}
		return n
	case []any:
		n := &yaml.Node{Kind: yaml.SequenceNode}
		for _, x := range v {
			n.Content = append(n.Content, toNode(x))
		}
		return n
	case string:
		n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}
		if strings.ContainsAny(v, "\t\n\u2028") {
			n.Style = yaml.DoubleQuotedStyle
		}
		return n
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
	}
	n := &yaml.Node{}
	if err := n.Encode(v); err != nil {
		panic(err)
	}
	return n
}

// workspace is a workspace in either form: a path, or a mapping with options (a read-only one
// would refuse the write tools the agents may list).
func (g taskGen) workspace() any {
	path := g.pick("ws", "./wörk", "a/b")
	switch g.r.Intn(4) {
	case 0:
		return path
	case 1:
		return map[string]any{"path": path, "shared": "exclusive", "commit": "step"}
	case 2:
		return map[string]any{"repo": path, "isolate": "worktree", "ref": g.pick("main", "v1.2"), "commit": "step", "merge": "fast-forward"}
	}
	return map[string]any{"path": path, "shared": g.pick("exclusive", "")}
}

var genTaskFile gopter.Gen = func(p *gopter.GenParameters) *gopter.GenResult {
	return gopter.NewGenResult(string(taskGen{p.Rng}.file()), gopter.NoShrinker)
}

// TestStoredTaskRoundTrip: whatever `run` accepts, the harness stores (json.Marshal) and
// `resume` reads back (task.Parse) to the same task; so does the stored task re-written with
// every character outside ASCII escaped (surrogate pairs beyond the Basic Multilingual Plane).
func TestStoredTaskRoundTrip(t *testing.T) {
	props := proptest.Props(t, 300)
	dir := t.TempDir()
	props.Property("parse, store, parse gives the same task", prop.ForAll(func(src string) bool {
		return proptest.Report(t, func() string {
			t1, err := task.ParseAt("gen.yaml", []byte(src), dir)
			if err != nil {
				return fmt.Sprintf("a generated file was refused: %v\n%s", err, src)
			}
			stored, err := json.Marshal(t1)
			if err != nil {
				return fmt.Sprintf("storing: %v\n%s", err, src)
			}
			t2, err := task.Parse("the stored task", stored)
			if err != nil {
				return fmt.Sprintf("the stored task was refused: %v\n%s\nstored: %s", err, src, stored)
			}
			again, _ := json.Marshal(t2)
			if !bytes.Equal(stored, again) {
				return fmt.Sprintf("the task changed:\n%s\n%s\nfrom:\n%s", stored, again, src)
			}
			// Written as JSON writers that keep to ASCII write it (Python's json.dumps), it is
			// the same task.
			ascii := asciiJSON(stored)
			t3, err := task.Parse("ascii.json", ascii)
			if err != nil {
				return fmt.Sprintf("the task as ASCII JSON was refused: %v\n%s", err, ascii)
			}
			if again, _ := json.Marshal(t3); !bytes.Equal(stored, again) {
				return fmt.Sprintf("the task as ASCII JSON changed:\n%s\n%s", stored, again)
			}
			// Deleting a harness reads only the stored task's workspace, and reads what Parse does.
			for _, b := range [][]byte{stored, ascii} {
				if w, ok := task.StoredWorkspace(b); !ok || w != t2.Workspace {
					return fmt.Sprintf("the stored task's workspace alone: %+v %v, the task's: %+v\n%s", w, ok, t2.Workspace, b)
				}
			}
			if t2.Workspace.Isolated() {
				if !filepath.IsAbs(t2.Workspace.Repo) || t2.Workspace.Path != "" {
					return fmt.Sprintf("an isolated workspace stored as %+v", t2.Workspace)
				}
			} else if !filepath.IsAbs(t2.Workspace.Path) {
				return fmt.Sprintf("the workspace's path was stored relative: %+v", t2.Workspace)
			}
			if !reflect.DeepEqual(kinds(t1), kinds(t2)) {
				return fmt.Sprintf("actions or workspace changed: %v %v", kinds(t1), kinds(t2))
			}
			return ""
		})
	}, genTaskFile))
	props.TestingRun(t)
}

func kinds(t *task.Task) map[string][]string {
	out := map[string][]string{}
	for name, a := range t.Agents {
		if a.Script == nil {
			continue
		}
		for sid, acts := range a.Script.Steps {
			for _, act := range acts {
				out[name+"/"+sid] = append(out[name+"/"+sid], act.Kind()+":"+act.Sleep.String())
			}
		}
	}
	return out
}

// TestZeroDurationsSurviveStorage: a written zero is stored as written, so the task reads
// back the same (a {sleep: 0ms} action once vanished, leaving an action that was nothing).
func TestZeroDurationsSurviveStorage(t *testing.T) {
	src := "agent: A\nbudget: {wallClock: 0s}\ntools:\n  bash: {timeout: 0s}\nagents:\n  A:\n    driver: script\n    script: {steps: {s1: [{sleep: 0ms}, {tool: bash, args: {}}]}}\n"
	t1, err := task.Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	stored, err := json.Marshal(t1)
	if err != nil {
		t.Fatal(err)
	}
	t2, err := task.Parse("stored", stored)
	if err != nil {
		t.Fatalf("stored %s: %v", stored, err)
	}
	acts := t2.Agents["A"].Script.Steps["s1"]
	if acts[0].Kind() != "sleep" || acts[1].Args == nil || !strings.Contains(string(stored), `"timeout":"0s"`) {
		t.Fatalf("stored %s read back as %+v", stored, acts)
	}
}

// asciiJSON re-escapes JSON as writers that keep to ASCII do (Python's json.dumps by default):
// every character outside ASCII as \uXXXX, one outside the Basic Multilingual Plane as its
// UTF-16 surrogate pair.
func asciiJSON(b []byte) []byte {
	var out []byte
	for _, r := range string(b) {
		switch {
		case r < utf8.RuneSelf:
			out = append(out, byte(r))
		case r > 0xFFFF:
			hi, lo := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04X`, hi, lo)
		default:
			out = fmt.Appendf(out, `\u%04x`, r)
		}
	}
	return out
}
