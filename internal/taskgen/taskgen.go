// Package taskgen writes big task files for the parser's benchmarks: the task parser's own and
// the benchmark suite's.
package taskgen

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/harness-edge/harness-edge/runtime/task"
)

// Big writes a YAML task file of about size bytes: agents of every driver, a long plan, script
// steps full of durations (the values that once made parsing quadratic), tools and hooks.
func Big(size int) []byte {
	var b strings.Builder
	b.WriteString(`id: big
agent: S
prompt: |
  A long task, written out.
retry: {maxRetries: 2, base: 50ms, factor: 3, maxDelay: 1m}
budget: {toolCalls: 1000, wallClock: 8h}
checkpoint: {interval: 2m}
tools:
  deploy: {command: [sh, -c, "echo deployed"], timeout: 30s, sideEffects: true, replay: skip}
  bash: {allow: ["go *", "make *"], timeout: 10m}
hooks:
  preTool: [{command: [sh, -c, "cat >/dev/null"], tools: [deploy], timeout: 5s}]
agents:
  C: {driver: command, command: [sh, -c, "echo hi"], iterationTimeout: 10m, rateLimit: {wait: 1m, maxWait: 1h}}
  O: {driver: openai, endpoint: "http://127.0.0.1:1/v1", model: m, requestTimeout: 2m, temperature: 0.2}
  S:
    driver: script
    tools: [read_file, write_file, deploy]
    script:
      steps:
`)
	var plan strings.Builder
	plan.WriteString("plan:\n")
	for i := 0; b.Len()+plan.Len() < size; i++ {
		fmt.Fprintf(&b, "        s%d:\n          - {sleep: %dms}\n          - {tool: write_file, args: {path: out/s%d.txt, content: \"step %d, done\"}}\n          - output: \"step %d written\"\n", i, i%50, i, i, i)
		dep := ""
		if i > 0 {
			dep = fmt.Sprintf(", dependsOn: [s%d]", i-1)
		}
		fmt.Fprintf(&plan, "  - {id: s%d, description: \"Write the file of step %d\", agent: S%s}\n", i, i, dep)
	}
	return []byte(b.String() + plan.String())
}

// BigJSON is Big's task as JSON, indented, as a program that writes task files for the
// daemon's API would send it: at most size bytes, and close to it.
func BigJSON(size int) ([]byte, error) {
	tk, err := task.Parse("big.yaml", Big(size/2))
	if err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(tk, "", "  ")
	for err == nil && len(data) > size {
		// Drop the plan's last tenth and their script steps; the others keep their actions.
		cut := len(tk.Plan) * 9 / 10
		for _, st := range tk.Plan[cut:] {
			delete(tk.Agents["S"].Script.Steps, st.ID)
		}
		tk.Plan = tk.Plan[:cut]
		data, err = json.MarshalIndent(tk, "", "  ")
	}
	return data, err
}
