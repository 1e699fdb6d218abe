package statefmt

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// A Migration upgrades a HarnessState JSON object from schema version From to From+1, in place.
type Migration struct {
	From     int
	Describe string
	Up       func(obj map[string]json.RawMessage) error
}

// migrations is the registry: one entry per older schema version, applied in a chain up to
// SchemaVersion. Versions only grow; an entry is never removed while data of its version may exist.
var migrations = map[int]Migration{
	0: {From: 0, Describe: "draft layout (id, agent, state, toolCalls) to the core field names", Up: migrateV0},
}

// supportedVersions names every schema version DecodeJSON reads.
func supportedVersions() string {
	vs := []int{SchemaVersion}
	for v := range migrations {
		vs = append(vs, v)
	}
	sort.Ints(vs)
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprint(v)
		if v != SchemaVersion {
			parts[i] += " (migrated)"
		}
	}
	return strings.Join(parts, ", ")
}

// migrateJSON upgrades a state of schema version v to SchemaVersion through the registry.
func migrateJSON(data []byte, v int) ([]byte, error) {
	if v > SchemaVersion {
		return nil, fmt.Errorf("schemaVersion %d is newer than this build understands (supported versions: %s); upgrade harness-edge", v, supportedVersions())
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return nil, jsonError(data, err)
	}
	for ; v < SchemaVersion; v++ {
		m, ok := migrations[v]
		if !ok {
			return nil, fmt.Errorf("schemaVersion %d is not supported (supported versions: %s)", v, supportedVersions())
		}
		if err := m.Up(obj); err != nil {
			return nil, fmt.Errorf("migrating schemaVersion %d to %d: %w", v, v+1, err)
		}
		obj["schemaVersion"] = json.RawMessage(fmt.Sprint(v + 1))
	}
	return json.Marshal(obj)
}

// rename moves obj[from] to obj[to], refusing to overwrite.
func rename(obj map[string]json.RawMessage, from, to string) error {
	v, ok := obj[from]
	if !ok {
		return nil
	}
	if _, clash := obj[to]; clash {
		return fmt.Errorf("both %q and %q are present", from, to)
	}
	obj[to] = v
	delete(obj, from)
	return nil
}

// migrateV0 upgrades the draft layout of schema version 0:
//
//	id → harnessId, agent → agentName, state → status, step → currentStepIndex,
//	checkpoints → checkpointCount, toolCalls → toolCallHistory, and in each tool call
//	name → callName, args → arguments, durationMs → duration, retries → retryCount, at → timestamp;
//	totalToolCalls is derived; the core collections are added empty.
func migrateV0(obj map[string]json.RawMessage) error {
	for _, r := range [][2]string{{"id", "harnessId"}, {"agent", "agentName"}, {"state", "status"},
		{"step", "currentStepIndex"}, {"checkpoints", "checkpointCount"}, {"toolCalls", "toolCallHistory"}} {
		if err := rename(obj, r[0], r[1]); err != nil {
			return err
		}
	}
	var calls []map[string]json.RawMessage
	if raw, ok := obj["toolCallHistory"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &calls); err != nil {
			return fmt.Errorf("toolCalls: %w", err)
		}
	}
	for i, c := range calls {
		for _, r := range [][2]string{{"name", "callName"}, {"args", "arguments"}, {"durationMs", "duration"},
			{"retries", "retryCount"}, {"at", "timestamp"}} {
			if err := rename(c, r[0], r[1]); err != nil {
				return fmt.Errorf("toolCalls[%d]: %w", i, err)
			}
		}
	}
	raw, err := json.Marshal(calls)
	if err != nil {
		return err
	}
	if calls == nil {
		raw = []byte("[]")
	}
	obj["toolCallHistory"] = raw
	obj["totalToolCalls"] = json.RawMessage(fmt.Sprint(len(calls)))
	for k, empty := range map[string]string{"subAgentIds": "[]", "subAgentResults": "{}",
		"agentLoopSnapshot": "null", "lastCheckpointAt": "null", "plan": "null"} {
		if _, ok := obj[k]; !ok {
			obj[k] = json.RawMessage(empty)
		}
	}
	return nil
}
