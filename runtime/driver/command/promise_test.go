package command_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/internal/proptest"
	"github.com/harness-edge/harness-edge/runtime/driver/command"
	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"
)

func TestFinalText(t *testing.T) {
	for _, c := range []struct{ name, stdout, want string }{
		{"plain", "working...\nall done\n<promise>DONE</promise>\n", "working...\nall done\n<promise>DONE</promise>"},
		{"ansi and CRLF", "\x1b[32mdone\x1b[0m\r\n\x1b]0;title\x07<promise>DONE</promise>  \r\n", "done\n<promise>DONE</promise>"},
		{"claude json", `{"type":"result","subtype":"success","is_error":false,"duration_ms":12,"result":"Fixed it.\n<promise>DONE</promise>","session_id":"x"}`,
			"Fixed it.\n<promise>DONE</promise>"},
		{"claude stream-json: the result line wins", "{\"type\":\"system\",\"subtype\":\"init\"}\n" +
			"{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"thinking aloud\"}]}}\n" +
			"{\"type\":\"result\",\"result\":\"final words\"}\n", "final words"},
		{"codex jsonl", "{\"type\":\"thread.started\"}\n{\"type\":\"item.completed\",\"item\":{\"type\":\"agent_message\",\"text\":\"<promise>DONE</promise>\"}}\n{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":5}}\n",
			"<promise>DONE</promise>"},
		{"gemini json", `{"response": "ok <promise>DONE</promise>", "stats": {"models": {}}}`, "ok <promise>DONE</promise>"},
		{"a brace that is not JSON", "{oops} not json <promise>DONE</promise>", "{oops} not json <promise>DONE</promise>"},
		{"json then text", "{\"result\":\"first\"}\ntrailing text", "first"},
		{"key named like a text key holds an object", `{"message":{"content":"inner"},"other":"x"}`, "inner"},
		{"empty", "  \n", ""},
	} {
		if got := command.FinalText(c.stdout); got != c.want {
			t.Errorf("%s: FinalText = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestKeptPromise(t *testing.T) {
	prompt := "Step s1: do it\nWhen the step is completely done, and only then, end your final answer with the completion promise: <promise>DONE</promise>\n"
	for _, c := range []struct {
		name, text string
		want       bool
	}{
		{"tag", "did it\n<promise>DONE</promise>", true},
		{"tag inside a line", "All good: <promise>DONE</promise>.", true},
		{"tag with spaces", "<promise> DONE </promise>\n\n", true},
		{"alone on a line", "done\nDONE  \n", true},
		{"alone in backticks or bold", "**DONE**", true},
		{"ansi around it", "\x1b[1m<promise>DONE</promise>\x1b[0m", true},
		{"mentioned in a sentence", "I will say DONE when done", false},
		{"another promise", "<promise>NOT_DONE</promise>", false},
		{"lowercase", "done", false},
		{"the echoed prompt", prompt + "\nstill working", false},
		{"an echoed prompt line with a prefix", "> When the step is completely done, and only then, end your final answer with the completion promise: <promise>DONE</promise>\nworking", false},
		{"echoed prompt, then the real promise", prompt + "\nfinished\n<promise>DONE</promise>", true},
		{"nothing", "", false},
	} {
		if got := command.KeptPromise(c.text, "DONE", prompt); got != c.want {
			t.Errorf("%s: KeptPromise = %v, want %v", c.name, got, c.want)
		}
	}
	// A prompt that carries the bare promise on a line of its own (feedback, say) does not make
	// the agent's own promise line unreadable.
	if !command.KeptPromise("DONE", "DONE", "previous output:\nDONE\n") {
		t.Error("a bare promise line in the prompt hid the agent's promise")
	}
	if command.KeptPromise("anything", "", prompt) {
		t.Error("an empty promise was kept")
	}
}

func TestDetectRateLimit(t *testing.T) {
	var pats []*regexp.Regexp
	for _, p := range command.DefaultRateLimitPatterns {
		pats = append(pats, regexp.MustCompile(p))
	}
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.Local)
	for _, c := range []struct {
		name, text string
		hit        bool
		reset      time.Time
	}{
		{"claude usage limit with epoch", "Claude AI usage limit reached|1795000000", true, time.Unix(1795000000, 0)},
		{"claude limit, local clock time", "You've hit your limit · resets 3pm (Europe/Berlin)", true, time.Date(2026, 11, 21, 15, 0, 0, 0, time.Local)},
		{"clock time already past today", "You’ve reached your usage limit. Resets at 9:30am", true, time.Date(2026, 11, 22, 9, 30, 0, 0, time.Local)},
		{"codex try again in", "You've hit your usage limit. Try again in 2 hours 5 minutes.", true, now.Add(2*time.Hour + 5*time.Minute)},
		{"http 429 with retry-after", "Error: status 429 Too Many Requests\nRetry-After: 30", true, now.Add(30 * time.Second)},
		{"openai style", `{"error":{"type":"rate_limit_error","message":"Rate limit reached for requests"}}`, true, time.Time{}},
		{"anthropic overloaded", `{"type":"error","error":{"type":"overloaded_error"}}`, true, time.Time{}},
		{"gemini", "RESOURCE_EXHAUSTED: quota", true, time.Time{}},
		{"iso reset", "rate limit exceeded; resets at 2026-11-21T12:00:00Z", true, time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)},
		{"ordinary failure", "error: file not found: main.go", false, time.Time{}},
		{"a line number 429", "main.go:429: undefined: x", false, time.Time{}},
		{"talking about rate limiting", "I added a token bucket for the rate limiter.", false, time.Time{}},
	} {
		rl, hit := command.DetectRateLimit(c.text, pats, now)
		if hit != c.hit || !rl.Reset.Equal(c.reset) {
			t.Errorf("%s: hit %v reset %v, want %v %v", c.name, hit, rl.Reset, c.hit, c.reset)
		}
	}
}

