#!/bin/sh
# fake-claude.sh: a stand-in for `claude -p --output-format json` (or `codex exec --json`, or a
# plain-text agent) in the loop tests. It reads its prompt on stdin, keeps a copy of it in
# prompt.N (and appends it to prompts.log), appends "started N" to runs.log, writes partN.txt,
# prints a line of progress on stderr, and ends with its final message in the format asked for.
# Environment:
#   FAKE_FORMAT=claude|codex|text  the output format (default claude)
#   FAKE_PROMISE_AT=N              keep the completion promise ($HARNESS_EDGE_PROMISE) in
#                                  iteration N (default 3)
#   FAKE_PAUSE_AT="N M", FAKE_PAUSE=S
#                                  in iterations N and M, write working.N and wait S seconds
#                                  halfway, printing a line on stdout every 0.2 s
#   FAKE_RELEASE=FILE              with FAKE_PAUSE_AT, wait until FILE exists instead (at most
#                                  60 s): the test says when the iteration may go on
#   FAKE_EMPTY_AT=N, FAKE_EMPTY_TIMES=K, FAKE_STATE=DIR
#                                  the first K runs of iteration N print nothing and change
#                                  nothing in the workspace (the count is kept in DIR)
#   FAKE_COST=USD                  the cost each iteration reports (default 0.0125)
set -eu
prompt=$(cat)
n=${HARNESS_EDGE_ITERATION:?run me from harness-edge}
promise=${HARNESS_EDGE_PROMISE:-DONE}
if [ "${FAKE_EMPTY_AT:-}" = "$n" ]; then
	count=$(cat "$FAKE_STATE/empty" 2>/dev/null || echo 0)
	if [ "$count" -lt "${FAKE_EMPTY_TIMES:-1}" ]; then
		echo $((count + 1)) > "$FAKE_STATE/empty"
		exit 0
	fi
fi
printf '%s' "$prompt" > "prompt.$n"
printf '%s\n=====\n' "$prompt" >> prompts.log
echo "started $n" >> runs.log
echo "iteration $n: reading the workspace" >&2
case " ${FAKE_PAUSE_AT:-} " in *" $n "*)
	echo $$ > "working.$n"
	if [ -n "${FAKE_RELEASE:-}" ]; then
		end=$(( $(date +%s) + 60 ))
	else
		end=$(( $(date +%s) + ${FAKE_PAUSE:-1} ))
	fi
	i=0
	while [ "$(date +%s)" -lt "$end" ]; do
		if [ -n "${FAKE_RELEASE:-}" ] && [ -e "$FAKE_RELEASE" ]; then
			break
		fi
		i=$((i + 1))
		echo "tick $i"
		sleep 0.2
	done
	;;
esac
echo "part $n" > "part$n.txt"
if [ "$n" -ge "${FAKE_PROMISE_AT:-3}" ]; then
	msg="All parts are written. <promise>$promise</promise>"
else
	msg="Wrote part $n; more to do."
fi
cost=${FAKE_COST:-0.0125}
case ${FAKE_FORMAT:-claude} in
claude)
	printf '{"type":"result","subtype":"success","is_error":false,"duration_ms":2417,"duration_api_ms":2290,"num_turns":2,"result":"%s","session_id":"5c0a9e2e-3a4b-4d1c-9f00-00000000000%s","total_cost_usd":%s,"usage":{"input_tokens":%s,"cache_creation_input_tokens":512,"cache_read_input_tokens":2048,"output_tokens":%s,"server_tool_use":{"web_search_requests":0},"service_tier":"standard"}}\n' \
		"$msg" "$n" "$cost" "$((1000 + n))" "$((200 + n))"
	;;
codex)
	printf '{"type":"thread.started","thread_id":"0199a213-81c0-7800-8aa1-bbab2a035a5%s"}\n' "$n"
	printf '{"type":"turn.started"}\n'
	printf '{"type":"item.completed","item":{"id":"item_0","type":"reasoning","text":"**Writing part %s**"}}\n' "$n"
	printf '{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"bash -lc ls","aggregated_output":"part1.txt\\n","exit_code":0,"status":"completed"}}\n'
	printf '{"type":"item.completed","item":{"id":"item_2","type":"agent_message","text":"%s"}}\n' "$msg"
	printf '{"type":"turn.completed","usage":{"input_tokens":%s,"cached_input_tokens":%s,"output_tokens":%s}}\n' "$((1000 + n))" 512 "$((200 + n))"
	;;
*)
	printf '%s\n' "$msg"
	;;
esac
