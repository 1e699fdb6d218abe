package command

import (
	"encoding/json"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// This file reads what a CLI agent printed: its final message, whether it kept its completion
// promise, and whether it hit a rate limit (and until when). All of it is defensive: the output
// is whatever a third-party program wrote, and none of it may panic or loop.

// ansi matches terminal escape sequences: CSI (colours, cursor moves), OSC (titles, links) and
// two-byte escapes. An OSC without its terminator ends at the line's end: a stray one must not
// swallow the rest of the output (and a promise in it). Compiled on first use, as the patterns
// below: every command of the binary would pay for them at start-up otherwise.
var ansi = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b\n]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]`)
})

// StripANSI removes terminal escape sequences and carriage returns.
func StripANSI(s string) string {
	if strings.IndexByte(s, 0x1b) >= 0 {
		s = ansi().ReplaceAllString(s, "")
	}
	return strings.ReplaceAll(s, "\r", "")
}

// textKeys are the JSON keys whose string values hold an agent's message, in the output formats
// of common CLI agents: "result" (claude -p --output-format json / stream-json), "text" (codex
// exec --json items, content blocks), "content" and "message" (chat formats), "response"
// (gemini -o json), "output".
var textKeys = map[string]bool{"result": true, "text": true, "content": true, "message": true, "response": true, "output": true}

// FinalText is an iteration's final message: stdout without terminal escapes, or, when stdout
// is JSON (one document, or JSON lines), the last message text it holds (the text of the last
// document that has any, and within it the last one in document order).
func FinalText(stdout string) string {
	s := strings.TrimSpace(StripANSI(stdout))
	if s == "" || (s[0] != '{' && s[0] != '[') {
		return s
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	last, docs := "", 0
	for {
		text, ok, err := lastText(dec)
		if err == io.EOF {
			break
		}
		if err != nil {
			if docs == 0 {
				return s // not JSON after all: the text as printed
			}
			break // JSON lines followed by text: keep what the JSON said
		}
		docs++
		if ok {
			last = text
		}
	}
	if docs == 0 {
		return s
	}
	return strings.TrimSpace(last)
}

// lastText reads one JSON value from dec and returns the last string it holds under one of
// textKeys (directly, or in an array under one), in document order.
func lastText(dec *json.Decoder) (string, bool, error) {
	type frame struct {
		obj, wantKey bool
		key          string
	}
	var (
		stack []frame
		last  string
		found bool
	)
	afterValue := func() {
		if n := len(stack); n > 0 && stack[n-1].obj {
			stack[n-1].wantKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			if err == io.EOF && len(stack) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return "", false, err
		}
		n := len(stack)
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{':
				stack = append(stack, frame{obj: true, wantKey: true})
			case '[':
				key := ""
				if n > 0 {
					key = stack[n-1].key
				}
				stack = append(stack, frame{key: key})
			default: // '}' or ']'
				stack = stack[:n-1]
				afterValue()
			}
		} else if n > 0 && stack[n-1].obj && stack[n-1].wantKey {
			stack[n-1].key, _ = tok.(string)
			stack[n-1].wantKey = false
		} else {
			if v, ok := tok.(string); ok && n > 0 && textKeys[stack[n-1].key] {
				last, found = v, true
			}
			afterValue()
		}
		if len(stack) == 0 {
			return last, found, nil
		}
	}
}

// withoutEcho cuts every copy of the prompt out of an agent's output (a CLI that echoes its
// prompt), and the blank or quote-marker lines that leaves at the start.
func withoutEcho(text, prompt string) string {
	p := strings.TrimSpace(prompt)
	if p == "" || !strings.Contains(text, p) {
		return text
	}
	lines := strings.Split(strings.ReplaceAll(text, p, ""), "\n")
	for len(lines) > 0 && strings.Trim(lines[0], " \t>") == "" {
		lines = lines[1:]
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

// KeptPromise reports whether text keeps the completion promise: "<promise>PROMISE</promise>"
// anywhere, or PROMISE alone on a line (spaces, backticks and asterisks around it allowed). What
// echoes the prompt does not count: every copy of the prompt is cut out first, and then every
// line that contains a line of the prompt mentioning the promise.
func KeptPromise(text, promise, prompt string) bool {
	promise = strings.TrimSpace(promise)
	if promise == "" {
		return false
	}
	text = StripANSI(text)
	if p := strings.TrimSpace(prompt); p != "" {
		text = strings.ReplaceAll(text, p, "")
	}
	var echoed []string // lines of the prompt that mention the promise among other words
	for _, l := range strings.Split(prompt, "\n") {
		l = strings.TrimSpace(l)
		rest := strings.NewReplacer("<promise>", "", "</promise>", "", promise, "").Replace(l)
		if strings.Contains(l, promise) && strings.Trim(rest, " \t`*") != "" {
			echoed = append(echoed, l)
		}
	}
lines:
	for _, l := range strings.Split(text, "\n") {
		for _, e := range echoed {
			if strings.Contains(l, e) {
				continue lines
			}
		}
		if hasTag(l, promise) || strings.Trim(l, " \t`*") == promise {
			return true
		}
	}
	return false
}

