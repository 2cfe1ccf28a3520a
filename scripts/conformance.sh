#!/usr/bin/env bash
# Checks a real agentrt serving PLUGIN, on a free port with a fresh data
# directory, against the Agent Protocol: "agentrt check" (every check,
# spec and strict), then, when COLLECTION is given, the protocol's official
# compliance suite (a Postman collection, run with newman) against the same
# server.
#
#   scripts/conformance.sh AGENTRT PLUGIN [COLLECTION]
#   AGENT=NAME scripts/conformance.sh AGENTRT DIR [COLLECTION]
#
# With a directory of plugins, agentrt serves them all as a fleet ("agentrt
# serve") and the checks run against the agent NAME's base URL,
# http://HOST/agents/NAME, as a client of that one agent would use it.
#
# newman comes from scripts/toolchains.sh ($AGENTRT_CACHE/bin/newman); it is
# needed only with a COLLECTION.
set -euo pipefail

[ $# -eq 2 ] || [ $# -eq 3 ] || { echo "usage: $0 AGENTRT PLUGIN [COLLECTION]" >&2; exit 2; }
bin=$(realpath "$1") plugin=$(realpath "$2") collection=""
[ $# -eq 3 ] && collection=$(realpath "$3")
cache=${AGENTRT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agentrt}
newman="$cache/bin/newman"
if [ -n "$collection" ] && [ ! -x "$newman" ]; then
	echo "conformance: $newman is missing; run scripts/toolchains.sh newman" >&2
	exit 1
fi

work=$(mktemp -d)
server=""
cleanup() {
	[ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
# What the server logged, when a run fails.
failed() {
	echo "conformance: $1 failed against $(basename "$plugin"); the server's log ends:" >&2
	tail -n 20 "$work/server.log" >&2
	exit 1
}

if [ -d "$plugin" ]; then
	[ -n "${AGENT:-}" ] || { echo "conformance: AGENT=NAME names the agent of $plugin to check" >&2; exit 2; }
	"$bin" serve --plugins "$plugin" --addr 127.0.0.1:0 --data "$work/data" 2>"$work/server.log" &
	pattern='s/.*url=\(http:[^ ]*\)\/agents.*/\1\/agents\/'"$AGENT"'/p'
else
	"$bin" run "$plugin" --addr 127.0.0.1:0 --data "$work/data" 2>"$work/server.log" &
	pattern='s/.*url=\(http:[^ ]*\)\/ap\/v1.*/\1/p'
fi
server=$!
url=""
for _ in $(seq 1 600); do
	url=$(sed -n "$pattern" "$work/server.log" | head -1)
	[ -n "$url" ] && break
	kill -0 "$server" 2>/dev/null || { cat "$work/server.log" >&2; echo "conformance: agentrt exited" >&2; exit 1; }
	sleep 0.1
done
[ -n "$url" ] || { cat "$work/server.log" >&2; echo "conformance: agentrt did not start" >&2; exit 1; }

echo "conformance: agentrt check $url ($(basename "$plugin"))"
"$bin" check "$url" || failed "agentrt check"

if [ -n "$collection" ]; then
	# The suite uploads ./test_output.txt, as the protocol's own script sets it up.
	cd "$work"
	echo Washington >test_output.txt
	echo "conformance: running the official suite against $url ($(basename "$plugin"))"
	"$newman" run "$collection" --env-var "url=$url" --color off --disable-unicode || failed "the official suite"
fi
