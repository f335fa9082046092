# otel-liveness: everything a fresh machine needs is installed by these targets.
#   make demo   -- the agent-shaped demo on the embedded simulated provider
#   make test   -- the whole test suite (what .ci/run calls)
#   make test-pure -- the whole suite with the C extensions disabled (the pure-Python fallback)
#   make bench  -- the benchmarks (figures, not pass/fail of the test suite)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# Re-install when the dependency list or a C extension changes (the install compiles them).
BUILD_INPUTS := pyproject.toml setup.py $(wildcard otel_liveness/core/*.c)
STAMP  := $(VENV)/.installed-$(shell cat $(BUILD_INPUTS) | cksum | cut -d' ' -f1)

.PHONY: install demo test test-pure lint bench clean system-deps collector preview dashboards

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

$(STAMP): $(BUILD_INPUTS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $@

install: $(STAMP)

demo: install
	$(BIN)/otel-liveness demo $(DEMO_ARGS)

# Static checks: ruff (a small, deliberate rule set, pyproject.toml) and mypy --strict on the package.
lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy

# pytest's exit 5 ("no tests collected") is a failure here, not a pass.
test: install system-deps collector lint
	$(BIN)/python -m pytest -q $(PYTEST_ARGS); status=$$?; \
	  if [ $$status -eq 5 ]; then echo "pytest collected no tests" >&2; exit 1; fi; exit $$status

# The same suite on the pure-Python steady lane and bulk scanner (what an install without a C
# compiler runs): OTEL_LIVENESS_PURE=1 selects them whatever is built.
test-pure: install system-deps collector lint
	OTEL_LIVENESS_PURE=1 $(BIN)/python -m pytest -q $(PYTEST_ARGS); status=$$?; \
	  if [ $$status -eq 5 ]; then echo "pytest collected no tests" >&2; exit 1; fi; exit $$status

# Every figure of the README's table; each benchmark exits non-zero when its target is missed,
# and all of them run regardless.
bench: install
	status=0; \
	$(BIN)/python -m benchmarks.bench_scanner || status=1; \
	$(BIN)/python -m benchmarks.bench_eventstream || status=1; \
	$(BIN)/python -m benchmarks.bench_transport --batch 1,64 || status=1; \
	$(BIN)/python -m benchmarks.bench_memory || status=1; \
	$(BIN)/python -m benchmarks.bench_flood || status=1; \
	exit $$status

# Regenerate dashboards/provider-liveness.json from dashboards/panels.py (Grafana Foundation SDK).
dashboards: install
	$(BIN)/python -m dashboards.generate

# PNGs of the key panels: starts the collector and Prometheus on loopback, runs the demo, renders.
preview: install system-deps collector
	$(BIN)/python -m dashboards.preview --self-contained --out docs/preview

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info
