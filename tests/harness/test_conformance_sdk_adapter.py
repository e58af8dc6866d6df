"""A correct adapter built on the official `openai` SDK passes the conformance suite.

`tests/conformance_sdk` is a third-party adapter: it subclasses only
`anyinfer.adapters.Adapter`, sends through `openai.AsyncOpenAI` (`max_retries=0`, its
own `httpx.AsyncClient` over the harness's transport) and turns the SDK's parsed chunks
into parts. A throwaway project registers it through the documented
`pytest_anyinfer_configure` hook and runs `pytest --anyinfer-conformance` at the CI
profile with `--anyinfer-resources`: every guarantee must hold.

What the SDK does not do for its caller, the adapter does in a transport wrapper (see
its module docstring): it tells `data: [DONE]` from a quiet end of body (the SDK ends its
iteration the same way for both, and the suite rightly fails an adapter that reports
the sentinel it never saw: the second test), decodes `Content-Encoding` under
`max_response_bytes`, and lets no cancellation interrupt a response's close.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_conformance_plugin import _matrix

from anyinfer.conformance.checker import GUARANTEES, TRAILING_USAGE
from anyinfer.conformance.plugin import OPTION_ADAPTER, OPTION_CONFORMANCE, OPTION_RESOURCES

pytest.importorskip("openai")

pytest_plugins = ["pytester"]

TESTS_DIR = Path(__file__).resolve().parents[1]

SDK_CONFTEST = """
import sys

from hypothesis import HealthCheck, settings

settings.register_profile("ci", derandomize=True, deadline=None, database=None, max_examples=30,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("ci")

sys.path.insert(0, {tests!r})

from conformance_sdk import SDKChatAdapter


def pytest_anyinfer_configure(registry):
    registry.add("openai-sdk", SDKChatAdapter, dialect="openai-chat")
"""

QUIET_END = """

from anyinfer.adapters import END, EndPart


class TrustsQuietEnd(SDKChatAdapter):
    # Reports the sentinel whenever the SDK's iteration ends without an error.
    async def generate(self, request):
        ended = False
        async for part in super().generate(request):
            ended = ended or isinstance(part, EndPart)
            yield part
        if request.stream and not ended:
            yield END


def pytest_anyinfer_configure(registry):
    registry.add("sdk-quiet-end", TrustsQuietEnd, dialect="openai-chat")
"""


@pytest.mark.timeout(600)
def test_the_openai_sdk_adapter_passes_every_guarantee(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(SDK_CONFTEST.format(tests=str(TESTS_DIR)))
    result = pytester.runpytest_subprocess(
        OPTION_CONFORMANCE,
        OPTION_ADAPTER,
        "openai-sdk",
        OPTION_RESOURCES,
        "-p",
        "no:cacheprovider",
        timeout=540,
    )
    output = result.stdout.str()
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == outcomes.get("errors", 0) == 0, output[-6000:]
    row = _matrix(output)["openai-sdk"]
    assert all(row[g] == "ok" for g in GUARANTEES), row
    assert "hypothesis profile 'ci'" in output


@pytest.mark.timeout(600)
def test_an_sdk_adapter_that_trusts_the_quiet_end_is_caught(pytester: pytest.Pytester) -> None:
    conftest = SDK_CONFTEST.format(tests=str(TESTS_DIR)).split("\n\ndef pytest_anyinfer")[0]
    pytester.makeconftest(conftest + QUIET_END)
    result = pytester.runpytest_subprocess(
        OPTION_CONFORMANCE,
        OPTION_ADAPTER,
        "sdk-quiet-end",
        "-k",
        "test_hostile",
        "-p",
        "no:cacheprovider",
        timeout=540,
    )
    output = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, output[-4000:]
    assert _matrix(output)["sdk-quiet-end"][TRAILING_USAGE] == "FAIL"
    assert "before the sentinel, but the result has no 'usage may be incomplete' warning" in output
