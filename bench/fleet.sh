#!/usr/bin/env bash
# bench/fleet.sh — agentrt serve (a fleet of plugins in one process): how long
# it takes to start, what each loaded plugin costs in memory, and what serving
# an agent at /agents/NAME/ap/v1 costs against "agentrt run" on the same plugin.
#
#   bench/fleet.sh          (from the repo root, after make build/agentrt and
#                            the echo plugins; about 11 minutes with the defaults)
#
# Parts (each on a freshly started server with an empty temp data dir):
#   start   agentrt serve over N distinct copies of each echo plugin (Go,
#           TinyGo, Rust): each copy gets a custom section of its own, so that
#           wazero, whose compilation cache is keyed by the module's bytes,
#           compiles every one (checked: a cold start adds N cache entries, a
#           warm one none). Cold: an empty --cache dir; warm: a second start
#           with the same one. Time from exec to the "msg=serving" log line
#           (its own timestamp), the server's CPU time by then, and its
#           resident memory (VmRSS) after GET /agents shows all N "ready" and
#           an idle moment. Memory also with 0 and each of BENCH_MEM_NS
#           plugins (warm), and the slope per plugin.
#   http    requests/s through /agents/NAME/ap/v1 of "agentrt serve" (a
#           directory of the echo plugins) against "agentrt run" on the same
#           plugin, alternating within each round: create-task (echo-go), and
#           execute-step on random ones of 100 seeded tasks (echo-rust,
#           echo-go), with bench/wrk's scripts and bench/seed as bench/run.sh.
#           Both servers share one warm compilation cache. The ratio
#           serve/run is computed per round (paired runs).
#
# Environment (defaults in brackets):
#   BENCH_PARTS ["start http"]
#   BENCH_START_ROUNDS [3]  rounds of the start part (a cold start of 20 Go
#                           plugins takes ~30 s of CPU)
#   BENCH_FLEET_N [20]      plugins per language in the timed starts
#   BENCH_MEM_NS ["1 10"]   other fleet sizes whose memory is measured (warm);
#                           0 and BENCH_FLEET_N always are
#   BENCH_LANGS ["go tinygo rust"]
#   BENCH_IDLE [2]          seconds the server idles before its memory is read
#   BENCH_ROUNDS [5]        rounds of the http part
#   BENCH_DURATION [10s], BENCH_WARMUP [3s], BENCH_THREADS [2], BENCH_CONNS [32],
#   BENCH_STEP_TASKS [100]  as in bench/run.sh
#   BENCH_SCENARIOS ["create step-rust step-go"]  (also: step-tinygo)
#   BENCH_OUT               also write the markdown report to this file
#   BENCH_TMP [$TMPDIR or /tmp]  where data and cache dirs go (a real disk)
#   AGENTRT [build/agentrt], PLUGIN_DIR [build/plugins]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BENCH="$ROOT/bench"
cd "$ROOT"

PARTS="${BENCH_PARTS:-start http}"
START_ROUNDS="${BENCH_START_ROUNDS:-3}"
FLEET_N="${BENCH_FLEET_N:-20}"
MEM_NS="${BENCH_MEM_NS:-1 10}"
LANGS="${BENCH_LANGS:-go tinygo rust}"
IDLE="${BENCH_IDLE:-2}"
ROUNDS="${BENCH_ROUNDS:-5}"
DURATION="${BENCH_DURATION:-10s}"
WARMUP="${BENCH_WARMUP:-3s}"
THREADS="${BENCH_THREADS:-2}"
CONNS="${BENCH_CONNS:-32}"
STEP_TASKS="${BENCH_STEP_TASKS:-100}"
SCENARIOS="${BENCH_SCENARIOS:-create step-rust step-go}"
AGENTRT="${AGENTRT:-build/agentrt}"
PLUGIN_DIR="${PLUGIN_DIR:-build/plugins}"
START_TIMEOUT=300 # seconds a fleet may take to print its serving line
READY_TIMEOUT=60  # the same for the http part's servers (warm cache)

log() { printf 'fleet: %s\n' "$*" >&2; }
die() { printf 'fleet: error: %s\n' "$*" >&2; exit 1; }

