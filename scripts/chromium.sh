#!/usr/bin/env bash
# chromium.sh installs the headless browser that the dashboard's tests
# drive (controlplane's dashboard tests, through chromedp): Debian's
# chromium package, the one browser build this project installs, from the
# distribution like the other services.
#
#   scripts/chromium.sh up    install chromium unless it is there, print the
#                             env (idempotent)
#   scripts/chromium.sh env   print the export line the tests read
#
#   eval "$(scripts/chromium.sh up)"   # progress goes to stderr, env to stdout
#
# Tests find the browser through KEYHEAT_TEST_CHROME; they skip without it,
# and fail under CI=true.
#
# Environment:
#   KEYHEAT_CHROME  a browser to use instead of Debian's chromium (then
#                   nothing is installed)
#   KEYHEAT_CACHE   where the install log and lock go; default ~/.cache/keyheat
set -euo pipefail

CACHE=${KEYHEAT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/keyheat}

log() { printf 'chromium: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# as_root runs a command with root rights: directly when we are root, through
# sudo otherwise (apt-get needs it).
as_root() {
	if [[ $(id -u) -eq 0 ]]; then
		"$@"
	elif command -v sudo >/dev/null; then
		sudo "$@"
	else
		die "need root for: $* (run as root or install sudo)"
	fi
}

# browser prints the browser's path, or nothing when none is installed.
# Debian's package installs /usr/bin/chromium; other distributions name it
# chromium-browser.
browser() {
	if [[ -n ${KEYHEAT_CHROME:-} ]]; then
		[[ -x $KEYHEAT_CHROME ]] || die "KEYHEAT_CHROME=$KEYHEAT_CHROME is not an executable"
		echo "$KEYHEAT_CHROME"
		return
	fi
	command -v chromium || command -v chromium-browser || true
}

print_env() {
	local b
	b=$(browser)
	[[ -n $b ]] || die "no chromium installed (scripts/chromium.sh up installs it)"
	echo "export KEYHEAT_TEST_CHROME=$b"
}

up() {
	if [[ -n $(browser) ]]; then
		print_env
		return
	fi
	mkdir -p "$CACHE"
	# Two test runs (or two worktrees) may call this at once: one installs,
	# the other waits for it, then finds the browser there.
	exec 9>"$CACHE/chromium.lock"
	flock 9
	if [[ -z $(browser) ]]; then
		local t0=$SECONDS
		log "installing chromium with apt-get (log: $CACHE/apt-chromium.log)"
		if ! as_root env DEBIAN_FRONTEND=noninteractive sh -c \
			'apt-get update -q && apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core' \
			>"$CACHE/apt-chromium.log" 2>&1; then
			log "apt-get failed"
			tail -n 40 "$CACHE/apt-chromium.log" >&2
			exit 1
		fi
		log "installed in $((SECONDS - t0))s"
	fi
	print_env
}

case ${1:-} in
up) up ;;
env) print_env ;;
*)
	echo "usage: $0 up | env" >&2
	exit 2
	;;
esac
