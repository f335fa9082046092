#!/usr/bin/env bash
# The I/O-free core tests (make check's CHECK_TESTS, with --io-free) on every Python the package's
# classifiers promise, other than the one make test runs the whole suite on: part of `make test`
# (the test-pythons target).
#
# For each version 3.X it finds an interpreter -- python3.X on PATH, else pyenv's newest 3.X
# ($(pyenv root)/versions/3.X.*) -- and keeps a small virtualenv in .venv-py3.X: the package
# installed editable (`pip install -e .`, which builds the C extensions in place for that Python)
# plus what the core tests import (pytest, hypothesis, httpx2, botocore, at the bounds of the dev
# extra in pyproject.toml). The virtualenv is re-made only when its stamp changes: the build inputs
# (pyproject.toml, setup.py, the C sources), this script and the interpreter's version. It then
# checks that the C extensions were built and load (a silent fall-back to pure Python fails here)
# and runs the tests. A version with no interpreter on this machine is skipped with a message.
#
# Usage: scripts/core_on_pythons.sh TEST...
# Environment: PYTHONS (default: the "Programming Language :: Python :: 3.X" classifiers),
# SKIP_PYTHON (a version tested otherwise, e.g. 3.11: make test's own), PYTHON_3_X (an interpreter
# for 3.X, instead of looking for one).
set -u
cd "$(dirname "$0")/.." || exit 1
if [ "$#" -eq 0 ]; then
  echo "usage: $0 TEST..." >&2
  exit 2
fi

versions=${PYTHONS:-$(grep -o '"Programming Language :: Python :: 3\.[0-9]*"' pyproject.toml | grep -o '3\.[0-9]*')}
skip=${SKIP_PYTHON:-}

find_python() {  # the interpreter of version $1, or nothing
  local version=$1 override candidate
  override=$(printenv "PYTHON_${version//./_}" || true)
  if [ -n "$override" ]; then
    echo "$override"
    return
  fi
  for candidate in "$(command -v "python$version" 2>/dev/null)" \
      $(ls -d "$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")/versions/$version".* 2>/dev/null | sort -V -r | sed 's|$|/bin/python'"$version"'|'); do
    # (a pyenv shim for a version that is not selected is on PATH but fails: run it to be sure)
    if [ -n "$candidate" ] && [ -x "$candidate" ] && \
        "$candidate" -c "import sys; sys.exit(sys.version_info[:2] != tuple(map(int, '$version'.split('.'))))" 2>/dev/null; then
      echo "$candidate"
      return
    fi
  done
}

status=0
for version in $versions; do
  if [ "$version" = "$skip" ]; then
    continue
  fi
  py=$(find_python "$version")
  if [ -z "$py" ]; then
    echo "core_on_pythons: Python $version: no interpreter found (python$version on PATH, pyenv's versions/$version.*): skipped"
    continue
  fi
  venv=.venv-py$version
  key=$( { cat pyproject.toml setup.py otel_liveness/core/wire/*.[ch] otel_liveness/transport/*.c "$0"; "$py" -VV; } | cksum | cut -d' ' -f1)
  start=$(date +%s)
  if [ ! -e "$venv/.installed-$key" ]; then
    echo "core_on_pythons: Python $version ($py): building $venv"
    rm -rf "$venv"
    # The core tests' imports, at the dev extra's bounds.
    mapfile -t reqs < <("$py" -c '
import re, tomllib
dev = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["dev"]
print("\n".join(d for d in dev if re.split(r"[<>=!~\[ ]", d)[0] in ("pytest", "hypothesis", "httpx2", "botocore")))')
    if ! { "$py" -m venv "$venv" &&
           "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e . "${reqs[@]}"; }; then
      echo "core_on_pythons: Python $version: the install failed" >&2
      status=1
      continue
    fi
    touch "$venv/.installed-$key"
  fi
  if ! "$venv/bin/python" -c '
import sys
from otel_liveness.core.wire import bulk, lane
if not (bulk.NATIVE and lane.NATIVE):
    sys.exit(f"the C extensions did not build or load: bulk.NATIVE={bulk.NATIVE}, lane.NATIVE={lane.NATIVE}")'; then
    echo "core_on_pythons: Python $version: no C extensions" >&2
    status=1
    continue
  fi
  mid=$(date +%s)
  "$venv/bin/python" -m pytest -q -p no:cacheprovider --io-free "$@"
  result=$?
  end=$(date +%s)
  echo "core_on_pythons: Python $version: exit $result (install $((mid - start))s, tests $((end - mid))s)"
  [ "$result" -eq 0 ] || status=1
done
exit "$status"
