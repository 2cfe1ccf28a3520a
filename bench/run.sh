#!/usr/bin/env bash
# bench/run.sh — agentrt against the reference JS Agent Protocol SDK
# (npm agent-protocol 1.0.5), side by side in one run, with wrk.
#
#   bench/run.sh            (from the repo root; `make bench` builds first)
#
# Scenarios (each on a freshly started server with an empty temp data dir):
#   create  POST /ap/v1/agent/tasks {"input":"hello","additional_input":{"n":1}}
#           agentrt (echo-go plugin, which has no task handler) vs JS SDK
#   get     GET /ap/v1/agent/tasks/{id}: 10,000 tasks seeded first, random ids
#   step    POST /ap/v1/agent/tasks/{id}/steps {"input":"hi"} on random ones of
#           100 seeded tasks: agentrt with echo-go, echo-tinygo, echo-rust
#           (each when its .wasm exists) vs the JS SDK's minimal echo agent;
#           and agentrt with --snapshots=false (init-LANG: every call runs the
#           plugin's initialization) for the languages in BENCH_INIT
# Every scenario runs every server once per round; the order of the servers
# rotates from round to round. The table gives the median over the rounds.
#
# Environment (defaults in brackets):
#   BENCH_ROUNDS [2]        rounds
#   BENCH_DURATION [10s]    measured wrk run per scenario and server
#   BENCH_WARMUP [3s]       unmeasured wrk run just before it
#   BENCH_THREADS [2]       wrk threads
#   BENCH_CONNS [32]        wrk connections
#   BENCH_SEED_TASKS [10000] tasks stored before get-task
#   BENCH_STEP_TASKS [100]  tasks the steps are spread over
#   BENCH_SCENARIOS ["create get step"]
#   BENCH_INIT [go]         languages (empty: none) whose echo step is also measured with
#                           --snapshots=false (init-go, init-tinygo, init-rust)
#   BENCH_OUT               also write the markdown report to this file
#   BENCH_TMP [$TMPDIR or /tmp]  where the temp data dirs go (use a disk, not tmpfs:
#                           agentrt fsyncs every commit)
#   AGENTRT [build/agentrt], PLUGIN_DIR [build/plugins]
#   BENCH_BASELINE          another agentrt binary (an earlier build) to measure
#                           beside AGENTRT in the same run: its servers are
#                           base-go, base-tinygo, base-rust, with the same plugins.
#                           The Go step's ≥ 10× target is against the build before
#                           snapshots: git worktree add /tmp/before c268a34 &&
#                           (cd /tmp/before && go build -o /tmp/agentrt-before ./cmd/agentrt)
#   BENCH_BASELINE_PLUGINS  the plugins the base-* servers run instead (a directory of
#                           echo-*.wasm built by an earlier kit); with BENCH_BASELINE
#                           set to AGENTRT it measures a change to the kits alone
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BENCH="$ROOT/bench"
cd "$ROOT"

ROUNDS="${BENCH_ROUNDS:-2}"
DURATION="${BENCH_DURATION:-10s}"
WARMUP="${BENCH_WARMUP:-3s}"
THREADS="${BENCH_THREADS:-2}"
CONNS="${BENCH_CONNS:-32}"
SEED_TASKS="${BENCH_SEED_TASKS:-10000}"
STEP_TASKS="${BENCH_STEP_TASKS:-100}"
SCENARIOS="${BENCH_SCENARIOS:-create get step}"
INIT_LANGS="${BENCH_INIT-go}"
AGENTRT="${AGENTRT:-build/agentrt}"
BASELINE="${BENCH_BASELINE:-}"
PLUGIN_DIR="${PLUGIN_DIR:-build/plugins}"
BASE_PLUGIN_DIR="${BENCH_BASELINE_PLUGINS:-$PLUGIN_DIR}"
JS_VERSION=1.0.5
READY_TIMEOUT=60 # seconds a server may take to print its url= line

log() { printf 'bench: %s\n' "$*" >&2; }
die() { printf 'bench: error: %s\n' "$*" >&2; exit 1; }

