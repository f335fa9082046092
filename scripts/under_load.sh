#!/usr/bin/env bash
# Run a command RUNS times with every core held by a busy loop (what a loaded CI machine does to
# timing), and report how many runs passed. Exit 0 only when all did.
#   scripts/under_load.sh RUNS COMMAND...        (LOAD_PROCS: busy loops, default: the core count)
set -u
runs="$1"; shift
procs="${LOAD_PROCS:-$(nproc)}"
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done; }
trap cleanup EXIT
trap 'exit 130' INT TERM
for _ in $(seq "$procs"); do
  python3 -c 'while True: pass' &
  pids+=("$!")
done
passed=0
for run in $(seq "$runs"); do
  start=$(date +%s)
  if "$@"; then passed=$((passed + 1)); status=passed; else status=FAILED; fi
  echo "under load ($procs busy loops): run $run/$runs $status in $(( $(date +%s) - start ))s"
done
echo "under load: $passed/$runs runs passed"
[ "$passed" -eq "$runs" ]
