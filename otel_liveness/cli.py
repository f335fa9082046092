"""The ``otel-liveness`` command line."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from .core.policy import PROVIDERS


def _seconds(text: str) -> float | None:
    if text.lower() in ("none", "off"):
        return None
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="otel-liveness", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    a = sub.add_parser("analyze", help="replay a timestamped capture through the liveness policy")
    a.add_argument("file", help="JSON Lines capture ('-' for standard input)")
    a.add_argument("--provider", choices=PROVIDERS, default="anthropic")
    a.add_argument("--raw-idle", type=_seconds, default=60.0, metavar="S", help="raw-silence bound (default 60, 'off')")
    a.add_argument("--notice-every", type=_seconds, default=30.0, metavar="S", help="semantic notice cadence (default 30)")
    a.add_argument("--semantic-timeout", type=_seconds, default=None, metavar="S", help="fail after S without content")
    a.add_argument("--wall", type=_seconds, default=None, metavar="S", help="wall budget")
    a.add_argument("--event-watchdog", type=_seconds, default=None, metavar="S",
                   help="report when a decoded-event watchdog of S seconds (ignoring heartbeats) would fire")
    a.add_argument("--max-frame-bytes", type=int, default=4 * 1024 * 1024)
    a.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


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
    raise AssertionError(args.command)  # pragma: no cover


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
