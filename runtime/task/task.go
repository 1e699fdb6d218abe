// Package task reads task files: YAML or JSON, strictly. Unknown keys and bad
// values are errors that name the file, the line and the field. Every default is in Defaults.
package task

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/harness-edge/harness-edge/internal/ident"
	"github.com/harness-edge/harness-edge/internal/idlist"
	"github.com/harness-edge/harness-edge/runtime/proc"
)

// Defaults: every value a task file may leave out, in one place.
const (
	DefaultAutonomy           = 3
	DefaultCheckpointInterval = 5 * time.Minute
	MinCheckpointInterval     = 100 * time.Millisecond
	DefaultToolCalls          = 100
	DefaultMaxRetries         = 3
	DefaultRetryBase          = time.Second
	DefaultRetryFactor        = 2.0
	DefaultMaxDelay           = 5 * time.Minute
	DefaultMaxDepth           = 3
	DefaultToolTimeout        = 10 * time.Minute // command tools
	DefaultBashTimeout        = 2 * time.Minute  // a bash call that names no timeout
	DefaultMaxOutput          = 64 << 10         // bytes of a tool's output kept (the rest is cut, marked truncated)
	DefaultMaxIterations      = 10
	DefaultIterationTimeout   = 30 * time.Minute
	DefaultAgentOutput        = 1 << 20 // bytes of a command agent's stdout (and stderr) kept per iteration
	DefaultHandoffFile        = "handoff.json"
	DefaultNoProgress         = 3
	DefaultSameError          = 5
	DefaultEmpty              = 3
	DefaultRateLimits         = 10
	DefaultRateLimitWait      = 5 * time.Minute
	DefaultRateLimitMaxWait   = 5 * time.Hour
	DefaultContextWindow      = 8192
	DefaultMaxTurns           = 50
	DefaultRequestTimeout     = 5 * time.Minute
	DefaultCompactThreshold   = 0.85
	DefaultProtectTurns       = 4
	DefaultDoomLoop           = 3
	DefaultHookTimeout        = 30 * time.Second
	DefaultContinuationPrompt = "You are continuing a long-running task in a fresh session: nothing of earlier sessions is in your context. " +
		"Review the workspace files to see what is done, then continue with what is left."
	DefaultWorkspace = "." // relative to the task file's directory
)

// Task is a parsed, validated task file with its defaults filled in.
type Task struct {
	// ID is the task's id (the harness id when set; generated when empty).
	ID string `yaml:"id" json:"id,omitzero"`
	// Prompt is what the task asks of its agents.
	Prompt string `yaml:"prompt" json:"prompt,omitzero"`
	// Agent owns the harness: it produces the plan when the task declares none.
	Agent string `yaml:"agent" json:"agent"`
	// LongRunning false takes the direct path: the agent is called with no harness.
	LongRunning *bool `yaml:"longRunning" json:"longRunning,omitzero"`
	// Autonomy 1..5 sets where human gates stop the run.
	Autonomy int `yaml:"autonomy" json:"autonomy,omitzero"`
	// Dream turns on Dream Mode for this task: auto-checkpoints every Checkpoint.Interval
	// (scaled by autonomy), inside long steps too. `serve --dream` turns it on for every task.
	Dream      bool             `yaml:"dream" json:"dream,omitzero"`
	Checkpoint CheckpointConfig `yaml:"checkpoint" json:"checkpoint,omitzero"`
	Budget     BudgetConfig     `yaml:"budget" json:"budget,omitzero"`
	Retry      RetryConfig      `yaml:"retry" json:"retry,omitzero"`
	// MaxDepth limits sub-agent nesting: a harness at depth MaxDepth spawns no children.
	MaxDepth int `yaml:"maxDepth" json:"maxDepth,omitzero"`
	// Workspace is the directory the agents' tools are confined to (relative paths are relative
	// to the task file), with how harnesses share it and whether steps are committed.
	Workspace Workspace              `yaml:"workspace" json:"workspace,omitzero"`
	Agents    map[string]*Agent      `yaml:"agents" json:"agents"`
	Tools     map[string]*ToolConfig `yaml:"tools" json:"tools,omitzero"`
	Hooks     HooksConfig            `yaml:"hooks" json:"hooks,omitzero"`
	Plan      []PlanStep             `yaml:"plan" json:"plan,omitzero"`
}

// CheckpointConfig: Interval is Dream Mode's auto-checkpoint interval inside long steps.
type CheckpointConfig struct {
	Interval Duration `yaml:"interval" json:"interval,omitzero"`
}

// BudgetConfig: limits per harness (0 tokens, wall clock or cost: unlimited).
type BudgetConfig struct {
	ToolCalls int      `yaml:"toolCalls" json:"toolCalls,omitzero"`
	Tokens    int64    `yaml:"tokens" json:"tokens,omitzero"`
	WallClock Duration `yaml:"wallClock" json:"wallClock,omitzero"`
	// CostUSD limits what the agents report spending, in US dollars (exact to a millionth).
	CostUSD float64 `yaml:"costUSD" json:"costUSD,omitzero"`
}

// RetryConfig: how a tool call (and a step) that failed transiently is retried: up to
// MaxRetries times, waiting about Base, then at least Factor times the previous wait (jitter
// only adds), never more than MaxDelay.
type RetryConfig struct {
	MaxRetries *int     `yaml:"maxRetries" json:"maxRetries,omitzero"`
	Base       Duration `yaml:"base" json:"base,omitzero"`
	Factor     float64  `yaml:"factor" json:"factor,omitzero"`
	MaxDelay   Duration `yaml:"maxDelay" json:"maxDelay,omitzero"`
}

// Retries is MaxRetries with its default applied.
func (r RetryConfig) Retries() int {
	if r.MaxRetries == nil {
		return DefaultMaxRetries
	}
	return *r.MaxRetries
}

