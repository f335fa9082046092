"""What a user installs and gets: errors that name the missing extra, the schema URL on the
tracer and meter, and the README's ``opentelemetry-instrument`` command in a fresh virtualenv
built from the package's metadata."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from typing import Any

import httpx2
import pytest

import otel_liveness
from otel_liveness.telemetry import semconv as S
from otel_liveness.testing import anthropic_reply
from otel_liveness.testing import steps as s

from .otlp_receiver import OTLPReceiver, attributes
from .test_telemetry import Telemetry

# A meta-path finder that makes the named packages (and their submodules) absent, as on a machine
# where the extra bringing them was not installed.
BLOCKER = textwrap.dedent(
    """
    import sys
    BLOCKED = {blocked!r}
    class Absent:
        def find_spec(self, name, path=None, target=None):
            if any(name == b or name.startswith(b + ".") for b in BLOCKED):
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
    sys.meta_path.insert(0, Absent())
    """
)


def run_without(blocked: tuple[str, ...], code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", BLOCKER.format(blocked=blocked) + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("blocked", "code", "message"), [
    (("httpx2",), "import otel_liveness.httpx2",
     "otel_liveness.httpx2 needs httpx2, which is not installed: pip install 'otel-liveness[httpx2]' "
     "(from a checkout: pip install '.[httpx2]')"),
    (("httpx",), "import otel_liveness.httpx",
     "otel_liveness.httpx needs httpx, which is not installed: pip install 'otel-liveness[httpx]' "
     "(from a checkout: pip install '.[httpx]')"),
    (("opentelemetry.instrumentation",), "import otel_liveness.telemetry as t\nt.instrument()",
     "otel_liveness.telemetry.instrument() needs opentelemetry.instrumentation, which is not installed: "
     "pip install 'otel-liveness[instrument]' (from a checkout: pip install '.[instrument]')"),
])
def test_a_missing_dependency_names_the_extra(blocked: tuple[str, ...], code: str, message: str) -> None:
    proc = run_without(blocked, code)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == f"ModuleNotFoundError: {message}", proc.stderr[-2000:]


def test_the_error_is_still_a_module_not_found_error_with_its_name() -> None:
    proc = run_without(("httpx2",), """
        try:
            import otel_liveness.httpx2
        except ModuleNotFoundError as exc:
            print(exc.name)
        """)
    assert proc.returncode == 0 and proc.stdout.strip() == "httpx2", proc.stderr


def test_the_core_package_imports_without_either_http_family() -> None:
    proc = run_without(("httpx", "httpx2", "httpcore", "httpcore2"), """
        import otel_liveness
        print(otel_liveness.Policy().raw_idle_timeout)
        """)
    assert proc.returncode == 0 and proc.stdout.strip() == "90.0", proc.stderr


def test_instrumenting_without_an_http_family_says_what_to_install() -> None:
    proc = run_without(("httpx", "httpx2"), """
        import logging
        logging.basicConfig(level=logging.WARNING, format="%(message)s")
        import otel_liveness.telemetry as t
        t.instrument()
        """)
    assert proc.returncode == 0, proc.stderr
    assert "found neither httpx2 nor httpx: nothing to instrument (pip install 'otel-liveness[anthropic]'" in proc.stderr


def test_tracer_and_meter_carry_the_schema_url(provider) -> None:  # type: ignore[no-untyped-def]
    tel = Telemetry()
    url = provider.add("schema", [[s.Headers(), *anthropic_reply()]])
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), hooks=[tel.hook])
    with httpx2.Client(transport=transport) as client:
        assert client.post(url + "/v1/messages", json={"model": "m", "stream": True}).status_code == 200
    spans = tel.finished()
    assert spans and {sp.instrumentation_scope.schema_url for sp in spans} == {S.SCHEMA_URL}
    data = tel.reader.get_metrics_data()
    scopes = [sm.scope for rm in data.resource_metrics for sm in rm.scope_metrics if sm.scope.name == S.SCOPE]
    assert scopes and {scope.schema_url for scope in scopes} == {S.SCHEMA_URL}


def test_the_schema_url_is_a_published_version_defining_every_reused_name() -> None:
    from opentelemetry.semconv._incubating.attributes import (
        error_attributes,
        gen_ai_attributes,
        http_attributes,
        server_attributes,
    )
    from opentelemetry.semconv._incubating.metrics import gen_ai_metrics
    from opentelemetry.semconv.schemas import Schemas

    assert S.SCHEMA_URL in {schema.value for schema in Schemas}
    defined = {value for module in (error_attributes, gen_ai_attributes, http_attributes, server_attributes, gen_ai_metrics)
               for value in vars(module).values() if isinstance(value, str)}
    reused = [value for name, value in vars(S).items()
              if name.isupper() and isinstance(value, str) and value.split(".")[0] in ("gen_ai", "http", "server", "error")]
    reused += [spec[0] for name, spec in vars(S).items() if name.startswith("M_") and spec[0].startswith("gen_ai.")]
    assert len(reused) >= 12
    assert [name for name in reused if name not in defined] == []


# -- the README's auto-instrumentation command, in a virtualenv built from the package's metadata --

ROOT = pathlib.Path(__file__).resolve().parent.parent
CACHE = pathlib.Path(os.environ.get("XDG_CACHE_HOME", pathlib.Path.home() / ".cache")) / "otel-liveness" / "venvs"


def readme_auto_instrumentation() -> tuple[str, str]:
    """(the pip line, the run line) of the README's auto-instrumentation block."""
    section = (ROOT / "README.md").read_text().split("### Auto-instrumentation", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None
    lines = [line for line in block.group(1).splitlines() if line.strip()]
    pip = [line for line in lines if line.startswith("pip install ")]
    run = [line for line in lines if "opentelemetry-instrument" in line]
    assert len(pip) == 1 and len(run) == 1, lines
    return pip[0], run[0]


def _package_sources() -> list[pathlib.Path]:
    files = [ROOT / "pyproject.toml", ROOT / "setup.py", ROOT / "README.md", ROOT / "LICENSE", ROOT / "MANIFEST.in",
             ROOT / "CHANGELOG.md"]
    files += sorted(p for p in (ROOT / "otel_liveness").rglob("*")
                    if p.is_file() and p.suffix in (".py", ".pyi", ".c", ".typed"))
    return files


def fresh_venv(pip_line: str) -> pathlib.Path:
    """A virtualenv with exactly what the README's pip line installs, the package built from this
    tree's sources (not the dev extra): built once per content of the sources and the line
    (about 15 s with pip's cache warm), then reused."""
    digest = hashlib.sha256(pip_line.encode())
    for path in _package_sources():
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    venv = CACHE / f"instrument-{digest.hexdigest()[:16]}"
    if (venv / ".complete").exists():
        (venv / ".complete").touch()  # in use: kept by the pruning below
        return venv
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"{venv.name}.lock", "w") as lock, tempfile.TemporaryDirectory() as scratch:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test run building the same one: wait for it
        if (venv / ".complete").exists():
            return venv
        shutil.rmtree(venv, ignore_errors=True)  # an interrupted build
        src = pathlib.Path(scratch) / "src"
        for path in _package_sources():  # a copy: building in this tree would leave build/ behind
            target = src / path.relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
        # The README's own line, with this tree standing in for the released name.
        args = shlex.split(pip_line)[2:]
        args = [str(src) + arg[len("otel-liveness"):] if arg.startswith("otel-liveness") else arg for arg in args]
        proc = subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check", *args],
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        (venv / ".complete").touch()
    _prune(keep=venv)
    return venv


