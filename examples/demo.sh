#!/usr/bin/env bash
# The demo behind `make demo`: run examples/demo.yaml in a durable harness, kill the process
# with SIGKILL part-way, resume the harness from its last checkpoint until it stops at a human
# gate, approve the gate, and let it finish.
# Usage: examples/demo.sh [BINARY]   (default: bin/harness-edge)
set -euo pipefail
bin=$(realpath "${1:-bin/harness-edge}")
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/harness-edge-demo.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp "$here/demo.yaml" "$work/demo.yaml"
he() { "$bin" --store "$work/store" "$@"; }

echo "== 1. run the task; kill -9 the process once two steps have completed"
"$bin" --store "$work/store" run "$work/demo.yaml" --json > "$work/events.jsonl" &
pid=$!
# Not a job of this shell's any more: the shell would print its own "Killed" line for it.
disown "$pid"
until [ "$(grep -c '"type":"step_completed"' "$work/events.jsonl" || true)" -ge 2 ]; do
	kill -0 "$pid" 2>/dev/null || { echo "the run ended before the kill"; cat "$work/events.jsonl"; exit 1; }
	sleep 0.02
done
kill -9 "$pid"
while kill -0 "$pid" 2>/dev/null; do sleep 0.01; done
echo "   killed pid $pid after: $(grep -o '"type":"step_completed","harnessId":"demo","ts":"[^"]*","n":[0-9]*,"stepId":"[a-z]*"' "$work/events.jsonl" | sed 's/.*"stepId":"\([a-z]*\)"/\1/' | tr '\n' ' ')"
echo "   what the store holds now:"
he show demo | sed 's/^/   /'

echo
echo "== 2. resume from the last checkpoint (the step in flight runs again; completed ones do not);"
echo "   the draft runs in a sub-agent, and the critical publish step waits for a human (exit 3)"
status=0
he resume demo || status=$?
[ "$status" -eq 3 ] || { echo "resume exited $status, want 3 (waiting for a human)"; exit 1; }

echo
echo "== 3. a human approves the gate, and the harness finishes"
he approve demo
he resume demo

echo
echo "== 4. what happened, from the durable event log"
he events demo | grep -E 'state_transition|step_|plan_completed|warning|gate|sub_agent' | sed 's/^/   /'
echo
he show demo | sed -n '/^sub-agents/,$p' | sed 's/^/   /'
echo
he inspect demo | tail -n 1 | sed 's/^/   /'
