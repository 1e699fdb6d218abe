// Package command is the command driver: a CLI agent (claude -p, codex exec, any program) run
// once per iteration in a Ralph loop until it keeps its completion promise, with handoff
// state, a circuit breaker, rate-limit back-off, and clean-up of what a killed iteration left
// running.
package command

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/harness-edge/harness-edge/internal/idlist"
	"github.com/harness-edge/harness-edge/runtime/agent"
	"github.com/harness-edge/harness-edge/runtime/inbox"
	"github.com/harness-edge/harness-edge/runtime/itlog"
	"github.com/harness-edge/harness-edge/runtime/proc"

	"github.com/harness-edge/harness-edge/statefmt/event"

	"github.com/cespare/xxhash/v2"

	"github.com/harness-edge/harness-edge/runtime/clock"
	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
)

// Agent is the command driver: the Ralph iteration loop around a CLI agent. Each iteration runs
// the agent's command as a fresh process (fresh context) with a prompt built from the task, the step, the continuation prompt, the handoff file the
// previous iteration left and its feedback. The step completes when an iteration keeps the
// completion promise; a circuit breaker pauses the harness when iterations stop making progress
// or fail the same way, and rate-limited iterations wait without counting. Every iteration ends
// in a durable checkpoint (StepContext.Save), so a crash loses at most the iteration in flight,
// and completion is read only from the live output of the iteration that just ran: nothing
// saved before a crash can pass for it.
type Agent struct {
	name      string
	cfg       *task.Agent
	rateLimit []*regexp.Regexp
	files     fileSums // what the workspace's files held when last read
}

// New makes the command agent named name from its configuration.
func New(name string, cfg *task.Agent) (*Agent, error) {
	a := &Agent{name: name, cfg: cfg, rateLimit: defaultRateLimits()}
	if len(cfg.RateLimit.Patterns) > 0 {
		a.rateLimit = slices.Clip(a.rateLimit) // the task's own patterns go into a copy
	}
	for _, p := range cfg.RateLimit.Patterns {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("agent %s: rate-limit pattern %q: %w", name, p, err)
		}
		a.rateLimit = append(a.rateLimit, re)
	}
	return a, nil
}

// defaultRateLimits are DefaultRateLimitPatterns compiled, once per process: compiling them took
// most of a direct-path run's own time (0.5-1.3 ms of it), every run making its agents anew.
var defaultRateLimits = sync.OnceValue(func() []*regexp.Regexp {
	out := make([]*regexp.Regexp, len(DefaultRateLimitPatterns))
	for i, p := range DefaultRateLimitPatterns {
		out[i] = regexp.MustCompile(p)
	}
	return out
})

// ObjectiveStep is the id of the one step a command agent plans for a task without a plan.
const ObjectiveStep = "objective"

// Plan is the plan of a task that declares none: one step, the task's prompt (the objective),
// which the Ralph loop works on until the agent keeps its promise. A CLI agent plans inside its
// own iterations; the harness needs no finer plan to run it durably.
func (a *Agent) Plan(_ context.Context, pc *agent.PlanContext) ([]task.PlanStep, error) {
	objective := ""
	if pc.Task != nil {
		objective = strings.TrimSpace(pc.Task.Prompt)
	}
	if objective == "" {
		return nil, fmt.Errorf("agent %s: the task has no plan and no prompt: a command agent runs the task's prompt as its one step, so give the task a prompt (or a plan)", a.name)
	}
	description, _, _ := strings.Cut(objective, "\n")
	if len(description) > 200 {
		description = description[:200] + "…"
	}
	return []task.PlanStep{{ID: ObjectiveStep, Description: description, Agent: a.name}}, nil
}