# ------------------------------------------------------------------ checks
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "BENCH_ROUNDS must be a positive integer, not '$ROUNDS'"
[[ "$THREADS" =~ ^[1-9][0-9]*$ && "$CONNS" =~ ^[1-9][0-9]*$ ]] || die "BENCH_THREADS/BENCH_CONNS must be positive integers"
((CONNS >= THREADS)) || die "BENCH_CONNS ($CONNS) must be >= BENCH_THREADS ($THREADS)"
for s in $SCENARIOS; do
	case "$s" in create | get | step) ;; *) die "unknown scenario '$s' in BENCH_SCENARIOS (expected: create get step)" ;; esac
done
for l in $INIT_LANGS; do
	case "$l" in go | tinygo | rust) ;; *) die "unknown language '$l' in BENCH_INIT (expected: go tinygo rust)" ;; esac
done
[ -x "$AGENTRT" ] || die "$AGENTRT not found or not executable: run 'make build/agentrt' (or 'make bench')"
[ -z "$BASELINE" ] || [ -x "$BASELINE" ] || die "BENCH_BASELINE $BASELINE not found or not executable"
[ -z "${BENCH_BASELINE_PLUGINS:-}" ] || [ -n "$BASELINE" ] || die "BENCH_BASELINE_PLUGINS needs BENCH_BASELINE (the binary the base-* servers run; AGENTRT's own for a change to the kits alone)"
# base-go serves create and get: the baseline's plugins must hold it.
[ -z "$BASELINE" ] || [ -f "$BASE_PLUGIN_DIR/echo-go.wasm" ] || die "$BASE_PLUGIN_DIR/echo-go.wasm not found: BENCH_BASELINE_PLUGINS must hold the baseline's echo-go.wasm"
[ -f "$PLUGIN_DIR/echo-go.wasm" ] || die "$PLUGIN_DIR/echo-go.wasm not found: run 'make $PLUGIN_DIR/echo-go.wasm' (or 'make bench')"
command -v go >/dev/null 2>&1 || die "go not found on PATH (needed for bench/seed)"
command -v node >/dev/null 2>&1 || die "node not found on PATH: install Node.js 20 (apt-get install nodejs npm)"
command -v npm >/dev/null 2>&1 || die "npm not found on PATH: install it (apt-get install npm)"

# wrk comes from Debian through the project's toolchain script (quick when cached).
scripts/toolchains.sh wrk || die "scripts/toolchains.sh wrk failed"
command -v wrk >/dev/null 2>&1 || die "wrk still not on PATH after scripts/toolchains.sh wrk"

# The JS SDK, pinned by bench/js/package-lock.json; node_modules is not committed.
if [ "$(node -p "try{require('$BENCH/js/node_modules/agent-protocol/package.json').version}catch(e){''}" 2>/dev/null)" != "$JS_VERSION" ]; then
	log "npm ci in bench/js (agent-protocol $JS_VERSION)"
	(cd "$BENCH/js" && npm ci --no-audit --no-fund --loglevel=error >&2) ||
		die "npm ci in bench/js failed (is the npm registry reachable?)"
fi

# ------------------------------------------------------------------ temp + cleanup
. "$ROOT/bench/lib.sh"
bench_workdir agentrt-bench

# Snapshot the binary and plugins: others may rebuild them while we run.
mkdir -p "$WORK/bin" "$WORK/plugins"
cp "$AGENTRT" "$WORK/bin/agentrt"
for l in go tinygo rust; do
	if [ -f "$PLUGIN_DIR/echo-$l.wasm" ]; then cp "$PLUGIN_DIR/echo-$l.wasm" "$WORK/plugins/"; fi
done
AGENTRT_BIN="$WORK/bin/agentrt"
BASE_BIN=""
if [ -n "$BASELINE" ]; then
	cp "$BASELINE" "$WORK/bin/agentrt-base"
	BASE_BIN="$WORK/bin/agentrt-base"
	mkdir -p "$WORK/base-plugins"
	for l in go tinygo rust; do
		if [ -f "$BASE_PLUGIN_DIR/echo-$l.wasm" ]; then cp "$BASE_PLUGIN_DIR/echo-$l.wasm" "$WORK/base-plugins/"; fi
	done