// hasTag reports whether line holds <promise>PROMISE</promise> (spaces inside allowed).
func hasTag(line, promise string) bool {
	for {
		i := strings.Index(line, "<promise>")
		if i < 0 {
			return false
		}
		line = line[i+len("<promise>"):]
		j := strings.Index(line, "</promise>")
		if j < 0 {
			return false
		}
		if strings.TrimSpace(line[:j]) == promise {
			return true
		}
	}
}

// DefaultRateLimitPatterns recognise the limit messages of common CLI agents and APIs: HTTP 429
// with its phrase, "rate limit exceeded/reached", Claude's "usage limit reached" and "You've
// hit your limit", Anthropic's overloaded error, Gemini's RESOURCE_EXHAUSTED.
var DefaultRateLimitPatterns = []string{
	`(?i)\b429\b[^\n]{0,40}too many requests|too many requests[^\n]{0,40}\b429\b|(?:status|http|error|code)[ :=]*429\b`,
	`(?i)\btoo many requests\b`,
	`(?i)\brate[ _-]?limit(?:ed|s)?\b[^\n]{0,30}\b(?:exceeded|reached|hit|error)\b|\brate_limit_error\b|\brate[ -]limited\b`,
	`(?i)\busage limit (?:reached|exceeded)\b`,
	`(?i)\byou(?:'|’)ve (?:hit|reached) your (?:usage |rate )?limit\b`,
	`(?i)\boverloaded_error\b|"type"\s*:\s*"overloaded"`,
	`(?i)\bresource[_ ]exhausted\b`,
}

// RateLimit is a rate-limit message found in an iteration's output.
type RateLimit struct {
	// Match is the text that matched a pattern.
	Match string
	// Reset is when the limit resets, when the output says (zero otherwise).
	Reset time.Time
}

// resetPatterns read when a rate limit resets, compiled on first use.
var resetPatterns = sync.OnceValue(func() *resetRegexps {
	return &resetRegexps{
		epoch:   regexp.MustCompile(`\|\s*(\d{10})\b`),
		in:      regexp.MustCompile(`(?i)(?:try again|retry|resets?|available(?: again)?|wait)\s+(?:in|after)\s+((?:\d+(?:\.\d+)?\s*(?:hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s)\b[\s,]*(?:and\s+)?)+)`),
		after:   regexp.MustCompile(`(?i)retry[- ]after:?\s*(\d+)\b`),
		atISO:   regexp.MustCompile(`(?i)resets?\s+(?:at\s+)?(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)`),
		atClock: regexp.MustCompile(`(?i)resets?\s+(?:at\s+)?(\d{1,2})(?::(\d{2}))?\s*(am|pm)\b`),
		durPart: regexp.MustCompile(`(?i)(\d+(?:\.\d+)?)\s*(hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s)\b`),
	}
})

type resetRegexps struct {
	epoch, in, after, atISO, atClock, durPart *regexp.Regexp
}

// DetectRateLimit looks for a rate-limit message in text with the given patterns; now is the
// time the output was read (for "resets in 2h" and "resets 3pm", local time).
func DetectRateLimit(text string, patterns []*regexp.Regexp, now time.Time) (RateLimit, bool) {
	text = StripANSI(text)
	var rl RateLimit
	for _, p := range patterns {
		if m := p.FindString(text); m != "" {
			rl.Match = m
			break
		}
	}
	if rl.Match == "" {
		return rl, false
	}
	rl.Reset = resetTime(text, now)
	return rl, true
}

// resetTime reads when a limit resets from a message, or returns zero.
func resetTime(text string, now time.Time) time.Time {
	re := resetPatterns()
	if m := re.epoch.FindStringSubmatch(text); m != nil {
		if sec, err := strconv.ParseInt(m[1], 10, 64); err == nil {
			return time.Unix(sec, 0)
		}
	}
	if m := re.in.FindStringSubmatch(text); m != nil {
		var d time.Duration
		for _, p := range re.durPart.FindAllStringSubmatch(m[1], -1) {
			v, _ := strconv.ParseFloat(p[1], 64)
			unit := time.Second
			switch u := strings.ToLower(p[2]); {
			case strings.HasPrefix(u, "h"):
				unit = time.Hour
			case strings.HasPrefix(u, "m"):
				unit = time.Minute
			}
			d += time.Duration(v * float64(unit))
		}
		if d > 0 {
			return now.Add(d)
		}
	}
	if m := re.after.FindStringSubmatch(text); m != nil {
		if sec, err := strconv.Atoi(m[1]); err == nil && sec < 1<<24 {
			return now.Add(time.Duration(sec) * time.Second)
		}
	}
	if m := re.atISO.FindStringSubmatch(text); m != nil {
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05Z0700", "2006-01-02 15:04:05Z07:00", "2006-01-02T15:04"} {
			if t, err := time.Parse(layout, m[1]); err == nil {
				return t
			}
		}
	}
	if m := re.atClock.FindStringSubmatch(text); m != nil {
		h, _ := strconv.Atoi(m[1])
		mins := 0
		if m[2] != "" {
			mins, _ = strconv.Atoi(m[2])
		}
		if h < 1 || h > 12 || mins > 59 {
			return time.Time{}
		}
		h %= 12
		if strings.EqualFold(m[3], "pm") {
			h += 12
		}
		local := now.Local()
		t := time.Date(local.Year(), local.Month(), local.Day(), h, mins, 0, 0, local.Location())
		if !t.After(now) {
			t = t.AddDate(0, 0, 1)
		}
		return t
	}
	return time.Time{}
}
