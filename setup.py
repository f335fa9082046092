"""Build configuration beyond pyproject.toml: the optional C steady lane.

``otel_liveness/core/_lane.c`` is the per-read hot path of a live stream in C. It is optional:
without a compiler the install still succeeds and ``otel_liveness.core.lane`` falls back to its
pure-Python reference implementation (``otel_liveness.core.lane.NATIVE`` says which is in use).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "otel_liveness.core._lane",
            ["otel_liveness/core/_lane.c"],
            optional=True,
            extra_compile_args=["-O2"],
        )
    ]
)
