"""Build configuration beyond pyproject.toml: the optional C steady lane and bulk scanner.

``otel_liveness/core/_lane.c`` is the per-read hot path of a live stream in C;
``otel_liveness/core/_bulk.c`` scans and classifies reads that carry many events. Both are
optional: without a compiler the install still succeeds and ``otel_liveness.core.lane`` and
``otel_liveness.core.bulk`` fall back to their pure-Python reference implementations (their
``NATIVE`` says which is in use; ``OTEL_LIVENESS_PURE=1`` selects the references at run time).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "otel_liveness.core._lane",
            ["otel_liveness/core/_lane.c"],
            depends=["otel_liveness/core/bulk_api.h"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
        Extension(
            "otel_liveness.core._bulk",
            ["otel_liveness/core/_bulk.c"],
            depends=["otel_liveness/core/bulk_api.h"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
    ]
)
