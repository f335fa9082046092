# otel-liveness: everything a fresh machine needs is installed by these targets.
#   make demo   -- the agent-shaped demo on the embedded simulated provider (its own light .venv-demo)
#   make tune-demo -- record a fleet, whatif on three policies, tune, replay the tuned policy (.venv-demo)
#   make check  -- the inner loop (under a minute): ruff, mypy --strict and the I/O-free core tests
#   make test   -- the whole test suite (what .ci/run calls), in parallel, with coverage and its floor;
#                 first the I/O-free core tests on Python 3.12 and 3.13 (make test-pythons)
#   make test-pure -- the whole suite with the C extensions disabled (the pure-Python fallback)
#   make test-under-load -- the timing-heavy tests, 5 runs, with every core held by a busy loop
#   make mutate -- the mutation pass over the core (cosmic-ray; about an hour)
#   make sanitize -- the C extensions under ASan+UBSan: the C-vs-reference property tests and a
#                 bounded fuzz run against them (scripts/sanitize.sh; a few minutes; not in make test)
#   make peer   -- an SDK's own test suite run plain, in shadow and in enforce with the transport under
#                 every client (scripts/peer.py; docs/compatibility.md; about 25 minutes; not in make test)
#   make bench  -- the benchmarks (figures, not pass/fail of the test suite)
#   make bench-fleet, make fleet-overload -- fleet capacity, overload and gateway death (minutes each)
#   make bench-outage -- what a fleet of agents does to a provider that goes down, retry budget on and off (5 min)
#
# The test loop (docs/testing.md, "Contributing: the test loop"):
#   one file     .venv/bin/python -m pytest -q tests/test_engine.py   (-n 3 to spread it over workers)
#   a selection  make test PYTEST_ARGS="tests/test_wires.py -k bedrock"   (COV_ARGS= without coverage)
#   workers      make test WORKERS=2   (default 3: the suite waits on loopback more than it computes;
#                4 was faster on a quiet host, but its timing tests lost bounds on a slowed one)
#   exclusive    @pytest.mark.serial on a test that needs the machine to itself (it measures timing
#                or throughput, or holds a fixed port): it runs after the parallel pass, alone.
#   by module    a module's tests run on one worker, in file order (--dist loadfile): its module-scoped
#                fixtures (a collector and Prometheus) start once; modules go longest first (tests/conftest.py).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# Re-install when the dependency list or a C extension changes (the install compiles them).
BUILD_INPUTS := pyproject.toml setup.py $(wildcard otel_liveness/core/wire/*.c otel_liveness/core/wire/*.h)
STAMP  := $(VENV)/.installed-$(shell cat $(BUILD_INPUTS) | cksum | cut -d' ' -f1)

.PHONY: bench-outage peer install demo-install demo tune-demo check test-pythons test test-pure test-under-load mutate sanitize lint bench bench-fleet fleet-overload clean system-deps collector store preview dashboards

# Debian's prometheus (2.42, with promtool) for the rules tests and the end-to-end runs, and
# Debian's prometheus-alertmanager (0.25) for the paging end-to-end test.
system-deps:
	@command -v promtool >/dev/null && command -v prometheus >/dev/null && command -v prometheus-alertmanager >/dev/null || { \
	  echo "installing prometheus, prometheus-alertmanager (Debian)"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends \
	    prometheus prometheus-alertmanager >/dev/null; }

# The collector distribution (ocb), cached by the manifest's hash.
collector:
	collector/build.sh >/dev/null

# The scaled-out store (Thanos v0.42: Receive, Query, Ruler) for its end-to-end test
# (tests/test_store_e2e.py), built with Go from the module proxy, cached by version.
store:
	collector/store/build-thanos.sh >/dev/null

$(STAMP): $(BUILD_INPUTS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $@

install: $(STAMP)

# The demos need only the package with the anthropic extra (the SDK and httpx2): their own
# virtualenv, not the development set of .venv (164 packages). Re-installed when the build inputs
# change, like .venv; editable, so the demos run the tree as it is. Measured from a fresh clone on
# this 2-core machine: 27 s cold (13 s install, 19 packages, 81 MB; 14 s demo), 14 s after.
DEMO_VENV  ?= .venv-demo
DEMO_BIN   := $(DEMO_VENV)/bin
DEMO_STAMP := $(DEMO_VENV)/.installed-$(shell cat $(BUILD_INPUTS) | cksum | cut -d' ' -f1)

$(DEMO_STAMP): $(BUILD_INPUTS)
	test -x $(DEMO_BIN)/python || $(PYTHON) -m venv $(DEMO_VENV)
	$(DEMO_BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[anthropic]'
	rm -f $(DEMO_VENV)/.installed-*
	touch $@

demo-install: $(DEMO_STAMP)

demo: demo-install
	$(DEMO_BIN)/otel-liveness demo $(DEMO_ARGS)

tune-demo: demo-install
	$(DEMO_BIN)/otel-liveness tune-demo $(DEMO_ARGS)

# Static checks: ruff (a small, deliberate rule set, pyproject.toml) and mypy --strict on the package.
lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy

# The inner loop: lint, types and the tests of the pure core -- fed bytes and fake timestamps, no
# sockets, no servers, no program but this Python (--io-free fails a test here that opens a socket or
# starts another program; tests/conftest.py). One process, no coverage: about 30 s on 2 cores.
CHECK_TESTS ?= tests/test_engine.py tests/test_clocks.py tests/test_retry.py tests/test_sse.py \
	tests/test_policy.py tests/test_providers.py tests/test_core_purity.py tests/test_anthropic.py \
	tests/test_eventstream.py tests/test_bulk.py tests/test_retained.py tests/test_composition_engine.py \
	tests/test_exported_members.py tests/test_docs.py tests/test_framing.py tests/test_budget.py
check: lint
	$(BIN)/python -m pytest -q --io-free $(CHECK_TESTS) $(PYTEST_ARGS)

# The same core tests on every other Python the classifiers promise (3.12, 3.13), each in its own
# stamped .venv-py3.X with the C extensions built for it (scripts/core_on_pythons.sh); a Python
# this machine lacks is skipped with a message. Part of make test.
test-pythons:
	SKIP_PYTHON=$$($(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])') \
	  scripts/core_on_pythons.sh $(CHECK_TESTS)

# The whole suite, in two passes (scripts/test.sh): every test not marked serial over WORKERS
# pytest-xdist workers, then the serial ones alone. Coverage is measured in both (subprocesses
# included), combined, and its floor enforced (pyproject.toml [tool.coverage.report]); COV_ARGS=
# runs without it (e.g. with a PYTEST_ARGS selection). pytest's exit 5 ("no tests collected") in
# both passes is a failure here, not a pass.
WORKERS ?= 3
COV_ARGS ?= --cov
test: install system-deps collector store lint test-pythons
	rm -f .coverage .coverage.*
	WORKERS=$(WORKERS) COV_ARGS="$(COV_ARGS)" scripts/test.sh $(BIN)/python $(PYTEST_ARGS)

# The same suite on the pure-Python steady lane and bulk scanner (what an install without a C
# compiler runs): OTEL_LIVENESS_PURE=1 selects them whatever is built.
test-pure: install system-deps collector store lint
	OTEL_LIVENESS_PURE=1 WORKERS=$(WORKERS) COV_ARGS= scripts/test.sh $(BIN)/python $(PYTEST_ARGS)

# The tests whose verdicts depend on real time, run LOAD_RUNS times while a busy loop holds each
# core (scripts/under_load.sh): every run must pass.
LOAD_RUNS ?= 5
LOAD_TESTS ?= tests/test_transport_wire.py tests/test_no_false_kills.py tests/test_reliability.py \
	tests/test_telemetry.py tests/test_transport_misc.py tests/test_transport_sdk.py tests/test_sdk_matrix.py \
	tests/test_soak.py tests/test_analyze_agrees.py tests/test_eventstream.py tests/test_lane.py tests/test_demo.py \
	tests/test_examples.py tests/test_instrumentor.py tests/test_wires.py tests/test_otel_native.py tests/test_retained.py \
	tests/test_http2.py tests/test_composition.py tests/test_frameworks.py
test-under-load: install
	scripts/under_load.sh $(LOAD_RUNS) $(BIN)/python -m pytest -q -p no:cacheprovider $(LOAD_TESTS) $(PYTEST_ARGS)

# Mutation testing of the core with cosmic-ray (scripts/mutation.toml): a report and the list of
# surviving mutants in .mutation/. Not part of make test (too slow).
mutate: install
	VENV=$(VENV) scripts/mutate.sh .mutation

# The C extensions built with -fsanitize=address,undefined into build/sanitize/<hash>/ (cached by
# the sources, flags, compiler and Python; the in-place build is untouched), then the
# C-vs-reference property tests, the engine's tests and a bounded fuzz run over a seed corpus of real replies
# (SANITIZE_FUZZ_RUNS, default 10000 inputs; SANITIZE_FUZZ_SECONDS, default 180) with the
# sanitizer runtime preloaded and PYTHONMALLOC=malloc. Fails on any test failure or sanitizer
# report.
sanitize: install
	scripts/sanitize.sh $(BIN)/python

# The anthropic SDK's own tests (from its sdist, at the installed version) plain, in shadow and in
# enforce, with the transport under every client it makes (scripts/peer.py): shadow must add no
# failure, enforce only those docs/compatibility.md lists. PEER_ARGS: e.g. --sdk anthropic,openai
# or -- tests/test_client.py (a selection).
peer: install
	$(BIN)/python scripts/peer.py $(PEER_ARGS)

# Every figure of docs/benchmarks.md's table; each benchmark exits non-zero when its target is missed,
# and all of them run regardless. The transport's whole-stream figures (the figures of record)
# come first.
bench: install
	status=0; \
	$(BIN)/python -m benchmarks.bench_transport --batch 1,64 || status=1; \
	$(BIN)/python -m benchmarks.bench_memory || status=1; \
	$(BIN)/python -m benchmarks.bench_scanner || status=1; \
	$(BIN)/python -m benchmarks.bench_eventstream || status=1; \
	$(BIN)/python -m benchmarks.bench_flood || status=1; \
	$(BIN)/python -m benchmarks.bench_whatif || status=1; \
	$(BIN)/python -m benchmarks.bench_canary || status=1; \
	exit $$status

# Fleet capacity (docs/operations.md, "Fleet scale"): a load generator replaying the library's own
# telemetry as 1,000 agents -> an agent collector -> a one-core gateway, in steps of offered load;
# reports attempts/s sustained per gateway core, CPU, RSS, series, and the delays to Prometheus and
# to a firing RawIdleStorm. About 5 minutes; not part of make test. BENCH_FLEET_ARGS adds options.
bench-fleet: install system-deps collector
	$(BIN)/python -m benchmarks.bench_fleet --rates 1000,2000,3000,4000,5000,6000,8000 --step 20 $(BENCH_FLEET_ARGS)

# Overload and gateway death (tests/test_fleet_overload.py): a gateway at twice its capacity and a
# gateway killed at the sized load, with the collector-health alerts. Saturates both cores for
# about two minutes, so not part of make test.
fleet-overload: install system-deps collector
	OTEL_LIVENESS_FLEET_OVERLOAD=1 $(BIN)/python -m pytest -q -s -p no:cacheprovider tests/test_fleet_overload.py $(PYTEST_ARGS)

# What 40 agents in one process do to a provider that is down for a window, for every failure mode,
# with the retry budget and without (docs/operations.md, "Retries at fleet scale"): exits non-zero
# when a target is missed with the budget (<= 1.2 attempts a call, retries back within a window,
# >= 99 % of healthy calls with a dead attempt still succeeding).
bench-outage: install
	$(BIN)/python -m benchmarks.bench_fleet_outage $(BENCH_OUTAGE_ARGS)

# Regenerate dashboards/provider-liveness.json from dashboards/panels.py (Grafana Foundation SDK).
dashboards: install
	$(BIN)/python -m dashboards.generate

# PNGs of the key panels: starts the collector and Prometheus on loopback, runs the demo, renders.
preview: install system-deps collector
	$(BIN)/python -m dashboards.preview --self-contained --out docs/preview

clean:
	rm -rf $(VENV) $(DEMO_VENV) .venv-py3.* .pytest_cache .hypothesis build *.egg-info
