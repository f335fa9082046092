"""A bounded coverage-guided fuzzing run (atheris) in the default test run; longer on demand:
``python fuzz/fuzz_sse.py -max_total_time=600``."""

from __future__ import annotations

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_bounded_atheris_run(tmp_path: pathlib.Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "fuzz" / "fuzz_sse.py"), "-atheris_runs=30000", "-max_len=2048", "-seed=1",
         f"-artifact_prefix={tmp_path}/"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Done 30000" in proc.stderr
    assert not list(tmp_path.glob("crash-*"))


# Inputs a run once failed on, checked by the harness itself (each was a harness or engine bug).
REGRESSIONS = [
    # an error frame before content: the engine schedules a retry, and the harness used to tell a
    # backing-off engine eof() (IllegalInput: no driver does that)
    b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n\x00\x00',
]


def test_inputs_a_run_once_failed_on_pass_the_harness() -> None:
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import fuzz_sse\n"
            "for raw in eval(sys.argv[2]): fuzz_sse.test_one(raw)\nprint('checked', len(eval(sys.argv[2])))")
    proc = subprocess.run([sys.executable, "-c", code, str(ROOT / "fuzz"), repr(REGRESSIONS)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"checked {len(REGRESSIONS)}" in proc.stdout
