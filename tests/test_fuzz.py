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
