package command_test

import (
	"strings"
	"testing"

	"github.com/harness-edge/harness-edge/internal/proptest"
	"github.com/harness-edge/harness-edge/runtime/driver/command"
	"github.com/harness-edge/harness-edge/statefmt/event"
	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"
)

// The outputs below are those the tools print: Claude Code's `claude -p --output-format json`
// result object (and `stream-json`, whose last line is the same object), and Codex's
// `codex exec --json` JSON lines.
const (
	claudeResult = `{"type":"result","subtype":"success","is_error":false,"duration_ms":2417,"duration_api_ms":2290,"num_turns":2,` +
		`"result":"Fixed the test.\n<promise>DONE</promise>","session_id":"5c0a9e2e-3a4b-4d1c-9f00-000000000001","total_cost_usd":0.0421,` +
		`"usage":{"input_tokens":14,"cache_creation_input_tokens":512,"cache_read_input_tokens":2048,"output_tokens":201,"server_tool_use":{"web_search_requests":0},"service_tier":"standard"}}`
	claudeError = `{"type":"result","subtype":"error_during_execution","is_error":true,"duration_ms":900,"num_turns":1,"result":"API Error: 500 internal error",` +
		`"session_id":"s2","total_cost_usd":0.001,"usage":{"input_tokens":3,"output_tokens":0}}`
	codexLines = `{"type":"thread.started","thread_id":"0199a213-81c0-7800-8aa1-bbab2a035a53"}
{"type":"turn.started"}
{"type":"item.completed","item":{"id":"item_0","type":"reasoning","text":"**Looking at the tests**"}}
{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"bash -lc ls","aggregated_output":"a.go\n","exit_code":0,"status":"completed"}}
{"type":"item.completed","item":{"id":"item_2","type":"agent_message","text":"All green. <promise>DONE</promise>"}}
{"type":"turn.completed","usage":{"input_tokens":24763,"cached_input_tokens":24448,"output_tokens":122}}
`
	codexFailed = `{"type":"thread.started","thread_id":"t9"}
{"type":"turn.started"}
{"type":"error","message":"stream disconnected before completion"}
{"type":"turn.failed","error":{"message":"stream disconnected before completion: 429 Too Many Requests"}}
`
)

