// Package statefmt will hold HarnessState and every persisted format: JSON v1, the canonical
// binary encoding that checkpoints carry, delta ops, the checkpoint record envelope, and
// migrations (SPEC.md sections 3 and 4).
//
// It is empty on purpose: the state formats are their own issue. Nothing here pretends to
// encode a state yet.
package statefmt
