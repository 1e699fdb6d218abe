package event

import (
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// appendJSON appends e as encoding/json's Marshal writes it: the same fields in the same order,
// the same omitempty rules, string escaping and number formats (a property test holds the two
// byte-equal). It exists because Marshal's reflection cost about 13 µs of every step's CPU (a
// step writes three or four events), more than the rest of the step's events together.
func appendJSON(b []byte, e *Event) ([]byte, error) {
	b = append(b, `{"type":`...)
	b = appendString(b, string(e.Type))
	b = append(b, `,"harnessId":`...)
	b = appendString(b, e.HarnessID)
	b = append(b, `,"ts":"`...)
	b, err := e.Time.AppendText(b) // what Time.MarshalJSON writes between its quotes
	if err != nil {
		return nil, fmt.Errorf("event time: %w", err)
	}
	b = append(b, '"')
	b = appendUint(b, `,"n":`, e.N)
	b = appendStr(b, `,"from":`, string(e.From))
	b = appendStr(b, `,"to":`, string(e.To))
	b = appendStr(b, `,"reason":`, e.Reason)
	b = appendStr(b, `,"stepId":`, e.StepID)
	b = appendInt(b, `,"attempt":`, int64(e.Attempt))
	if len(e.Blocked) > 0 {
		b = append(b, `,"blocked":[`...)
		for i, s := range e.Blocked {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, s)
		}
		b = append(b, ']')
	}
	b = appendInt(b, `,"steps":`, int64(e.Steps))
	if b, err = appendFloat(b, `,"delayMs":`, e.DelayMs); err != nil {
		return nil, err
	}
	b = appendStr(b, `,"tool":`, e.Tool)
	if b, err = appendFloat(b, `,"durationMs":`, e.DurationMs); err != nil {
		return nil, err
	}
	if e.Success != nil {
		b = append(b, `,"success":`...)
		b = strconv.AppendBool(b, *e.Success)
	}
	b = appendUint(b, `,"seq":`, e.Seq)
	b = appendStr(b, `,"kind":`, e.Kind)
	b = appendInt(b, `,"storedBytes":`, int64(e.StoredBytes))
	b = appendStr(b, `,"gateId":`, e.GateID)
	b = appendStr(b, `,"action":`, e.Action)
	if b, err = appendFloat(b, `,"waitMs":`, e.WaitMs); err != nil {
		return nil, err
	}
	b = appendStr(b, `,"outcome":`, e.Outcome)
	b = appendStr(b, `,"subAgentId":`, e.SubAgentID)
	b = appendStr(b, `,"agent":`, e.Agent)
	b = appendInt(b, `,"iteration":`, int64(e.Iteration))
	if e.ExitCode != nil {
		b = append(b, `,"exitCode":`...)
		b = strconv.AppendInt(b, int64(*e.ExitCode), 10)
	}
	b = appendStr(b, `,"phase":`, e.Phase)
	if b, err = appendFloat(b, `,"cpuMs":`, e.CPUMs); err != nil {
		return nil, err
	}
	b = appendInt(b, `,"rssBytes":`, e.RSSBytes)
	if u := e.Usage; u != nil {
		b = append(b, `,"usage":{`...)
		start := len(b)
		b = appendInt(b, `,"inputTokens":`, u.InputTokens)
		b = appendInt(b, `,"outputTokens":`, u.OutputTokens)
		b = appendInt(b, `,"cacheReadTokens":`, u.CacheReadTokens)
		b = appendInt(b, `,"cacheWriteTokens":`, u.CacheWriteTokens)
		if b, err = appendFloat(b, `,"costUsd":`, u.CostUSD); err != nil {
			return nil, err
		}
		b = appendStr(b, `,"sessionId":`, u.SessionID)
		b = appendStr(b, `,"model":`, u.Model)
		if len(b) > start { // the first field carries no comma
			b = append(b[:start], b[start+1:]...)
		}
		b = append(b, '}')
	}
	b = appendStr(b, `,"by":`, e.By)
	b = appendStr(b, `,"message":`, e.Message)
	return append(b, '}'), nil
}

// appendStr appends the key and s, unless s is empty (omitempty).
func appendStr(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return appendString(append(b, key...), s)
}

// appendInt appends the key and n, unless n is 0 (omitempty).
func appendInt(b []byte, key string, n int64) []byte {
	if n == 0 {
		return b
	}
	return strconv.AppendInt(append(b, key...), n, 10)
}

// appendUint appends the key and n, unless n is 0 (omitempty).
func appendUint(b []byte, key string, n uint64) []byte {
	if n == 0 {
		return b
	}
	return strconv.AppendUint(append(b, key...), n, 10)
}

// appendFloat appends the key and f as encoding/json formats a float64, unless f is 0
// (omitempty). Like encoding/json it refuses NaN and the infinities.
func appendFloat(b []byte, key string, f float64) ([]byte, error) {
	if f == 0 {
		return b, nil
	}
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, fmt.Errorf("json: unsupported value: %s", strconv.FormatFloat(f, 'g', -1, 64))
	}
	b = append(b, key...)
	format := byte('f')
	if abs := math.Abs(f); abs < 1e-6 || abs >= 1e21 {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' { // e-09 is written e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string the way encoding/json does by default: ", \ and the
// control characters escaped (\b \f \n \r \t short), <, > and & as \u003c, \u003e and \u0026,
// each invalid UTF-8 byte as \ufffd, and U+2028 and U+2029 escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
