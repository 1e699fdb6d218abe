// Package openai is the openai driver: a tool-calling agent over any OpenAI-compatible
// chat-completions endpoint, with its conversation saved as the harness's loop snapshot.
package openai

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/harness-edge/harness-edge/runtime/tools"

	"github.com/harness-edge/harness-edge/runtime/agent"
	"github.com/harness-edge/harness-edge/runtime/clock"

	"github.com/harness-edge/harness-edge/statefmt/event"

	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
)

// Agent is the openai driver: a tool-calling loop over any OpenAI-compatible
// chat-completions endpoint (llama.cpp server, Ollama, vLLM, hosted APIs). The conversation is
// the harness's agent-loop snapshot, saved after every model turn and every tool result, so a
// resumed harness continues it where it stopped (a tool call the model asked for and that did
// not finish runs on resume, through the side-effect journal). Near the context window the
// older turns are summarised by the model (or, when that fails, dropped with a note); the same
// tool call repeated DoomLoop times in a row is blocked and the model told, and a model that
// keeps at it is put before a human.
type Agent struct {
	name   string
	cfg    *task.Agent
	client *http.Client
}

// New makes the openai agent named name from its configuration.
func New(name string, cfg *task.Agent) *Agent {
	return &Agent{name: name, cfg: cfg, client: &http.Client{}}
}

var _ agent.Replanner = (*Agent)(nil)

// Plan asks the model for the task's plan, as JSON; an answer that is not a valid plan is sent
// back once with what is wrong.
func (a *Agent) Plan(ctx context.Context, pc *agent.PlanContext) ([]task.PlanStep, error) {
	clk := pc.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	sc := &agent.StepContext{HarnessID: pc.HarnessID, Task: pc.Task, Clock: clk}
	agents := describeAgents(pc.Task)
	msgs := []statefmt.Message{
		{Role: "system", Content: "You plan work for a team of agents. Answer with JSON only: " +
			`{"steps": [{"id": "short-id", "description": "what to do", "agent": "AGENT", "dependsOn": ["id"], "critical": false}]}. ` +
			"Use only the agents listed; mark steps that change things outside the workspace critical."},
		{Role: "user", Content: fmt.Sprintf("Task: %s\n\nAgents:\n%s", strings.TrimSpace(pc.Task.Prompt), agents)},
	}
	known := func(n string) bool { _, ok := pc.Task.Agents[n]; return ok }
	for try := 1; ; try++ {
		resp, err := a.complete(ctx, sc, msgs, nil)
		if err != nil {
			return nil, err
		}
		answer := resp.Choices[0].Message.Content
		steps, problem := parsePlan(answer, known)
		if problem == "" {
			return steps, nil
		}
		if try == 2 {
			return nil, fmt.Errorf("agent %s: no valid plan after %d answers: %s", a.name, try, problem)
		}
		msgs = append(msgs, statefmt.Message{Role: "assistant", Content: answer},
			statefmt.Message{Role: "user", Content: "That is not a valid plan: " + problem + ". Answer with the corrected JSON only."})
	}
}

// describeAgents lists a task's agents for a prompt, one a line.
func describeAgents(t *task.Task) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(t.Agents)) {
		cfg := t.Agents[name]
		fmt.Fprintf(&b, "- %s (%s driver; tools: %s)\n", name, cfg.Driver, strings.Join(cfg.Tools, ", "))
	}
	return b.String()
}

// replanSystemPrompt tells the model what a plan change is.
const replanSystemPrompt = "You change the plan of a team of agents after a human rejected one of its steps. " +
	"Answer with JSON only, a plan change (every field optional, at least one given): " +
	`{"skip": ["step-id"], "replace": {"step-id": {"description": "what to do instead", "agent": "AGENT", "critical": false}}, ` +
	`"insert": [{"id": "new-id", "description": "what to do", "agent": "AGENT", "dependsOn": ["step-id"], "critical": false}], ` +
	`"dependsOn": {"step-id": ["step-id"]}}. ` +
	"skip marks a step done without running it; replace changes a step; insert adds steps; dependsOn sets a step's dependencies. " +
	"Completed steps cannot be changed; use only the agents listed; address the human's reason."