// loopState is the command driver's part of the loop snapshot (AgentLoopSnapshot.Data).
type loopState struct {
	// NoProgress counts iterations in a row that changed neither the workspace nor the output.
	NoProgress int `json:"noProgress,omitempty"`
	// SameError counts iterations in a row that failed with LastError.
	SameError int    `json:"sameError,omitempty"`
	LastError string `json:"lastError,omitempty"`
	// OutputHash and WorkspaceHash are those of the last iteration.
	OutputHash    string `json:"outputHash,omitempty"`
	WorkspaceHash string `json:"workspaceHash,omitempty"`
	// RateLimited counts rate-limited iterations in a row; WaitUntil is when the next may start.
	RateLimited int        `json:"rateLimited,omitempty"`
	WaitUntil   *time.Time `json:"waitUntil,omitempty"`
	// Empty counts empty iterations in a row (not counted as iterations).
	Empty int `json:"empty,omitempty"`
	// BreakerOpen is set when the breaker paused the harness; resume closes it.
	BreakerOpen bool `json:"breakerOpen,omitempty"`
	// RunToken marks the processes of the iteration in flight (saved before it starts).
	RunToken string `json:"runToken,omitempty"`
	// Messages are the messages from a human that the iteration in flight carries in its
	// prompt (taken before it started; an iteration that runs again carries them again).
	Messages []inbox.Message `json:"messages,omitempty"`
	// Taken names the inbox messages taken whose removal may not have happened; InboxFileHash
	// is the hash of the inbox file's text taken before it was emptied (inbox.go).
	Taken         []string `json:"taken,omitempty"`
	InboxFileHash string   `json:"inboxFileHash,omitempty"`
}

// iteration is what one run of the agent's command gave.
type iteration struct {
	stdout, stderr string
	exit           int // -1: did not exit by itself (timeout)
	timedOut       bool
	// agentError is the error the agent's structured output reported ("" when none).
	agentError string
	took       time.Duration
}

