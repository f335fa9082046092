#!/usr/bin/env bash
# The C extensions (otel_liveness/core/wire/_bulk.c, _lane.c) under
# AddressSanitizer and UndefinedBehaviorSanitizer: `make sanitize`.
#
#   scripts/sanitize.sh PYTHON
#
# 1. Builds the extensions with -fsanitize=address,undefined into build/sanitize/<hash>/, never
#    touching the in-place build the test suite imports. <hash> covers the C sources and the
#    headers they share, the flags, the compiler and the Python version: a repeat run with nothing
#    changed does not rebuild.
# 2. Copies the package, the tests and the fuzz harness next to them (a fresh copy every run, so
#    the Python side is always the current one) and runs, in that copy, with the sanitizer runtime
#    preloaded into the interpreter:
#      - the C-vs-reference property tests (tests/test_bulk.py, tests/test_lane.py, tests/test_sse.py,
#        tests/test_members.py)
#        and the engine's and the retained-bytes tests (tests/test_engine.py, tests/test_retained.py:
#        the scanner's hold, journal and retract as the engine drives them);
#      - a bounded fuzz run of fuzz/fuzz_sse.py's checks (SANITIZE_FUZZ_RUNS inputs, at most
#        SANITIZE_FUZZ_SECONDS seconds): blind mutations of the seed corpus fuzz/corpus.py writes
#        (real replies of every SSE wire). Not libFuzzer's coverage-guided loop: under gcc's ASan,
#        libasan (loaded first) answers the coverage hooks atheris registers its Python coverage
#        with, and libFuzzer then keeps a single input. The coverage-guided run is the plain one
#        (tests/test_fuzz.py in make test, or fuzz/fuzz_sse.py by hand).
#    PYTHONMALLOC=malloc: CPython's small-object allocator would otherwise hand out blocks from its
#    own arenas, where ASan sees no red zones. detect_leaks=0: CPython keeps objects alive at exit by
#    design. halt_on_error=1 (and -fno-sanitize-recover): the first report ends the run.
# 3. Exits non-zero if a step fails or any sanitizer report appears in the output.
#
# SANITIZE_PYTEST_ARGS adds pytest arguments (e.g. a -k selection); SANITIZE_DIR moves the build.
set -euo pipefail

PYTHON=${1:-.venv/bin/python}
PYTHON=$(cd "$(dirname "$PYTHON")" && pwd)/$(basename "$PYTHON")
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CC=${CC:-gcc}
FLAGS="-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -fPIC -shared"
FUZZ_RUNS=${SANITIZE_FUZZ_RUNS:-10000}
FUZZ_SECONDS=${SANITIZE_FUZZ_SECONDS:-180}

LIBASAN=$("$CC" -print-file-name=libasan.so)
# the C++ runtime too: atheris (C++) throws at exit, and ASan's __cxa_throw interceptor needs the
# real one loaded when ASan starts
LIBSTDCXX=$(readlink -f "$("$CC" -print-file-name=libstdc++.so.6)")
if [ ! -e "$LIBASAN" ] || [ ! -e "$LIBSTDCXX" ]; then
  echo "sanitize: no libasan.so (Debian: gcc's libgcc-12-dev) or libstdc++.so.6 for $CC" >&2
  exit 2
