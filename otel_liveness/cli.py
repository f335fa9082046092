"""The otel-liveness command line: replay captures through the liveness policy, count what candidate
policies would do to recorded attempts (whatif), recommend bounds from them (tune), run the demos,
serve the simulated provider."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._version import __version__
from .core.wire.providers import PROFILES
from .core.wire.sse import DEFAULT_MAX_FRAME_BYTES

if TYPE_CHECKING:
    from .tools.recordings import Recording


#: The default of an option whose absence means "what the recording says" (argparse applies no
#: ``type`` to a default that is not a string, and ``None`` already means "off").
_UNSET: Any = object()


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
    a.add_argument("--provider", choices=sorted(PROFILES), default=None,
                   help="the wire (default: the recording's own, else anthropic)")
    a.add_argument("--raw-idle", type=_seconds, default=_UNSET, metavar="S",
                   help="raw-silence bound (default: the one the flight recorder's capture records, else the "
                        "provider's, 90 or 600; 'off')")
    a.add_argument("--first-byte", type=_first_byte, default=_UNSET, metavar="S",
                   help="bound on the wait for the first body byte ('auto' from --body-bytes, or 'off': the raw bound; "
                        "default: the one the capture records, else auto)")
    a.add_argument("--body-bytes", type=int, default=None, metavar="N",
                   help="size of the request body, for the automatic first-byte bound (default: the recording's, "
                        "else unknown: the largest)")
    a.add_argument("--notice-every", type=_seconds, default=30.0, metavar="S", help="semantic notice cadence (default 30)")
    a.add_argument("--semantic-timeout", type=_seconds, default=None, metavar="S", help="fail after S without content")
    a.add_argument("--wall", type=_seconds, default=None, metavar="S", help="wall budget")
    a.add_argument("--event-watchdog", type=_seconds, default=None, metavar="S",
                   help="report when a decoded-event watchdog of S seconds (ignoring heartbeats) would fire")
    a.add_argument("--max-frame-bytes", type=int, default=DEFAULT_MAX_FRAME_BYTES, metavar="N",
                   help="largest frame the replay accepts; a longer one is malformed, as live "
                        "(Policy.max_frame_bytes; default 67108864 = 64 MiB)")
    a.add_argument("--json", action="store_true", help="print one JSON object")
    w = sub.add_parser("whatif", help="replay recorded attempts under candidate policies: kills, false kills, detection delay")
    w.add_argument("paths", nargs="+", metavar="PATH", help="a recording, or a folder of them (recursively)")
    w.add_argument("--policy", action="append", dest="policies", metavar="NAME=SPEC", default=[],
                   help="a candidate: NAME=field=value,... (Policy fields or raw/first_byte/semantic/wall; "
                        "values as in OTEL_LIVENESS_*); repeatable; default: the defaults")
    w.add_argument("--provider", choices=sorted(PROFILES), default="anthropic",
                   help="the wire of recordings that do not name one (captures older than the recorder's "
                        "description record; default anthropic)")
    w.add_argument("--json", action="store_true", help="print one JSON object")
    t = sub.add_parser("tune", help="recommend the raw and first-byte bounds from recorded attempts")
    t.add_argument("paths", nargs="+", metavar="PATH", help="a recording, or a folder of them (recursively)")
    t.add_argument("--max-false-kill-rate", type=float, default=0.0, metavar="R",
                   help="the share of recorded attempts the bounds may kill while alive (default 0)")
    t.add_argument("--margin", type=float, default=1.5, metavar="M",
                   help="multiply what the recordings need by M (default 1.5)")
    t.add_argument("--holdout", type=float, default=0.25, metavar="F",
                   help="the share of recordings kept out of the fit to validate it (default 0.25)")
    t.add_argument("--min-attempts", type=int, default=None, metavar="N",
                   help="the fewest attempts a bound is fitted from before it is printed ready to use "
                        "(default 20; a fit from fewer is a comment saying so)")
    t.add_argument("--provider", choices=sorted(PROFILES), default="anthropic",
                   help="the wire of recordings that do not name one (default anthropic)")
    t.add_argument("--json", action="store_true", help="print one JSON object")
    td = sub.add_parser("tune-demo", help="the tuning loop on the embedded simulated provider: record a fleet, "
                                          "whatif on three policies, tune, replay the tuned policy")
    td.add_argument("--attempts", type=int, default=48, help="recorded attempts in the fleet (default 48)")
    td.add_argument("--time-scale", type=float, default=0.01,
                    help="real seconds per provider second (default 0.01)")
    td.add_argument("--keep", metavar="DIR", help="write the recordings into DIR (default: a temporary folder)")
    td.add_argument("--seed", type=int, default=7, help="the fleet's random seed (default 7)")
    td.add_argument("--json", action="store_true", help="print the result as JSON")
    r = sub.add_parser("replay", help="replay the streams of VCR cassettes through the transport on loopback: "
                                      "transparent on your own recorded traffic?")
    r.add_argument("paths", nargs="+", metavar="PATH",
                   help="a cassette (vcrpy / pytest-recording YAML, .yaml or .yaml.gz), or a folder of them")
    r.add_argument("--seed", type=int, default=0, help="the seed of the random re-splits (default 0)")
    r.add_argument("--json", action="store_true", help="print one JSON object")
    from .demo import COLUMNS

    d = sub.add_parser("demo", help="run the agent-shaped demo on the embedded simulated provider",
                       description="Ten agent turns, nine real anthropic SDK streaming calls through the transport and an "
                                   "OpenAI Responses background response read with httpx2, "
                                   "against the embedded simulated provider, each meeting one failure shape; exit "
                                   "status 0 only if every turn behaved as the policy says.",
                       epilog="the table's columns: " + "; ".join(f"{name}: {meaning}" for name, meaning in COLUMNS))
    d.add_argument("--scenario", action="append", dest="scenarios", metavar="NAME",
                   help="run only this scenario (repeatable); default: all")
    d.add_argument("--time-scale", type=float, default=0.02, help="real seconds per provider second (default 0.02)")
    d.add_argument("--shadow", action="store_true", help="observe and report, enforce nothing")
    d.add_argument("--json", action="store_true", help="print the result as JSON")
    d.add_argument("--otlp", metavar="ENDPOINT", help="also send telemetry over OTLP/HTTP (e.g. http://localhost:4318; "
                                                      "needs the sdk extra)")
    d.add_argument("--capture-dir", metavar="DIR",
                   help="the flight recorder writes every attempt that did not complete into DIR, for otel-liveness analyze")
    d.add_argument("--list", action="store_true", help="list the scenarios and exit")
    sv = sub.add_parser("serve", help="run the simulated provider as a server (Anthropic Messages and OpenAI Chat "
                                      "Completions) for examples and agents in any language, until SIGINT/SIGTERM",
                        description="Serve one scenario on the Anthropic Messages (POST /v1/messages) and OpenAI Chat "
                                    "Completions (POST /v1/chat/completions) wires. The first line of standard output "
                                    "is the URL (an anthropic SDK's base URL; + /v1 for an openai SDK). The scenario's "
                                    "attempts cycle: every call meets its failures first. Stops on SIGINT/SIGTERM.")
    sv.add_argument("--scenario", default="ok", metavar="NAME",
                    help="what the provider does (default ok; --list shows them all)")
    sv.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1)")
    sv.add_argument("--port", type=int, default=0, help="the port (default 0: one the system picks; the URL says which)")
    sv.add_argument("--time-scale", type=float, default=1.0,
                    help="real seconds per provider second (default 1: a provider's own pace; 0.05 runs 20x faster)")
    sv.add_argument("--list", action="store_true", help="list the scenarios and exit")
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
    try:
        status, _ = run_demo(names=args.scenarios, time_scale=args.time_scale, shadow=args.shadow, otlp=args.otlp,
                             as_json=args.json, capture_dir=args.capture_dir)
    except ModuleNotFoundError as exc:  # an extra the demo needs (missing_extra names it)
        print(f"otel-liveness demo: {exc}", file=sys.stderr)
        return 2
    return status


def _recorded(meta: dict[str, Any], key: str) -> tuple[bool, float | None]:
    """``(True, bound)`` when the flight recorder's description record holds ``key`` (a number of
    seconds, or ``null``: the attempt ran without that bound); ``(False, None)`` otherwise."""
    if key not in meta:
        return False, None
    value = meta[key]
    if value is None:
        return True, None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return True, float(value)
    return False, None


def _serve(args: argparse.Namespace) -> int:
    from .serve import BY_NAME, SCENARIOS, serve

    if args.list:
        for scenario in SCENARIOS:
            print(f"{scenario.name:<20} {scenario.title}")
        return 0
    if args.scenario not in BY_NAME:
        print(f"otel-liveness serve: unknown scenario {args.scenario!r}; known: {', '.join(BY_NAME)}", file=sys.stderr)
        return 2
    if not args.time_scale > 0 or not 0 <= args.port <= 65535:
        print("otel-liveness serve: need --time-scale > 0 and 0 <= --port <= 65535", file=sys.stderr)
        return 2
    return serve(args.scenario, host=args.host, port=args.port, time_scale=args.time_scale)


def _analyze(args: argparse.Namespace) -> int:
    from .core.errors import InvalidPolicy
    from .core.policy import Policy
    from .tools.analyze import CaptureError, analyze, render
    from .tools.recordings import parse_recording

    try:
        if args.file == "-":
            recording = parse_recording(sys.stdin)
        else:
            with open(args.file, encoding="utf-8") as fh:
                recording = parse_recording(fh)
    except OSError as exc:
        print(f"otel-liveness analyze: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
        return 2
    except (CaptureError, UnicodeDecodeError) as exc:
        print(f"otel-liveness analyze: {args.file}: {exc}", file=sys.stderr)
        return 2
    # The bounds: an option given wins; else the ones the attempt ran under, when the flight
    # recorder's description record holds them; else the defaults (the provider's raw bound, auto).
    sources = {"raw": "option", "first_byte": "option"}
    raw, first_byte = args.raw_idle, args.first_byte
    if raw is _UNSET:
        known, bound = _recorded(recording.meta, "raw_bound")
        raw, sources["raw"] = (bound, "recording") if known else (_UNSET, "default")
    if first_byte is _UNSET:
        known, bound = _recorded(recording.meta, "first_byte_bound")
        first_byte, sources["first_byte"] = (bound, "recording") if known else ("auto", "default")
    changes: dict[str, Any] = {
        "first_byte_timeout": first_byte, "semantic_notice_interval": args.notice_every,
        "semantic_timeout": args.semantic_timeout, "wall_timeout": args.wall, "max_frame_bytes": args.max_frame_bytes,
    }
    if raw is not _UNSET:
        changes["raw_idle_timeout"] = changes["raw_idle_timeout_no_keepalive"] = raw
    try:
        policy = Policy(**changes)
    except InvalidPolicy as exc:
        print(f"otel-liveness analyze: {exc}", file=sys.stderr)
        return 2
    result = analyze(
        recording.chunks,
        provider=args.provider or recording.provider,
        policy=policy,
        body_size=args.body_bytes if args.body_bytes is not None else recording.body_bytes,
        event_watchdog=args.event_watchdog,
    )
    result["bounds_from"] = sources
    if args.json:
        print(json.dumps(result))
    else:
        print(render(result, event_watchdog=args.event_watchdog))
    return 0


def _recordings(command: str, args: argparse.Namespace) -> tuple[list[Recording], list[dict[str, str]]]:
    """The readable recordings under ``args.paths``, and the unreadable ones, each told on stderr
    (as is an empty result: the caller then exits 2)."""
    from .tools.whatif import load

    recordings, errors = load(args.paths, args.provider)
    for error in errors:
        print(f"otel-liveness {command}: {error['error']}", file=sys.stderr)
    if not recordings:
        print(f"otel-liveness {command}: no readable recording", file=sys.stderr)
    return recordings, errors


def _whatif(args: argparse.Namespace) -> int:
    from .tools.whatif import parse_policy, render, whatif

    try:
        policies = dict(parse_policy(text) for text in args.policies) or dict([parse_policy("defaults=")])
    except ValueError as exc:
        print(f"otel-liveness whatif: {exc}", file=sys.stderr)
        return 2
    recordings, errors = _recordings("whatif", args)
    if not recordings:
        return 2
    result = whatif(recordings, policies)
    result["unreadable"] = errors
    print(json.dumps(result) if args.json else render(result, errors))
    return 0


def _tune(args: argparse.Namespace) -> int:
    from .tools.tune import render, tune

    if not 0 <= args.max_false_kill_rate < 1 or not args.margin >= 1 or not 0 < args.holdout < 1:
        print("otel-liveness tune: need 0 <= --max-false-kill-rate < 1, --margin >= 1, 0 < --holdout < 1",
              file=sys.stderr)
        return 2
    recordings, errors = _recordings("tune", args)
    if not recordings:
        return 2
    from .tools.tune import MIN_ATTEMPTS

    minimum = MIN_ATTEMPTS if args.min_attempts is None else args.min_attempts
    if minimum < 1:
        print("otel-liveness tune: need --min-attempts >= 1", file=sys.stderr)
        return 2
    result = tune(recordings, max_false_kill_rate=args.max_false_kill_rate, margin=args.margin, holdout=args.holdout,
                  min_attempts=minimum)
    result["unreadable"] = errors
    print(json.dumps(result) if args.json else render(result))
    return 0


def _tune_demo(args: argparse.Namespace) -> int:
    from .tools.tune_demo import render, run_tune_demo

    if not 0 < args.time_scale <= 1 or args.attempts < 8:
        print("otel-liveness tune-demo: need --time-scale in (0, 1] and --attempts >= 8", file=sys.stderr)
        return 2
    result = run_tune_demo(attempts=args.attempts, time_scale=args.time_scale, keep=args.keep, seed=args.seed)
    print(json.dumps(result) if args.json else render(result))
    return 0 if result["ok"] else 1


def _replay(args: argparse.Namespace) -> int:
    from .tools.replay import CassetteError, load_cassettes, render, replay

    try:
        streams, skipped, errors = load_cassettes(args.paths)
    except CassetteError as exc:  # PyYAML missing
        print(f"otel-liveness replay: {exc}", file=sys.stderr)
        return 2
    if args.json or not streams:  # (the table names them too)
        for error in errors:
            print(f"otel-liveness replay: {error['error']}", file=sys.stderr)
    if not streams:
        print("otel-liveness replay: no streamed response in the cassettes"
              + (f" ({len(skipped)} interactions skipped: not streams)" if skipped else ""), file=sys.stderr)
        return 2
    rows = replay(streams, seed=args.seed)
    ok = not errors and not any(row["differences"] for row in rows)
    if args.json:
        print(json.dumps({"ok": ok, "streams": rows, "skipped": skipped, "unreadable": errors}))
    else:
        print(render(rows, skipped, errors))
    return 0 if ok else 1


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "analyze":
        return _analyze(args)
    if args.command == "whatif":
        return _whatif(args)
    if args.command == "tune":
        return _tune(args)
    if args.command == "tune-demo":
        return _tune_demo(args)
    if args.command == "demo":
        return _demo(args)
    if args.command == "serve":
        return _serve(args)
    if args.command == "replay":
        return _replay(args)
    raise AssertionError(args.command)  # pragma: no cover


#: The exit status of a command whose reader went away (``otel-liveness analyze --json | head -1``):
#: what a shell reports for a program a SIGPIPE ended (128 + 13).
EXIT_BROKEN_PIPE = 141


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        status = _dispatch(args)
        sys.stdout.flush()  # inside the try: a closed pipe surfaces here, not at exit
    except BrokenPipeError:
        # The reader closed the pipe (head, a pager quit): stop quietly, as command-line tools do.
        # Standard output goes to /dev/null so that the interpreter's own flush at exit finds no
        # pipe to complain about (the recipe of Python's signal documentation).
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):  # standard output is not a file (a test's capture)
            pass
        return EXIT_BROKEN_PIPE
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