// Replan asks the model for a plan change after a human rejected the gate of a step: it is
// given the task, the agents, the plan as it is (each step's id, description, agent,
// dependencies, critical flag and status), the rejected step and the human's reason. An answer
// that rc.Check refuses is sent back with every problem, up to rc.Tries answers in all.
func (a *Agent) Replan(ctx context.Context, rc *agent.ReplanContext) ([]byte, error) {
	clk := rc.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	sc := &agent.StepContext{HarnessID: rc.HarnessID, Task: rc.Task, Clock: clk}
	type planned struct {
		ID          string   `json:"id"`
		Description string   `json:"description"`
		Agent       string   `json:"agent"`
		DependsOn   []string `json:"dependsOn,omitempty"`
		Critical    bool     `json:"critical,omitempty"`
		Status      string   `json:"status"`
	}
	var steps []planned
	if rc.Plan != nil {
		for _, s := range rc.Plan.Steps {
			steps = append(steps, planned{s.ID, s.Description, s.AssignedAgent, s.Dependencies, s.Critical, string(s.Status)})
		}
	}
	plan, err := json.MarshalIndent(map[string]any{"steps": steps}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", a.name, err)
	}
	msgs := []statefmt.Message{
		{Role: "system", Content: replanSystemPrompt},
		{Role: "user", Content: fmt.Sprintf("Task: %s\n\nAgents:\n%s\nThe plan now:\n%s\n\nA human rejected step %s (gate %s). Their reason: %s\n\nAnswer with the plan change.",
			strings.TrimSpace(rc.Task.Prompt), describeAgents(rc.Task), plan, rc.StepID, rc.GateID, cmp.Or(strings.TrimSpace(rc.Reason), "(none given)"))},
	}
	tries := max(rc.Tries, 1)
	for try := 1; ; try++ {
		resp, err := a.complete(ctx, sc, msgs, nil)
		if err != nil {
			return nil, err
		}
		if rc.ReportTokens != nil {
			rc.ReportTokens(resp.tokens())
		}
		answer := resp.Choices[0].Message.Content
		change := answer
		if i, j := strings.IndexByte(change, '{'), strings.LastIndexByte(change, '}'); i >= 0 && j > i {
			change = change[i : j+1]
		}
		problem := rc.Check([]byte(change))
		if problem == nil {
			return []byte(change), nil
		}
		if try >= tries {
			return nil, fmt.Errorf("agent %s: no valid plan change after %d answers; the last: %w", a.name, try, problem)
		}
		msgs = append(msgs, statefmt.Message{Role: "assistant", Content: answer},
			statefmt.Message{Role: "user", Content: "That plan change was refused:\n" + problem.Error() + "\nAnswer with the corrected JSON only."})
	}
}

// parsePlan reads a plan from a model's answer (JSON, possibly in a code fence or with text
// around it) and checks it; it returns what is wrong, or "".
func parsePlan(answer string, known func(string) bool) ([]task.PlanStep, string) {
	s := answer
	if i, j := strings.IndexByte(s, '{'), strings.LastIndexByte(s, '}'); i >= 0 && j > i {
		s = s[i : j+1]
	}
	var p struct {
		Steps []task.PlanStep `json:"steps"`
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, "the answer is not the JSON object asked for (" + err.Error() + ")"
	}
	if errs := task.CheckPlan(p.Steps, known); len(errs) > 0 {
		var msgs []string
		for _, e := range errs {
			msgs = append(msgs, e.Msg)
		}
		return nil, strings.Join(msgs, "; ")
	}
	return p.Steps, ""
}