# ------------------------------------------------------------------ checks
posint() { [[ "$1" =~ ^[1-9][0-9]*$ ]]; }
for p in $PARTS; do
	case "$p" in start | http) ;; *) die "unknown part '$p' in BENCH_PARTS (expected: start http)" ;; esac
done
posint "$START_ROUNDS" && posint "$ROUNDS" || die "BENCH_START_ROUNDS/BENCH_ROUNDS must be positive integers"
posint "$FLEET_N" && ((FLEET_N <= 99)) || die "BENCH_FLEET_N must be from 1 to 99, not '$FLEET_N'"
for n in $MEM_NS; do
	posint "$n" && ((n <= FLEET_N)) || die "BENCH_MEM_NS: '$n' is not from 1 to BENCH_FLEET_N ($FLEET_N)"
done
[[ "$IDLE" =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "BENCH_IDLE must be a number of seconds, not '$IDLE'"
posint "$THREADS" && posint "$CONNS" && ((CONNS >= THREADS)) || die "BENCH_THREADS/BENCH_CONNS must be positive integers, CONNS >= THREADS"
for s in $SCENARIOS; do
	case "$s" in create | step-go | step-tinygo | step-rust) ;; *) die "unknown scenario '$s' in BENCH_SCENARIOS (expected: create step-rust step-go step-tinygo)" ;; esac
done
for l in $LANGS; do
	case "$l" in go | tinygo | rust) ;; *) die "unknown language '$l' in BENCH_LANGS (expected: go tinygo rust)" ;; esac
done
[ -x "$AGENTRT" ] || die "$AGENTRT not found or not executable: run 'make build/agentrt'"
"$AGENTRT" serve --help >/dev/null 2>&1 || die "$AGENTRT has no 'serve' command: rebuild it (go build -o build/agentrt ./cmd/agentrt)"
command -v go >/dev/null 2>&1 || die "go not found on PATH (needed for bench/seed)"
command -v curl >/dev/null 2>&1 || die "curl not found on PATH"
case " $PARTS " in *" http "*)
	scripts/toolchains.sh wrk || die "scripts/toolchains.sh wrk failed"
	command -v wrk >/dev/null 2>&1 || die "wrk still not on PATH after scripts/toolchains.sh wrk"
	;;
esac

# ------------------------------------------------------------------ temp + cleanup
. "$ROOT/bench/lib.sh"
bench_workdir agentrt-fleet

# Snapshot the binary and plugins: others may rebuild them while we run.
mkdir -p "$WORK/bin" "$WORK/plugins"
cp "$AGENTRT" "$WORK/bin/agentrt"
AGENTRT_BIN="$WORK/bin/agentrt"
HAVE=""
for l in go tinygo rust; do
	if [ -f "$PLUGIN_DIR/echo-$l.wasm" ]; then
		cp "$PLUGIN_DIR/echo-$l.wasm" "$WORK/plugins/"
		HAVE="$HAVE $l"
	fi
done
have() { case " $HAVE " in *" $1 "*) return 0 ;; esac; return 1; }
have go || die "$PLUGIN_DIR/echo-go.wasm not found: run 'make $PLUGIN_DIR/echo-go.wasm'"

# ------------------------------------------------------------------ helpers
# status_kib PID FIELD: a field of /proc/PID/status in KiB (VmRSS, RssAnon, RssFile).
status_kib() { awk -v f="$2:" '$1 == f { print $2; exit }' "/proc/$1/status"; }


# server_failed MSG: agentrt misbehaved: show its log and stop everything.
server_failed() {
	local rc
	printf 'fleet: error: %s; server log %s:\n' "$1" "$SERVER_LOG" >&2
	tail -n 40 "$SERVER_LOG" | sed 's/^/    /' >&2
	if [ -n "${SERVER_PID:-}" ] && ! kill -0 "$SERVER_PID" 2>/dev/null; then
		wait "$SERVER_PID" 2>/dev/null && rc=0 || rc=$?
		printf 'fleet: the server exited with status %s\n' "$rc" >&2
		SERVER_PID=""
	fi
	exit 1
}

