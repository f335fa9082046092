"""Tests that use the transport do not depend on their order: the process's retry budgets
(core/memory/budget.py) are shared by every transport, and the pytest plugin starts every test with them
full -- a user's suite, run by pytest as a user runs it (``pytester``), passes in both orders; and
the same suite without the plugin fails, so the check can fail."""

from __future__ import annotations

import textwrap

import pytest

pytest_plugins = ["pytester"]

SUITE = textwrap.dedent('''
    import anthropic, httpx2, otel_liveness
    from otel_liveness import Policy
    from otel_liveness.testing import Scenario, steps as s, anthropic_reply
    from otel_liveness.testing.scripts import anthropic_status

    POLICY = Policy(backoff_initial=0.01, backoff_max=0.02, max_retry_after=0.05, first_byte_timeout=None)

    def client(url):
        transport = otel_liveness.wrap(httpx2.HTTPTransport(), POLICY, telemetry=False)
        return anthropic.Anthropic(base_url=url, api_key="k", max_retries=0, http_client=httpx2.Client(transport=transport))

    def test_a_failure_heavy_test(simulated_provider):
        url = simulated_provider.add("down", Scenario([[anthropic_status(529, "overloaded_error")]]))
        for _ in range(6):
            try:
                client(url).messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}],
                                            stream=True)
            except anthropic.APIStatusError:
                pass

    def test_a_retry_that_must_happen(simulated_provider):
        simulated_provider.add("flaky", Scenario([[anthropic_status(529, "overloaded_error")],
                                                  [s.Headers(), *anthropic_reply("ok")]]))
        with client(simulated_provider.base_url("flaky")).messages.stream(
                model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}]) as stream:
            assert stream.get_final_text() == "ok"
        assert simulated_provider.attempts("flaky") == 2
''')


@pytest.mark.parametrize("order", ["heavy-first", "heavy-last"])
def test_a_failure_heavy_test_does_not_drain_a_later_one(pytester: pytest.Pytester, order: str) -> None:
    suite = SUITE
    if order == "heavy-last":  # the same tests, defined (and run) the other way round
        head, _, rest = suite.partition("def test_a_failure_heavy_test")
        body, _, retry = rest.partition("def test_a_retry_that_must_happen")
        suite = head + "def test_a_retry_that_must_happen" + retry + "\n" + "def test_a_failure_heavy_test" + body
    pytester.makepyfile(test_user_suite=suite)
    result = pytester.runpytest_subprocess("-q", "-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)


def test_without_the_plugin_the_heavy_test_drains_the_next(pytester: pytest.Pytester) -> None:
    """The check above can fail: with the budgets' reset off, the retry after the heavy test is shed."""
    conftest = textwrap.dedent('''
        import pytest
        from otel_liveness.testing import SimulatedProvider

        @pytest.fixture
        def simulated_provider():
            with SimulatedProvider() as provider:
                yield provider
    ''')
    pytester.makeconftest(conftest)
    pytester.makepyfile(test_user_suite=SUITE)
    result = pytester.runpytest_subprocess("-q", "-p", "no:randomly", "-p", "no:otel_liveness", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
