#!/usr/bin/env bash
# Installs the toolchains agentrt's tests and plugin builds need, idempotently.
#
#   scripts/toolchains.sh [component...]     components: rust tinygo wabt newman wrk
#                                            (default: rust tinygo wabt newman)
#
# Cache root: $AGENTRT_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/agentrt).
# Produces:
#   rust    Debian rustc 1.63 / cargo with the wasm32 std. Build wasm with
#           RUSTC=/usr/bin/rustc /usr/bin/cargo build --target wasm32-unknown-unknown
#           (cargo runs the first rustc on PATH; a rustup one has no wasm targets).
#   tinygo  $AGENTRT_CACHE/bin/tinygo (wrapper: TinyGo's cache is
#           $AGENTRT_CACHE/xdg/tinygo), real toolchain in $AGENTRT_CACHE/tinygo-v0.41.1.
#   newman  $AGENTRT_CACHE/bin/newman (npm install in $AGENTRT_CACHE/newman).
#   wabt    Debian wabt (/usr/bin/wat2wasm), for the WAT test plugins in testdata/.
#   wrk     Debian wrk (/usr/bin/wrk), for benchmarks only.
# Everything already present is detected and skipped; a second run takes seconds.
# Verbose output of apt, go and npm goes to $AGENTRT_CACHE/logs/*.log.
set -euo pipefail
set -o errtrace

TINYGO_VERSION=v0.41.1
NEWMAN_VERSION=6.2.2
DEFAULT_COMPONENTS=(rust tinygo wabt newman)

RUST_PKGS=(rustc cargo libstd-rust-dev-wasm32 lld-14)
TINYGO_PKGS=(llvm-19-dev libclang-19-dev clang-19 lld-19 libclang-rt-19-dev-wasm32 wasi-libc binaryen)
WRK_PKGS=(wrk)
WABT_PKGS=(wabt)
NODE_PKGS=(nodejs npm) # only when node/npm are not on PATH at all

log() { printf 'toolchains: %s\n' "$*" >&2; }
die() { printf 'toolchains: error: %s\n' "$*" >&2; exit 1; }
on_err() {
	local rc=$? line="$1" cmd="$2"
	printf 'toolchains: error: command failed (exit %d, line %d): %s\n' "$rc" "$line" "$cmd" >&2
	exit "$rc"
}
trap 'on_err "$LINENO" "$BASH_COMMAND"' ERR

usage() {
	sed -n '2,19s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
}

# ---------------------------------------------------------------- arguments
COMPONENTS=()
for arg in "$@"; do
	case "$arg" in
	rust | tinygo | wabt | newman | wrk) COMPONENTS+=("$arg") ;;
	-h | --help) usage; exit 0 ;;
	*) die "unknown component '$arg' (expected: rust tinygo wabt newman wrk; see --help)" ;;
	esac