# launch LOG TIMEOUT CMD...: starts CMD (an agentrt server) with its log in LOG
# and waits for its "msg=serving" line. Sets SERVER_PID, SERVER_URL, READY_MS
# (from just before the exec to the timestamp of that line), READY_TICKS (the
# server's CPU ticks then) and OTHER_CORES (cores the rest of the machine kept
# busy meanwhile).
launch() {
	local logf="$1" timeout="$2" line="" i b0 b1 t0 t1 ts what
	shift 2
	what="agentrt $2"
	SERVER_LOG="$logf"
	b0="$(busy_ticks)"
	t0="$(date +%s%3N)"
	"$@" 2>"$logf" >/dev/null &
	SERVER_PID=$!
	for ((i = 0; i < timeout * 20; i++)); do
		line="$(grep -m1 ' msg=serving ' "$logf" 2>/dev/null)" || true
		[ -n "$line" ] && break
		kill -0 "$SERVER_PID" 2>/dev/null || server_failed "$what exited before it was ready"
		sleep 0.05
	done
	[ -n "$line" ] || server_failed "$what printed no msg=serving line within ${timeout}s"
	READY_TICKS="$(cpu_ticks "$SERVER_PID")"
	b1="$(busy_ticks)"
	t1="$(date +%s%3N)"
	SERVER_URL="$(field "$line" url)"
	ts="$(field "$line" time)"
	READY_MS=$(($(date -d "$ts" +%s%3N) - t0))
	OTHER_CORES="$(awk -v b="$((b1 - b0))" -v s="$READY_TICKS" -v hz="$CLK_TCK" -v ms="$((t1 - t0))" \
		'BEGIN { o = (b - s) / hz / (ms / 1000); printf "%.2f", (o > 0 ? o : 0) }')"
}

# check_agents N: GET /agents must list N agents, every one "ready".
check_agents() {
	local want="$1" body total ready
	body="$(curl -sS --max-time 30 "$SERVER_URL" 2>&1)" || server_failed "GET $SERVER_URL failed: $body"
	total="$(grep -o '"name":' <<<"$body" | wc -l)" || true
	ready="$(grep -o '"state": *"ready"' <<<"$body" | wc -l)" || true
	if [ "$total" != "$want" ] || [ "$ready" != "$want" ]; then
		printf 'fleet: GET /agents answered:\n%s\n' "$body" | head -c 4000 >&2
		server_failed "GET /agents lists $total agents, $ready of them ready; $want expected, all ready"
	fi
}

cache_entries() { if [ -d "$1" ]; then find "$1" -type f | wc -l; else echo 0; fi; }
cache_kib() { if [ -d "$1" ]; then du -sk "$1" | cut -f1; else echo 0; fi; }

