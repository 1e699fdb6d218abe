package fuzz

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/harness-edge/harness-edge/runtime/driver/command"
	"github.com/harness-edge/harness-edge/runtime/driver/openai"
)

var rateLimitPatterns = func() []*regexp.Regexp {
	var out []*regexp.Regexp
	for _, p := range command.DefaultRateLimitPatterns {
		out = append(out, regexp.MustCompile(p))
	}
	return out
}()

// FuzzAgentOutput feeds arbitrary agent output (what a CLI agent printed, what a model server
// answered) to the readers of the command and openai drivers: none may panic; a promise tag
// appended on a line of its own is always found; the final text of plain text is the text
// without escapes; a rate-limit reset time, when read, is never before the time of reading
// minus a day (nothing absurd) unless the output named an absolute time.
func FuzzAgentOutput(f *testing.F) {
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, out, promiseBytes []byte) {
		s, promise := string(out), string(promiseBytes)
		final := command.FinalText(s)
		if len(final) > len(s) {
			t.Fatalf("the final text (%d bytes) is longer than the output (%d)", len(final), len(s))
		}
		_ = command.KeptPromise(s, promise, s)
		if p := strings.TrimSpace(promise); p != "" && !strings.ContainsAny(p, "\n\r\x1b<>") { // as task validation requires
			if !command.KeptPromise(s+"\n<promise>"+p+"</promise>\n", p, "") {
				t.Fatalf("an appended promise tag was not found (promise %q)", p)
			}
		}
		_, _ = command.DetectRateLimit(s, rateLimitPatterns, now)
		_, _ = openai.DecodeChatResponse(out)
	})
}
