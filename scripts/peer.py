"""``make peer``: an SDK's *own* test suite, run with the liveness transport in the path.

The SDK's sdist ships its ``tests/``; its mocks (respx) sit *below* a transport (at httpcore's
connection pool), so a transport placed under the SDK's clients is really exercised. For the
installed version of each SDK this:

1. downloads its sdist into ``.peer/src/`` and a virtual environment for its tests into
   ``.peer/venv-<sdk>-<version>/`` (the SDK at the installed version, its locked test tools, this
   project editable; rebuilt when the lock or the project's build inputs change);
2. runs its tests three times: ``plain``; ``shadow`` and ``enforce`` with the auto-instrumentor
   putting the liveness transport under every client for every host (``scripts/peer_plugin.py``,
   which counts the requests and attempts the transport judged: the proof it was in the path);
3. prints, per mode, the tests that fail there but pass plain, and checks them: shadow must add
   none; enforce may add only the ones ``scripts/peer_differences.txt`` lists (intended
   differences, their reasons in ``docs/compatibility.md``). Exit status 1 when either check fails.

Usage: ``python scripts/peer.py [--sdk anthropic,openai] [--modes plain,shadow,enforce]
[--workers N] [-- PYTEST_ARGS...]``. ``.peer/out/<sdk>/report.json`` keeps the figures.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".peer"
#: The enforce-mode differences by design, one test id a line (the reasons: docs/compatibility.md).
DIFFERENCES = ROOT / "scripts" / "peer_differences.txt"
#: A test that runs longer fails (pytest-timeout, its stack printed): a wait the transport made
#: longer than the test expects is a difference to see, not a hung run.
TEST_TIMEOUT = 120
BUILD_INPUTS = ["pyproject.toml", "setup.py",
                *sorted(str(p.relative_to(ROOT)) for d in ("core", "transport")
                        for p in (ROOT / "otel_liveness" / d).glob("*.[ch]"))]


@dataclass(frozen=True)
class Sdk:
    name: str
    extras: str
    #: test paths not run: they need a server this machine does not have (Stainless's Prism mock)
    ignore: tuple[str, ...]
    #: lock entries not installed: our own pins of the HTTP family win; linters and type stubs
    #: are not tests
    skip_requirements: tuple[str, ...]


SDKS = {
    "anthropic": Sdk("anthropic", "bedrock,vertex", ("tests/api_resources",),
                     ("httpx2", "httpcore2", "pyright", "ruff", "nodeenv", "boto3-stubs", "botocore-stubs",
                      "types-awscrt", "types-s3transfer")),
    "openai": Sdk("openai", "", ("tests/api_resources",),
                  ("httpx2", "httpcore2", "pyright", "ruff", "nodeenv", "mypy", "types-", "ty", "pandas-stubs")),
}


def run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, check=True, text=True, **kw)  # type: ignore[call-overload,no-any-return]


def sdist(sdk: Sdk, version: str) -> Path:
    src = WORK / "src" / f"{sdk.name}-{version}"
    if (src / "tests").is_dir():
        return src
    dist = WORK / "dist"
    dist.mkdir(parents=True, exist_ok=True)
    run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
         f"{sdk.name}=={version}", "-d", str(dist)])
    archive = next(dist.glob(f"{sdk.name}-{version}.tar.gz"))
    with tarfile.open(archive) as tar:
        tar.extractall(WORK / "src", filter="data")
    return src


def requirements(sdk: Sdk, src: Path) -> list[str]:
    """The SDK's locked development requirements (``requirements-dev.lock``; else its pyproject's
    ``[dependency-groups] dev``), less its own package, our family pins, linters and stubs, and
    lines for Pythons other than this one."""
    lock = src / "requirements-dev.lock"
    if lock.exists():
        lines = lock.read_text().splitlines()
    else:
        import tomllib

        lines = tomllib.loads((src / "pyproject.toml").read_text()).get("dependency-groups", {}).get("dev", [])
    out = []
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#") or line.startswith("-e") or "python_full_version <" in line:
            continue
        name = re.split(r"[=<>;\[ ]", line, maxsplit=1)[0].lower()
        if any(name == s or (s.endswith("-") and name.startswith(s)) for s in sdk.skip_requirements):
            continue
        out.append(line.split(";")[0].strip())
    return out


def venv(sdk: Sdk, version: str, src: Path) -> Path:
    reqs = [*requirements(sdk, src), "opentelemetry-instrumentation", "pytest-timeout"]
    digest = hashlib.sha256("\n".join(reqs).encode() + b"".join((ROOT / p).read_bytes() for p in BUILD_INPUTS))
    env = WORK / f"venv-{sdk.name}-{version}"
    stamp = env / f".installed-{digest.hexdigest()[:16]}"
    if stamp.exists():
        return env
    print(f"peer: building {env.relative_to(ROOT)} ({len(reqs)} locked test requirements)", flush=True)
    if not (env / "bin" / "python").exists():
        run([sys.executable, "-m", "venv", str(env)])
    pkg = f"{sdk.name}[{sdk.extras}]=={version}" if sdk.extras else f"{sdk.name}=={version}"
    run([str(env / "bin" / "python"), "-m", "pip", "install", "-q", "--upgrade", "pip"])
    run([str(env / "bin" / "python"), "-m", "pip", "install", "-q", *reqs, pkg, "-e", str(ROOT)])
    for old in env.glob(".installed-*"):
        old.unlink()
    stamp.touch()
    return env


def run_mode(sdk: Sdk, env: Path, src: Path, mode: str, workers: int, extra: list[str]) -> dict[str, object]:
    out = WORK / "out" / sdk.name / mode
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.json"):
        old.unlink()
    cmd = [str(env / "bin" / "python"), "-m", "pytest", "-q", "-p", "peer_plugin", "-p", "no:cacheprovider",
           "-n", str(workers), "--tb=line", f"--timeout={TEST_TIMEOUT}",
           *(f"--ignore={p}" for p in sdk.ignore), *extra]
    environ = {**os.environ, "PEER_MODE": mode, "PEER_OUT": str(out),
               "PYTHONPATH": os.pathsep.join([str(ROOT / "scripts"), str(src)])}
    for name in [n for n in environ if n.startswith("OTEL_LIVENESS_")]:
        del environ[name]
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=src, env=environ, text=True, capture_output=True)
    seconds = time.monotonic() - started
    (out / "pytest.log").write_text(proc.stdout + proc.stderr)
    outcomes_file = out / "outcomes.json"
    if not outcomes_file.exists():
        sys.exit(f"peer: {sdk.name} {mode}: pytest wrote no outcomes (exit {proc.returncode}); see {out}/pytest.log")
    outcomes: dict[str, str] = json.loads(outcomes_file.read_text())
    requests = attempts = 0
    for calls in out.glob("calls-*.json"):
        counted = json.loads(calls.read_text())
        requests += counted["requests"]
        attempts += counted["attempts"]
    tally: dict[str, int] = {}
    for outcome in outcomes.values():
        tally[outcome] = tally.get(outcome, 0) + 1
    return {"outcomes": outcomes, "tally": tally, "requests": requests, "attempts": attempts, "seconds": round(seconds)}


def documented() -> set[str]:
    """The enforce-mode differences by design: the test ids ``scripts/peer_differences.txt`` lists
    (one a line; ``#`` lines are headings and comments)."""
    if not DIFFERENCES.exists():
        return set()
    return {line.strip() for line in DIFFERENCES.read_text().splitlines()
            if line.strip() and not line.lstrip().startswith("#")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sdk", default="anthropic", help="comma-separated: " + ", ".join(SDKS))
    parser.add_argument("--modes", default="plain,shadow,enforce")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("pytest_args", nargs="*", help="after --: more pytest arguments (a selection)")
    args = parser.parse_args()
    status = 0
    listed = documented()
    for name in args.sdk.split(","):
        sdk = SDKS[name]
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            print(f"peer: {name} is not installed here; skipped")
            continue
        src = sdist(sdk, version)
        env = venv(sdk, version, src)
        results = {}
        for mode in args.modes.split(","):
            print(f"peer: {name} {version}: {mode} ...", flush=True)
            results[mode] = run_mode(sdk, env, src, mode, args.workers, args.pytest_args)
        plain = results.get("plain")
        kept = WORK / "out" / name / "plain" / "outcomes.json"
        if plain is None and kept.exists():  # (a later mode alone: compared with the last plain run's outcomes)
            plain = {"outcomes": json.loads(kept.read_text())}
        report: dict[str, object] = {"sdk": name, "version": version}
        for mode, result in results.items():
            tally = result["tally"]
            line = (f"{name} {version} {mode:8s} passed {tally.get('passed', 0):5d}  failed {tally.get('failed', 0):4d}"
                    f"  errors {tally.get('error', 0):3d}  skipped {tally.get('skipped', 0):3d}"
                    f"  transport requests {result['requests']:5d} attempts {result['attempts']:5d}  {result['seconds']} s")
            print(line)
            entry: dict[str, object] = {k: v for k, v in result.items() if k != "outcomes"}
            if plain is not None and mode != "plain":
                base: dict[str, str] = plain["outcomes"]  # type: ignore[assignment]
                now: dict[str, str] = result["outcomes"]  # type: ignore[assignment]
                new = sorted(t for t, o in now.items() if o in ("failed", "error") and base.get(t) == "passed")
                entry["new_failures"] = new
                unexplained = new if mode == "shadow" else [t for t in new if t not in listed]
                print(f"  new failures in {mode}: {len(new)}"
                      + (f" ({len(new) - len(unexplained)} listed in scripts/peer_differences.txt)" if mode == "enforce" else ""))
                for test in new:
                    mark = "  " if test not in unexplained else "! "
                    print(f"    {mark}{test}")
                if mode != "plain" and not result["requests"]:
                    print(f"  the transport judged no request in {mode}: it was not in the path")
                    status = 1
                if unexplained:
                    status = 1
            report[mode] = entry
        (WORK / "out" / name / "report.json").write_text(json.dumps(report, indent=1))
    return status


if __name__ == "__main__":
    sys.exit(main())
