# Shared by bench/run.sh and bench/fleet.sh: a temp work dir and the one
# server a script runs at a time, both gone when the script exits, and one
# measured wrk run against that server.
#
#   . bench/lib.sh; bench_workdir agentrt-bench     # sets WORK
#   "$bin" run ... & SERVER_PID=$!; ...
#   stats="$(measure_wrk SCRIPT BASE IDS)"    # rps p50 p99 errors cores cpu_us others
#   stop_server
#
# The caller sets BENCH (the bench dir), THREADS, CONNS, WARMUP, DURATION
# and defines die.

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

# cpu_ticks PID: clock ticks the process has used (user + system).
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
CLK_TCK="$(getconf CLK_TCK)"
# busy_ticks: clock ticks all CPUs of the machine spent busy so far.
busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat; }

# run_wrk SCRIPT DURATION BASE [IDS_FILE]: prints the WRK_RESULT line.
run_wrk() {
	local script="$1" dur="$2" base="$3" ids="${4:-}" out
	local args=(-t"$THREADS" -c"$CONNS" -d"$dur" --timeout 10s -s "$BENCH/wrk/$script" "$base/agent/tasks")
	[ -n "$ids" ] && args+=(-- "$ids")
	out="$(wrk "${args[@]}" 2>&1)" || {
		printf '%s\n' "$out" | sed 's/^/    /' >&2
		die "wrk failed"
	}
	printf '%s\n' "$out" | grep '^WRK_RESULT ' || {
		printf '%s\n' "$out" | sed 's/^/    /' >&2
		die "wrk printed no WRK_RESULT line"
	}
}

field() { # field LINE KEY
	local kv
	for kv in $1; do
		[ "${kv%%=*}" = "$2" ] && { echo "${kv#*=}"; return; }
	done
	echo "?"
}

# measure_wrk SCRIPT BASE [IDS_FILE]: a warm-up run, then a measured one
# against the server $SERVER_PID; prints "rps p50_ms p99_ms errors
# server_cores server_cpu_us_per_request other_cores", where other_cores
# are the machine's busy cores besides the server's: wrk and whatever
# else runs.
measure_wrk() {
	local script="$1" base="$2" ids="${3:-}" t0 t1 m0 m1 line reqs dur errs
	run_wrk "$script" "$WARMUP" "$base" "$ids" >/dev/null
	t0="$(cpu_ticks "$SERVER_PID")"
	m0="$(busy_ticks)"
	line="$(run_wrk "$script" "$DURATION" "$base" "$ids")"
	m1="$(busy_ticks)"
	t1="$(cpu_ticks "$SERVER_PID")"
	reqs="$(field "$line" requests)"
	dur="$(field "$line" duration_s)"
	errs=$(($(field "$line" non2xx) + $(field "$line" connect_err) + $(field "$line" read_err) + $(field "$line" write_err) + $(field "$line" timeouts)))
	printf '%s %s %s %s ' "$(field "$line" rps)" "$(field "$line" p50_ms)" "$(field "$line" p99_ms)" "$errs"
	awk -v a="$t0" -v b="$t1" -v ma="$m0" -v mb="$m1" -v hz="$CLK_TCK" -v d="$dur" -v n="$reqs" \
		'BEGIN { s = (b - a) / hz; o = ((mb - ma) / hz - s) / d; printf "%.2f %.0f %.2f\n", s / d, (n > 0 ? s * 1e6 / n : 0), (o > 0 ? o : 0) }'
}