# ------------------------------------------------------------------ distinct plugins
# with_section SRC DST TAG: DST is SRC with a custom section (id 0) named
# "agentrt-bench" holding TAG appended: the same code, other bytes, so its own
# entry in wazero's compilation cache.
with_section() {
	local name="agentrt-bench" payload="$3" size
	size=$((1 + ${#name} + ${#payload})) # name length (1-byte LEB128) + name + payload
	((size < 128)) || die "custom section too large for a 1-byte LEB128 size"
	cp "$1" "$2"
	printf "\\x00\\x$(printf %02x "$size")\\x$(printf %02x "${#name}")%s%s" "$name" "$payload" >>"$2"
}

# $WORK/fleet/LANG/N/: N distinct copies of echo-LANG.wasm (the first N of
# FLEET_N, hard links); $WORK/fleet/none/0/ is empty.
make_fleets() {
	local l i n d
	mkdir -p "$WORK/fleet/none/0"
	for l in $LANGS; do
		have "$l" || continue
		d="$WORK/fleet/$l/$FLEET_N"
		mkdir -p "$d"
		for ((i = 1; i <= FLEET_N; i++)); do
			with_section "$WORK/plugins/echo-$l.wasm" "$d/$(printf 'echo-%s-%02d' "$l" "$i").wasm" "$(printf 'fleet-%02d' "$i")"
		done
		[ "$(sha256sum "$d"/*.wasm | cut -d' ' -f1 | sort -u | wc -l)" = "$FLEET_N" ] || die "the $l copies are not all distinct"
		for n in $MEM_NS; do
			[ "$n" = "$FLEET_N" ] && continue
			mkdir -p "$WORK/fleet/$l/$n"
			for ((i = 1; i <= n; i++)); do
				ln "$d/$(printf 'echo-%s-%02d' "$l" "$i").wasm" "$WORK/fleet/$l/$n/"
			done
		done
	done
}

# ------------------------------------------------------------------ part 1: start-up and memory
STARTS="$WORK/starts.tsv"
: >"$STARTS"
RUN_N=0

# fleet_start KIND LANG N ROUND CACHE: one start of serve over $WORK/fleet/LANG/N.
fleet_start() {
	local kind="$1" lang="$2" n="$3" round="$4" cache="$5" dir before after added rss anon file ckib
	RUN_N=$((RUN_N + 1))
	dir="$WORK/run$RUN_N-$kind-$lang-$n"
	before="$(cache_entries "$cache")"
	launch "$dir.log" "$START_TIMEOUT" "$AGENTRT_BIN" serve --plugins "$WORK/fleet/$lang/$n" --addr 127.0.0.1:0 --data "$dir" --cache "$cache"
	[ "$(field "$(grep -m1 ' msg=serving ' "$dir.log")" agents)" = "$n" ] || server_failed "the serving line does not say agents=$n"
	check_agents "$n"
	sleep "$IDLE"
	kill -0 "$SERVER_PID" 2>/dev/null || server_failed "the server died while idle"
	rss="$(status_kib "$SERVER_PID" VmRSS)"
	anon="$(status_kib "$SERVER_PID" RssAnon)"
	file="$(status_kib "$SERVER_PID" RssFile)"
	stop_server
	after="$(cache_entries "$cache")"
	ckib="$(cache_kib "$cache")"
	added=$((after - before))
	if [ "$kind" = cold ] && [ "$added" != "$n" ]; then
		die "a cold start of $n $lang plugins added $added entries to the compilation cache $cache, not $n: wazero did not compile each one separately"
	fi
	if [ "$kind" = warm ] && [ "$added" != 0 ]; then
		die "a warm start of $n $lang plugins added $added entries to the compilation cache: it compiled again"
	fi
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$kind" "$lang" "$n" "$round" "$READY_MS" \
		"$((READY_TICKS * 1000 / CLK_TCK))" "$OTHER_CORES" "$rss" "$anon" "$file" "$added" "$ckib" >>"$STARTS"
	log "$(printf 'start %-4s %-6s N=%-2s round %d: serving after %6.2f s, %6.2f s CPU (others %s cores); RSS %6.1f MiB (anon %.1f, file %.1f); cache +%s entries, %.1f MiB' \
		"$kind" "$lang" "$n" "$round" "$(awk -v v="$READY_MS" 'BEGIN { print v / 1000 }')" \
		"$(awk -v v="$READY_TICKS" -v hz="$CLK_TCK" 'BEGIN { print v / hz }')" "$OTHER_CORES" \
		"$(awk -v v="$rss" 'BEGIN { print v / 1024 }')" "$(awk -v v="$anon" 'BEGIN { print v / 1024 }')" \
		"$(awk -v v="$file" 'BEGIN { print v / 1024 }')" "$added" "$(awk -v v="$ckib" 'BEGIN { print v / 1024 }')")"
}

start_part() {
	local round langs=() l k n cache
	for l in $LANGS; do
		if have "$l"; then langs+=("$l"); else log "start: $PLUGIN_DIR/echo-$l.wasm not found, $l skipped"; fi
	done
	for ((round = 1; round <= START_ROUNDS; round++)); do
		fleet_start cold none 0 "$round" "$WORK/cache-r$round-none"
		for ((k = 0; k < ${#langs[@]}; k++)); do
			l="${langs[$(((k + round - 1) % ${#langs[@]}))]}"
			cache="$WORK/cache-r$round-$l"
			fleet_start cold "$l" "$FLEET_N" "$round" "$cache"
			fleet_start warm "$l" "$FLEET_N" "$round" "$cache"
			for n in $MEM_NS; do
				[ "$n" = "$FLEET_N" ] || fleet_start warm "$l" "$n" "$round" "$cache"
			done
			rm -rf -- "$cache" "$WORK"/run*-"$l"-* # keep the temp dir small
		done
	done
}

# ------------------------------------------------------------------ part 2: serve vs run
RESULTS="$WORK/http.tsv"
: >"$RESULTS"
HTTP_PLUGINS="$WORK/http-plugins" # what serve serves: echo-go, echo-tinygo, echo-rust
HTTP_CACHE="$WORK/http-cache"     # shared by every server of this part, warmed first


# http_server KIND LANG: starts "agentrt run" on echo-LANG or "agentrt serve"
# on the directory of echo plugins; sets BASE to the agent's /ap/v1 URL.
http_server() {
	local kind="$1" lang="$2" dir
	RUN_N=$((RUN_N + 1))
	dir="$WORK/run$RUN_N-$kind-$lang"
	case "$kind" in
	run)
		launch "$dir.log" "$READY_TIMEOUT" "$AGENTRT_BIN" run "$HTTP_PLUGINS/echo-$lang.wasm" --addr 127.0.0.1:0 --data "$dir" --cache "$HTTP_CACHE"
		BASE="$SERVER_URL"
		;;
	serve)
		launch "$dir.log" "$READY_TIMEOUT" "$AGENTRT_BIN" serve --plugins "$HTTP_PLUGINS" --addr 127.0.0.1:0 --data "$dir" --cache "$HTTP_CACHE"
		check_agents "$HTTP_AGENTS"
		BASE="$SERVER_URL/echo-$lang/ap/v1"
		;;
	esac
	SERVER_DIR="$dir"
}

# measure SCENARIO KIND ROUND
measure() {
	local scen="$1" kind="$2" round="$3" lang script ids=""
	case "$scen" in
	create) lang=go script=create_task.lua ;;
	step-*) lang="${scen#step-}" script=execute_step.lua ;;
	esac
	http_server "$kind" "$lang"
	if [ "$script" = execute_step.lua ]; then
		ids="$SERVER_DIR.ids"
		"$WORK/seed" -url "$BASE" -n "$STEP_TASKS" -c 16 -out "$ids" 2>>"$WORK/seed.log" ||
			{ tail -n 5 "$WORK/seed.log" >&2; server_failed "seeding $STEP_TASKS tasks on $kind echo-$lang failed"; }
	fi
	local stats rps p50 p99 errs cores cpu_us others
	stats="$(measure_wrk "$script" "$BASE" "$ids")" # set -e: a failed run ends the script
	read -r rps p50 p99 errs cores cpu_us others <<<"$stats"
	kill -0 "$SERVER_PID" 2>/dev/null || server_failed "$kind died during the $scen run"
	stop_server
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$scen" "$kind" "$round" "$rps" "$p50" "$p99" "$errs" "$cores" "$cpu_us" "$others" >>"$RESULTS"
	log "$(printf '%-11s %-5s round %d: %8.1f req/s  p50 %7.2f ms  p99 %7.2f ms  errors %d  server %.2f cores, %s us CPU/req; wrk+others %.2f cores' \
		"$scen" "$kind" "$round" "$rps" "$p50" "$p99" "$errs" "$cores" "$cpu_us" "$others")"
}

http_part() {
	local s l round k scens=() kinds
	mkdir -p "$HTTP_PLUGINS"
	HTTP_AGENTS=0
	for l in $HAVE; do
		cp "$WORK/plugins/echo-$l.wasm" "$HTTP_PLUGINS/"
		HTTP_AGENTS=$((HTTP_AGENTS + 1))
	done
	for s in $SCENARIOS; do
		case "$s" in step-*) have "${s#step-}" || { log "http: $PLUGIN_DIR/echo-${s#step-}.wasm not found, $s skipped"; continue; } ;; esac
		scens+=("$s")
	done
	# Compile every plugin once, so that no measured server compiles.
	RUN_N=$((RUN_N + 1))
	launch "$WORK/run$RUN_N-warmup.log" "$START_TIMEOUT" "$AGENTRT_BIN" serve --plugins "$HTTP_PLUGINS" --addr 127.0.0.1:0 --data "$WORK/run$RUN_N-warmup" --cache "$HTTP_CACHE"
	check_agents "$HTTP_AGENTS"
	stop_server
	for ((round = 1; round <= ROUNDS; round++)); do
		# The two servers alternate: run first in odd rounds, serve first in even ones.
		if ((round % 2)); then kinds="run serve"; else kinds="serve run"; fi
		for s in "${scens[@]}"; do
			for k in $kinds; do
				measure "$s" "$k" "$round"
			done
		done
		rm -rf -- "$WORK"/run*-run-* "$WORK"/run*-serve-*
	done
}

# ------------------------------------------------------------------ machine
case " $PARTS " in *" http "*)
	log "building bench/seed"
	go build -o "$WORK/seed" ./bench/seed || die "go build ./bench/seed failed"
	;;
esac
MACHINE="$(
	echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "- nproc: $(nproc); CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); memory: $(free -h | awk '/^Mem:/ { print $2 }')"
	echo "- kernel: $(uname -sr); load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "- plugins: $(cd "$WORK/plugins" && for f in *.wasm; do printf '%s %s KiB; ' "$f" "$(($(stat -c %s "$f") / 1024))"; done | sed 's/; $//')"
	echo "- data and cache dirs on: $(df -T "$WORK" | awk 'NR == 2 { print $2 " (" $1 ")" }')"
	echo "- $("$AGENTRT_BIN" version 2>/dev/null | head -n 1) (binary sha256 $(sha256sum "$AGENTRT_BIN" | cut -c1-12), repo at $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet HEAD -- 2>/dev/null || echo ' + uncommitted changes'))$(command -v wrk >/dev/null && printf '; %s' "$(wrk --version 2>&1 | head -n 1 | awk '{ print $1, $2 }')")"
	case " $PARTS " in *" start "*) echo "- start: $START_ROUNDS round(s), languages in rotated order; $FLEET_N distinct copies per language (a custom section each); memory read ${IDLE}s after GET /agents showed every agent ready" ;; esac
	case " $PARTS " in *" http "*) echo "- http: wrk -t$THREADS -c$CONNS --timeout 10s, $WARMUP warm-up + $DURATION measured, $ROUNDS round(s), run and serve alternating (run first in odd rounds); fresh server and data dir for every run, one warm compilation cache for all" ;; esac
)"