// Agent is a named agent configuration. Which fields apply depends on the driver; a field of
// another driver is an error.
type Agent struct {
	Driver string `yaml:"driver" json:"driver"`
	// Tools the agent may call (built-in or the task's own).
	Tools []string `yaml:"tools" json:"tools,omitzero"`
	// Instructions are the agent's standing instructions: the system prompt of an openai agent,
	// the head of every prompt of a command agent.
	Instructions string `yaml:"instructions" json:"instructions,omitzero"`
	// Script is the script driver's actions.
	Script *Script `yaml:"script" json:"script,omitzero"`

	// The command driver: Command runs once per iteration (a fresh process: fresh context).
	Command []string `yaml:"command" json:"command,omitzero"`
	// PromptVia is how the prompt reaches the command: "stdin" (the default) or "arg" (it
	// replaces a "{prompt}" argument, or is appended).
	PromptVia string `yaml:"promptVia" json:"promptVia,omitzero"`
	// Env names variables of harness-edge's environment the command sees (API keys, say),
	// besides PATH, HOME, LANG, LC_ALL, TZ and TMPDIR.
	Env              []string `yaml:"env" json:"env,omitzero"`
	IterationTimeout Duration `yaml:"iterationTimeout" json:"iterationTimeout,omitzero"`
	// MaxOutput caps the bytes of stdout (and of stderr) kept per iteration.
	MaxOutput int `yaml:"maxOutput" json:"maxOutput,omitzero"`
	// CompletionPromise is the text whose appearance in an iteration's final output completes
	// the step; without one, an iteration that exits 0 completes it.
	CompletionPromise string `yaml:"completionPromise" json:"completionPromise,omitzero"`
	MaxIterations     int    `yaml:"maxIterations" json:"maxIterations,omitzero"`
	// HandoffFile is the workspace file an iteration may leave for the next (default
	// handoff.json); its content goes into the next iteration's prompt.
	HandoffFile string `yaml:"handoffFile" json:"handoffFile,omitzero"`
	// ContinuationPrompt opens the prompt of every iteration after the first.
	ContinuationPrompt string        `yaml:"continuationPrompt" json:"continuationPrompt,omitzero"`
	CircuitBreaker     BreakerConfig `yaml:"circuitBreaker" json:"circuitBreaker,omitzero"`
	// CountEmptyIterations counts empty iterations (exit 0, no output, no change in the
	// workspace) toward MaxIterations; by default they are not counted (the breaker's Empty
	// bounds them).
	CountEmptyIterations bool `yaml:"countEmptyIterations" json:"countEmptyIterations,omitzero"`
	// Inbox names a file in the workspace that a human may write to: before each iteration its
	// text is taken into the prompt, as a message from the human, and the file emptied.
	Inbox     string          `yaml:"inbox" json:"inbox,omitzero"`
	RateLimit RateLimitConfig `yaml:"rateLimit" json:"rateLimit,omitzero"`

	// The openai driver: chat completions at Endpoint (".../v1"), the key in the environment
	// variable APIKeyEnv (never stored).
	Endpoint       string           `yaml:"endpoint" json:"endpoint,omitzero"`
	Model          string           `yaml:"model" json:"model,omitzero"`
	APIKeyEnv      string           `yaml:"apiKeyEnv" json:"apiKeyEnv,omitzero"`
	ContextWindow  int              `yaml:"contextWindow" json:"contextWindow,omitzero"`
	MaxTurns       int              `yaml:"maxTurns" json:"maxTurns,omitzero"`
	RequestTimeout Duration         `yaml:"requestTimeout" json:"requestTimeout,omitzero"`
	Temperature    *float64         `yaml:"temperature" json:"temperature,omitzero"`
	Compaction     CompactionConfig `yaml:"compaction" json:"compaction,omitzero"`
	// DoomLoop is how many identical tool calls in a row are blocked (same tool, same arguments).
	DoomLoop int `yaml:"doomLoop" json:"doomLoop,omitzero"`
}

// BreakerConfig: the command driver's circuit breaker opens (and pauses the harness) after
// NoProgress iterations in a row that changed nothing (same output, same workspace), SameError
// iterations in a row that failed the same way, RateLimits rate-limited iterations in a row,
// or Empty empty iterations in a row (no output at all, no change in the workspace).
type BreakerConfig struct {
	NoProgress int `yaml:"noProgress" json:"noProgress,omitzero"`
	SameError  int `yaml:"sameError" json:"sameError,omitzero"`
	RateLimits int `yaml:"rateLimits" json:"rateLimits,omitzero"`
	Empty      int `yaml:"empty" json:"empty,omitzero"`
}

// RateLimitConfig: Patterns (regular expressions, added to the built-in ones) recognise a
// rate-limited iteration; it waits for the reset time the output states, else Wait (doubling
// while it repeats), never more than MaxWait.
type RateLimitConfig struct {
	Patterns []string `yaml:"patterns" json:"patterns,omitzero"`
	Wait     Duration `yaml:"wait" json:"wait,omitzero"`
	MaxWait  Duration `yaml:"maxWait" json:"maxWait,omitzero"`
}

// CompactionConfig: when a conversation reaches Threshold of the context window, the turns
// before the ProtectTurns most recent ones are replaced by a summary.
type CompactionConfig struct {
	Threshold    float64 `yaml:"threshold" json:"threshold,omitzero"`
	ProtectTurns int     `yaml:"protectTurns" json:"protectTurns,omitzero"`
}

// HooksConfig: shell hooks run before (PreTool) and after (PostTool) tool calls.
type HooksConfig struct {
	PreTool  []HookConfig `yaml:"preTool" json:"preTool,omitzero"`
	PostTool []HookConfig `yaml:"postTool" json:"postTool,omitzero"`
}

// HookConfig is one shell hook: Command gets the call as JSON on stdin; Tools limits it to
// those tools (empty: every tool).
type HookConfig struct {
	Command []string `yaml:"command" json:"command"`
	Tools   []string `yaml:"tools" json:"tools,omitzero"`
	Timeout Duration `yaml:"timeout" json:"timeout,omitzero"`
	Env     []string `yaml:"env" json:"env,omitzero"`
}

