"""The otel-liveness command line: replay captures through the liveness policy, run the demo."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from . import __version__
from .core.providers import PROFILES


def _seconds(text: str) -> float | None:
    if text.lower() in ("none", "off"):
        return None
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def _first_byte(text: str) -> float | str | None:
    return "auto" if text.lower() == "auto" else _seconds(text)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="otel-liveness", description=__doc__)
    parser.add_argument("--version", action="version", version=f"otel-liveness {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    a = sub.add_parser("analyze", help="replay a timestamped capture through the liveness policy")
    a.add_argument("file", help="JSON Lines capture ('-' for standard input)")
    a.add_argument("--provider", choices=sorted(PROFILES), default="anthropic")
    a.add_argument("--raw-idle", type=_seconds, default=None, metavar="S",
                   help="raw-silence bound (default: the provider's, 90 or 600; 'off')")
    a.add_argument("--first-byte", type=_first_byte, default="auto", metavar="S",
                   help="bound on the wait for the first body byte ('auto' from --body-bytes, or 'off': the raw bound)")
    a.add_argument("--body-bytes", type=int, default=None, metavar="N",
                   help="size of the request body, for the automatic first-byte bound (default: unknown, the largest)")
    a.add_argument("--notice-every", type=_seconds, default=30.0, metavar="S", help="semantic notice cadence (default 30)")
    a.add_argument("--semantic-timeout", type=_seconds, default=None, metavar="S", help="fail after S without content")
    a.add_argument("--wall", type=_seconds, default=None, metavar="S", help="wall budget")
    a.add_argument("--event-watchdog", type=_seconds, default=None, metavar="S",
                   help="report when a decoded-event watchdog of S seconds (ignoring heartbeats) would fire")
    a.add_argument("--max-frame-bytes", type=int, default=4 * 1024 * 1024)
    a.add_argument("--json", action="store_true", help="print one JSON object")
    d = sub.add_parser("demo", help="run the agent-shaped demo on the embedded simulated provider")
    d.add_argument("--scenario", action="append", dest="scenarios", metavar="NAME",
                   help="run only this scenario (repeatable); default: all")
    d.add_argument("--time-scale", type=float, default=0.02, help="real seconds per provider second (default 0.02)")
    d.add_argument("--shadow", action="store_true", help="observe and report, enforce nothing")
    d.add_argument("--json", action="store_true", help="print the result as JSON")
    d.add_argument("--otlp", metavar="ENDPOINT", help="also send telemetry over OTLP/HTTP (e.g. http://localhost:4318)")
    d.add_argument("--list", action="store_true", help="list the scenarios and exit")
    return parser


def _demo(args: argparse.Namespace) -> int:
    from .demo import SCENARIOS, run_demo

    if args.list:
        for scenario in SCENARIOS:
            print(f"{scenario.name:<20} {scenario.title}")
        return 0
    known = {sc.name for sc in SCENARIOS}
    unknown = sorted(set(args.scenarios or ()) - known)
    if unknown:
        print(f"otel-liveness demo: unknown scenario(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}",
              file=sys.stderr)
        return 2
    if not 0 < args.time_scale <= 1:
        print("otel-liveness demo: --time-scale must be in (0, 1]", file=sys.stderr)
        return 2
    status, _ = run_demo(names=args.scenarios, time_scale=args.time_scale, shadow=args.shadow, otlp=args.otlp,
                         as_json=args.json)
    return status


def _analyze(args: argparse.Namespace) -> int:
    from .tools.analyze import CaptureError, analyze, parse_capture, render

    try:
        if args.file == "-":
            chunks = parse_capture(sys.stdin)
        else:
            with open(args.file, encoding="utf-8") as fh:
                chunks = parse_capture(fh)
    except OSError as exc:
        print(f"otel-liveness analyze: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
        return 2
    except (CaptureError, UnicodeDecodeError) as exc:
        print(f"otel-liveness analyze: {args.file}: {exc}", file=sys.stderr)
        return 2
    result = analyze(
        chunks,
        provider=args.provider,
        raw_idle=args.raw_idle,
        first_byte=args.first_byte,
        body_size=args.body_bytes,
        notice_every=args.notice_every,
        semantic_timeout=args.semantic_timeout,
        wall=args.wall,
        event_watchdog=args.event_watchdog,
        max_frame_bytes=args.max_frame_bytes,
    )
    if args.json:
        print(json.dumps(result))
    else:
        print(render(result, event_watchdog=args.event_watchdog))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "analyze":
        return _analyze(args)
    if args.command == "demo":
        return _demo(args)
    raise AssertionError(args.command)  # pragma: no cover


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
