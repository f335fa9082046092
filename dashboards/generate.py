"""Generate dashboards/provider-liveness.json with the Grafana Foundation SDK (pinned to the
Grafana release of the compose stack, 11.6). ``python -m dashboards.generate [--check]``."""

from __future__ import annotations

import pathlib
import sys

from grafana_foundation_sdk.builders import common as C
from grafana_foundation_sdk.builders import dashboard as D
from grafana_foundation_sdk.builders import heatmap, prometheus, table, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.common import GraphThresholdsStyleMode, StackingMode
from grafana_foundation_sdk.models.dashboard import (
    DashboardCursorSync,
    DataSourceRef,
    Threshold,
    ThresholdsMode,
    VariableRefresh,
)

from .panels import PANELS, VARIABLES, PanelSpec

OUT = pathlib.Path(__file__).resolve().parent / "provider-liveness.json"
PROM = DataSourceRef(type_val="prometheus", uid="prometheus")


def _target(query, ref: str):  # type: ignore[no-untyped-def]
    target = prometheus.Dataquery().expr(query.expr).legend_format(query.legend or "__auto").ref_id(ref).datasource(PROM)
    if query.instant:
        target = target.instant()
    if query.heatmap:
        target = target.format("heatmap")
    if query.exemplar:
        target = target.exemplar(True)
    return target


def _panel(spec: PanelSpec, x: int, y: int):  # type: ignore[no-untyped-def]
    height = 8
    if spec.kind == "heatmap":
        panel = heatmap.Panel().calculate(False)
    elif spec.kind == "table":
        panel = table.Panel()
    else:
        panel = timeseries.Panel().line_width(1).fill_opacity(10)
        if spec.stacked:
            panel = panel.stacking(C.StackingConfig().mode(StackingMode.NORMAL))
        if spec.threshold is not None:
            panel = panel.thresholds(
                D.ThresholdsConfig().mode(ThresholdsMode.ABSOLUTE).steps([
                    Threshold(value=None, color="green"), Threshold(value=spec.threshold, color="red")])
            ).thresholds_style(C.GraphThresholdsStyleConfig().mode(GraphThresholdsStyleMode.LINE))
    panel = panel.title(spec.title).datasource(PROM).unit(spec.unit).height(height).span(spec.width)
    if spec.description:
        panel = panel.description(spec.description)
    for i, query in enumerate(spec.queries):
        panel = panel.with_target(_target(query, chr(ord("A") + i)))
    return panel


def build() -> D.Dashboard:
    board = (
        D.Dashboard("Provider liveness")
        .uid("otel-liveness-provider")
        .description("Waits, retries and truncations of LLM provider streams (otel-liveness), as distinct facts.")
        .tags(["otel-liveness", "genai", "generated"])
        .refresh("30s")
        .time("now-1h", "now")
        .timezone("browser")
        .tooltip(DashboardCursorSync.CROSSHAIR)
    )
    for name, query in VARIABLES.items():
        board = board.with_variable(
            D.QueryVariable(name).label(name).query(query).datasource(PROM).multi(True).include_all(True)
            .all_value(".*").refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
        )
    row = None
    for spec in PANELS:
        if spec.row != row:
            row = spec.row
            board = board.with_row(D.Row(row))
        board = board.with_panel(_panel(spec, 0, 0))
    return board


def render() -> str:
    return JSONEncoder(sort_keys=True, indent=2).encode(build().build()) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    text = render()
    if "--check" in argv:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT.name} is out of date: run python -m dashboards.generate", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