// oaState is the driver's part of the loop snapshot (AgentLoopSnapshot.Data).
type oaState struct {
	// RepeatKey is the last tool call (name and arguments) and RepeatCount how many times in a
	// row the model asked for it.
	RepeatKey   string `json:"repeatKey,omitempty"`
	RepeatCount int    `json:"repeatCount,omitempty"`
	// UsageTokens is the prompt and completion tokens of the last response, at UsageMessages
	// messages: the base of the context-size estimate.
	UsageTokens   int `json:"usageTokens,omitempty"`
	UsageMessages int `json:"usageMessages,omitempty"`
	Compactions   int `json:"compactions,omitempty"`
}

const defaultSystemPrompt = "You are an agent working on a task in a workspace, through the tools you are given. " +
	"Use them to do the work, check what you did, and when the step is done, answer with a short final report and no tool call."

func (a *Agent) RunStep(ctx context.Context, sc *agent.StepContext) (string, error) {
	loop := sc.Resume
	var st oaState
	if loop == nil {
		loop = &statefmt.AgentLoopSnapshot{Messages: []statefmt.Message{
			{Role: "system", Content: cmp.Or(strings.TrimSpace(a.cfg.Instructions), defaultSystemPrompt)},
			{Role: "user", Content: agent.StepPrompt(sc)},
		}}
	} else if len(loop.Data) > 0 {
		if err := json.Unmarshal(loop.Data, &st); err != nil {
			return "", &agent.StepError{Msg: fmt.Sprintf("agent %s: the saved loop state does not read: %v", a.name, err)}
		}
	}
	save := func() error {
		var err error
		if loop.Data, err = statefmt.JSONOf(st); err != nil {
			return err
		}
		return sc.Save(loop)
	}
	specs := a.toolSpecs(sc)
	for {
		// Tool calls the last answer asked for and that have no result yet run first (after a
		// resume, those the crash cut short).
		if call, ok := pendingCall(loop.Messages); ok {
			content, err := a.callTool(ctx, sc, &st, call, loop.Iteration)
			if err != nil {
				return "", err
			}
			loop.Messages = append(loop.Messages, statefmt.Message{Role: "tool", ToolCallID: call.ID, Name: call.Name, Content: content})
			if err := save(); err != nil {
				return "", err
			}
			continue
		}
		if loop.Iteration >= a.cfg.MaxTurns {
			return "", &agent.StepError{Msg: fmt.Sprintf("agent %s: no final answer after %d model turns (maxTurns)", a.name, a.cfg.MaxTurns)}
		}
		if err := sc.CheckBudget(); err != nil {
			return "", err
		}
		if compacted, err := a.compactIfNeeded(ctx, sc, loop, &st); err != nil {
			return "", err
		} else if compacted {
			if err := save(); err != nil {
				return "", err
			}
		}
		start := sc.Clock.Now()
		resp, err := a.complete(ctx, sc, loop.Messages, specs)
		if err != nil {
			return "", err
		}
		loop.Iteration++
		sc.CountIteration()
		st.UsageTokens, st.UsageMessages = resp.Usage.PromptTokens+resp.Usage.CompletionTokens, len(loop.Messages)+1
		if sc.ReportTokens != nil {
			sc.ReportTokens(resp.tokens())
		}
		msg := resp.Choices[0].Message
		reply := statefmt.Message{Role: "assistant", Content: msg.Content, ToolCalls: callsOf(msg.ToolCalls, loop.Iteration)}
		loop.Messages = append(loop.Messages, reply)
		ev := event.Event{Type: event.Iteration, Iteration: loop.Iteration, DurationMs: event.Ms(sc.Clock.Now().Sub(start)), Outcome: event.IterCompleted,
			Usage: &event.Usage{InputTokens: int64(max(0, resp.Usage.PromptTokens)), OutputTokens: int64(max(0, resp.Usage.CompletionTokens)),
				Model: cmp.Or(resp.Model, a.cfg.Model)}}
		if len(reply.ToolCalls) > 0 {
			names := make([]string, len(reply.ToolCalls))
			for i, tc := range reply.ToolCalls {
				names[i] = tc.Name
			}
			ev.Outcome, ev.Message = "tool_calls", strings.Join(names, ", ")
		}
		sc.Emit(ev)
		if len(reply.ToolCalls) == 0 {
			return strings.TrimSpace(msg.Content), nil
		}
		if err := save(); err != nil {
			return "", err
		}
	}
}