def _prune(keep: pathlib.Path, unused_for: float = 24 * 3600) -> None:
    """Remove the virtualenvs of earlier sources (about 120 MB each) not used for a day (another
    checkout on this machine may be using a recent one)."""
    for old in CACHE.glob("instrument-*"):
        if old == keep or not old.is_dir():
            continue
        # last used: its marker (touched on each use), or its lock (opened when a build starts)
        stamps = [p.stat().st_mtime for p in (old / ".complete", CACHE / f"{old.name}.lock") if p.exists()]
        if stamps and time.time() - max(stamps) < unused_for:
            continue
        shutil.rmtree(old, ignore_errors=True)
        (CACHE / f"{old.name}.lock").unlink(missing_ok=True)


class GRPCTraceReceiver:
    """An OTLP/gRPC trace receiver on loopback (grpcio and opentelemetry-proto's service stubs)."""

    def __init__(self) -> None:
        from concurrent import futures

        import grpc
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

        self.requests: list[Any] = []
        receiver = self

        class Service(trace_service_pb2_grpc.TraceServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:  # the service's method name
                receiver.requests.append(request)
                return trace_service_pb2.ExportTraceServiceResponse()

        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Service(), self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")

    def __enter__(self) -> GRPCTraceReceiver:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop(grace=None)

    def spans(self) -> list[tuple[str, Any]]:
        return [(ss.scope.name, span) for req in self.requests for rs in req.resource_spans
                for ss in rs.scope_spans for span in ss.spans]


AGENT = textwrap.dedent(
    """
    import os, anthropic, otel_liveness
    client = anthropic.Anthropic(base_url=os.environ["PROVIDER_URL"], api_key="sk-ant-PLANTED", max_retries=0)
    try:
        with client.messages.stream(model="claude-sim-1", max_tokens=16,
                                    messages=[{"role": "user", "content": "PLANTED prompt"}]) as stream:
            text = stream.get_final_text()
        report = stream.response.extensions["liveness"]
        print(text, report["shadow"], len(report["attempts"]))
    except Exception as exc:  # shadow mode enforces nothing: the reset reaches the agent (the SDK wraps it)
        print("failed", type(exc.__cause__ or exc).__name__)
    """
)


def test_readme_auto_instrumentation_command_in_a_fresh_virtualenv(provider, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The README's two lines, as a new user runs them: enforcing with OTEL_LIVENESS_MODE=enforce,
    shadow without it, exporting over OTLP/HTTP when configured, and unharmed with no collector
    listening on the default OTLP/gRPC endpoint."""
    pip_line, run_line = readme_auto_instrumentation()
    assert run_line.startswith("OTEL_LIVENESS_MODE=enforce opentelemetry-instrument python ")
    venv = fresh_venv(pip_line)
    script = run_line.split()[-1]
    (tmp_path / script).write_text(AGENT)
    reply = [[s.Headers(), anthropic_reply()[0], s.Reset()], [s.Headers(), *anthropic_reply("Recovered.", think_pings=5)]]
    base = {key: value for key, value in os.environ.items() if not key.startswith(("OTEL_", "COV_", "COVERAGE"))}
    base |= {"PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}", "OTEL_SERVICE_NAME": "agent",
             "OTEL_LIVENESS_HOSTS": "127.0.0.1"}  # the loopback provider stands in for api.anthropic.com
    base.pop("VIRTUAL_ENV", None)
    base.pop("PYTHONPATH", None)

    def start(name: str, line: str, **env: str) -> subprocess.Popen[str]:
        url = provider.add(name, reply)
        return subprocess.Popen(["bash", "-c", line], cwd=tmp_path, env={**base, "PROVIDER_URL": url, **env},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    with OTLPReceiver() as receiver, GRPCTraceReceiver() as grpc_receiver:
        began = time.monotonic()
        runs = {
            # exactly the README's line; nothing listens on localhost:4317 (the default exporter's endpoint)
            "enforce": start("enforce", run_line),
            # the same, exporting over the default protocol (OTLP/gRPC) to a receiver
            "grpc": start("grpc", run_line, OTEL_METRICS_EXPORTER="none", OTEL_LOGS_EXPORTER="none",
                          OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{grpc_receiver.port}"),
            # without the mode: shadow, exporting over OTLP/HTTP
            "shadow": start("shadow", run_line.replace("OTEL_LIVENESS_MODE=enforce ", ""),
                            OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf", OTEL_METRIC_EXPORT_INTERVAL="200",
                            OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{receiver.port}"),
        }
        out = {name: proc.communicate(timeout=120) for name, proc in runs.items()}
        elapsed = time.monotonic() - began
        spans = receiver.spans()
        grpc_spans = grpc_receiver.spans()
    stdout, stderr = out["enforce"]
    assert runs["enforce"].returncode == 0, stderr[-3000:]
    assert stdout.strip() == "Recovered. False 2", (stdout, stderr[-2000:])  # retried below the SDK, enforced
    assert provider.attempts("enforce") == 2
    # The default exporter is OTLP/gRPC (installed by the extra); its failures are logged, never
    # raised into the agent.
    assert "Failed to export" in stderr and "localhost:4317" in stderr
    stdout, stderr = out["grpc"]
    assert runs["grpc"].returncode == 0 and stdout.strip() == "Recovered. False 2", (stdout, stderr[-2000:])
    outcomes = sorted(attributes(span)[S.ATTEMPT_OUTCOME] for scope, span in grpc_spans if scope == S.SCOPE)
    assert outcomes == ["completed", "connection_error"]  # both attempts, exported over gRPC
    stdout, stderr = out["shadow"]
    assert runs["shadow"].returncode == 0, stderr[-3000:]
    assert stdout.strip() == "failed ReadError", (stdout, stderr[-2000:])  # observed, not enforced
    assert provider.attempts("shadow") == 1
    ours = [span for scope, span in spans if scope == S.SCOPE]
    assert len(ours) == 1 and attributes(ours[0])[S.ATTEMPT_OUTCOME] == "connection_error"
    assert "PLANTED" not in "".join(str(m) for m in receiver.received["/v1/traces"])
    assert elapsed < 90


def test_the_readme_names_every_extra_and_only_real_ones() -> None:
    import tomllib

    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    install = (ROOT / "README.md").read_text().split("## Install", 1)[1].split("\n## ", 1)[0]
    # From a checkout ('.[anthropic]') today; by name ('otel-liveness[anthropic]') once published.
    named = {extra for group in re.findall(r"(?:otel-liveness|'\.)\[([a-z0-9,]+)\]", install) for extra in group.split(",")}
    assert named == extras - {"dev"}, (named, extras)
    instrument = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["instrument"]
    assert any(dep.startswith("opentelemetry-distro") for dep in instrument)
    assert any(dep.startswith("opentelemetry-exporter-otlp>") for dep in instrument)  # gRPC and HTTP


def test_the_installed_metadata_carries_the_license_urls_and_classifiers() -> None:
    # The package as the README installs it (the virtualenv of the test above, built from this tree).
    venv = fresh_venv(readme_auto_instrumentation()[0])
    code = textwrap.dedent("""
        import json
        from importlib.metadata import distribution
        dist = distribution("otel-liveness")
        files = [str(f) for f in dist.files if f.name == "LICENSE"]
        print(json.dumps({"license": dist.metadata["License-Expression"], "files": files,
                          "text": dist.locate_file(files[0]).read_text() if files else "",
                          "urls": dist.metadata.get_all("Project-URL"),
                          "classifiers": dist.metadata.get_all("Classifier")}))
        """)
    proc = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    meta = json.loads(proc.stdout)
    assert meta["license"] == "Apache-2.0" and len(meta["files"]) == 1
    assert meta["text"] == (ROOT / "LICENSE").read_text() and "Apache License\n" in meta["text"]
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in meta["text"]
    assert {url.split(",")[0] for url in meta["urls"]} >= {"Homepage", "Documentation", "Changelog"}
    pythons = {c.rsplit(" ", 1)[1] for c in meta["classifiers"] if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)}
    assert pythons == {"3.11", "3.12", "3.13"}
    assert "Typing :: Typed" in meta["classifiers"] and "Framework :: OpenTelemetry" in meta["classifiers"]


def test_a_build_without_a_compiler_is_a_pure_wheel(tmp_path: pathlib.Path) -> None:
    # No C compiler: the optional extensions are left out, the reference implementations run, and the
    # wheel says it is for any platform (not this one's tag over pure-Python contents).
    src = tmp_path / "src"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(src)], check=True)
    shutil.copy(ROOT / "setup.py", src / "setup.py")  # (the working tree's, committed or not)
    out = tmp_path / "wheels"
    env = {**os.environ, "CC": "/bin/false"}
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(src), "-w", str(out)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = out.glob("*.whl")
    assert wheel.name.endswith("-py3-none-any.whl"), wheel.name
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    assert "otel_liveness/core/wire/bulk.py" in names and not [n for n in names if n.endswith(".so")]