func (a *Agent) RunStep(ctx context.Context, sc *agent.StepContext) (string, error) {
	loop := &statefmt.AgentLoopSnapshot{}
	var st loopState
	if sc.Resume != nil {
		loop = sc.Resume
		if len(loop.Data) > 0 {
			if err := json.Unmarshal(loop.Data, &st); err != nil {
				return "", &agent.StepError{Msg: fmt.Sprintf("agent %s: the saved loop state does not read: %v", a.name, err)}
			}
		}
		if st.BreakerOpen {
			sc.Emit(event.Event{Type: event.Iteration, Iteration: loop.Iteration, Outcome: event.IterBreakerDone,
				Message: "resumed by a human: the circuit breaker's counts start again"})
			st = loopState{OutputHash: st.OutputHash, WorkspaceHash: st.WorkspaceHash, RunToken: st.RunToken,
				Messages: st.Messages, Taken: st.Taken, InboxFileHash: st.InboxFileHash}
		}
	}
	if st.RunToken != "" {
		// The iteration in flight when the harness was killed: what it started may live on.
		if n := killMarked(st.RunToken, 0); n > 0 {
			sc.Emit(event.Event{Type: event.Warning, Message: fmt.Sprintf("killed %d leftover processes of the iteration cut short", n)})
		}
		st.RunToken = ""
	}
	if st.WorkspaceHash == "" {
		st.WorkspaceHash = a.files.hash(sc.Workspace)
	}
	save := func() error {
		var err error
		if loop.Data, err = statefmt.JSONOf(st); err != nil {
			return err
		}
		return sc.Save(loop)
	}
	for {
		if st.WaitUntil != nil {
			if d := st.WaitUntil.Sub(sc.Clock.Now()); d > 0 {
				if err := sc.Clock.Sleep(ctx, d); err != nil {
					return "", err
				}
			}
			st.WaitUntil = nil
		}
		// Budgets are checked between iterations: one runs whole, and what it spent counts
		// before the next may start (the harness then asks a human, or fails, by autonomy).
		if err := sc.CheckBudget(); err != nil {
			return "", err
		}
		if loop.Iteration >= a.cfg.MaxIterations {
			return "", &agent.StepError{Msg: fmt.Sprintf("agent %s: no completion after %s (maxIterations)", a.name, idlist.Of(a.cfg.MaxIterations, "iteration"))}
		}
		n := loop.Iteration + 1
		removeTaken := a.takeMessages(sc, &st)
		prompt := a.prompt(sc, loop, n, st.Messages)
		// The token (and the messages taken) are durable before the iteration starts: a crash
		// from here on leaves them for the next run to find the iteration's processes by, and
		// to give the iteration that runs again the same messages.
		st.RunToken = newRunToken()
		started := event.Event{Type: event.Iteration, Iteration: n, Outcome: event.IterStarted}
		if len(st.Messages) > 0 {
			started.Message = fmt.Sprintf("with %d message(s) from the human", len(st.Messages))
		}
		sc.Emit(started)
		if err := save(); err != nil {
			return "", err
		}
		if removeTaken() {
			// A human's edit, not the agent's work: the breaker compares the workspace from here.
			st.WorkspaceHash = a.files.hash(sc.Workspace)
		}
		it, err := a.run(ctx, sc, prompt, n, st.RunToken)
		st.RunToken = ""
		if err != nil {
			return "", err
		}
		final := withoutEcho(FinalText(it.stdout), prompt)
		ev := event.Event{Type: event.Iteration, Iteration: n, DurationMs: event.Ms(it.took), ExitCode: &it.exit}
		if rep, ok := ParseReport(it.stdout); ok {
			// Claude Code's or Codex's JSON: its final message is the answer, its own error flag
			// counts as a failure, and the use it reports is charged, rate-limited or not.
			if rep.HasText {
				final = strings.TrimSpace(rep.Text)
			}
			if rep.IsError {
				it.agentError = cmp.Or(strings.TrimSpace(rep.ErrorText), "the agent reported an error")
			}
			if u := rep.Usage; u != (event.Usage{}) {
				ev.Usage = &u
				if sc.ReportTokens != nil {
					sc.ReportTokens(u.Tokens())
				}
				if micro, ok := statefmt.MicroUSD(u.CostUSD); ok && sc.ReportCost != nil {
					sc.ReportCost(micro)
				}
			}
		}
		done := it.exit == 0 && it.agentError == "" && (a.cfg.CompletionPromise == "" || KeptPromise(final, a.cfg.CompletionPromise, prompt))

		// Rate limits first: a limit message is neither a failure nor progress, and the
		// iteration does not count. A completed iteration is never read as one.
		if !done && (it.exit != 0 || it.agentError != "" || len(final) <= 512) {
			now := sc.Clock.Now()
			rl, ok := DetectRateLimit(it.stderr+"\n"+it.agentError+"\n"+final, a.rateLimit, now)
			if ok && it.exit == 0 && it.agentError == "" && a.files.hash(sc.Workspace) != st.WorkspaceHash {
				// It exited 0 and changed the workspace: it worked, and a short answer that
				// speaks of a 429 or a rate limit ("retried the upload after 429 Too Many
				// Requests") is its report, not a limit message.
				ok = false
			}
			if ok {
				st.RateLimited++
				wait := a.rateLimitWait(rl, st.RateLimited, now)
				until := now.Add(wait)
				st.WaitUntil = &until
				ev.Outcome, ev.DelayMs, ev.Message = event.IterRateLimited, event.Ms(wait), fmt.Sprintf("rate limited (%q); waiting %v", rl.Match, wait.Round(time.Second))
				if st.RateLimited >= a.cfg.CircuitBreaker.RateLimits {
					return "", a.openBreaker(sc, &st, ev, save, fmt.Sprintf("%s in a row (last: %q)", idlist.Of(st.RateLimited, "rate-limited iteration"), rl.Match))
				}
				sc.Emit(ev)
				if err := save(); err != nil {
					return "", err
				}
				continue
			}
		}
		st.RateLimited = 0
		// An empty iteration (it exited 0, printed nothing and changed nothing) is a run that
		// did not happen as far as the work goes: by default it does not count, and a few in
		// a row open the breaker (an agent that no longer answers).
		if !done && it.exit == 0 && it.agentError == "" && strings.TrimSpace(it.stdout) == "" && strings.TrimSpace(it.stderr) == "" &&
			!a.cfg.CountEmptyIterations && a.files.hash(sc.Workspace) == st.WorkspaceHash {
			st.Empty++
			ev.Outcome, ev.Message = event.IterEmpty, fmt.Sprintf("no output and no change in the workspace (%d in a row); not counted", st.Empty)
			if st.Empty >= a.cfg.CircuitBreaker.Empty {
				return "", a.openBreaker(sc, &st, ev, save, fmt.Sprintf("%s in a row (no output, no change in the workspace)", idlist.Of(st.Empty, "empty iteration")))
			}
			sc.Emit(ev)
			if err := save(); err != nil {
				return "", err
			}
			continue
		}
		st.Empty = 0
		loop.Iteration = n
		sc.CountIteration()
		st.Messages = nil // their iteration counted: they were delivered

		if done {
			ev.Outcome = event.IterCompleted
			sc.Emit(ev)
			return final, nil
		}
		// Not done: remember what the next iteration needs, and watch for a loop going nowhere.
		loop.Handoff = readHandoff(sc.Workspace, a.cfg.HandoffFile)
		loop.Scratchpad = feedback(it, final, a.cfg.CompletionPromise)
		ws, out := a.files.hash(sc.Workspace), hashString(it.stdout)
		if ws == st.WorkspaceHash && out == st.OutputHash {
			st.NoProgress++
		} else {
			st.NoProgress = 0
		}
		st.WorkspaceHash, st.OutputHash = ws, out
		switch {
		case it.timedOut:
			ev.Outcome, ev.ExitCode = event.IterTimeout, nil
			st.countError(fmt.Sprintf("timed out after %v", a.cfg.IterationTimeout.Duration))
		case it.exit != 0:
			ev.Outcome = event.IterFailed
			st.countError(fmt.Sprintf("exit status %d: %s", it.exit, lastLine(cmp.Or(strings.TrimSpace(it.stderr), it.agentError))))
		case it.agentError != "":
			ev.Outcome = event.IterFailed
			st.countError("the agent reported an error: " + lastLine(it.agentError))
		default:
			ev.Outcome = event.IterContinue
			st.SameError, st.LastError = 0, ""
		}
		ev.Message = loop.Scratchpad // the end of its final output and error output, as the next prompt gets them
		switch {
		case st.NoProgress >= a.cfg.CircuitBreaker.NoProgress:
			return "", a.openBreaker(sc, &st, ev, save, fmt.Sprintf("%s in a row changed nothing (same output, same workspace)", idlist.Of(st.NoProgress, "iteration")))
		case st.SameError >= a.cfg.CircuitBreaker.SameError:
			return "", a.openBreaker(sc, &st, ev, save, fmt.Sprintf("%s in a row failed the same way: %s", idlist.Of(st.SameError, "iteration"), st.LastError))
		case n >= a.cfg.MaxIterations:
			ev.Outcome = event.IterExhausted
			sc.Emit(ev)
			return "", &agent.StepError{Msg: fmt.Sprintf("agent %s: no completion after %s (maxIterations); last: %s", a.name, idlist.Of(n, "iteration"), agent.Tail(loop.Scratchpad, 300))}
		}
		sc.Emit(ev)
		if err := save(); err != nil {
			return "", err
		}
	}
}

