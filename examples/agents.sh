#!/usr/bin/env bash
# The agent drivers' demo behind `make demo-agents`:
#   1. examples/ralph.yaml: the command driver's Ralph loop around a stand-in CLI agent; the
#      process is killed with SIGKILL halfway through iteration 2 and resumed;
#   2. examples/openai.yaml: the openai driver against the fake OpenAI-compatible server.
# Usage: examples/agents.sh [BINARY] [FAKE_SERVER]   (default: bin/harness-edge bin/fake-openai)
set -euo pipefail
bin=$(realpath "${1:-bin/harness-edge}")
fake=$(realpath "${2:-bin/fake-openai}")
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/harness-edge-agents.XXXXXX")
server=
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
mkdir -p "$work/examples"
cp -r "$here/agents" "$here/ralph.yaml" "$here/openai.yaml" "$work/examples/"
he() { "$bin" --store "$work/store" "$@"; }

echo "== 1. the Ralph loop: a CLI agent re-run until it keeps its completion promise"
echo "   (each iteration pauses 1s; the process is killed with SIGKILL in iteration 2)"
export FAKE_AGENT_PAUSE=1
"$bin" --store "$work/store" run --progress "$work/examples/ralph.yaml" > "$work/ralph.out" 2>&1 &
pid=$!
disown "$pid" # else the shell prints its own "Killed" line for it
until [ -e "$work/examples/ralph-workspace/working.2" ]; do
	kill -0 "$pid" 2>/dev/null || { echo "the run ended before the kill"; cat "$work/ralph.out"; exit 1; }
	sleep 0.02
done
kill -9 "$pid"
while kill -0 "$pid" 2>/dev/null; do sleep 0.01; done
sed 's/^/   /' "$work/ralph.out"
echo "   -- killed pid $pid in iteration 2; resuming:"
he resume --progress ralph-example | sed 's/^/   /'
echo "   runs of the agent: $(tr '\n' ' ' < "$work/examples/ralph-workspace/runs.log")(iteration 2 ran twice: once killed)"
echo "   files it wrote: $(cd "$work/examples/ralph-workspace" && ls part*.txt | tr '\n' ' ')"

echo
echo "== 2. the openai driver against a fake OpenAI-compatible server"
"$fake" -addr 127.0.0.1:0 2> "$work/fake.log" &
server=$!
until grep -q 'http://' "$work/fake.log"; do sleep 0.02; done
url=$(grep -o 'http://[^ ]*' "$work/fake.log")
sed -i "s|endpoint: .*|endpoint: \"$url\"|" "$work/examples/openai.yaml"
he run --progress "$work/examples/openai.yaml" | sed 's/^/   /'
echo "   NOTES.md:"
sed 's/^/   | /' "$work/examples/openai-workspace/NOTES.md"
echo "   its durable event log (checkpoints left out):"
he events openai-example | grep -v checkpoint | sed 's/^/   /'
