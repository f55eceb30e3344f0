#!/usr/bin/env bash
# pydeps-parquet.sh installs the Python packages the Parquet archive's
# interoperability test (sink/parquet/tools_test.go) reads the archive with:
# DuckDB and pyarrow, pinned, in a virtual environment outside the repo.
# It is idempotent: a second run checks the versions and installs nothing.
#
#   eval "$(scripts/pydeps-parquet.sh)"   # install if needed, export KEYHEAT_TEST_PYTHON
#   scripts/pydeps-parquet.sh env         # only print the export line
#
# Progress goes to stderr, the export line to stdout. The test also finds
# the environment without the export, at the default location below.
#
# Environment:
#   KEYHEAT_PYENV   the virtual environment; default $KEYHEAT_CACHE/pyenv
#   KEYHEAT_CACHE   keyheat's cache folder; default ~/.cache/keyheat
#   PYTHON          the interpreter that creates the environment; default python3
set -euo pipefail

CACHE=${KEYHEAT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/keyheat}
VENV=${KEYHEAT_PYENV:-$CACHE/pyenv}
PY=$VENV/bin/python
# Pinned so every machine reads the archive with the same readers.
PACKAGES=(duckdb==2.0.0 pyarrow==26.0.1)

log() { printf 'pydeps-parquet: %s\n' "$*" >&2; }

print_env() { printf 'export KEYHEAT_TEST_PYTHON=%q\n' "$PY"; }

if [[ ${1:-} == env ]]; then
	print_env
	exit 0
fi
if [[ $# -gt 0 ]]; then
	log "usage: $0 [env]"
	exit 2
fi

# installed reports whether the venv has exactly the pinned versions.
installed() {
	[[ -x $PY ]] || return 1
	"$PY" - "${PACKAGES[@]}" <<'PYEOF' 2>/dev/null
import sys
from importlib.metadata import version, PackageNotFoundError
for spec in sys.argv[1:]:
    name, want = spec.split("==")
    try:
        if version(name) != want:
            sys.exit(1)
    except PackageNotFoundError:
        sys.exit(1)
PYEOF
}

if installed; then
	log "duckdb and pyarrow present in $VENV"
else
	if [[ ! -x $PY ]]; then
		log "creating $VENV"
		mkdir -p "$(dirname "$VENV")"
		"${PYTHON:-python3}" -m venv "$VENV" >&2 ||
			{ log "python3 -m venv failed (on Debian: apt-get install python3-venv)"; exit 1; }
	fi
	log "installing ${PACKAGES[*]} into $VENV"
	"$PY" -m pip install --quiet --disable-pip-version-check "${PACKAGES[@]}" >&2
	installed || { log "installed packages do not match ${PACKAGES[*]}"; exit 1; }
fi
print_env