// callsOf are the tool calls of a reply (turn), each with an id of its own: a result is matched
// to its call by id, and a call sent without one, or with the id of an earlier call of the reply
// (some servers number them per turn, or not at all), gets a new one, so that none goes unrun.
func callsOf(calls []oaToolCall, turn int) []statefmt.MessageToolCall {
	var out []statefmt.MessageToolCall
	seen := map[string]bool{}
	for _, tc := range calls {
		seen[tc.ID] = true
	}
	used := map[string]bool{}
	for i, tc := range calls {
		id := tc.ID
		if id == "" || used[id] {
			id = fmt.Sprintf("call_%d_%d", turn, i)
			for k := 1; used[id] || seen[id]; k++ {
				id = fmt.Sprintf("call_%d_%d_%d", turn, i, k)
			}
		}
		used[id] = true
		out = append(out, statefmt.MessageToolCall{ID: id, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	return out
}

// pendingCall is the first tool call of the last assistant message that has no result yet.
func pendingCall(msgs []statefmt.Message) (statefmt.MessageToolCall, bool) {
	last := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "assistant" {
			last = i
			break
		}
	}
	if last < 0 {
		return statefmt.MessageToolCall{}, false
	}
	done := map[string]bool{}
	for _, m := range msgs[last+1:] {
		if m.Role == "tool" {
			done[m.ToolCallID] = true
		}
	}
	for _, tc := range msgs[last].ToolCalls {
		if !done[tc.ID] {
			return tc, true
		}
	}
	return statefmt.MessageToolCall{}, false
}

// callTool runs one tool call the model asked for and returns what the model is told. Tool
// failures, refusals and bad arguments are told to the model; a budget stop, a gate or a
// cancellation is returned as an error and ends the attempt.
func (a *Agent) callTool(ctx context.Context, sc *agent.StepContext, st *oaState, call statefmt.MessageToolCall, turn int) (string, error) {
	var args map[string]any
	if strings.TrimSpace(call.Arguments) != "" {
		if err := json.Unmarshal([]byte(call.Arguments), &args); err != nil {
			return fmt.Sprintf("error: the arguments of %s are not a JSON object (%v); call it again with valid JSON", call.Name, err), nil
		}
	}
	canon, _ := statefmt.JSONOf(args)
	key := call.Name + "\x00" + string(canon)
	if key == st.RepeatKey {
		st.RepeatCount++
	} else {
		st.RepeatKey, st.RepeatCount = key, 1
	}
	if n := a.cfg.DoomLoop; st.RepeatCount >= n {
		why := fmt.Sprintf("the model asked for %s %s %d times in a row", call.Name, canon, st.RepeatCount)
		if st.RepeatCount < 2*n {
			sc.Emit(event.Event{Type: event.Warning, Tool: call.Name, Message: "doom loop: " + why + "; the call was blocked and the model told"})
			return fmt.Sprintf("blocked: you have called %s with these same arguments %d times in a row, and the result will not change. "+
				"Do something different: other arguments, another tool, or your final answer.", call.Name, st.RepeatCount), nil
		}
		// Told and still at it: a human decides whether it may go on.
		var rejected *agent.RejectedError
		err := sc.AskHuman(fmt.Sprintf("doom_loop:%d", turn), why+", after being told to stop; approve to let it run the call (and go on), reject to fail the step")
		switch {
		case errors.As(err, &rejected):
			return "", &agent.StepError{Msg: fmt.Sprintf("agent %s: stuck calling %s %s; %v", a.name, call.Name, canon, err)}
		case err != nil:
			return "", err
		}
		st.RepeatCount = 0
	}
	res, err := sc.Tools.Call(ctx, call.Name, args)
	var se *agent.StepError
	if err != nil && !errors.As(err, &se) {
		return "", err
	}
	return toolMessage(res), nil
}

// toolMessage is how a tool result reads to the model.
func toolMessage(res statefmt.ToolResult) string {
	var b strings.Builder
	if !res.Success {
		fmt.Fprintf(&b, "error (%s): %s\n", res.ErrorKind, res.Error)
	}
	b.WriteString(res.Output)
	if len(res.Data) > 0 && res.Output == "" {
		b.Write(res.Data)
	}
	if res.Truncated {
		b.WriteString("\n[output truncated]")
	}
	return cmp.Or(strings.TrimRight(b.String(), "\n"), "(no output)")
}

// Wire types of the chat-completions API (the fields harness-edge uses).
type (
	oaMessage struct {
		Role       string       `json:"role"`
		Content    *string      `json:"content"`
		Name       string       `json:"name,omitempty"`
		ToolCallID string       `json:"tool_call_id,omitempty"`
		ToolCalls  []oaToolCall `json:"tool_calls,omitempty"`
	}
	oaToolCall struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	oaTool struct {
		Type     string `json:"type"`
		Function struct {
			Name        string         `json:"name"`
			Description string         `json:"description,omitempty"`
			Parameters  map[string]any `json:"parameters"`
		} `json:"function"`
	}
	oaRequest struct {
		Model       string      `json:"model"`
		Messages    []oaMessage `json:"messages"`
		Tools       []oaTool    `json:"tools,omitempty"`
		Temperature *float64    `json:"temperature,omitempty"`
	}
	// ChatResponse is a chat-completions response (the fields harness-edge reads).
	ChatResponse struct {
		Choices []struct {
			Message struct {
				Content   string       `json:"content"`
				ToolCalls []oaToolCall `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		// Model is the model that answered (the request's, or a more exact name).
		Model string `json:"model"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
			TotalTokens      int `json:"total_tokens"`
		} `json:"usage"`
	}
)

// tokens is what the response used: its total, or, from servers that report none, the sum of
// the prompt's and the completion's.
func (r ChatResponse) tokens() int64 {
	return int64(cmp.Or(r.Usage.TotalTokens, r.Usage.PromptTokens+r.Usage.CompletionTokens))
}

// DecodeChatResponse reads a chat-completions response body: it must be JSON with at least one
// choice. (Fuzzed: it never panics.)
func DecodeChatResponse(body []byte) (ChatResponse, error) {
	var r ChatResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return r, fmt.Errorf("the response is not chat-completions JSON: %v (body: %s)", err, agent.Tail(string(body), 200))
	}
	if len(r.Choices) == 0 {
		return r, fmt.Errorf("the response has no choices (body: %s)", agent.Tail(string(body), 200))
	}
	return r, nil
}

func wireMessages(msgs []statefmt.Message) []oaMessage {
	out := make([]oaMessage, len(msgs))
	for i, m := range msgs {
		w := oaMessage{Role: m.Role, Name: m.Name, ToolCallID: m.ToolCallID}
		if m.Role != "tool" {
			w.Name = ""
		}
		if m.Content != "" || len(m.ToolCalls) == 0 {
			c := m.Content
			w.Content = &c
		}
		for _, tc := range m.ToolCalls {
			var t oaToolCall
			t.ID, t.Type, t.Function.Name, t.Function.Arguments = tc.ID, "function", tc.Name, tc.Arguments
			w.ToolCalls = append(w.ToolCalls, t)
		}
		out[i] = w
	}
	return out
}

// complete sends one chat-completions request, retrying 429 and 5xx answers, malformed bodies
// and timeouts (as transient, honouring Retry-After) up to the task's retry limit.
func (a *Agent) complete(ctx context.Context, sc *agent.StepContext, msgs []statefmt.Message, specs []oaTool) (ChatResponse, error) {
	body, err := json.Marshal(oaRequest{Model: a.cfg.Model, Messages: wireMessages(msgs), Tools: specs, Temperature: a.cfg.Temperature})
	if err != nil {
		return ChatResponse{}, &agent.StepError{Msg: fmt.Sprintf("agent %s: request: %v", a.name, err)}
	}
	var key string
	if a.cfg.APIKeyEnv != "" {
		if key = os.Getenv(a.cfg.APIKeyEnv); key == "" {
			return ChatResponse{}, &agent.StepError{Msg: fmt.Sprintf("agent %s: the environment variable %s (apiKeyEnv) is not set", a.name, a.cfg.APIKeyEnv)}
		}
	}
	retry := sc.Task.Retry
	var delay time.Duration
	for tries := 0; ; tries++ {
		resp, wait, err := a.post(ctx, sc.Clock, body, key)
		if err == nil {
			return resp, nil
		}
		var se *agent.StepError
		if ctx.Err() != nil || !errors.As(err, &se) || !se.Transient || tries >= retry.Retries() {
			if se != nil && se.Transient {
				se.Msg = fmt.Sprintf("%s (after %d tries)", se.Msg, tries+1)
			}
			return ChatResponse{}, err
		}
		delay = tools.NextDelay(retry, delay, rand.Float64())
		if wait > 0 { // the server said how long (within reason)
			delay = min(wait, time.Hour)
		}
		sc.Emit(event.Event{Type: event.Warning, Message: fmt.Sprintf("model request failed (%s); retrying in %v", se.Msg, delay.Round(time.Millisecond))})
		if err := sc.Clock.Sleep(ctx, delay); err != nil {
			return ChatResponse{}, err
		}
	}
}

// post sends one request. Errors are *StepError (transient for 429, 5xx, timeouts, connection
// failures and malformed bodies), with the wait a Retry-After header asked for.
func (a *Agent) post(ctx context.Context, clk clock.Clock, body []byte, key string) (ChatResponse, time.Duration, error) {
	rctx, cancel := clock.WithTimeout(ctx, clk, a.cfg.RequestTimeout.Duration)
	defer cancel()
	url := strings.TrimRight(a.cfg.Endpoint, "/") + "/chat/completions"
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return ChatResponse{}, 0, &agent.StepError{Msg: fmt.Sprintf("agent %s: %v", a.name, err)}
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return ChatResponse{}, 0, ctx.Err()
		case clock.TimedOut(rctx):
			return ChatResponse{}, 0, &agent.StepError{Transient: true, Msg: fmt.Sprintf("agent %s: the model did not answer within %v (requestTimeout)", a.name, a.cfg.RequestTimeout.Duration)}
		}
		return ChatResponse{}, 0, &agent.StepError{Transient: true, Msg: fmt.Sprintf("agent %s: %v", a.name, scrub(err.Error(), key))}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		if ctx.Err() != nil {
			return ChatResponse{}, 0, ctx.Err()
		}
		return ChatResponse{}, 0, &agent.StepError{Transient: true, Msg: fmt.Sprintf("agent %s: reading the response: %v", a.name, err)}
	}
	if resp.StatusCode != http.StatusOK {
		msg := fmt.Sprintf("agent %s: %s %s: %s", a.name, url, resp.Status, scrub(errorMessage(data), key))
		transient := resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500
		return ChatResponse{}, retryAfter(resp.Header.Get("Retry-After"), clk.Now()), &agent.StepError{Transient: transient, Msg: msg}
	}
	r, err := DecodeChatResponse(data)
	if err != nil {
		return ChatResponse{}, 0, &agent.StepError{Transient: true, Msg: fmt.Sprintf("agent %s: %v", a.name, err)}
	}
	return r, 0, nil
}

