#!/usr/bin/env bash
# Mutation testing of otel_liveness/core with cosmic-ray (scripts/mutation.toml), in a scratch copy
# of the tree so that an interrupted run never leaves a mutated file behind.
#   scripts/mutate.sh [OUT_DIR]      -> OUT_DIR/session.sqlite, OUT_DIR/report.txt, OUT_DIR/survivors.txt
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
OUT="$(mkdir -p "${1:-$ROOT/.mutation}" && cd "${1:-$ROOT/.mutation}" && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
tar -C "$ROOT" --exclude=.venv --exclude=.git --exclude=.mutation --exclude=.hypothesis --exclude=.cache -cf - . | tar -C "$WORK" -xf -
export PATH="$VENV/bin:$PATH"
cd "$WORK"
python -m pytest -q -p no:cacheprovider $(sed -n 's/^test-command = "python -m pytest -x -q -p no:cacheprovider \(.*\)"$/\1/p' scripts/mutation.toml) >/dev/null \
  || { echo "the baseline test run fails: fix it before mutating" >&2; exit 1; }
rm -f "$OUT/session.sqlite"
cosmic-ray init scripts/mutation.toml "$OUT/session.sqlite"
cr-filter-operators "$OUT/session.sqlite" scripts/mutation.toml
cosmic-ray exec scripts/mutation.toml "$OUT/session.sqlite"
cr-report "$OUT/session.sqlite" --show-pending > "$OUT/report.txt" || true
python "$ROOT/scripts/mutation_survivors.py" "$OUT/session.sqlite" > "$OUT/survivors.txt"
tail -n 3 "$OUT/report.txt"
echo "survivors: $OUT/survivors.txt ($(wc -l < "$OUT/survivors.txt"))"