func TestParseReport(t *testing.T) {
	for _, c := range []struct {
		name, stdout string
		ok           bool
		want         command.Report
	}{
		{"claude json", claudeResult, true, command.Report{Format: "claude", Text: "Fixed the test.\n<promise>DONE</promise>", HasText: true,
			Usage: event.Usage{InputTokens: 14, OutputTokens: 201, CacheReadTokens: 2048, CacheWriteTokens: 512, CostUSD: 0.0421, SessionID: "5c0a9e2e-3a4b-4d1c-9f00-000000000001"}}},
		{"claude stream-json", `{"type":"system","subtype":"init","session_id":"s1","tools":["Bash"]}` + "\n" +
			`{"type":"assistant","message":{"content":[{"type":"text","text":"thinking"}],"usage":{"input_tokens":9,"output_tokens":1}}}` + "\n" + claudeResult + "\n",
			true, command.Report{Format: "claude", Text: "Fixed the test.\n<promise>DONE</promise>", HasText: true,
				Usage: event.Usage{InputTokens: 14, OutputTokens: 201, CacheReadTokens: 2048, CacheWriteTokens: 512, CostUSD: 0.0421, SessionID: "5c0a9e2e-3a4b-4d1c-9f00-000000000001"}}},
		{"claude error", claudeError, true, command.Report{Format: "claude", Text: "API Error: 500 internal error", HasText: true, IsError: true,
			ErrorText: "API Error: 500 internal error", Usage: event.Usage{InputTokens: 3, CostUSD: 0.001, SessionID: "s2"}}},
		{"codex exec --json", codexLines, true, command.Report{Format: "codex", Text: "All green. <promise>DONE</promise>", HasText: true,
			Usage: event.Usage{InputTokens: 24763 - 24448, CacheReadTokens: 24448, OutputTokens: 122, SessionID: "0199a213-81c0-7800-8aa1-bbab2a035a53"}}},
		{"codex failed turn", codexFailed, true, command.Report{Format: "codex", IsError: true,
			ErrorText: "stream disconnected before completion: 429 Too Many Requests", Usage: event.Usage{SessionID: "t9"}}},
		{"codex reconnected, then completed its turn", `{"type":"thread.started","thread_id":"t10"}
{"type":"turn.started"}
{"type":"error","message":"Reconnecting... 1/5 (stream disconnected before completion: error sending request for url (http://127.0.0.1:8080/v1/responses))"}
{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"Done. <promise>DONE</promise>"}}
{"type":"turn.completed","usage":{"input_tokens":100,"cached_input_tokens":0,"output_tokens":9}}
`, true, command.Report{Format: "codex", Text: "Done. <promise>DONE</promise>", HasText: true,
			Usage: event.Usage{InputTokens: 100, OutputTokens: 9, SessionID: "t10"}}},
		{"a line of text before codex's lines", "Reading prompt from stdin...\n" + codexLines, true, command.Report{Format: "codex", Text: "All green. <promise>DONE</promise>", HasText: true,
			Usage: event.Usage{InputTokens: 24763 - 24448, CacheReadTokens: 24448, OutputTokens: 122, SessionID: "0199a213-81c0-7800-8aa1-bbab2a035a53"}}},
		{"plain text", "All done.\n<promise>DONE</promise>\n", false, command.Report{}},
		{"another program's JSON", `{"response": "ok", "stats": {}}`, false, command.Report{}},
		{"a result key of the wrong type", `{"type":"result","result":{"nested":1},"total_cost_usd":"lots"}`, false, command.Report{}},
		{"a negative cost and counts", `{"type":"result","result":"x","total_cost_usd":-3,"usage":{"input_tokens":-5,"output_tokens":7}}`, true,
			command.Report{Format: "claude", Text: "x", HasText: true, Usage: event.Usage{OutputTokens: 7}}},
	} {
		got, ok := command.ParseReport(c.stdout)
		if ok != c.ok || got != c.want {
			t.Errorf("%s: ParseReport = %+v, %v\nwant %+v, %v", c.name, got, ok, c.want, c.ok)
		}
	}
	if u := (event.Usage{InputTokens: 14, OutputTokens: 201, CacheReadTokens: 2048, CacheWriteTokens: 512}); u.Tokens() != 2775 {
		t.Errorf("Tokens = %d", u.Tokens())
	}
}

// Whatever a program prints, ParseReport returns (no panic), and what it reports is sane.
func TestParseReportNeverPanicsOnAnyOutput(t *testing.T) {
	p := proptest.Props(t, 200)
	pieces := []string{claudeResult, claudeError, codexLines, codexFailed, "{", "}", "\n", `"type":"result"`, `{"type":"turn.completed","usage":{"input_tokens":1e30}}`,
		`{"type":"item.completed","item":null}`, `{"type":"result","usage":null}`, "\x1b[31m", "text", `[1,2]`, `{"type":"error"}`}
	p.Property("ParseReport holds on mixed and cut output", prop.ForAll(func(idx []int, cut int) bool {
		var b strings.Builder
		for _, i := range idx {
			b.WriteString(pieces[i%len(pieces)])
		}
		s := b.String()
		s = s[:min(len(s), cut%(len(s)+1))]
		return proptest.Report(t, func() string {
			r, ok := command.ParseReport(s)
			switch {
			case ok && r.Format != "claude" && r.Format != "codex":
				return "format " + r.Format
			case !ok && r != (command.Report{}):
				return "a report without a format"
			case r.Usage.InputTokens < 0 || r.Usage.OutputTokens < 0 || r.Usage.CostUSD < 0:
				return "negative use"
			}
			return ""
		})
	}, gen.SliceOf(gen.IntRange(0, 1000)), gen.IntRange(0, 1<<20)))
	p.TestingRun(t)
}