// errorMessage is the message of an API error body ({"error": {"message": ...}}), else the body.
func errorMessage(body []byte) string {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && len(e.Error) > 0 {
		var inner struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(e.Error, &inner) == nil && inner.Message != "" {
			return inner.Message
		}
		var s string
		if json.Unmarshal(e.Error, &s) == nil && s != "" {
			return s
		}
	}
	return agent.Tail(strings.TrimSpace(string(body)), 500)
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	if s, err := strconv.Atoi(strings.TrimSpace(h)); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// scrub keeps a secret out of a message (one too short to be a real key would only garble it).
func scrub(msg, secret string) string {
	if len(secret) < 8 {
		return msg
	}
	return strings.ReplaceAll(msg, secret, "[api key]")
}

// toolSpecs describes the agent's tools to the model.
func (a *Agent) toolSpecs(sc *agent.StepContext) []oaTool {
	var out []oaTool
	for _, name := range a.cfg.Tools {
		var t oaTool
		t.Type, t.Function.Name = "function", name
		if spec, ok := builtinSpecs[name]; ok {
			t.Function.Description, t.Function.Parameters = spec.desc, spec.params
		} else {
			cfg := tools.Settings(sc.Task, name)
			t.Function.Description = cmp.Or(cfg.Description, "Runs the task's "+name+" tool.")
			t.Function.Parameters = cfg.Parameters
			if t.Function.Parameters == nil {
				t.Function.Parameters = map[string]any{"type": "object"}
			}
		}
		out = append(out, t)
	}
	return out
}

func obj(required []string, props map[string]any) map[string]any {
	return map[string]any{"type": "object", "properties": props, "required": required}
}

func param(typ, desc string) map[string]any { return map[string]any{"type": typ, "description": desc} }

var builtinSpecs = map[string]struct {
	desc   string
	params map[string]any
}{
	"read_file": {"Read a text file of the workspace, by lines.", obj([]string{"path"}, map[string]any{
		"path": param("string", "path relative to the workspace"), "offset": param("integer", "first line, from 1"), "limit": param("integer", "most lines to read")})},
	"write_file": {"Write a file of the workspace (created or replaced).", obj([]string{"path", "content"}, map[string]any{
		"path": param("string", "path relative to the workspace"), "content": param("string", "the whole new content")})},
	"edit_file": {"Replace text in a file of the workspace: old must occur exactly once unless all is true.", obj([]string{"path", "old", "new"}, map[string]any{
		"path": param("string", "path relative to the workspace"), "old": param("string", "text to replace"), "new": param("string", "replacement"), "all": param("boolean", "replace every occurrence")})},
	"glob": {"List the workspace files matching a pattern (** crosses directories).", obj([]string{"pattern"}, map[string]any{
		"pattern": param("string", "e.g. src/**/*.go")})},
	"grep": {"Search the workspace's files for a regular expression.", obj([]string{"pattern"}, map[string]any{
		"pattern": param("string", "a regular expression"), "path": param("string", "directory to search (default: the workspace)"), "glob": param("string", "only files matching this pattern")})},
	"bash": {"Run a bash command in the workspace.", obj([]string{"command"}, map[string]any{
		"command": param("string", "the command line"), "timeout": param("string", "e.g. 30s (at most the tool's limit)")})},
	"git_status": {"Show the workspace's git status: branch, changed and untracked files.", obj([]string{}, map[string]any{
		"paths": paths})},
	"git_diff": {"Show changes in the workspace's git repository: unstaged, staged, or against a ref or range.", obj([]string{}, map[string]any{
		"paths": paths, "staged": param("boolean", "the staged changes"), "ref": param("string", "a commit or range, e.g. HEAD~1 or main..HEAD")})},
	"git_log": {"List commits of the workspace's git repository, newest first.", obj([]string{}, map[string]any{
		"paths": paths, "limit": param("integer", "most commits to list (default 20)"), "ref": param("string", "a commit or range, e.g. main..HEAD")})},
	"git_commit": {"Commit the workspace's changes (all of them, or only the paths given).", obj([]string{"message"}, map[string]any{
		"message": param("string", "the commit message"), "paths": paths})},
}

// paths is the schema of the git tools' paths argument.
var paths = map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "paths relative to the workspace (default: all)"}