// ToolConfig configures a user-defined command tool, or a built-in one (then without Command).
type ToolConfig struct {
	// Command runs the tool: JSON arguments on stdin, JSON (or text) result on stdout.
	Command []string `yaml:"command" json:"command,omitzero"`
	// Timeout cancels a call that runs longer (for bash: the longest a call may ask for).
	Timeout Duration `yaml:"timeout" json:"timeout,omitzero"`
	// SideEffects journals each call (intent before, receipt after); Replay says what a resume
	// does with a call that has an intent and no receipt: retry, skip or ask (the default).
	SideEffects bool   `yaml:"sideEffects" json:"sideEffects,omitzero"`
	Replay      string `yaml:"replay" json:"replay,omitzero"`
	// Env names the variables of harness-edge's environment the tool sees, besides PATH, HOME,
	// LANG, LC_ALL, TZ and TMPDIR (command tools and bash run in a clean environment).
	Env []string `yaml:"env" json:"env,omitzero"`
	// Allow and Deny are bash's rules: patterns ('*' matches anything) that each simple command
	// of a call must match (Allow, when set) and must not match (Deny).
	Allow []string `yaml:"allow" json:"allow,omitzero"`
	Deny  []string `yaml:"deny" json:"deny,omitzero"`
	// MaxOutput caps the bytes of output kept (default 64 KiB).
	MaxOutput int `yaml:"maxOutput" json:"maxOutput,omitzero"`
	// Description and Parameters (a JSON schema) describe a command tool to models.
	Description string         `yaml:"description" json:"description,omitzero"`
	Parameters  map[string]any `yaml:"parameters" json:"parameters,omitzero"`
}

// Builtins are the built-in tools, confined to the harness workspace.
var Builtins = []string{"read_file", "write_file", "edit_file", "glob", "grep", "bash", "git_status", "git_diff", "git_log", "git_commit"}

// PlanStep is a step of a declared plan.
type PlanStep struct {
	ID          string   `yaml:"id" json:"id"`
	Description string   `yaml:"description" json:"description"`
	Agent       string   `yaml:"agent" json:"agent"`
	DependsOn   []string `yaml:"dependsOn" json:"dependsOn,omitzero"`
	Critical    bool     `yaml:"critical" json:"critical,omitzero"`
	Phase       string   `yaml:"phase" json:"phase,omitzero"`
}

// Script is the script driver's program: the plan it produces and the actions of each step
// ("*" serves steps without their own entry).
type Script struct {
	Plan  []PlanStep          `yaml:"plan" json:"plan,omitzero"`
	Steps map[string][]Action `yaml:"steps" json:"steps,omitzero"`
}

// Action is one script action; exactly one of Tool, Sleep, Output, Fail, Promise and Tokens is
// set.
type Action struct {
	// Tool calls a tool with Args.
	Tool string         `yaml:"tool" json:"tool,omitzero"`
	Args map[string]any `yaml:"args" json:"args,omitzero"`
	// Sleep waits (cancellably).
	Sleep Duration `yaml:"sleep" json:"sleep,omitzero"`
	// Output appends a line to the step's output.
	Output *string `yaml:"output" json:"output,omitzero"`
	// Fail fails the attempt: "transient" (retried) or "permanent", with Message, on the first
	// Times attempts of the step (0: every attempt).
	Fail    string `yaml:"fail" json:"fail,omitzero"`
	Message string `yaml:"message" json:"message,omitzero"`
	Times   int    `yaml:"times" json:"times,omitzero"`
	// Promise prints a completion promise (<promise>TEXT</promise>) in the output.
	Promise string `yaml:"promise" json:"promise,omitzero"`
	// Tokens reports model tokens used (counted against the token budget).
	Tokens int64 `yaml:"tokens" json:"tokens,omitzero"`
}

// Kind says which action a is: "tool", "sleep", "output", "fail", "promise" or "tokens" (a
// valid action is exactly one).
func (a Action) Kind() string {
	switch {
	case a.Tool != "":
		return "tool"
	case a.Sleep.raw != "" || a.Sleep.Duration > 0:
		return "sleep"
	case a.Output != nil:
		return "output"
	case a.Fail != "":
		return "fail"
	case a.Promise != "":
		return "promise"
	case a.Tokens != 0:
		return "tokens"
	}
	return ""
}

// Duration is a duration written like "50ms", "5m" or "8h".
type Duration struct {
	time.Duration
	raw string // as written, kept for the error message
	bad bool
}

// UnmarshalText keeps what it cannot parse for validation to report with its line.
func (d *Duration) UnmarshalText(b []byte) error {
	d.raw = string(b)
	v, err := time.ParseDuration(d.raw)
	if err != nil || v < 0 {
		d.bad = true
		return nil
	}
	d.Duration = v
	return nil
}

// MarshalText writes the duration back in the same notation.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.Duration.String()), nil }

// IsZero lets JSON omit a duration that was not written (nor defaulted). A written zero is
// not omitted: it may be what makes a value valid ({sleep: 0s} is a sleep action).
func (d Duration) IsZero() bool { return d.Duration == 0 && d.raw == "" }

// Error is a task-file error: where, which field, and why.
type Error struct {
	File  string
	Line  int // 0 when unknown
	Field string
	Msg   string
	// Err is the kind of problem, when a caller tells it apart (ErrTooLarge), else nil.
	Err error
}

// Unwrap returns the kind of problem (ErrTooLarge), or nil.
func (e *Error) Unwrap() error { return e.Err }

// ErrTooLarge marks a task file or a plan change over MaxFileSize (the daemon's API answers
// it with 413, as it does a request body over its limit).
var ErrTooLarge = errors.New("too large")

