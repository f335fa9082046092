"""The pure core imports neither httpx, opentelemetry nor a clock."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import otel_liveness.core

CORE = pathlib.Path(otel_liveness.core.__file__).parent
FORBIDDEN = ("httpx", "httpx2", "httpcore", "httpcore2", "opentelemetry", "time", "datetime", "asyncio", "anyio",
             "trio", "socket", "threading", "random", "logging")


def imported_modules(path: pathlib.Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_core_sources_import_nothing_forbidden() -> None:
    files = sorted(CORE.glob("*.py"))
    assert len(files) >= 7
    for path in files:
        bad = imported_modules(path) & set(FORBIDDEN)
        assert not bad, f"{path.name} imports {sorted(bad)}"


def test_core_imports_without_http_or_otel_installed() -> None:
    blocker = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.split('.')[0] in {FORBIDDEN[:5]!r}:\n"
        "            raise ImportError('blocked ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import otel_liveness.core, otel_liveness.tools.analyze\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('httpx','httpx2','opentelemetry')))\n"
    )
    out = subprocess.run([sys.executable, "-c", blocker], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