// estimateTokens is the conversation's size in tokens: the last response's usage for the
// messages it covered, plus about one token per four bytes for the rest (or for all, when the
// server reports no usage).
func estimateTokens(msgs []statefmt.Message, st *oaState) int {
	from, base := 0, 0
	if st.UsageTokens > 0 && st.UsageMessages <= len(msgs) {
		from, base = st.UsageMessages, st.UsageTokens
	}
	n := 0
	for _, m := range msgs[from:] {
		n += len(m.Content) + 16
		for _, tc := range m.ToolCalls {
			n += len(tc.Name) + len(tc.Arguments) + 16
		}
	}
	return base + n/4
}

// compactIfNeeded replaces the older turns by a summary when the conversation reached the
// threshold of the context window. The system prompt, the step's prompt and the ProtectTurns
// most recent turns (an assistant message with its tool results) are kept as they are.
func (a *Agent) compactIfNeeded(ctx context.Context, sc *agent.StepContext, loop *statefmt.AgentLoopSnapshot, st *oaState) (bool, error) {
	before := estimateTokens(loop.Messages, st)
	if float64(before) < a.cfg.Compaction.Threshold*float64(a.cfg.ContextWindow) {
		return false, nil
	}
	msgs := loop.Messages
	head := 0 // the system prompt and the step's prompt stay
	if head < len(msgs) && msgs[head].Role == "system" {
		head++
	}
	if head < len(msgs) && msgs[head].Role == "user" {
		head++
	}
	tailStart, turns := len(msgs), 0
	for i := len(msgs) - 1; i >= head; i-- {
		if msgs[i].Role == "assistant" {
			turns++
			if turns > a.cfg.Compaction.ProtectTurns {
				break
			}
			tailStart = i
		}
	}
	if tailStart-head < 2 {
		return false, nil // nothing old enough to compact
	}
	middle := msgs[head:tailStart]
	var note statefmt.Message
	outcome := "summarised"
	summary, err := a.summarise(ctx, sc, middle)
	switch {
	case ctx.Err() != nil:
		return false, ctx.Err()
	case err == nil && strings.TrimSpace(summary) != "":
		note = statefmt.Message{Role: "user", Content: fmt.Sprintf("[Summary of %d earlier messages, compacted to fit the context window]\n%s", len(middle), strings.TrimSpace(summary))}
	default:
		outcome = "dropped"
		why := "it came back empty"
		if err != nil {
			why = err.Error()
		}
		note = statefmt.Message{Role: "user", Content: fmt.Sprintf("[%d earlier messages were dropped to fit the context window (summarising them failed: %s). "+
			"Look at the workspace to see what was done.]", len(middle), why)}
	}
	loop.Messages = slices.Concat(msgs[:head], []statefmt.Message{note}, msgs[tailStart:])
	st.UsageTokens, st.UsageMessages = 0, 0
	st.Compactions++
	after := estimateTokens(loop.Messages, st)
	sc.Emit(event.Event{Type: event.Compaction, Outcome: outcome, Message: fmt.Sprintf("%d messages compacted into one: about %d tokens before, %d after (window %d)",
		len(middle), before, after, a.cfg.ContextWindow)})
	return true, nil
}

// summarise asks the model for a summary of messages (no tools, one try per retry policy).
func (a *Agent) summarise(ctx context.Context, sc *agent.StepContext, msgs []statefmt.Message) (string, error) {
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "[%s] %s\n", m.Role, agent.Tail(m.Content, 2000))
		for _, tc := range m.ToolCalls {
			fmt.Fprintf(&b, "  called %s %s\n", tc.Name, agent.Tail(tc.Arguments, 500))
		}
	}
	resp, err := a.complete(ctx, sc, []statefmt.Message{
		{Role: "system", Content: "You summarise an agent's work so far for the agent itself, which will continue from your summary alone. " +
			"Keep: decisions, facts learned, files changed and their state, what failed and why, what is left to do. Be concise."},
		{Role: "user", Content: b.String()},
	}, nil)
	if err != nil {
		return "", err
	}
	if sc.ReportTokens != nil {
		sc.ReportTokens(resp.tokens())
	}
	return resp.Choices[0].Message.Content, nil
}
