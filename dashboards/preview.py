"""Render the key panels of the "Provider liveness" dashboard to PNG, from the same queries,
against a Prometheus -- a preview an operator can look at without Grafana.

    python -m dashboards.preview --prometheus http://127.0.0.1:9090 --out docs/preview
    python -m dashboards.preview --self-contained --out docs/preview   # starts the collector and
        Prometheus on loopback, runs the demo through them, then renders (what `make preview` does)
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time
import urllib.parse
import urllib.request
from typing import Any

from .panels import PANELS, PanelSpec, substitute


def query_range(base: str, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
    params = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": step})
    with urllib.request.urlopen(f"{base}/api/v1/query_range?{params}", timeout=10) as response:
        body = json.load(response)
    return body["data"]["result"] if body.get("status") == "success" else []


def legend(template: str, labels: dict[str, str]) -> str:
    out = template
    for key, value in labels.items():
        out = out.replace("{{" + key + "}}", value)
    return out if "{{" not in out else ",".join(f"{k}={v}" for k, v in labels.items() if k != "__name__")


def render_panel(base: str, spec: PanelSpec, out: pathlib.Path, *, window: float, rate: str) -> pathlib.Path | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    end = time.time()
    start = end - window
    step = max(1.0, window / 120)
    fig, ax = plt.subplots(figsize=(8, 3.2), dpi=100)
    drawn = 0
    for query in spec.queries:
        if query.instant:
            continue
        for series in query_range(base, substitute(query.expr, rate), start, end, step):
            points = [(float(t) - end, float(v)) for t, v in series["values"] if v not in ("NaN", "+Inf", "-Inf")]
            if not points:
                continue
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys, label=legend(query.legend, series["metric"]) or "value", linewidth=1.2)
            drawn += 1
    if spec.threshold is not None:
        ax.axhline(spec.threshold, color="red", linestyle="--", linewidth=1, label=f"alert threshold {spec.threshold:g}")
    ax.set_title(spec.title, fontsize=10)
    ax.set_xlabel("seconds before now", fontsize=8)
    ax.set_ylabel(spec.unit, fontsize=8)
    ax.tick_params(labelsize=7)
    if drawn:
        ax.legend(fontsize=6, loc="upper left")
    else:
        ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center")
    fig.tight_layout()
    path = out / f"{spec.key}.png"
    fig.savefig(path)
    plt.close(fig)
    return path if drawn else None


def render_all(base: str, out: pathlib.Path, *, window: float = 600.0, rate: str = "1m") -> list[pathlib.Path]:
    out.mkdir(parents=True, exist_ok=True)
    drawn = []
    for spec in PANELS:
        if spec.key and spec.kind == "timeseries":
            path = render_panel(base, spec, out, window=window, rate=rate)
            if path is not None:
                drawn.append(path)
    return drawn


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prometheus", help="base URL of a Prometheus that scrapes the collector")
    parser.add_argument("--self-contained", action="store_true", help="start collector + Prometheus, run the demo")
    parser.add_argument("--out", default="docs/preview")
    args = parser.parse_args(argv)
    out = pathlib.Path(args.out)
    if args.self_contained:
        from .selfcontained import demo_stack

        with demo_stack() as prometheus:
            drawn = render_all(prometheus, out, window=120.0, rate="30s")
    elif args.prometheus:
        drawn = render_all(args.prometheus.rstrip("/"), out)
    else:
        parser.error("give --prometheus URL or --self-contained")
    for path in drawn:
        print(path)
    return 0 if drawn else 1


if __name__ == "__main__":
    sys.exit(main())