func (st *loopState) countError(e string) {
	if e == st.LastError {
		st.SameError++
	} else {
		st.SameError, st.LastError = 1, e
	}
}

// openBreaker saves the loop with the breaker open and returns the pause that stops the harness.
func (a *Agent) openBreaker(sc *agent.StepContext, st *loopState, ev event.Event, save func() error, why string) error {
	st.BreakerOpen = true
	ev.Outcome, ev.Message = event.IterBreaker, why
	sc.Emit(ev)
	if err := save(); err != nil {
		return err
	}
	return &agent.PauseError{Reason: fmt.Sprintf("circuit breaker open (agent %s, step %s): %s; look at the workspace, then resume (the counts start again) or stop", a.name, sc.Step.ID, why)}
}

// rateLimitWait is how long a rate-limited iteration waits: until the reset time the output
// stated, else the configured wait doubled for each limit in a row; never more than maxWait.
func (a *Agent) rateLimitWait(rl RateLimit, inRow int, now time.Time) time.Duration {
	wait := a.cfg.RateLimit.Wait.Duration << min(inRow-1, 20)
	if !rl.Reset.IsZero() {
		wait = rl.Reset.Sub(now) + 2*time.Second // a margin for clocks that disagree
	}
	return min(max(wait, time.Second), a.cfg.RateLimit.MaxWait.Duration)
}

