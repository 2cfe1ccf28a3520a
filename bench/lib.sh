# Shared by bench/run.sh and bench/fleet.sh: a temp work dir and the one
# server a script runs at a time, both gone when the script exits.
#
#   . bench/lib.sh; bench_workdir agentrt-bench     # sets WORK
#   "$bin" run ... & SERVER_PID=$!; ...; stop_server

# bench_workdir makes the temp dir $WORK (PREFIX.XXXXXX under $BENCH_TMP,
# $TMPDIR or /tmp) and sets the traps that stop the server and remove it.
bench_workdir() {
	local root="${BENCH_TMP:-${TMPDIR:-/tmp}}"
	WORK="$(mktemp -d "$root/$1.XXXXXX")" || die "cannot create a temp dir in $root"
	SERVER_PID=""
	trap bench_cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
}

# stop_server stops the server $SERVER_PID: politely for 10 s, then not.
stop_server() {
	if [ -n "$SERVER_PID" ]; then
		kill "$SERVER_PID" 2>/dev/null || true
		local i
		for ((i = 0; i < 100; i++)); do
			kill -0 "$SERVER_PID" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "$SERVER_PID" 2>/dev/null || true
		wait "$SERVER_PID" 2>/dev/null || true
		SERVER_PID=""
	fi
}

bench_cleanup() {
	stop_server
	rm -rf -- "$WORK"
}