fi
INCLUDE=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
SUFFIX=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
# package/module: the extensions, each built from otel_liveness/<package>/<module>.c
EXTS="core/wire/_bulk core/wire/_lane"
HASH=$( { for ext in $EXTS; do cat "$ROOT/otel_liveness/$ext.c"; done; cat "$ROOT"/otel_liveness/core/wire/*.h; echo "$FLAGS";
          "$CC" --version | head -1; "$PYTHON" -VV; } | sha256sum | cut -c1-16)
BASE=${SANITIZE_DIR:-$ROOT/build/sanitize}
OUT=$BASE/$HASH

if [ -e "$OUT/.built" ]; then
  echo "sanitize: cached build $OUT"
else
  echo "sanitize: building the extensions with ASan+UBSan into $OUT"
  rm -rf "$OUT"
  for ext in $EXTS; do
    mkdir -p "$OUT/lib/$(dirname "$ext")"
    "$CC" $FLAGS -I"$INCLUDE" "$ROOT/otel_liveness/$ext.c" -o "$OUT/lib/$ext$SUFFIX"
  done
  touch "$OUT/.built"
fi
# older builds (other sources) are not reused: keep only this one
find "$BASE" -mindepth 1 -maxdepth 1 -type d ! -name "$HASH" -exec rm -rf {} +

# The copy the runs import from: the current Python files, the sanitized extensions.
TREE=$OUT/tree
rm -rf "$TREE"
mkdir -p "$TREE"
cp -r "$ROOT/otel_liveness" "$ROOT/tests" "$ROOT/fuzz" "$ROOT/pyproject.toml" "$TREE/"
find "$TREE" \( -name '*.so' -o -name __pycache__ \) -prune -exec rm -rf {} +
for ext in $EXTS; do
  cp "$OUT/lib/$ext$SUFFIX" "$TREE/otel_liveness/$ext$SUFFIX"
done

LOG=$OUT/run.log
: >"$LOG"
# Reports go to files as well as to stderr: pytest captures file descriptor 2 while a test runs,
# and a process the sanitizer ends takes the captured report with it.
REPORTS=$OUT/reports
rm -rf "$REPORTS"
mkdir -p "$REPORTS"
run() {
  # the sanitizer runtime must be the first library the interpreter loads
  (cd "$TREE" && env PYTHONPATH="$TREE" PYTHONMALLOC=malloc LD_PRELOAD="$LIBASAN:$LIBSTDCXX" \
     ASAN_OPTIONS=detect_leaks=0:halt_on_error=1:abort_on_error=0:exitcode=86:log_path="$REPORTS/asan" \
     UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:exitcode=87:log_path="$REPORTS/ubsan" \
     OTEL_LIVENESS_PURE= HYPOTHESIS_STORAGE_DIRECTORY="$OUT/hypothesis" \
     "$@") 2>&1 | tee -a "$LOG"
  return "${PIPESTATUS[0]}"
}

status=0
# The sanitized modules are the ones imported, and they carry the sanitizer.
run "$PYTHON" -c "
import sys
from otel_liveness.core.wire import _bulk, _lane, bulk, lane
for m in (_bulk, _lane):
    assert m.__file__.startswith(sys.argv[1]), m.__file__
    assert b'__asan_' in open(m.__file__, 'rb').read(), m.__file__ + ' is not instrumented'
assert bulk.NATIVE and lane.NATIVE
print('sanitize: importing', _bulk.__file__, 'and', _lane.__file__)
" "$TREE/" || status=1
if [ $status -eq 0 ]; then
  echo "sanitize: the C-vs-reference property tests, the engine's tests"
  run "$PYTHON" -m pytest -q -p no:cacheprovider -x tests/test_bulk.py tests/test_lane.py tests/test_sse.py tests/test_members.py \
    tests/test_engine.py tests/test_retained.py ${SANITIZE_PYTEST_ARGS:-} || status=1
fi
if [ $status -eq 0 ]; then
  echo "sanitize: fuzz/fuzz_sse.py, $FUZZ_RUNS inputs (at most ${FUZZ_SECONDS}s)"
  rm -rf "$OUT/fuzz" "$OUT/corpus"
  mkdir -p "$OUT/fuzz"
  run "$PYTHON" fuzz/corpus.py "$OUT/corpus" || status=1
  run "$PYTHON" fuzz/fuzz_sse.py --mutate "$FUZZ_RUNS" --seconds "$FUZZ_SECONDS" --seed 1 \
    "$OUT/corpus" "$OUT/fuzz" || status=1
  if ls "$OUT"/fuzz/crash-* "$OUT"/fuzz/leak-* "$OUT"/fuzz/timeout-* >/dev/null 2>&1; then
    echo "sanitize: the fuzz run left a reproducer in $OUT/fuzz/" >&2
    status=1
  fi
fi
if ls "$REPORTS"/* >/dev/null 2>&1; then
  cat "$REPORTS"/* >&2
  echo "sanitize: a sanitizer report (in $REPORTS)" >&2
  status=1
fi
if grep -q -E "ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer|SUMMARY: (Address|UndefinedBehavior)Sanitizer" "$LOG"; then
  echo "sanitize: a sanitizer report (see $LOG)" >&2
  status=1
fi
if [ $status -ne 0 ]; then
  echo "sanitize: FAILED (log: $LOG)" >&2
else
  echo "sanitize: clean (log: $LOG)"
fi
exit $status