// prompt builds iteration n's prompt, with the messages from a human it carries.
func (a *Agent) prompt(sc *agent.StepContext, loop *statefmt.AgentLoopSnapshot, n int, msgs []inbox.Message) string {
	var b strings.Builder
	if a.cfg.Instructions != "" {
		b.WriteString(strings.TrimSpace(a.cfg.Instructions) + "\n\n")
	}
	if n > 1 {
		fmt.Fprintf(&b, "%s\n(This is iteration %d of at most %d.)\n\n", strings.TrimSpace(a.cfg.ContinuationPrompt), n, a.cfg.MaxIterations)
	}
	b.WriteString(agent.StepPrompt(sc))
	b.WriteString(messagesPrompt(msgs))
	if n > 1 && len(loop.Handoff) > 0 {
		fmt.Fprintf(&b, "\n[Handoff state: %s, as the previous iteration left it]\n%s\n", a.cfg.HandoffFile, loop.Handoff)
	}
	if n > 1 && loop.Scratchpad != "" {
		fmt.Fprintf(&b, "\n[Previous iteration]\n%s\n", loop.Scratchpad)
	}
	if p := a.cfg.CompletionPromise; p != "" {
		fmt.Fprintf(&b, "\nWhen the step is completely done, and only then, end your final answer with the completion promise: <promise>%s</promise>\n", p)
	}
	fmt.Fprintf(&b, "Before you stop, you may write %s in the workspace: a JSON object with what is done, what is next and the files that matter; the next session gets it.\n", a.cfg.HandoffFile)
	return b.String()
}

// run runs iteration n: the command in the workspace, in its own process group, with a clean
// environment, killed whole at the iteration timeout. A context cancelled meanwhile is returned
// as an error (the iteration is cut short and runs again).
func (a *Agent) run(ctx context.Context, sc *agent.StepContext, prompt string, n int, token string) (iteration, error) {
	if err := os.MkdirAll(sc.Workspace, 0o755); err != nil {
		return iteration{}, &agent.StepError{Msg: fmt.Sprintf("agent %s: workspace: %v", a.name, err)}
	}
	args := slices.Clone(a.cfg.Command)
	if a.cfg.PromptVia == "arg" {
		if i := slices.Index(args, "{prompt}"); i > 0 {
			args[i] = prompt
		} else {
			args = append(args, prompt)
		}
	}
	ictx, cancel := clock.WithTimeout(ctx, sc.Clock, a.cfg.IterationTimeout.Duration)
	defer cancel()
	cmd := exec.CommandContext(ictx, args[0], args[1:]...)
	cmd.Dir = sc.Workspace
	cmd.Env = append(proc.CleanEnv(a.cfg.Env), "HARNESS_EDGE_HARNESS_ID="+sc.HarnessID, "HARNESS_EDGE_STEP_ID="+sc.Step.ID,
		"HARNESS_EDGE_ITERATION="+strconv.Itoa(n), "HARNESS_EDGE_PROMISE="+a.cfg.CompletionPromise, runTokenVar+"="+token)
	if a.cfg.PromptVia == "stdin" {
		cmd.Stdin = strings.NewReader(prompt)
	}
	stdout, stderr := &proc.TailWriter{Max: a.cfg.MaxOutput}, &proc.TailWriter{Max: a.cfg.MaxOutput}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	start := sc.Clock.Now()
	var live *itlog.Writer
	if sc.LogDir != "" {
		// The live log is a view for people: one that cannot be written leaves the iteration be.
		var err error
		live, err = itlog.Open(sc.LogDir, sc.HarnessID, sc.Step.ID, n, fmt.Sprintf("=== iteration %d of step %s started %s ===", n, sc.Step.ID, start.UTC().Format(time.RFC3339)))
		if err == nil {
			cmd.Stdout, cmd.Stderr = io.MultiWriter(stdout, live), io.MultiWriter(stderr, live)
		} else {
			sc.Emit(event.Event{Type: event.Warning, Message: fmt.Sprintf("iteration %d runs without its live log: %v", n, err)})
		}
	}
	err := proc.Run(ictx, cmd)
	// proc.Run killed the iteration's process group; what left it (setsid, a daemon) still
	// carries the token, and would go on working in the workspace beside the next iteration.
	if cmd.Process != nil { // it started
		if k := killMarked(token, cmd.Process.Pid); k > 0 {
			sc.Emit(event.Event{Type: event.Warning, Message: fmt.Sprintf("iteration %d left %s running outside its process group: killed", n, idlist.Of(k, "process"))})
		}
	}
	it := iteration{stdout: stdout.String(), stderr: stderr.String(), took: sc.Clock.Now().Sub(start)}
	if live != nil {
		end := fmt.Sprintf("=== iteration %d ended after %v ===", n, it.took.Round(time.Millisecond))
		if ctx.Err() != nil {
			end = fmt.Sprintf("=== iteration %d cut short after %v (it runs again) ===", n, it.took.Round(time.Millisecond))
		}
		_ = live.Close(end)
	}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return it, ctx.Err()
	case clock.TimedOut(ictx):
		it.exit, it.timedOut = -1, true
	case errors.As(err, &ee):
		it.exit = ee.ExitCode()
	case err != nil: // it did not start: not an iteration, a configuration problem
		return it, &agent.StepError{Msg: fmt.Sprintf("agent %s: %v", a.name, err)}
	}
	return it, nil
}

