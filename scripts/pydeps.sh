#!/usr/bin/env bash
# pydeps.sh installs the Python packages that some Go tests run as
# independent readers of what keyheat writes, into a virtualenv in the
# download cache (outside the repo, like the Kafka jars):
#
#   chdb     a current ClickHouse engine in-process: the ClickHouse DDL and
#            queries must run on it as well as on Debian's 18.16 server
#   duckdb   an independent Parquet reader
#   pyarrow  another independent Parquet reader
#
#   scripts/pydeps.sh up [PKG...]  install PKG (default: all three) unless
#                                  already there, print the env (idempotent)
#   scripts/pydeps.sh env          print the export line the tests read
#
#   eval "$(scripts/pydeps.sh up)"   # progress goes to stderr, env to stdout
#
# Tests find the interpreter through KEYHEAT_TEST_PYTHON; they skip without
# it, and fail under CI=true.
#
# Environment:
#   KEYHEAT_CACHE   download cache; default ~/.cache/keyheat
#   KEYHEAT_PYTHON  interpreter that creates the virtualenv; default python3
set -euo pipefail

CACHE=${KEYHEAT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/keyheat}
VENV=$CACHE/pyvenv

# Pinned so that every machine checks against the same engines. A package
# named without a version on the command line gets its pin from here.
declare -A PIN=(
	[chdb]=4.4.0
	[duckdb]=2.0.0
	[pyarrow]=26.0.1
)
ALL=(chdb duckdb pyarrow)

log() { printf 'pydeps: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

print_env() { echo "export KEYHEAT_TEST_PYTHON=$VENV/bin/python"; }

# spec PKG: "name==version" from the pins; unknown names are refused, so a
# typo cannot install something nobody reviewed.
spec() {
	local name=${1%%==*}
	[[ -n ${PIN[$name]:-} ]] || die "unknown package $name (known: ${ALL[*]})"
	echo "$name==${PIN[$name]}"
}

up() {
	local want=() p
	if (($# == 0)); then set -- "${ALL[@]}"; fi
	for p in "$@"; do want+=("$(spec "$p")"); done

	mkdir -p "$CACHE"
	# Two test runs (or two worktrees) may call this at once; one installs,
	# the other waits and then finds everything there.
	exec 9>"$CACHE/pyvenv.lock"
	flock 9

	if [[ ! -x $VENV/bin/python ]]; then
		log "creating virtualenv $VENV"
		"${KEYHEAT_PYTHON:-python3}" -m venv "$VENV" ||
			die "python3 -m venv failed (Debian: apt-get install python3-venv)"
	fi
	# Installed pins are recorded one per line; install only what is missing.
	local stamp=$VENV/.keyheat-pins missing=()
	touch "$stamp"
	for p in "${want[@]}"; do
		grep -qxF "$p" "$stamp" || missing+=("$p")
	done
	if ((${#missing[@]} > 0)); then
		local t0=$SECONDS
		log "installing ${missing[*]}"
		"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${missing[@]}" >&2 ||
			die "pip install ${missing[*]} failed"
		"$VENV/bin/python" -m pip freeze --disable-pip-version-check | grep -E "^($(IFS='|'; echo "${ALL[*]}"))==" >"$stamp.new" || true
		mv "$stamp.new" "$stamp"
		log "installed in $((SECONDS - t0))s"
	fi
	print_env
}

case ${1:-} in
up) shift; up "$@" ;;
env) print_env ;;
*)
	echo "usage: $0 up [chdb|duckdb|pyarrow ...] | env" >&2
	exit 2
	;;
esac
