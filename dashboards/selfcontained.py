"""Start the built collector and Debian's Prometheus on loopback and run the demo through them, for
the preview to render (``make preview``)."""

from __future__ import annotations

import contextlib
import pathlib
import sys
import tempfile
import time
from collections.abc import Iterator

ROOT = pathlib.Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def demo_stack() -> Iterator[str]:
    """The base URL of a Prometheus that has scraped a demo run; the stack stops on exit."""
    sys.path.insert(0, str(ROOT))
    from otel_liveness.demo import run_demo
    from tests.stack import Collector, Prometheus, collector_binary, scaled_rules

    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = pathlib.Path(tmp_name)
        collector = Collector(collector_binary(), tmp).start()
        prometheus = Prometheus(tmp, f"127.0.0.1:{collector.ports['prom']}", scaled_rules(tmp)).start()
        try:
            with open("/dev/null", "w") as devnull:
                run_demo(time_scale=0.01, otlp=collector.otlp_http, as_json=True, out=devnull, rounds=6)
            time.sleep(5)  # two scrapes after the last export
            yield f"http://127.0.0.1:{prometheus.port}"
        finally:
            prometheus.stop()
            collector.stop()
