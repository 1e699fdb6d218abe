package command

import (
	"encoding/json"
	"math"
	"strings"

	"github.com/harness-edge/harness-edge/statefmt/event"
)

// The structured output of the two CLI agents people run in Ralph loops, read for what the
// loop needs: the final message (the promise and the next prompt's feedback are read from it),
// whether the agent itself says the run failed, and the model use and cost it reports.
//
// Claude Code, `claude -p --output-format json` (one object) or `stream-json` (JSON lines, the
// last of which is the same object):
//
//	{"type":"result","subtype":"success","is_error":false,"duration_ms":2417,"num_turns":2,
//	 "result":"...","session_id":"...","total_cost_usd":0.0125,
//	 "usage":{"input_tokens":12,"cache_creation_input_tokens":512,"cache_read_input_tokens":2048,"output_tokens":201,...}}
//
// Codex, `codex exec --json` (JSON lines):
//
//	{"type":"thread.started","thread_id":"..."}
//	{"type":"turn.started"}
//	{"type":"item.completed","item":{"id":"item_2","type":"agent_message","text":"..."}}
//	{"type":"turn.completed","usage":{"input_tokens":24763,"cached_input_tokens":24448,"output_tokens":122}}
//	{"type":"turn.failed","error":{"message":"..."}}  or  {"type":"error","message":"..."}
//
// An error line followed by turn.completed is a stream retry that succeeded ("Reconnecting...
// 1/5"), not a failure. Codex reports no cost; its input_tokens include the cached ones, which Usage counts apart.

// Report is what an agent's structured output said about its run.
type Report struct {
	// Format is "claude" or "codex".
	Format string
	// Text is the final message (the result, or the last agent message); HasText says there
	// was one.
	Text    string
	HasText bool
	// IsError is the agent's own word that the run failed (is_error, turn.failed, error);
	// ErrorText says how, when it said.
	IsError   bool
	ErrorText string
	Usage     event.Usage
}

// agentDoc is one JSON document of either format; fields of the other stay zero.
type agentDoc struct {
	Type string `json:"type"`
	// Claude Code's result.
	IsError      *bool    `json:"is_error"`
	Result       *string  `json:"result"`
	SessionID    string   `json:"session_id"`
	TotalCostUSD *float64 `json:"total_cost_usd"`
	Usage        *struct {
		InputTokens   int64 `json:"input_tokens"`
		OutputTokens  int64 `json:"output_tokens"`
		CacheCreation int64 `json:"cache_creation_input_tokens"`
		CacheRead     int64 `json:"cache_read_input_tokens"`
		CachedInput   int64 `json:"cached_input_tokens"` // codex
	} `json:"usage"`
	// Codex.
	ThreadID string `json:"thread_id"`
	Item     *struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"item"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
	Message string `json:"message"`
}

// ParseReport reads an iteration's stdout as Claude Code's or Codex's JSON output; ok is false
// when it is neither (plain text, or another program's JSON). It reads one JSON document, or
// JSON lines (skipping lines that are not JSON), and never panics: the output is whatever a
// third-party program printed.
func ParseReport(stdout string) (r Report, ok bool) {
	s := strings.TrimSpace(StripANSI(stdout))
	if s == "" || s[0] != '{' {
		// JSON lines may follow a line of text; a plain-text answer has no line starting a
		// JSON object of either format, and is left to FinalText.
		if !strings.Contains(s, "\n{") {
			return Report{}, false
		}
	}
	var docs []agentDoc
	var one agentDoc
	if json.Unmarshal([]byte(s), &one) == nil {
		docs = append(docs, one)
	} else {
		for _, line := range strings.Split(s, "\n") {
			line = strings.TrimSpace(line)
			if !strings.HasPrefix(line, "{") {
				continue
			}
			var d agentDoc
			if json.Unmarshal([]byte(line), &d) == nil {
				docs = append(docs, d)
			}
		}
	}
	for _, d := range docs {
		switch d.Type {
		case "result": // Claude Code: the run's outcome, usage and cost, all at once
			if d.Result == nil && d.IsError == nil && d.Usage == nil && d.TotalCostUSD == nil {
				continue
			}
			r.Format, ok = "claude", true
			if d.Result != nil {
				r.Text, r.HasText = *d.Result, true
			}
			r.IsError = d.IsError != nil && *d.IsError
			r.Usage = event.Usage{SessionID: d.SessionID}
			if u := d.Usage; u != nil {
				r.Usage.InputTokens, r.Usage.OutputTokens = clampTokens(u.InputTokens), clampTokens(u.OutputTokens)
				r.Usage.CacheReadTokens, r.Usage.CacheWriteTokens = clampTokens(u.CacheRead), clampTokens(u.CacheCreation)
			}
			if c := d.TotalCostUSD; c != nil && *c > 0 && !math.IsInf(*c, 0) && !math.IsNaN(*c) {
				r.Usage.CostUSD = *c
			}
		case "thread.started":
			r.Format, ok = "codex", true
			r.Usage.SessionID = d.ThreadID
		case "item.completed":
			if d.Item != nil && d.Item.Type == "agent_message" {
				r.Format, ok = "codex", true
				r.Text, r.HasText = d.Item.Text, true
			}
		case "turn.completed":
			if r.Format == "codex" && r.IsError {
				// Codex prints an error line for each stream retry ("Reconnecting... 1/5") and
				// fails the turn (turn.failed) only when the error was fatal: a turn that then
				// completed did not fail.
				r.IsError, r.ErrorText = false, ""
			}
			if u := d.Usage; u != nil {
				r.Format, ok = "codex", true
				cached := min(clampTokens(u.CachedInput), clampTokens(u.InputTokens))
				r.Usage.InputTokens += clampTokens(u.InputTokens) - cached
				r.Usage.CacheReadTokens += cached
				r.Usage.OutputTokens += clampTokens(u.OutputTokens)
			}
		case "turn.failed", "error":
			if r.Format == "claude" {
				continue
			}
			r.Format, ok = "codex", true
			r.IsError = true
			switch {
			case d.Error != nil && d.Error.Message != "":
				r.ErrorText = d.Error.Message
			case d.Message != "":
				r.ErrorText = d.Message
			}
		}
	}
	if r.IsError && r.ErrorText == "" && r.Format == "claude" {
		r.ErrorText = r.Text
	}
	return r, ok
}

// clampTokens keeps a reported count sane: never negative, never near overflow when summed.
func clampTokens(n int64) int64 { return min(max(n, 0), 1<<40) }