func (e *Error) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	if e.Field == "" {
		return fmt.Sprintf("%s: %s", loc, e.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", loc, e.Field, e.Msg)
}

// MaxFileSize is the largest task file taken (4 MiB), whichever way it comes: `run`, `loop`,
// `submit` and the daemon's API refuse a bigger one alike (the API's body limit leaves room for
// a task file of this size however JSON escapes it). Generated plans are long: a plan of
// 10,000 steps of one tool call each is about 2 MB, so the limit leaves it room twice over, and
// a task file parses in time linear in its size (BenchmarkParse), so a file at the limit costs
// four times one of 1 MiB, not more.
const MaxFileSize = 4 << 20

// SizeError is the refusal of a task file (what: "task file") or of a plan change ("plan
// change") named name over MaxFileSize; size is its size in bytes, or -1 when only "more than
// the limit" is known. It is an ErrTooLarge.
func SizeError(name, what string, size int64) error {
	n := fmt.Sprintf("%d bytes", size)
	if size < 0 {
		n = fmt.Sprintf("more than %d bytes", MaxFileSize)
	}
	msg := fmt.Sprintf("the %s is %s, over the %d MiB (%d bytes) a %s may be", what, n, MaxFileSize>>20, MaxFileSize, what)
	if what == "plan change" {
		msg += ", as a task file: split it into smaller changes"
	}
	return &Error{File: name, Msg: msg, Err: ErrTooLarge}
}

// ReadFile reads a task file, refusing one over MaxFileSize (named, with the limit) without
// reading more of it than the limit.
func ReadFile(path string) ([]byte, error) {
	return readLimited(path, "task file")
}

// ReadPlanChange reads a plan change from the file at path, or from stdin when path is "-",
// refusing one over MaxFileSize (named, with the limit) without reading more of it than the
// limit: a plan change may be as large as a task file, whose plan it changes.
func ReadPlanChange(path string, stdin io.Reader) ([]byte, error) {
	if path != "-" {
		return readLimited(path, "plan change")
	}
	data, err := io.ReadAll(io.LimitReader(stdin, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("plan change: standard input: %w", err)
	}
	if len(data) > MaxFileSize {
		return nil, SizeError("standard input", "plan change", -1)
	}
	return decodeLimited("standard input", "plan change", data)
}

// readLimited reads the file at path whole, refusing it (what: "task file" or "plan change")
// when it is over MaxFileSize.
func readLimited(path, what string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > MaxFileSize {
		return nil, SizeError(path, what, fi.Size())
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if len(data) > MaxFileSize {
		return nil, SizeError(path, what, -1) // it grew, or is not a regular file
	}
	return decodeLimited(path, what, data)
}

// decodeLimited is DecodeText for a file read within MaxFileSize: UTF-16 text grows as UTF-8
// (up to half as much again), and what is sent on and parsed is the UTF-8, so that is what
// the limit holds to, saying so.
func decodeLimited(name, what string, data []byte) ([]byte, error) {
	text, err := DecodeText(name, what, data)
	if err != nil {
		return nil, err
	}
	if len(text) > MaxFileSize {
		return nil, &Error{File: name, Err: ErrTooLarge, Msg: fmt.Sprintf("the %s is %d bytes once decoded from UTF-16 to UTF-8, over the %d MiB (%d bytes) a %s may be",
			what, len(text), MaxFileSize>>20, MaxFileSize, what)}
	}
	return text, nil
}

// Load reads and parses a task file, and makes its workspace absolute (relative to the file).
func Load(path string) (*Task, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseAt(path, data, filepath.Dir(path))
}

// ParseAt parses a task file's bytes and makes its workspace absolute, relative to dir (the
// directory the file came from: a task submitted to a daemon keeps the meaning it has for `run`).
// It is how a task is loaded to run, so it also checks that the executables of command agents,
// command tools and hooks are found on the PATH their subprocesses will get, and refuses a
// task file over MaxFileSize.
func ParseAt(name string, data []byte, dir string) (*Task, error) {
	if len(data) > MaxFileSize {
		return nil, SizeError(name, "task file", int64(len(data)))
	}
	t, root, errs, err := parse(name, data)
	if err != nil {
		return nil, err
	}
	for _, fe := range t.checkExecutables() {
		errs = append(errs, lineErr{fe, locate(root, fe.path), false})
	}
	if len(errs) > 0 {
		return nil, joinErrs(name, errs)
	}
	t.applyDefaults()
	for _, p := range []*string{&t.Workspace.Path, &t.Workspace.Repo} {
		if *p == "" {
			continue // (an isolated harness's worktree is named when the harness is created)
		}
		if !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
		if *p, err = filepath.Abs(*p); err != nil {
			return nil, fmt.Errorf("%s: workspace: %w", name, err)
		}
	}
	return t, nil
}

// checkExecutables looks up the first word of each command as its subprocess will (with the
// clean environment and the names its env: lists), so that a misspelt command is refused
// before a harness exists rather than failing it.
func (t *Task) checkExecutables() []fieldErr {
	var errs []fieldErr
	check := func(command, env []string, path ...string) {
		if len(command) == 0 || command[0] == "" {
			return
		}
		if _, err := proc.LookPath(command[0], env); err != nil {
			errs = append(errs, fieldErr{append(path, "command", "[0]"), err.Error()})
		}
	}
	for _, name := range sortedKeys(t.Agents) {
		if a := t.Agents[name]; a != nil && a.Driver == "command" {
			check(a.Command, a.Env, "agents", name)
		}
	}
	for _, name := range sortedKeys(t.Tools) {
		if tc := t.Tools[name]; tc != nil && !slices.Contains(Builtins, name) {
			check(tc.Command, tc.Env, "tools", name)
		}
	}
	for _, h := range []struct {
		name  string
		hooks []HookConfig
	}{{"preTool", t.Hooks.PreTool}, {"postTool", t.Hooks.PostTool}} {
		for i, hc := range h.hooks {
			check(hc.Command, hc.Env, "hooks", h.name, fmt.Sprintf("[%d]", i))
		}
	}
	return errs
}

// Parse parses a task file's bytes; name is the file name used in errors. Every problem is
// reported, each with its line and field.
func Parse(name string, data []byte) (*Task, error) {
	t, _, errs, err := parse(name, data)
	if err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		return nil, joinErrs(name, errs)
	}
	t.applyDefaults()
	return t, nil
}

// parse decodes and validates a task file: the task (defaults not applied), its document, and
// the problems found, or an error that stops parsing (a syntax error, an empty file).
func parse(name string, data []byte) (*Task, *yaml.Node, []lineErr, error) {
	t := &Task{}
	root, errs, err := decodeFile(name, data, t)
	if err != nil {
		return nil, nil, nil, err
	}
	// A value that could not be decoded is missing from the task: validation would only
	// report its absence again.
	under := func(p []string) bool {
		for _, e := range errs {
			if e.lost && len(e.path) <= len(p) && slices.Equal(e.path, p[:len(e.path)]) {
				return true
			}
		}
		return false
	}
	for _, fe := range t.validate() {
		if !under(fe.path) {
			errs = append(errs, lineErr{fe, locate(root, fe.path), false})
		}
	}
	return t, root, errs, nil
}

// MaxErrors is how many of a task file's problems an error lists: a generated file with one
// mistake repeated on every step would otherwise print thousands of lines.
const MaxErrors = 50

func joinErrs(name string, errs []lineErr) error {
	slices.SortStableFunc(errs, func(a, b lineErr) int { return a.line - b.line })
	out := make([]error, 0, min(len(errs), MaxErrors)+1)
	for _, fe := range errs[:min(len(errs), MaxErrors)] {
		out = append(out, &Error{File: name, Line: fe.line, Field: fe.field(), Msg: fe.msg})
	}
	if n := len(errs) - MaxErrors; n > 0 {
		out = append(out, fmt.Errorf("%s: and %d more problems like these (the first %d are listed)", name, n, MaxErrors))
	}
	return errors.Join(out...)
}

type fieldErr struct {
	path []string
	msg  string
}

func (f fieldErr) field() string {
	var b strings.Builder
	for i, p := range f.path {
		if i > 0 && !strings.HasPrefix(p, "[") {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}

// Drivers are the agent drivers a task may name.
var Drivers = []string{"script", "command", "openai"}

// validID reports whether a task or step ID is 1-128 letters, digits, '.', '_' and '-',
// starting with a letter or digit.
func validID(id string) bool { return ident.Valid(id, 128, "._-") }

func (t *Task) validate() []fieldErr {
	var errs []fieldErr
	bad := func(msg string, path ...string) { errs = append(errs, fieldErr{path, msg}) }
	idx := func(i int) string { return fmt.Sprintf("[%d]", i) }
	if t.ID != "" && !validID(t.ID) {
		bad(fmt.Sprintf("%q is not a valid id: use 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit", t.ID), "id")
	}
	if len(t.Agents) == 0 {
		bad("the task names no agents", "agents")
	}
	if t.Agent == "" {
		bad("is required: the agent that owns the harness", "agent")
	} else if _, ok := t.Agents[t.Agent]; !ok && len(t.Agents) > 0 {
		bad(fmt.Sprintf("%q is not one of the task's agents %v", t.Agent, sortedKeys(t.Agents)), "agent")
	}
	if t.Autonomy != 0 && (t.Autonomy < 1 || t.Autonomy > 5) {
		bad(fmt.Sprintf("%d is outside 1..5", t.Autonomy), "autonomy")
	}
	checkDur := func(d Duration, path ...string) {
		if d.bad {
			bad(fmt.Sprintf("%q is not a duration (write it like 50ms, 5m or 8h)", d.raw), path...)
		}
	}
	checkDur(t.Checkpoint.Interval, "checkpoint", "interval")
	if d := t.Checkpoint.Interval.Duration; d != 0 && d < MinCheckpointInterval {
		bad(fmt.Sprintf("%v is below the %v minimum (every auto-checkpoint is a synced write)", d, MinCheckpointInterval), "checkpoint", "interval")
	}
	checkDur(t.Budget.WallClock, "budget", "wallClock")
	checkDur(t.Retry.Base, "retry", "base")
	checkDur(t.Retry.MaxDelay, "retry", "maxDelay")
	if t.Budget.ToolCalls < 0 || t.Budget.Tokens < 0 {
		bad("budgets cannot be negative", "budget")
	}
	if c := t.Budget.CostUSD; c < 0 || c > 1e9 || math.IsNaN(c) {
		bad(fmt.Sprintf("%v is not a budget in US dollars (0 to 1e9; 0: unlimited)", c), "budget", "costUSD")
	}
	if r := t.Retry.MaxRetries; r != nil && (*r < 0 || *r > 100) {
		bad(fmt.Sprintf("%d is outside 0..100", *r), "retry", "maxRetries")
	}
	if t.Retry.Factor != 0 && (t.Retry.Factor < 2 || t.Retry.Factor > 10) {
		bad(fmt.Sprintf("%g is outside 2..10 (each retry waits at least twice as long as the one before)", t.Retry.Factor), "retry", "factor")
	}
	if t.MaxDepth < 0 || t.MaxDepth > 16 {
		bad(fmt.Sprintf("%d is outside 0..16", t.MaxDepth), "maxDepth")
	}
	for _, name := range sortedKeys(t.Agents) {
		a := t.Agents[name]
		p := []string{"agents", name}
		if a == nil {
			bad("is empty: an agent needs at least a driver", p...)
			continue
		}
		switch a.Driver {
		case "script":
			if a.Script == nil {
				bad("a script agent needs a script", append(p, "script")...)
			}
		case "command":
			if len(a.Command) == 0 {
				bad("a command agent needs a command", append(p, "command")...)
			}
		case "openai":
			if a.Endpoint == "" || a.Model == "" {
				bad("an openai agent needs an endpoint and a model", p...)
			}
		case "":
			bad(fmt.Sprintf("is required: one of %v", Drivers), append(p, "driver")...)
		default:
			bad(fmt.Sprintf("%q is not one of %v", a.Driver, Drivers), append(p, "driver")...)
		}
		errs = append(errs, validateDriverFields(a, p)...)
		for i, tool := range a.Tools {
			if _, ok := t.Tools[tool]; !ok && !slices.Contains(Builtins, tool) {
				bad(fmt.Sprintf("%q is neither a built-in tool %v nor one of the task's tools", tool, Builtins), append(p, "tools", idx(i))...)
			}
		}
		if a.Script != nil {
			if len(a.Script.Plan) > 0 {
				errs = append(errs, validatePlan(a.Script.Plan, t.Agents, append(p, "script", "plan"))...)
			}
			for _, sid := range sortedKeys(a.Script.Steps) {
				for i, act := range a.Script.Steps[sid] {
					ap := append(slices.Clone(p), "script", "steps", sid, idx(i))
					errs = append(errs, validateAction(act, ap)...)
				}
			}
		}
	}
	for _, name := range sortedKeys(t.Tools) {
		tc, p := t.Tools[name], []string{"tools", name}
		builtin := slices.Contains(Builtins, name)
		switch {
		case tc == nil:
			bad("is empty: a tool needs a command (or, for a built-in, its settings)", p...)
			continue
		case builtin && len(tc.Command) > 0:
			bad(fmt.Sprintf("%s is a built-in tool: it takes settings, not a command (name your own tool differently)", name), append(p, "command")...)
		case !builtin && len(tc.Command) == 0:
			bad("a tool needs a command", p...)
		}
		if (len(tc.Allow) > 0 || len(tc.Deny) > 0) && name != "bash" {
			bad("allow and deny rules are bash's", p...)
		}
		checkDur(tc.Timeout, append(p, "timeout")...)
		if !slices.Contains([]string{"", "retry", "skip", "ask"}, tc.Replay) {
			bad(fmt.Sprintf("%q is not retry, skip or ask", tc.Replay), append(p, "replay")...)
		}
		if tc.Replay != "" && !tc.SideEffects && name != "git_commit" {
			bad("a replay policy applies to tools with sideEffects: true", append(p, "replay")...)
		}
		if tc.MaxOutput < 0 {
			bad("cannot be negative", append(p, "maxOutput")...)
		}
	}
	for _, h := range []struct {
		name  string
		hooks []HookConfig
	}{{"preTool", t.Hooks.PreTool}, {"postTool", t.Hooks.PostTool}} {
		for i, hc := range h.hooks {
			p := []string{"hooks", h.name, idx(i)}
			if len(hc.Command) == 0 {
				bad("a hook needs a command", append(p, "command")...)
			}
			checkDur(hc.Timeout, append(p, "timeout")...)
			for j, tool := range hc.Tools {
				if _, ok := t.Tools[tool]; !ok && !slices.Contains(Builtins, tool) {
					bad(fmt.Sprintf("%q is neither a built-in tool %v nor one of the task's tools", tool, Builtins), append(p, "tools", idx(j))...)
				}
			}
		}
	}
	if len(t.Plan) > 0 {
		errs = append(errs, validatePlan(t.Plan, t.Agents, []string{"plan"})...)
	}
	errs = append(errs, t.validateWorkspace()...)
	return errs
}

// validateDriverFields checks the settings of the agent's driver, and that it has none of
// another driver's.
func validateDriverFields(a *Agent, p []string) []fieldErr {
	var errs []fieldErr
	bad := func(msg string, sub ...string) { errs = append(errs, fieldErr{append(slices.Clone(p), sub...), msg}) }
	command := map[string]bool{"command": len(a.Command) > 0, "promptVia": a.PromptVia != "", "env": len(a.Env) > 0,
		"iterationTimeout": a.IterationTimeout.raw != "", "maxOutput": a.MaxOutput != 0, "completionPromise": a.CompletionPromise != "",
		"maxIterations": a.MaxIterations != 0, "handoffFile": a.HandoffFile != "", "continuationPrompt": a.ContinuationPrompt != "",
		"circuitBreaker": a.CircuitBreaker != BreakerConfig{}, "countEmptyIterations": a.CountEmptyIterations, "inbox": a.Inbox != "", "rateLimit": len(a.RateLimit.Patterns) > 0 || a.RateLimit.Wait.raw != "" || a.RateLimit.MaxWait.raw != ""}
	openai := map[string]bool{"endpoint": a.Endpoint != "", "model": a.Model != "", "apiKeyEnv": a.APIKeyEnv != "",
		"contextWindow": a.ContextWindow != 0, "maxTurns": a.MaxTurns != 0, "requestTimeout": a.RequestTimeout.raw != "",
		"temperature": a.Temperature != nil, "compaction": a.Compaction != CompactionConfig{}, "doomLoop": a.DoomLoop != 0}
	for driver, fields := range map[string]map[string]bool{"command": command, "openai": openai} {
		if driver == a.Driver {
			continue
		}
		for _, f := range sortedKeys(fields) {
			if fields[f] {
				bad(fmt.Sprintf("is a setting of the %s driver, and this agent's driver is %q", driver, a.Driver), f)
			}
		}
	}
	if a.Script != nil && a.Driver != "script" {
		bad(fmt.Sprintf("is a setting of the script driver, and this agent's driver is %q", a.Driver), "script")
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"maxIterations", a.MaxIterations}, {"maxOutput", a.MaxOutput}, {"contextWindow", a.ContextWindow}, {"maxTurns", a.MaxTurns},
		{"doomLoop", a.DoomLoop}, {"circuitBreaker.noProgress", a.CircuitBreaker.NoProgress}, {"circuitBreaker.sameError", a.CircuitBreaker.SameError},
		{"circuitBreaker.rateLimits", a.CircuitBreaker.RateLimits}, {"circuitBreaker.empty", a.CircuitBreaker.Empty}, {"compaction.protectTurns", a.Compaction.ProtectTurns}} {
		if n.v < 0 {
			bad("cannot be negative", strings.Split(n.name, ".")...)
		}
	}
	if p := a.CompletionPromise; p != "" && (strings.ContainsAny(p, "<>\r\n\x1b") || strings.TrimSpace(p) != p) {
		bad(fmt.Sprintf("%q: a promise is one line of text without '<', '>' or surrounding spaces", p), "completionPromise")
	}
	if a.PromptVia != "" && a.PromptVia != "stdin" && a.PromptVia != "arg" {
		bad(fmt.Sprintf("%q is not stdin or arg", a.PromptVia), "promptVia")
	}
	if a.Inbox != "" && (filepath.IsAbs(a.Inbox) || !filepath.IsLocal(a.Inbox)) {
		bad(fmt.Sprintf("%q is not a path inside the workspace", a.Inbox), "inbox")
	}
	if a.HandoffFile != "" && (filepath.IsAbs(a.HandoffFile) || !filepath.IsLocal(a.HandoffFile)) {
		bad(fmt.Sprintf("%q is not a path inside the workspace", a.HandoffFile), "handoffFile")
	}
	for i, pat := range a.RateLimit.Patterns {
		if _, err := regexp.Compile(pat); err != nil {
			bad(fmt.Sprintf("is not a regular expression: %v", err), "rateLimit", "patterns", fmt.Sprintf("[%d]", i))
		}
	}
	for _, d := range []struct {
		d    Duration
		path []string
	}{{a.IterationTimeout, []string{"iterationTimeout"}}, {a.RequestTimeout, []string{"requestTimeout"}},
		{a.RateLimit.Wait, []string{"rateLimit", "wait"}}, {a.RateLimit.MaxWait, []string{"rateLimit", "maxWait"}}} {
		if d.d.bad {
			bad(fmt.Sprintf("%q is not a duration (write it like 50ms, 5m or 8h)", d.d.raw), d.path...)
		}
	}
	if th := a.Compaction.Threshold; th != 0 && (th < 0.1 || th > 1) {
		bad(fmt.Sprintf("%g is outside 0.1..1 (a fraction of the context window)", th), "compaction", "threshold")
	}
	if a.Temperature != nil && (*a.Temperature < 0 || *a.Temperature > 2) {
		bad(fmt.Sprintf("%g is outside 0..2", *a.Temperature), "temperature")
	}
	if a.Driver == "openai" && a.Endpoint != "" && !strings.HasPrefix(a.Endpoint, "http://") && !strings.HasPrefix(a.Endpoint, "https://") {
		bad(fmt.Sprintf("%q is not an http:// or https:// URL", a.Endpoint), "endpoint")
	}
	return errs
}

func validateAction(a Action, p []string) []fieldErr {
	var errs []fieldErr
	bad := func(msg string, sub ...string) { errs = append(errs, fieldErr{append(slices.Clone(p), sub...), msg}) }
	set := 0
	for _, on := range []bool{a.Tool != "", a.Sleep.raw != "", a.Output != nil, a.Fail != "", a.Promise != "", a.Tokens != 0} {
		if on {
			set++
		}
	}
	if set != 1 {
		bad("an action is exactly one of tool, sleep, output, fail, promise or tokens")
	}
	if a.Sleep.bad {
		bad(fmt.Sprintf("%q is not a duration (write it like 50ms, 5m or 8h)", a.Sleep.raw), "sleep")
	}
	if a.Fail != "" && a.Fail != "transient" && a.Fail != "permanent" {
		bad(fmt.Sprintf("%q is not transient or permanent", a.Fail), "fail")
	}
	if a.Times < 0 {
		bad("cannot be negative", "times")
	}
	if a.Tokens < 0 {
		bad("cannot be negative", "tokens")
	}
	if a.Args != nil && a.Tool == "" {
		bad("args belong to a tool action", "args")
	}
	return errs
}

// validatePlan checks ids, descriptions, agents, dependencies and cycles.
func validatePlan(steps []PlanStep, agents map[string]*Agent, p []string) []fieldErr {
	var errs []fieldErr
	for _, err := range CheckPlan(steps, func(a string) bool { _, ok := agents[a]; return ok }) {
		path := slices.Clone(p)
		if err.Step >= 0 {
			path = append(path, fmt.Sprintf("[%d]", err.Step))
			if err.Field != "" {
				path = append(path, err.Field)
			}
		}
		errs = append(errs, fieldErr{path, err.Msg})
	}
	return errs
}

// StepError is one plan problem: the step's index (-1 for the whole plan), field and message.
type StepError struct {
	Step  int
	Field string
	Msg   string
}

// CheckPlan validates a plan: unique non-empty ids, descriptions, known agents, known
// dependencies, no cycles. knownAgent reports whether an agent name exists.
func CheckPlan(steps []PlanStep, knownAgent func(string) bool) []StepError {
	var errs []StepError
	if len(steps) == 0 {
		return []StepError{{-1, "", "the plan has no steps"}}
	}
	index := map[string]int{}
	for i, s := range steps {
		switch {
		case s.ID == "":
			errs = append(errs, StepError{i, "id", "is required"})
		case !validID(s.ID):
			errs = append(errs, StepError{i, "id", fmt.Sprintf("%q is not a valid step id (letters, digits, '.', '_', '-')", s.ID)})
		case index[s.ID] > 0:
			errs = append(errs, StepError{i, "id", fmt.Sprintf("%q is also the id of step %d", s.ID, index[s.ID]-1)})
		default:
			index[s.ID] = i + 1
		}
		if strings.TrimSpace(s.Description) == "" {
			errs = append(errs, StepError{i, "description", "is required"})
		}
		if s.Agent == "" {
			errs = append(errs, StepError{i, "agent", "is required"})
		} else if !knownAgent(s.Agent) {
			errs = append(errs, StepError{i, "agent", fmt.Sprintf("%q is not an agent of the task", s.Agent)})
		}
	}
	for i, s := range steps {
		seen := map[string]bool{}
		for _, d := range s.DependsOn {
			switch {
			case index[d] == 0:
				errs = append(errs, StepError{i, "dependsOn", fmt.Sprintf("%q is not a step of the plan", d)})
			case d == s.ID:
				errs = append(errs, StepError{i, "dependsOn", "a step cannot depend on itself"})
			case seen[d]:
				errs = append(errs, StepError{i, "dependsOn", fmt.Sprintf("%q is listed twice", d)})
			}
			seen[d] = true
		}
	}
	errs = append(errs, checkPhases(steps, index)...)
	if len(index) < len(steps) {
		return errs // a step without an id of its own: its dependencies cannot be followed
	}
	// A cycle is looked for among the dependencies that name other steps of the plan, so that
	// it is reported with the unknown ones, not after they are mended.
	if cycle := findCycle(steps, index); cycle != nil {
		errs = append(errs, StepError{index[cycle[0]] - 1, "dependsOn", "dependency cycle: " + idlist.Cycle(cycle, "step")})
	}
	return errs
}

// Phases lists a plan's phases in order: the order in which they first appear.
func Phases(steps []PlanStep) []string {
	var out []string
	for _, s := range steps {
		if s.Phase != "" && !slices.Contains(out, s.Phase) {
			out = append(out, s.Phase)
		}
	}
	return out
}

// checkPhases: when any step names a phase, every step does, and no step depends on a step of
// a later phase (phases run in the order they first appear; see PhaseDependencies).
func checkPhases(steps []PlanStep, index map[string]int) []StepError {
	phases := Phases(steps)
	if len(phases) == 0 {
		return nil
	}
	var errs []StepError
	for i, s := range steps {
		if s.Phase == "" {
			errs = append(errs, StepError{i, "phase", fmt.Sprintf("is required: other steps name phases (%s), so every step must", strings.Join(phases, ", "))})
			continue
		}
		for _, d := range s.DependsOn {
			if j := index[d] - 1; j >= 0 && steps[j].Phase != "" && slices.Index(phases, steps[j].Phase) > slices.Index(phases, s.Phase) {
				errs = append(errs, StepError{i, "dependsOn", fmt.Sprintf("%q is in phase %s, which runs after this step's phase %s", d, steps[j].Phase, s.Phase)})
			}
		}
	}
	return errs
}

// PhaseDependencies is what phases add to a plan: every step of a phase depends on every step
// of the phase before it, so a phase starts only when the one before it has completed.
func PhaseDependencies(steps []PlanStep) map[string][]string {
	phases := Phases(steps)
	if len(phases) < 2 {
		return nil
	}
	members := map[string][]string{}
	for _, s := range steps {
		members[s.Phase] = append(members[s.Phase], s.ID)
	}
	out := map[string][]string{}
	for _, s := range steps {
		if k := slices.Index(phases, s.Phase); k > 0 {
			for _, d := range members[phases[k-1]] {
				if !slices.Contains(s.DependsOn, d) {
					out[s.ID] = append(out[s.ID], d)
				}
			}
		}
	}
	return out
}

// findCycle returns the step ids of a dependency cycle (first id repeated at the end), or nil.
func findCycle(steps []PlanStep, index map[string]int) []string {
	const (
		unseen = iota
		active
		done
	)
	mark := make([]int, len(steps))
	var stack []string
	var visit func(i int) []string
	visit = func(i int) []string {
		mark[i] = active
		stack = append(stack, steps[i].ID)
		for _, d := range steps[i].DependsOn {
			j := index[d] - 1
			if j < 0 || j == i {
				continue // not a step of the plan, or the step itself: reported as such
			}
			switch mark[j] {
			case active:
				start := slices.Index(stack, d)
				return append(slices.Clone(stack[start:]), d)
			case unseen:
				if c := visit(j); c != nil {
					return c
				}
			}
		}
		stack = stack[:len(stack)-1]
		mark[i] = done
		return nil
	}
	for i := range steps {
		if mark[i] == unseen {
			if c := visit(i); c != nil {
				return c
			}
		}
	}
	return nil
}

func (t *Task) applyDefaults() {
	if t.LongRunning == nil {
		yes := true
		t.LongRunning = &yes
	}
	if t.Autonomy == 0 {
		t.Autonomy = DefaultAutonomy
	}
	if t.Checkpoint.Interval.Duration == 0 {
		t.Checkpoint.Interval.Duration = DefaultCheckpointInterval
	}
	if t.Budget.ToolCalls == 0 {
		t.Budget.ToolCalls = DefaultToolCalls
	}
	if t.MaxDepth == 0 {
		t.MaxDepth = DefaultMaxDepth
	}
	if t.Retry.MaxDelay.Duration == 0 {
		t.Retry.MaxDelay.Duration = DefaultMaxDelay
	}
	if t.Retry.Base.Duration == 0 {
		t.Retry.Base.Duration = DefaultRetryBase
	}
	if t.Retry.Factor == 0 {
		t.Retry.Factor = DefaultRetryFactor
	}
	t.Workspace.applyDefaults()
	for _, a := range t.Agents {
		a.applyDefaults()
	}
	for _, hooks := range [][]HookConfig{t.Hooks.PreTool, t.Hooks.PostTool} {
		for i := range hooks {
			if hooks[i].Timeout.Duration == 0 {
				hooks[i].Timeout.Duration = DefaultHookTimeout
			}
		}
	}
	for name, tc := range t.Tools {
		if name == "git_commit" {
			tc.SideEffects = true // a commit is a side effect, whatever the settings say
		}
		if tc.Replay == "" && tc.SideEffects {
			tc.Replay = "ask"
		}
		if tc.MaxOutput == 0 {
			tc.MaxOutput = DefaultMaxOutput
		}
		if tc.Timeout.Duration == 0 && !slices.Contains(Builtins, name) {
			tc.Timeout.Duration = DefaultToolTimeout
		}
	}
}

// applyDefaults fills in the defaults of the agent's driver.
func (a *Agent) applyDefaults() {
	setInt := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	setDur := func(v *Duration, d time.Duration) {
		if v.Duration == 0 {
			v.Duration = d
		}
	}
	switch a.Driver {
	case "command":
		setInt(&a.MaxIterations, DefaultMaxIterations)
		setInt(&a.MaxOutput, DefaultAgentOutput)
		setInt(&a.CircuitBreaker.NoProgress, DefaultNoProgress)
		setInt(&a.CircuitBreaker.Empty, DefaultEmpty)
		setInt(&a.CircuitBreaker.SameError, DefaultSameError)
		setInt(&a.CircuitBreaker.RateLimits, DefaultRateLimits)
		setDur(&a.IterationTimeout, DefaultIterationTimeout)
		setDur(&a.RateLimit.Wait, DefaultRateLimitWait)
		setDur(&a.RateLimit.MaxWait, DefaultRateLimitMaxWait)
		if a.PromptVia == "" {
			a.PromptVia = "stdin"
		}
		if a.HandoffFile == "" {
			a.HandoffFile = DefaultHandoffFile
		}
		if a.ContinuationPrompt == "" {
			a.ContinuationPrompt = DefaultContinuationPrompt
		}
	case "openai":
		setInt(&a.ContextWindow, DefaultContextWindow)
		setInt(&a.MaxTurns, DefaultMaxTurns)
		setInt(&a.Compaction.ProtectTurns, DefaultProtectTurns)
		setInt(&a.DoomLoop, DefaultDoomLoop)
		setDur(&a.RequestTimeout, DefaultRequestTimeout)
		if a.Compaction.Threshold == 0 {
			a.Compaction.Threshold = DefaultCompactThreshold
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
