"""Start the built collector and Debian's Prometheus on loopback, run the demo through them, and
render the preview (``make preview``)."""

from __future__ import annotations

import pathlib
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


def run_stack_and_render(out: pathlib.Path) -> list[pathlib.Path]:
    sys.path.insert(0, str(ROOT))
    from otel_liveness.demo import run_demo
    from tests.stack import Collector, Prometheus, collector_binary, scaled_rules

    from .preview import render_all

    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = pathlib.Path(tmp_name)
        collector = Collector(collector_binary(), tmp).start()
        prometheus = Prometheus(tmp, f"127.0.0.1:{collector.ports['prom']}", scaled_rules(tmp)).start()
        try:
            run_demo(time_scale=0.01, otlp=collector.otlp_http, as_json=True, out=open("/dev/null", "w"), rounds=6)
            time.sleep(5)  # two scrapes after the last export
            return render_all(f"http://127.0.0.1:{prometheus.port}", out, window=120.0, rate="30s")
        finally:
            prometheus.stop()
            collector.stop()