fi

log "building bench/seed and bench/fsyncprobe"
go build -o "$WORK/seed" ./bench/seed || die "go build ./bench/seed failed"
go build -o "$WORK/fsyncprobe" ./bench/fsyncprobe || die "go build ./bench/fsyncprobe failed"

# ------------------------------------------------------------------ servers
# Server names: js, agentrt-go, agentrt-tinygo, agentrt-rust, init-go,
# init-tinygo, init-rust (--snapshots=false), and with a baseline base-go,
# base-tinygo, base-rust.
plugin_of() { echo "$WORK/plugins/echo-${1#*-}.wasm"; }

# start_server NAME: starts it on a free port with a fresh data dir; sets
# SERVER_PID and BASE (http://127.0.0.1:PORT/ap/v1).
RUN_N=0
start_server() {
	local name="$1" dir logf
	RUN_N=$((RUN_N + 1))
	dir="$WORK/run$RUN_N-$name"
	logf="$dir.log"
	mkdir -p "$dir"
	case "$name" in
	js)
		(cd "$BENCH/js" && PORT=0 HOST=127.0.0.1 WORKSPACE="$dir/workspace" exec node agent.js) 2>"$logf" >/dev/null &
		;;
	agentrt-*)
		"$AGENTRT_BIN" run "$(plugin_of "$name")" --addr 127.0.0.1:0 --data "$dir/data" 2>"$logf" >/dev/null &
		;;
	init-*)
		"$AGENTRT_BIN" run "$(plugin_of "$name")" --snapshots=false --addr 127.0.0.1:0 --data "$dir/data" 2>"$logf" >/dev/null &
		;;
	base-*)
		"$BASE_BIN" run "$WORK/base-plugins/echo-${name#*-}.wasm" --addr 127.0.0.1:0 --data "$dir/data" 2>"$logf" >/dev/null &
		;;
	*) die "unknown server $name" ;;
	esac
	SERVER_PID=$!
	local i url=""
	for ((i = 0; i < READY_TIMEOUT * 10; i++)); do
		url="$(grep -o 'url=http://[^ ]*' "$logf" 2>/dev/null | head -n 1 | cut -d= -f2-)" || true
		[ -n "$url" ] && break
		if ! kill -0 "$SERVER_PID" 2>/dev/null; then
			tail -n 20 "$logf" | sed 's/^/    /' >&2
			SERVER_PID=""
			die "$name exited before it was ready (log above)"
		fi
		sleep 0.1
	done
	if [ -z "$url" ]; then
		tail -n 20 "$logf" | sed 's/^/    /' >&2
		die "$name printed no url= line within ${READY_TIMEOUT}s (log above)"
	fi
	BASE="$url"
	SERVER_LOG="$logf"
	SERVER_DIR="$dir"
}

RESULTS="$WORK/results.tsv"
: >"$RESULTS"

# measure SCENARIO SERVER ROUND
measure() {
	local scen="$1" name="$2" round="$3" script ids=""
	start_server "$name"
	case "$scen" in
	create) script=create_task.lua ;;
	get)
		script=get_task.lua
		ids="$SERVER_DIR.ids"
		"$WORK/seed" -url "$BASE" -n "$SEED_TASKS" -c 16 -out "$ids" 2>>"$WORK/seed.log" ||
			{ tail -n 5 "$WORK/seed.log" >&2; die "seeding $SEED_TASKS tasks on $name failed"; }
		;;
	step)
		script=execute_step.lua
		ids="$SERVER_DIR.ids"
		"$WORK/seed" -url "$BASE" -n "$STEP_TASKS" -c 16 -out "$ids" 2>>"$WORK/seed.log" ||
			{ tail -n 5 "$WORK/seed.log" >&2; die "seeding $STEP_TASKS tasks on $name failed"; }
		;;
	esac
	local stats rps p50 p99 errs cores cpu_us others
	stats="$(measure_wrk "$script" "$BASE" "$ids")" # set -e: a failed run ends the script
	read -r rps p50 p99 errs cores cpu_us others <<<"$stats"
	kill -0 "$SERVER_PID" 2>/dev/null || die "$name died during the $scen run (log: $SERVER_LOG)"
	stop_server
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$scen" "$name" "$round" "$rps" "$p50" "$p99" "$errs" "$cores" "$cpu_us" "$others" >>"$RESULTS"
	log "$(printf '%-6s %-15s round %d: %8.1f req/s  p50 %7.2f ms  p99 %7.2f ms  errors %d  server %.2f cores, %s us CPU/req; wrk+others %.2f cores' \
		"$scen" "$name" "$round" "$rps" "$p50" "$p99" "$errs" "$cores" "$cpu_us" "$others")"
}

