#!/usr/bin/env bash
# The whole suite as `make test` runs it (docs/testing.md, "Contributing: the test loop"):
#   1. every test not marked `serial`, spread over WORKERS pytest-xdist workers, one test module
#      per work unit (--dist loadfile: its module-scoped fixtures start once), longest module first
#      (--no-loadscope-reorder keeps the order tests/conftest.py sorts them in);
#   2. the tests marked `serial`, one at a time, with the machine to themselves;
#   3. with coverage (COV_ARGS non-empty): both passes' data combined -- the workers', the serial
#      pass's and every Python subprocess's (coverage's patch = ["subprocess"]) -- reported, and the
#      floor in pyproject.toml ([tool.coverage.report] fail_under) enforced.
# Usage: scripts/test.sh PYTHON [PYTEST_ARGS...]
# Environment: WORKERS (default 3; 0 runs pass 1 without xdist), COV_ARGS (default --cov; empty:
# no coverage). pytest's exit 5 ("no tests collected") in both passes is a failure, not a pass.
set -u
py="$1"; shift
workers="${WORKERS:-3}"
cov_args="${COV_ARGS---cov}"
cov_pass=()
if [ -n "$cov_args" ]; then
  # shellcheck disable=SC2206  # COV_ARGS is a list of options
  cov_pass=($cov_args --cov-report= --cov-fail-under=0)
fi
xdist=()
if [ "$workers" != 0 ]; then
  xdist=(-n "$workers" --dist loadfile --no-loadscope-reorder)
fi
start=$(date +%s)
"$py" -m pytest -q "${xdist[@]}" -m "not serial" "${cov_pass[@]}" "$@"; parallel=$?
mid=$(date +%s)
append=()
[ -n "$cov_args" ] && append=(--cov-append)
"$py" -m pytest -q -m serial "${cov_pass[@]}" "${append[@]}" "$@"; serial=$?
end=$(date +%s)
echo "test loop: parallel pass ($workers workers) $((mid - start))s (exit $parallel), serial pass $((end - mid))s (exit $serial)"
status=0
if [ "$parallel" -eq 5 ] && [ "$serial" -eq 5 ]; then
  echo "pytest collected no tests" >&2
  status=1
fi
for pass in "$parallel" "$serial"; do
  if [ "$pass" -ne 0 ] && [ "$pass" -ne 5 ]; then status=1; fi
done
if [ -n "$cov_args" ]; then
  "$py" -m coverage report || status=1   # the combined data; exits 2 below the floor
fi
exit "$status"