done
[ ${#COMPONENTS[@]} -gt 0 ] || COMPONENTS=("${DEFAULT_COMPONENTS[@]}")

# ---------------------------------------------------------------- cache root
if [ -z "${AGENTRT_CACHE:-}" ] && [ -z "${XDG_CACHE_HOME:-}" ] && [ -z "${HOME:-}" ]; then
	die "none of AGENTRT_CACHE, XDG_CACHE_HOME, HOME is set: cannot choose a cache directory"
fi
AGENTRT_CACHE="${AGENTRT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agentrt}"
case "$AGENTRT_CACHE" in /*) ;; *) AGENTRT_CACHE="$PWD/$AGENTRT_CACHE" ;; esac
AGENTRT_CACHE="${AGENTRT_CACHE%/}"
BIN_DIR="$AGENTRT_CACHE/bin"
LOG_DIR="$AGENTRT_CACHE/logs"
mkdir -p "$BIN_DIR" "$LOG_DIR" || die "cannot create cache directory $AGENTRT_CACHE"

# One run at a time per cache (parallel make targets may call us concurrently).
if command -v flock >/dev/null 2>&1; then
	exec 9>"$AGENTRT_CACHE/.lock"
	if ! flock -n 9; then
		log "waiting for another toolchains.sh run on $AGENTRT_CACHE"
		flock 9
	fi
fi

TMP_PATHS=()
cleanup() { local p; for p in ${TMP_PATHS[@]+"${TMP_PATHS[@]}"}; do rm -rf -- "$p"; done; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# run_logged NAME CMD...: run CMD with its output in $LOG_DIR/NAME.log; on
# failure show the log's tail and stop with one error line.
run_logged() {
	local name="$1"; shift
	local logf="$LOG_DIR/$name.log"
	if ! "$@" >"$logf" 2>&1; then
		tail -n 25 "$logf" | sed 's/^/    /' >&2
		die "$name failed (full log: $logf)"
	fi
}

in_dir() ( cd "$1" && shift && exec "$@" ) # in_dir DIR CMD...

SUMMARY=()
note() { SUMMARY+=("$1"); }

# ---------------------------------------------------------------- apt
pkg_installed() {
	local status
	status="$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" || return 1
	[[ "$status" == *" ok installed" ]]
}

missing_pkgs() { # prints the missing ones among "$@"
	local p
	for p in "$@"; do pkg_installed "$p" || printf '%s\n' "$p"; done
}

SUDO=()
APT_UPDATED=0
apt_install_pkgs() { # apt_install_pkgs PKG...: installs exactly these
	[ $# -gt 0 ] || return 0
	if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-query >/dev/null 2>&1; then
		die "apt-get/dpkg-query not found: this script needs Debian/Ubuntu (missing packages: $*)"
	fi
	if [ "$(id -u)" -ne 0 ]; then
		command -v sudo >/dev/null 2>&1 ||
			die "not root and no sudo: install as root: apt-get install $*"
		SUDO=(sudo)
	fi
	if [ "$APT_UPDATED" -eq 0 ]; then
		log "apt-get update"
		run_logged apt-update ${SUDO[@]+"${SUDO[@]}"} apt-get update
		APT_UPDATED=1
	fi
	log "apt-get install $*"
	run_logged apt-install ${SUDO[@]+"${SUDO[@]}"} env DEBIAN_FRONTEND=noninteractive \
		apt-get install -y --no-install-recommends "$@"
	local still
	still="$(missing_pkgs "$@" | tr '\n' ' ')"
	[ -z "$still" ] || die "apt-get install did not install: $still"
}

# apt_ensure PKG...: installs those of PKG... that are not installed.
apt_ensure() {
	local missing
	mapfile -t missing < <(missing_pkgs "$@")
	apt_install_pkgs ${missing[@]+"${missing[@]}"}
}

# Missing Debian packages per component, as found when this run started (the
# combined apt-get run in main installs them before the components run).
declare -A MISSING_AT_START=()

# ---------------------------------------------------------------- rust
component_rust() {
	apt_ensure "${RUST_PKGS[@]}"
	local t dir
	for t in wasm32-unknown-unknown wasm32-wasi; do
		dir="$(/usr/bin/rustc --print target-libdir --target "$t" 2>/dev/null)" ||
			die "rust: /usr/bin/rustc does not know target $t"
		compgen -G "$dir/libstd-*.rlib" >/dev/null ||
			die "rust: no standard library for $t in $dir (package libstd-rust-dev-wasm32?)"
	done
	local v
	v="$(/usr/bin/cargo --version 2>/dev/null)" || die "rust: /usr/bin/cargo does not run"
	if [ -n "${MISSING_AT_START[rust]-}" ]; then
		note "rust: installed ($v; build wasm with RUSTC=/usr/bin/rustc /usr/bin/cargo)"
	else
		note "rust: cached ($v; build wasm with RUSTC=/usr/bin/rustc /usr/bin/cargo)"
	fi
}

# ---------------------------------------------------------------- tinygo
TINYGO_DIR="$AGENTRT_CACHE/tinygo-$TINYGO_VERSION"
TINYGO_BIN="$TINYGO_DIR/build/tinygo"
TINYGO_XDG="$AGENTRT_CACHE/xdg"
TINYGO_CACHE="$TINYGO_XDG/tinygo"

ensure_go() {
	if ! command -v go >/dev/null 2>&1; then
		[ -x /usr/local/go/bin/go ] || die "tinygo: 'go' not found on PATH (needed to build TinyGo)"
		PATH="/usr/local/go/bin:$PATH"
	fi
}

tinygo_works() { # tinygo_works BINARY
	[ -x "$1" ] || return 1
	local out
	out="$(XDG_CACHE_HOME="$TINYGO_XDG" "$1" version 2>/dev/null)" || return 1
	[[ "$out" == *"tinygo version ${TINYGO_VERSION#v} "* ]]
}

build_tinygo() {
	ensure_go
	# Leftovers of an interrupted run (we hold the lock, so nobody else uses them).
	rm -rf -- "$AGENTRT_CACHE"/.tinygo-build.* 2>/dev/null || true
	local work src
	work="$(mktemp -d "$AGENTRT_CACHE/.tinygo-build.XXXXXX")"
	TMP_PATHS+=("$work")
	local goenv=(env GOWORK=off GO111MODULE=on GOFLAGS=-buildvcs=false)

	log "tinygo: fetching github.com/tinygo-org/tinygo@$TINYGO_VERSION from the Go module proxy"
	# -json reports a failure on stdout ("Error"), not stderr.
	if ! in_dir "$work" "${goenv[@]}" go mod download -json "github.com/tinygo-org/tinygo@$TINYGO_VERSION" \
		>"$LOG_DIR/tinygo-download.log" 2>&1; then
		sed 's/^/    /' "$LOG_DIR/tinygo-download.log" | tail -n 25 >&2
		die "tinygo: go mod download github.com/tinygo-org/tinygo@$TINYGO_VERSION failed (Go module proxy reachable? log: $LOG_DIR/tinygo-download.log)"
	fi
	src="$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}[[:space:]]*$/\1/p' "$LOG_DIR/tinygo-download.log" | head -n 1)"
	if [ -z "$src" ] || [ ! -d "$src" ]; then
		die "tinygo: go mod download gave no module directory (see $LOG_DIR/tinygo-download.log)"
	fi

	cp -R "$src" "$work/tinygo"
	chmod -R u+w "$work/tinygo"
	mkdir -p "$work/tinygo/src/net/http" # the src/net submodule is not in the module zip

	log "tinygo: building $TINYGO_VERSION against LLVM 19 (about a minute)"
	run_logged tinygo-build in_dir "$work/tinygo" "${goenv[@]}" CGO_ENABLED=1 go build -tags=llvm19 -o build/tinygo .
	tinygo_works "$work/tinygo/build/tinygo" ||
		die "tinygo: the freshly built binary fails 'tinygo version' (build log: $LOG_DIR/tinygo-build.log)"

	rm -rf -- "$TINYGO_DIR"
	mv "$work/tinygo" "$TINYGO_DIR"
}

# sync_file SRC DST: copy SRC to DST atomically unless identical already.
CHANGED=0
sync_file() {
	[ -f "$1" ] || die "tinygo: $1 is missing"
	cmp -s "$1" "$2" 2>/dev/null && return 0
	mkdir -p "$(dirname "$2")"
	TMP_PATHS+=("$2.tmp.$$")
	cp "$1" "$2.tmp.$$"
	mv -f "$2.tmp.$$" "$2"
	CHANGED=1
}

# sync_dir SRC DST: make DST a copy of SRC (replaced whole) unless identical already.
sync_dir() {
	[ -d "$1" ] || die "tinygo: $1 is missing"
	diff -rq "$1" "$2" >/dev/null 2>&1 && return 0
	mkdir -p "$(dirname "$2")"
	TMP_PATHS+=("$2.tmp.$$")
	rm -rf -- "$2.tmp.$$"
	cp -R "$1" "$2.tmp.$$"
	rm -rf -- "$2"
	mv "$2.tmp.$$" "$2"
	CHANGED=1
}

# TinyGo would compile wasi-libc and compiler-rt from sources that the module
# zip lacks; it takes a prebuilt lib.a from its cache without looking for them.
place_tinygo_libs() {
	sync_dir /usr/include/wasm32-wasi "$TINYGO_CACHE/wasi-libc-wasm32-unknown-wasi-generic/include"
	sync_file /usr/lib/wasm32-wasi/libc.a "$TINYGO_CACHE/wasi-libc-wasm32-unknown-wasi-generic/lib.a"
	sync_file /usr/lib/llvm-19/lib/clang/19/lib/wasi/libclang_rt.builtins-wasm32.a \
		"$TINYGO_CACHE/compiler-rt-wasm32-unknown-wasi-generic/lib.a"
}

write_tinygo_wrapper() {
	local wrapper="$BIN_DIR/tinygo" content
	# Only TinyGo's own cache moves: the go commands TinyGo runs keep the
	# caller's Go build cache (Go's default is $XDG_CACHE_HOME/go-build).
	content="$(cat <<EOF
#!/bin/sh
# Generated by agentrt scripts/toolchains.sh: TinyGo $TINYGO_VERSION with its cache in $TINYGO_CACHE.
if [ -z "\${GOCACHE:-}" ]; then
	GOCACHE="\${XDG_CACHE_HOME:-\$HOME/.cache}/go-build"
	export GOCACHE
fi
XDG_CACHE_HOME='$TINYGO_XDG'
export XDG_CACHE_HOME
exec '$TINYGO_BIN' "\$@"
EOF
)"
	if [ -f "$wrapper" ] && [ -x "$wrapper" ] && [ "$(cat "$wrapper")" = "$content" ]; then
		return 0
	fi
	TMP_PATHS+=("$wrapper.tmp.$$")
	printf '%s\n' "$content" >"$wrapper.tmp.$$"
	chmod 755 "$wrapper.tmp.$$"
	mv -f "$wrapper.tmp.$$" "$wrapper"
	CHANGED=1
}

component_tinygo() {
	local built=0
	apt_ensure "${TINYGO_PKGS[@]}"
	command -v wasm-opt >/dev/null 2>&1 || die "tinygo: wasm-opt (package binaryen) is not on PATH"
	ensure_go
	if tinygo_works "$TINYGO_BIN"; then
		:
	else
		build_tinygo
		built=1
	fi
	CHANGED=0
	place_tinygo_libs
	write_tinygo_wrapper
	local v
	v="$("$BIN_DIR/tinygo" version 2>/dev/null)" || die "tinygo: $BIN_DIR/tinygo version failed"
	if [ -n "${MISSING_AT_START[tinygo]-}" ] || [ "$built" -eq 1 ] || [ "$CHANGED" -eq 1 ]; then
		note "tinygo: installed ($v, $BIN_DIR/tinygo)"
	else
		note "tinygo: cached ($v, $BIN_DIR/tinygo)"
	fi
}

# ---------------------------------------------------------------- newman
component_newman() {
	local link="$BIN_DIR/newman" prefix="$AGENTRT_CACHE/newman" v
	v="$("$link" --version 2>/dev/null || true)"
	if [ "$v" = "$NEWMAN_VERSION" ]; then
		note "newman: cached ($v, $link)"
		return 0
	fi
	if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
		apt_ensure "${NODE_PKGS[@]}"
		if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
			die "newman: node/npm still not on PATH"
		fi
	fi
	log "newman: npm install newman@$NEWMAN_VERSION into $prefix"
	mkdir -p "$prefix"
	run_logged newman-install env npm_config_update_notifier=false \
		npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error \
		"newman@$NEWMAN_VERSION"
	[ -e "$prefix/node_modules/.bin/newman" ] || die "newman: npm left no $prefix/node_modules/.bin/newman"
	ln -sfn "$prefix/node_modules/.bin/newman" "$link"
	v="$("$link" --version 2>/dev/null || true)"
	[ "$v" = "$NEWMAN_VERSION" ] || die "newman: $link --version printed '$v', want $NEWMAN_VERSION"
	note "newman: installed ($v, $link)"
}

# ---------------------------------------------------------------- wrk
component_wrk() {
	apt_ensure "${WRK_PKGS[@]}"
	if [ -n "${MISSING_AT_START[wrk]-}" ]; then
		note "wrk: installed ($(command -v wrk))"
	else
		note "wrk: cached ($(command -v wrk || echo /usr/bin/wrk))"
	fi
}

# ---------------------------------------------------------------- wabt
component_wabt() {
	apt_ensure "${WABT_PKGS[@]}"
	command -v wat2wasm >/dev/null 2>&1 || die "wabt: wat2wasm is not on PATH after installing wabt"
	if [ -n "${MISSING_AT_START[wabt]-}" ]; then
		note "wabt: installed ($(command -v wat2wasm))"
	else
		note "wabt: cached ($(command -v wat2wasm))"
	fi
}

# ---------------------------------------------------------------- main
# All missing Debian packages go in one apt-get run (much faster than one per
# component); each component then checks and finishes its own part.
ALL_MISSING=()
for c in "${COMPONENTS[@]}"; do
	case "$c" in
	rust) pkgs=("${RUST_PKGS[@]}") ;;
	tinygo) pkgs=("${TINYGO_PKGS[@]}") ;;
	wrk) pkgs=("${WRK_PKGS[@]}") ;;
	wabt) pkgs=("${WABT_PKGS[@]}") ;;
	*) continue ;;
	esac
	mapfile -t m < <(missing_pkgs "${pkgs[@]}")
	if [ ${#m[@]} -gt 0 ]; then
		MISSING_AT_START[$c]="${m[*]}"
		ALL_MISSING+=("${m[@]}")
	fi
done
apt_install_pkgs ${ALL_MISSING[@]+"${ALL_MISSING[@]}"}

for c in "${COMPONENTS[@]}"; do
	"component_$c"
done

for s in "${SUMMARY[@]}"; do log "$s"; done