servers_for() {
	local base=""
	[ -n "$BASE_BIN" ] && base="base-go"
	case "$1" in
	create | get) echo "agentrt-go $base js" ;;
	step)
		local s="" l
		for l in go tinygo rust; do
			if [ -f "$WORK/plugins/echo-$l.wasm" ]; then
				s="$s agentrt-$l"
				[ -n "$BASE_BIN" ] && [ -f "$WORK/base-plugins/echo-$l.wasm" ] && s="$s base-$l"
				[[ " $INIT_LANGS " == *" $l "* ]] && s="$s init-$l"
			else
				log "step: $PLUGIN_DIR/echo-$l.wasm not found, agentrt-$l skipped"
			fi
		done
		echo "$s js"
		;;
	esac
}

# ------------------------------------------------------------------ machine
FSYNC_LINE="$("$WORK/fsyncprobe" -dir "$WORK" -n 1000)" || die "fsyncprobe failed"
MACHINE="$(
	echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "- nproc: $(nproc); CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); memory: $(free -h | awk '/^Mem:/ { print $2 }')"
	echo "- kernel: $(uname -sr); load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "- plugins: $(cd "$WORK/plugins" && for f in *.wasm; do printf '%s %s KiB; ' "$f" "$(($(stat -c %s "$f") / 1024))"; done | sed 's/; $//')"
	echo "- data dirs on: $(df -T "$WORK" | awk 'NR == 2 { print $2 " (" $1 ")" }'); 4 KiB append+fsync there: $(field "$FSYNC_LINE" per_s)/s (p50 $(field "$FSYNC_LINE" p50_us) µs, p99 $(field "$FSYNC_LINE" p99_us) µs)"
	echo "- $("$AGENTRT_BIN" version 2>/dev/null | head -n 1) (binary sha256 $(sha256sum "$AGENTRT_BIN" | cut -c1-12), repo at $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet HEAD -- 2>/dev/null || echo ' + uncommitted changes')); node $(node --version); agent-protocol $(node -p "require('$BENCH/js/node_modules/agent-protocol/package.json').version"); $(wrk --version 2>&1 | head -n 1 | awk '{ print $1, $2 }')"
	[ -n "$BASE_BIN" ] && echo "- baseline (base-*): $("$BASE_BIN" version 2>/dev/null | head -n 1) (binary sha256 $(sha256sum "$BASE_BIN" | cut -c1-12)); its plugins: $(cd "$WORK/base-plugins" && for f in *.wasm; do printf '%s %s KiB sha256 %s; ' "$f" "$(($(stat -c %s "$f") / 1024))" "$(sha256sum "$f" | cut -c1-12)"; done | sed 's/; $//')"
	echo "- wrk -t$THREADS -c$CONNS --timeout 10s, $WARMUP warm-up + $DURATION measured per scenario and server, $ROUNDS round(s), server order rotated each round; fresh server and data dir for every run"
)"