// feedback is what the next iteration is told about this one.
func feedback(it iteration, final, promise string) string {
	var b strings.Builder
	switch {
	case it.timedOut:
		b.WriteString("The previous session ran out of time and was stopped.\n")
	case it.exit != 0:
		fmt.Fprintf(&b, "The previous session failed (exit status %d).\n", it.exit)
	case it.agentError != "":
		fmt.Fprintf(&b, "The previous session ended in an error: %s\n", agent.Tail(it.agentError, 1500))
	case promise != "":
		fmt.Fprintf(&b, "The previous session ended without the completion promise.\n")
	}
	if s := strings.TrimSpace(StripANSI(it.stderr)); s != "" && it.exit != 0 {
		fmt.Fprintf(&b, "Its error output ended with:\n%s\n", agent.Tail(s, 1500))
	}
	if final != "" {
		fmt.Fprintf(&b, "Its final output ended with:\n%s\n", agent.Tail(final, 2500))
	}
	out := strings.TrimSpace(b.String())
	if promise != "" { // the next prompt must not carry the promise for the agent to echo
		out = strings.ReplaceAll(out, promise, "[promise]")
	}
	return out
}

// readHandoff reads the handoff file an iteration left: as JSON when it is, else as a JSON
// string; nil when there is none. It is read through the workspace root, so a link cannot make
// it read outside.
func readHandoff(workspace, name string) statefmt.JSONValue {
	root, err := os.OpenRoot(workspace)
	if err != nil {
		return nil
	}
	defer root.Close()
	f, err := root.Open(name)
	if err != nil {
		return nil
	}
	defer f.Close()
	buf := make([]byte, 64<<10+1)
	n, _ := f.Read(buf)
	data := bytes.TrimSpace(buf[:min(n, 64<<10)])
	if len(data) == 0 {
		return nil
	}
	if v, err := statefmt.CanonicalJSON(data); err == nil {
		return v
	}
	v, _ := statefmt.JSONOf(string(data))
	return v
}

func hashString(s string) string {
	return strconv.FormatUint(xxhash.Sum64String(s), 16)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(StripANSI(s)), "\n")
	return agent.Tail(lines[len(lines)-1], 300)
}