# ------------------------------------------------------------------ run
START=$SECONDS
case " $PARTS " in *" start "*)
	make_fleets
	start_part
	;;
esac
case " $PARTS " in *" http "*) http_part ;; esac
log "done in $((SECONDS - START))s"

# ------------------------------------------------------------------ report
AWK_LIB='
function median(list,    a, n, i, j, t) {
	n = split(list, a, " ")
	if (n == 0) return ""
	for (i = 2; i <= n; i++) { t = a[i] + 0; for (j = i - 1; j >= 1 && a[j] + 0 > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
	return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function lo(list,    a, n, i, v) { n = split(list, a, " "); v = a[1] + 0; for (i = 2; i <= n; i++) if (a[i] + 0 < v) v = a[i] + 0; return v }
function hi(list,    a, n, i, v) { n = split(list, a, " "); v = a[1] + 0; for (i = 2; i <= n; i++) if (a[i] + 0 > v) v = a[i] + 0; return v }
'
start_report() {
	echo "Start-up: agentrt serve over $FLEET_N distinct echo plugins, from exec to the serving line (median over $START_ROUNDS rounds, range in brackets); cold: empty compilation cache, warm: the same cache again."
	echo
	awk -F'\t' -v N="$FLEET_N" -v langs="none $LANGS" "$AWK_LIB"'
	{
		k = $1 SUBSEP $2 SUBSEP $3
		wall[k] = wall[k] " " $5 / 1000; cpu[k] = cpu[k] " " $6 / 1000; oth[k] = oth[k] " " $7
		added[k] = added[k] " " $11; ckib[k] = ckib[k] " " $12
	}
	END {
		print "| plugins | cold: serving after | cold: server CPU | warm: serving after | warm: server CPU | cold CPU per plugin | warm CPU per plugin | cache entries added (cold) | compiled code per plugin | other load during cold starts |"
		print "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
		n0c = median(cpu["cold" SUBSEP "none" SUBSEP 0])
		printf "| none (0) | %.2f s (%.2f–%.2f) | %.2f s | — | — | — | — | — | — | %.2f cores |\n",
			median(wall["cold" SUBSEP "none" SUBSEP 0]), lo(wall["cold" SUBSEP "none" SUBSEP 0]), hi(wall["cold" SUBSEP "none" SUBSEP 0]), n0c, median(oth["cold" SUBSEP "none" SUBSEP 0])
		nl = split(langs, L, " ")
		for (i = 2; i <= nl; i++) {
			c = "cold" SUBSEP L[i] SUBSEP N; w = "warm" SUBSEP L[i] SUBSEP N
			if (!(c in wall)) continue
			printf "| %d %s | %.2f s (%.2f–%.2f) | %.2f s | %.2f s (%.2f–%.2f) | %.2f s | %.0f ms | %.1f ms | %s | %.1f MiB | %.2f cores |\n",
				N, L[i], median(wall[c]), lo(wall[c]), hi(wall[c]), median(cpu[c]),
				median(wall[w]), lo(wall[w]), hi(wall[w]), median(cpu[w]),
				1000 * (median(cpu[c]) - n0c) / N, 1000 * (median(cpu[w]) - n0c) / N,
				(lo(added[c]) == hi(added[c]) ? lo(added[c]) : lo(added[c]) "–" hi(added[c])),
				median(ckib[c]) / 1024 / N, median(oth[c])
		}
	}' "$STARTS"
	echo
	echo "Memory: VmRSS of agentrt serve, in MiB, with N plugins loaded (warm starts, median over $START_ROUNDS rounds); slope: least-squares fit over N, per plugin."
	echo
	awk -F'\t' -v N="$FLEET_N" -v langs="$LANGS" -v ns="0 $MEM_NS $FLEET_N" "$AWK_LIB"'
	{
		k = $1 SUBSEP $2 SUBSEP $3
		rss[k] = rss[k] " " $8 / 1024; anon[k] = anon[k] " " $9 / 1024
	}
	END {
		m = split(ns, NS, " ")
		hdr = "| plugins"; sep = "|---"
		for (j = 1; j <= m; j++) { hdr = hdr " | N=" NS[j]; sep = sep "|---:" }
		print hdr " | slope per plugin | (RSS(" N ") − RSS(0)) / " N " | N=" N " after a cold start |"
		print sep "|---:|---:|---:|"
		r0 = median(rss["cold" SUBSEP "none" SUBSEP 0])
		nl = split(langs, L, " ")
		for (i = 1; i <= nl; i++) {
			if (!(("warm" SUBSEP L[i] SUBSEP N) in rss)) continue
			row = "| " L[i]; sx = sy = sxx = sxy = 0
			for (j = 1; j <= m; j++) {
				v = (NS[j] == 0) ? r0 : median(rss["warm" SUBSEP L[i] SUBSEP NS[j]])
				row = row sprintf(" | %.1f", v)
				sx += NS[j]; sy += v; sxx += NS[j] * NS[j]; sxy += NS[j] * v
			}
			slope = (m * sxy - sx * sy) / (m * sxx - sx * sx)
			c = "cold" SUBSEP L[i] SUBSEP N
			printf "%s | **%.1f MiB** | %.1f MiB | %.1f (%.1f–%.1f) |\n", row, slope,
				(median(rss["warm" SUBSEP L[i] SUBSEP N]) - r0) / N, median(rss[c]), lo(rss[c]), hi(rss[c])
		}
	}' "$STARTS"
	echo
	echo "Per start (kind, plugins, N, round, ms to serving, server CPU ms, cores used by everything else meanwhile, VmRSS/RssAnon/RssFile KiB, cache entries added, cache KiB):"
	echo
	echo '```'
	sort -t$'\t' -k2,2 -k3,3n -k1,1 -k4,4n "$STARTS" |
		awk -F'\t' '{ printf "%-4s %-6s %2s %2s %7s %7s %5s %8s %8s %7s %3s %7s\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12 }'
	echo '```'
}

http_report() {
	echo "Requests through /agents/NAME/ap/v1 (agentrt serve, a directory of $(echo "$HAVE" | wc -w) echo plugins) against agentrt run on the same plugin: median over $ROUNDS rounds, the ratio serve/run computed per round."
	echo
	awk -F'\t' -v rounds="$ROUNDS" -v steptasks="$STEP_TASKS" "$AWK_LIB"'
	{
		k = $1 SUBSEP $2
		if (!($1 in seen)) { seen[$1] = 1; order[++ns] = $1 }
		rps[k] = rps[k] " " $4; p50[k] = p50[k] " " $5; p99[k] = p99[k] " " $6; errs[k] += $7; cpu[k] = cpu[k] " " $9
		r[$1 SUBSEP $2 SUBSEP $3] = $4; c[$1 SUBSEP $2 SUBSEP $3] = $9
	}
	END {
		name["create"] = "create-task (echo-go)"
		name["step-rust"] = "execute-step, echo-rust (" steptasks " tasks)"
		name["step-go"] = "execute-step, echo-go (" steptasks " tasks)"
		name["step-tinygo"] = "execute-step, echo-tinygo (" steptasks " tasks)"
		print "| scenario | run req/s | serve req/s | serve/run (per-round range) | run µs CPU/req | serve µs CPU/req | CPU/req serve/run (range) | p50 ms run / serve | p99 ms run / serve | errors | target | met |"
		print "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
		for (i = 1; i <= ns; i++) {
			s = order[i]; rl = ""; cl = ""
			for (rd = 1; rd <= rounds; rd++) {
				a = s SUBSEP "run" SUBSEP rd; b = s SUBSEP "serve" SUBSEP rd
				if ((a in r) && (b in r) && r[a] > 0) rl = rl " " r[b] / r[a]
				if ((a in c) && (b in c) && c[a] > 0) cl = cl " " c[b] / c[a]
			}
			mr = median(rl)
			printf "| %s | %.0f (%.0f–%.0f) | %.0f (%.0f–%.0f) | **%.3f** (%.2f–%.2f) | %.0f | %.0f | %.3f (%.2f–%.2f) | %.2f / %.2f | %.1f / %.1f | %d | serve ≥ 0.95 × run | %s |\n",
				name[s], median(rps[s SUBSEP "run"]), lo(rps[s SUBSEP "run"]), hi(rps[s SUBSEP "run"]),
				median(rps[s SUBSEP "serve"]), lo(rps[s SUBSEP "serve"]), hi(rps[s SUBSEP "serve"]),
				mr, lo(rl), hi(rl), median(cpu[s SUBSEP "run"]), median(cpu[s SUBSEP "serve"]),
				median(cl), lo(cl), hi(cl),
				median(p50[s SUBSEP "run"]), median(p50[s SUBSEP "serve"]), median(p99[s SUBSEP "run"]), median(p99[s SUBSEP "serve"]),
				errs[s SUBSEP "run"] + errs[s SUBSEP "serve"], (mr >= 0.95 ? "yes" : "no")
		}
	}' "$RESULTS"
	echo
	echo "Per run (scenario, server, round, req/s, p50 ms, p99 ms, errors, server cores, server CPU µs/req, cores used by wrk and everything else on the machine):"
	echo
	echo '```'
	sort -t$'\t' -k1,1 -k3,3n -k2,2 "$RESULTS" |
		awk -F'\t' '{ printf "%-11s %-5s %2s %9s %8s %8s %6s %6s %6s %6s\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10 }'
	echo '```'
}

REPORT="$(
	echo "$MACHINE"
	case " $PARTS " in *" start "*) echo && start_report ;; esac
	case " $PARTS " in *" http "*) echo && http_report ;; esac
)"
printf '\n%s\n' "$REPORT"
if [ -n "${BENCH_OUT:-}" ]; then
	printf '%s\n' "$REPORT" >"$BENCH_OUT" || die "cannot write $BENCH_OUT"
	log "report written to $BENCH_OUT"
fi
