// Package runtime will hold the harness runtime: the manager, the harness lifecycle, plans,
// tool calls, gates, sub-agents, the Ralph loop, agent drivers, events and Dream Mode
// (SPEC.md sections 3, 7 and 8).
//
// It is empty on purpose: the runtime core is its own issue, built on the engine bridge and the
// state formats. Nothing here pretends to run a task yet.
package runtime
