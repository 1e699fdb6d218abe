package event

import (
	"fmt"
	"strconv"

	"github.com/harness-edge/harness-edge/statefmt"
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
	return statefmt.AppendJSONFloat(append(b, key...), f)
}

// appendString appends s as a JSON string the way json.Marshal does, HTML escaping included.
func appendString(b []byte, s string) []byte { return statefmt.AppendJSONString(b, s, true) }
