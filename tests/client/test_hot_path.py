"""What the per-request hot path caches stays correct: each cache answers what a fresh
look-up would (capabilities after a probe, routes per target string, the first target's
request reused only when it fits)."""

from __future__ import annotations

import anyinfer as ai
from anyinfer.fakeservers import FakeTransport, Fault, Script, ScriptUsage, Text


def test_capabilities_follow_the_probe_layer_after_being_looked_up() -> None:
    # Looked up (and so cached) before every stream: each probe must still show.
    fake = FakeTransport(
        "openai-chat",
        [
            Script(pieces=(Text("a"),), usage=ScriptUsage(3, 1)),
            Script(pieces=(Text("b"),), usage=ScriptUsage(3, 1)),
            Script(pieces=(Text("c"),), usage=None),
        ],
    )
    with ai.Client([ai.ProviderSettings("openai", api_key="k", transport=fake)]) as client:
        before = client.capabilities("openai:m")
        assert before.source("streaming_usage") != "probe"
        seen = []
        for _ in range(3):
            with client.stream("hi", target="openai:m") as st:
                for _event in st:
                    pass
            caps = client.capabilities("openai:m")
            seen.append((caps.streaming_usage, caps.source("streaming_usage")))
    assert seen == [(True, "probe"), (True, "probe"), (False, "probe")]


def test_a_target_string_route_inherits_the_client_route_every_time() -> None:
    fake = FakeTransport("openai-chat", [Script(pieces=(Text("ok"),))] * 2)
    default = ai.Route(["openai:other"], breaker_threshold=0)
    settings = ai.ProviderSettings("openai", api_key="k", transport=fake)
    with ai.Client([settings], route=default) as client:
        first = client.generate("hi", target="openai:m")
        second = client.generate("hi", target="openai:m")
    assert str(first.target) == str(second.target) == "openai:m"
    routes = client._async._target_routes
    assert routes["openai:m"].breaker_threshold == 0


def test_provider_options_reach_each_target_of_a_route() -> None:
    # The first target's request is built up front and reused; a fallback target with
    # other options and another model must still get its own.
    first = FakeTransport("openai-chat", [Script(fault=Fault("status", status=503))])
    second = FakeTransport("openai-chat", [Script(pieces=(Text("ok"),))])
    client = ai.Client(
        [
            ai.ProviderSettings("openai", alias="a", api_key="k", transport=first),
            ai.ProviderSettings("openai", alias="b", api_key="k", transport=second),
        ],
        route=ai.Route(["a:m1", "b:m2"], retry=ai.RetryPolicy(max_retries=0)),
    )
    with client:
        result = client.generate("hi", provider_options={"a": {"x": 1}, "b": {"y": 2}})
    assert str(result.target) == "b:m2"
    ((_, _, sent_a),), ((_, _, sent_b),) = first.requests, second.requests
    assert (sent_a["model"], sent_a.get("x"), "y" in sent_a) == ("m1", 1, False)
    assert (sent_b["model"], sent_b.get("y"), "x" in sent_b) == ("m2", 2, False)
