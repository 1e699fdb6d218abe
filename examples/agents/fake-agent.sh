#!/bin/sh
# fake-agent.sh: a stand-in for a CLI agent such as `claude -p` or `codex exec`, for the command
# driver's example and tests. Like a real one it reads its prompt on stdin, works on the files of
# the workspace, leaves handoff.json for the next session, and prints a final message. It:
#   - echoes its prompt first (some CLIs do): the promise in the prompt must not count;
#   - writes partN.txt in iteration N and keeps the completion promise in iteration 3;
#   - the first time it starts iteration 2, prints a rate-limit message and exits 1 instead;
#   - from iteration 2 on, fails unless its prompt carries the handoff state.
# With --json it prints its final message the way `claude -p --output-format json` does (and
# does not echo the prompt). Environment (pass it with the agent's env: list):
#   FAKE_AGENT_PAUSE=SECONDS  pause halfway through each iteration, in a child process whose pid
#                             it writes to working.N
#   FAKE_AGENT_LINGER=SECONDS stay alive that long after printing the promise (pid in promised.N)
#   FAKE_AGENT_LEFTOVER=SECONDS the child of the pause and of the linger lives this long instead,
#                             and the agent does not wait for it (like a server an agent starts):
#                             when the agent is killed, it outlives it by that much
#   FAKE_AGENT_RESET=TEXT     when the rate limit resets, as the message says it (default "2 seconds")
set -eu
prompt=$(cat)
n=${HARNESS_EDGE_ITERATION:?run me from harness-edge}
promise=${HARNESS_EDGE_PROMISE:-TASK_COMPLETE}
json=false
[ "${1:-}" = "--json" ] && json=true
$json || printf '> %s\n' "$prompt"
say() {
	if $json; then printf '{"type":"result","subtype":"success","is_error":false,"result":"%s"}\n' "$1"; else printf '%s\n' "$1"; fi
}
if [ "$n" -gt 1 ]; then
	case $prompt in
	*"Handoff state"*) ;;
	*) echo "iteration $n got no handoff state in its prompt" >&2; exit 3 ;;
	esac
fi
if [ "$n" = 2 ] && [ ! -e .rate-limited ]; then
	: > .rate-limited
	echo "Claude AI usage limit reached. Try again in ${FAKE_AGENT_RESET:-2 seconds}." >&2
	exit 1
fi
# helper SECONDS MARKER: a child of its own, like a real agent's tools and servers, whose pid
# goes to MARKER; the agent waits SECONDS.
helper() {
	if [ -n "${FAKE_AGENT_LEFTOVER:-}" ]; then
		sleep "$FAKE_AGENT_LEFTOVER" </dev/null >/dev/null 2>&1 &
		echo $! > "$2"
		sleep "$1"
	else
		sleep "$1" &
		echo $! > "$2"
		wait
	fi
}
echo "started $n" >> runs.log
if [ -n "${FAKE_AGENT_PAUSE:-}" ]; then
	helper "$FAKE_AGENT_PAUSE" "working.$n"
fi
echo "part $n" > "part$n.txt"
printf '{"phase": "writing parts", "completed": ["part%s"], "next_step": "part %s"}\n' "$n" "$((n + 1))" > handoff.json
if [ "$n" -ge 3 ]; then
	say "All three parts are written. <promise>$promise</promise>"
	if [ -n "${FAKE_AGENT_LINGER:-}" ]; then
		helper "$FAKE_AGENT_LINGER" "promised.$n"
	fi
else
	say "Wrote part $n; more to do."
fi
