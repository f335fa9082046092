"""What a user installs and gets: errors that name the missing extra, the schema URL on the
tracer and meter, and the README's ``opentelemetry-instrument`` command in a fresh virtualenv
built from the package's metadata."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import httpx2
import pytest

import otel_liveness
from otel_liveness.telemetry import semconv as S
from otel_liveness.testing import anthropic_reply
from otel_liveness.testing import steps as s

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
     "otel_liveness.httpx2 needs httpx2, which is not installed: pip install 'otel-liveness[httpx2]'"),
    (("httpx",), "import otel_liveness.httpx",
     "otel_liveness.httpx needs httpx, which is not installed: pip install 'otel-liveness[httpx]'"),
    (("opentelemetry.instrumentation",), "import otel_liveness.telemetry as t\nt.instrument()",
     "otel_liveness.telemetry.instrument() needs opentelemetry.instrumentation, which is not installed: "
     "pip install 'otel-liveness[instrument]'"),
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
    from opentelemetry.semconv._incubating.attributes import error_attributes, gen_ai_attributes, http_attributes, server_attributes
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