// The promise reader over random agent output: text without the promise never completes, not
// even when it echoes the prompt (verbatim, quoted line by line, coloured); the same text with
// the promise tag on a line of its own, or the bare promise alone on a line, completes, also
// when wrapped in escapes or in a CLI's JSON output (read through FinalText).
func TestPropertyPromiseDetection(t *testing.T) {
	words := []string{"done", "DONE", "promise", "<promise>", "</promise>", "task", "complete", "TASK", "iteration", "wrote", "file", "`", "**", "{", "\"result\":"}
	p := proptest.Props(t, 200)
	p.Property("only a kept promise completes", prop.ForAll(func(seed uint64) bool {
		return proptest.Report(t, func() string {
			r := rand.New(rand.NewPCG(seed, 77))
			promise := fmt.Sprintf("P_%d_DONE", r.IntN(1000))
			var lines []string
			for range r.IntN(8) {
				var l []string
				for range 1 + r.IntN(6) {
					l = append(l, words[r.IntN(len(words))])
				}
				lines = append(lines, strings.Join(l, " "))
			}
			text := strings.Join(lines, "\n")
			prompt := "Step s: do it\nWhen the step is completely done, and only then, end your final answer with the completion promise: <promise>" + promise + "</promise>\n"
			echo := []string{prompt + text, "> " + strings.ReplaceAll(prompt, "\n", "\n> ") + "\n" + text, "\x1b[2m" + prompt + "\x1b[0m" + text}[r.IntN(3)]
			if command.KeptPromise(echo, promise, prompt) {
				return fmt.Sprintf("completed without the promise:\n%s", echo)
			}
			kept := []string{"<promise>" + promise + "</promise>", "  " + promise + "  ", "\x1b[1m<promise> " + promise + " </promise>\x1b[0m", "**" + promise + "**"}[r.IntN(4)]
			out := echo + "\n" + kept + "\n"
			switch r.IntN(3) {
			case 1: // claude -p --output-format json
				b, _ := json.Marshal(map[string]any{"type": "result", "is_error": false, "result": text + "\n" + kept})
				out = string(b)
			case 2: // stream-json: the last result line
				first, _ := json.Marshal(map[string]any{"type": "assistant", "message": map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}}})
				last, _ := json.Marshal(map[string]any{"type": "result", "result": kept})
				out = string(first) + "\n" + string(last) + "\n"
			}
			if !command.KeptPromise(command.FinalText(out), promise, prompt) {
				return fmt.Sprintf("a kept promise was missed:\n%q", out)
			}
			return ""
		})
	}, gen.UInt64()))
	p.TestingRun(t)
}