# ------------------------------------------------------------------ run
START=$SECONDS
for ((round = 1; round <= ROUNDS; round++)); do
	for scen in $SCENARIOS; do
		read -r -a list <<<"$(servers_for "$scen")"
		n=${#list[@]}
		for ((k = 0; k < n; k++)); do
			measure "$scen" "${list[$(((k + round - 1) % n))]}" "$round"
		done
	done
done
log "done in $((SECONDS - START))s"

# ------------------------------------------------------------------ report
# targets prints the step targets that compare two servers, each as the
# median and range of its per-round ratio (runs of one round are paired:
# background noise hits both sides alike); a target whose servers were not
# both measured is left out.
targets() {
	awk -F'\t' -v rounds="$ROUNDS" -v kits="${BENCH_BASELINE_PLUGINS:+1}" '
	function median(list,    a, n, i, j, t) {
		n = split(list, a, " ")
		for (i = 2; i <= n; i++) { t = a[i] + 0; for (j = i - 1; j >= 1 && a[j] + 0 > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
		return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	# ratio WHAT: per round, field f of scenario/server a over b.
	function ratio(what, sa, a, sb, b, f, goal, atleast,    rd, l, n, t, i, lo, hi, m, ok) {
		l = ""
		for (rd = 1; rd <= rounds; rd++)
			if ((sa SUBSEP a SUBSEP rd) in v && (sb SUBSEP b SUBSEP rd) in v && v[sb, b, rd, f] > 0)
				l = l " " v[sa, a, rd, f] / v[sb, b, rd, f]
		if (l == "") return
		n = split(l, t, " "); lo = hi = t[1] + 0
		for (i = 2; i <= n; i++) { if (t[i] + 0 < lo) lo = t[i] + 0; if (t[i] + 0 > hi) hi = t[i] + 0 }
		m = median(l)
		if (goal == 0) { # a comparison, not a target
			printf "| %s | %.2f× (%.2f–%.2f) | — | — |\n", what, m, lo, hi
			return
		}
		ok = atleast ? m >= goal : m <= goal
		printf "| %s | %.2f× (%.2f–%.2f) | %s %g× | %s |\n", what, m, lo, hi, atleast ? "≥" : "≤", goal, ok ? "met" : "**missed**"
	}
	{ v[$1, $2, $3] = 1; v[$1, $2, $3, "rps"] = $4; v[$1, $2, $3, "cpu"] = $9 }
	END {
		print "Step targets, per-round ratios (median, range):"
		print ""
		print "| target | measured | goal | verdict |"
		print "|---|---:|---|---|"
		# The 10x target of the Go step is against the build before snapshots
		# (c268a34, as BENCH_BASELINE), not this build without them:
		# --snapshots=false keeps the rest of the step path of this build, so
		# that ratio is a comparison. Against other plugins
		# (BENCH_BASELINE_PLUGINS) the baseline ratio is a comparison too.
		ratio("Go echo step from a snapshot / without (req/s)", "step", "agentrt-go", "step", "init-go", "rps", 0, 1)
		ratio("Go echo step / the baseline (req/s)", "step", "agentrt-go", "step", "base-go", "rps", kits ? 0 : 10, 1)
		ratio("TinyGo echo step / the baseline (req/s)", "step", "agentrt-tinygo", "step", "base-tinygo", "rps", 0, 1)
		ratio("Rust echo step / the baseline (req/s)", "step", "agentrt-rust", "step", "base-rust", "rps", 0, 1)
		ratio("TinyGo echo step / Go echo step (req/s)", "step", "agentrt-tinygo", "step", "agentrt-go", "rps", 2, 0)
		ratio("Rust echo step / create-task (server CPU per request)", "step", "agentrt-rust", "create", "agentrt-go", "cpu", 3, 0)
		ratio("Rust echo step / the JS SDK step (req/s)", "step", "agentrt-rust", "step", "js", "rps", 2, 1)
		print ""
	}' "$RESULTS"
}

REPORT="$(
	echo "$MACHINE"
	echo
	awk -F'\t' -v rounds="$ROUNDS" -v seeded="$SEED_TASKS" -v steptasks="$STEP_TASKS" '
	function median(list,    a, n, i, j, t) {
		n = split(list, a, " ")
		for (i = 2; i <= n; i++) { t = a[i] + 0; for (j = i - 1; j >= 1 && a[j] + 0 > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
		return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	function minmax(list,    a, n, i, lo, hi) {
		n = split(list, a, " "); lo = hi = a[1] + 0
		for (i = 2; i <= n; i++) { if (a[i] + 0 < lo) lo = a[i] + 0; if (a[i] + 0 > hi) hi = a[i] + 0 }
		return sprintf("%.0f–%.0f", lo, hi)
	}
	{
		key = $1 SUBSEP $2
		if (!(key in seen)) { seen[key] = 1; order[++nk] = key }
		rps[key] = rps[key] " " $4; p50[key] = p50[key] " " $5; p99[key] = p99[key] " " $6
		errs[key] += $7; cores[key] = cores[key] " " $8; cpu[key] = cpu[key] " " $9
		r[$1 SUBSEP $2 SUBSEP $3] = $4
		if ($2 == "js") js[$1 SUBSEP $3] = $4
		scen_rounds[$1 SUBSEP $3] = 1
	}
	END {
		name["create"] = "create-task"; name["get"] = "get-task (" seeded " stored)"; name["step"] = "execute-step (echo, " steptasks " tasks)"
		print "| scenario | server | req/s (median) | req/s range | p50 ms | p99 ms | vs JS (per-round range) | target | met | errors | server cores | server CPU µs/req |"
		print "|---|---|---:|---:|---:|---:|---:|---|---|---:|---:|---:|"
		for (k = 1; k <= nk; k++) {
			split(order[k], kk, SUBSEP); s = kk[1]; srv = kk[2]; key = order[k]
			m = median(rps[key])
			ratio = "—"; target = "—"; met = "—"
			if (srv != "js") {
				rl = ""
				for (rd = 1; rd <= rounds; rd++) {
					if ((s SUBSEP srv SUBSEP rd) in r && (s SUBSEP rd) in js && js[s SUBSEP rd] > 0)
						rl = rl " " r[s SUBSEP srv SUBSEP rd] / js[s SUBSEP rd]
				}
				if (rl != "") {
					n = split(rl, tmp, " "); lo = hi = tmp[1] + 0
					for (i = 2; i <= n; i++) { if (tmp[i] + 0 < lo) lo = tmp[i] + 0; if (tmp[i] + 0 > hi) hi = tmp[i] + 0 }
					mr = median(rl)
					ratio = sprintf("%.2f× (%.2f–%.2f)", mr, lo, hi)
				}
				if (s == "create" || s == "get") {
					target = "≥ 5× JS"
					if (rl != "") met = (mr >= 5) ? "yes" : sprintf("no (%.0f%% of target)", 100 * mr / 5)
				} else {
					goal = (srv ~ /-go$/) ? 300 : 2000
					target = sprintf("≥ %d/s", goal)
					met = (m >= goal) ? "yes" : sprintf("no (%.0f%% of target)", 100 * m / goal)
				}
			}
			printf "| %s | %s | %.0f | %s | %.2f | %.2f | %s | %s | %s | %d | %.2f | %.0f |\n",
				name[s], srv, m, minmax(rps[key]), median(p50[key]), median(p99[key]), ratio, target, met,
				errs[key], median(cores[key]), median(cpu[key])
		}
	}' "$RESULTS"
	echo
	targets
	echo "Per run (scenario, server, round, req/s, p50 ms, p99 ms, errors, server cores, server CPU µs/req, cores used by wrk and everything else on the machine):"
	echo
	echo '```'
	sort -t$'\t' -k1,1 -k2,2 -k3,3n "$RESULTS" |
		awk -F'\t' '{ printf "%-7s %-15s %2s %9s %8s %8s %6s %6s %6s %6s\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10 }'
	echo '```'
)"
printf '\n%s\n' "$REPORT"
if [ -n "${BENCH_OUT:-}" ]; then
	printf '%s\n' "$REPORT" >"$BENCH_OUT" || die "cannot write $BENCH_OUT"
	log "report written to $BENCH_OUT"
fi
