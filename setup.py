"""Build configuration beyond pyproject.toml: the optional C steady lane and bulk scanner.

``otel_liveness/core/wire/_lane.c`` is the per-read hot path of a live stream in C;
``otel_liveness/core/wire/_bulk.c`` scans and classifies reads that carry many events. Both are pure
(no clock, no I/O: ``tests/test_core_purity.py``). Both are optional:
without a compiler the install still succeeds and ``otel_liveness.core.wire.lane`` and
``otel_liveness.core.wire.bulk`` fall back to their pure-Python reference implementations (their
``NATIVE`` says which is in use; ``OTEL_LIVENESS_PURE=1`` selects the references at run time).
"""

import os
import sys

from setuptools import Extension, setup
from setuptools.command.bdist_wheel import bdist_wheel as _bdist_wheel
from setuptools.command.build_ext import build_ext as _build_ext

#: The extensions that did build (an optional one that fails is left out by setuptools).
BUILT: list[str] = []


class build_ext(_build_ext):
    """Records which optional extension built, and says so when one did not: the package then
    runs its pure-Python reference, correct and slower (``otel_liveness.core.wire.bulk.NATIVE``)."""

    def build_extension(self, ext: Extension) -> None:
        # Never a stale build: a used checkout's build/ holds the last build's .so, which an
        # install whose compile fails (CC=false, no compiler) would otherwise ship as if built now.
        output = self.get_ext_fullpath(ext.name)
        if os.path.exists(output):
            os.remove(output)
        super().build_extension(ext)
        BUILT.append(ext.name)

    def run(self) -> None:
        self.force = True  # (compiled again, or not at all: never "up to date" from an earlier build)
        super().run()
        missing = [ext.name for ext in self.extensions if ext.name not in BUILT]
        if missing:
            print(f"otel-liveness: the C extensions {', '.join(missing)} did not build (no C compiler?): "
                  "the pure-Python reference implementations are used -- correct, and slower", file=sys.stderr)


class bdist_wheel(_bdist_wheel):
    """A wheel with no compiled extension is pure: tagged ``py3-none-any``, not for this platform."""

    def run_command(self, command: str) -> None:
        super().run_command(command)
        if command == "build" and not BUILT:
            self.root_is_pure = True
            self.distribution.ext_modules = []  # (installed as pure: to purelib, the wheel's root)

    def get_tag(self) -> tuple[str, str, str]:
        if not BUILT:
            return "py3", "none", "any"
        return super().get_tag()  # type: ignore[no-any-return]


setup(
    cmdclass={"build_ext": build_ext, "bdist_wheel": bdist_wheel},
    ext_modules=[
        Extension(
            "otel_liveness.core.wire._lane",
            ["otel_liveness/core/wire/_lane.c"],
            depends=["otel_liveness/core/wire/bulk_api.h"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
        Extension(
            "otel_liveness.core.wire._bulk",
            ["otel_liveness/core/wire/_bulk.c"],
            depends=["otel_liveness/core/wire/bulk_api.h", "otel_liveness/core/wire/_journal.h"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
    ]
)
