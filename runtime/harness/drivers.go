package harness

import (
	"fmt"

	"github.com/harness-edge/harness-edge/runtime/agent"
	"github.com/harness-edge/harness-edge/runtime/driver/command"
	"github.com/harness-edge/harness-edge/runtime/driver/openai"
	"github.com/harness-edge/harness-edge/runtime/driver/script"
	"github.com/harness-edge/harness-edge/runtime/task"
)

// newAgent makes the agent named name from its configuration.
func newAgent(name string, cfg *task.Agent) (agent.Agent, error) {
	switch cfg.Driver {
	case "script":
		return script.New(name, cfg.Script), nil
	case "command":
		return command.New(name, cfg)
	case "openai":
		return openai.New(name, cfg), nil
	default:
		return nil, fmt.Errorf("agent %s: the %s driver is not part of this build (available: %v)", name, cfg.Driver, task.Drivers)
	}
}
