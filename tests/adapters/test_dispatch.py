"""`HTTPAdapter.send` hands a request to the transport itself, keeping what httpx's
client `send` does that anyone can see: cookies, Basic auth from the URL, auth objects,
the closed-client error and httpx's log line."""

from __future__ import annotations

import asyncio
import base64
import logging

import httpx
import pytest
from helpers import NO_RETRY, settings

import anyinfer as ai
from anyinfer._providers.openai_chat import OpenAIChatAdapter

CHAT = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}
OLLAMA = {
    "model": "m",
    "message": {"role": "assistant", "content": "hi"},
    "done": True,
    "done_reason": "stop",
    "prompt_eval_count": 1,
    "eval_count": 1,
}


def test_a_cookie_the_provider_sets_goes_back_on_the_next_request() -> None:
    seen: list[str | None] = []

    def serve(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("cookie"))
        return httpx.Response(200, json=CHAT, headers={"set-cookie": "affinity=b7; Path=/"})

    with ai.Client(
        [settings("openai", serve, api_key="sk-test")], route=ai.Route("openai:m", retry=NO_RETRY)
    ) as client:
        client.generate("hi", target="openai:m")
        client.generate("hi", target="openai:m")
    assert seen == [None, "affinity=b7"]


def test_credentials_in_the_base_url_are_sent_as_basic_auth() -> None:
    seen: list[str | None] = []

    def serve(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        if request.url.path == "/api/chat":
            return httpx.Response(200, json=OLLAMA)
        return httpx.Response(404, json={"error": "not found"})

    remote = settings("ollama", serve, base_url="http://user:pw@ollama.example:11434")
    with ai.Client([remote], route=ai.Route("ollama:m", retry=NO_RETRY)) as client:
        assert client.generate("hi", target="ollama:m").text == "hi"
    expected = "Basic " + base64.b64encode(b"user:pw").decode()
    assert seen[-1] == expected


def test_an_auth_object_on_the_client_still_signs_each_request() -> None:
    seen: list[str | None] = []

    class Signed(httpx.Auth):
        def auth_flow(self, request: httpx.Request):  # type: ignore[no-untyped-def]
            request.headers["x-signed"] = "yes"
            yield request

    def serve(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("x-signed"))
        return httpx.Response(200, json=CHAT)

    async def main() -> None:
        adapter = OpenAIChatAdapter(settings("openai", serve, api_key="sk-test"))
        adapter.http.auth = Signed()  # as Bedrock's SigV4 is set
        response = await adapter.send("POST", "/chat/completions", json_body={})
        await response.aclose()
        await adapter.aclose()

    asyncio.run(main())
    assert seen == ["yes"]


def test_a_closed_adapter_refuses_to_send() -> None:
    def serve(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=CHAT)

    async def main() -> None:
        adapter = OpenAIChatAdapter(settings("openai", serve, api_key="sk-test"))
        await adapter.aclose()
        with pytest.raises(RuntimeError, match="client has been closed"):
            await adapter.send("POST", "/chat/completions", json_body={})

    asyncio.run(main())


def test_httpx_logs_each_request_as_its_client_does(caplog: pytest.LogCaptureFixture) -> None:
    def serve(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=CHAT)

    with caplog.at_level(logging.INFO, logger="httpx"):
        with ai.Client([settings("openai", serve, api_key="sk-test")]) as client:
            client.generate("hi", target="openai:m")
    lines = [r.getMessage() for r in caplog.records if r.name == "httpx"]
    assert any(
        line.startswith("HTTP Request: POST https://api.openai.com/v1/chat/completions")
        and line.endswith('"HTTP/1.1 200 OK"')
        for line in lines
    ), lines


def test_a_client_the_adapter_did_not_build_is_sent_through_as_it_is() -> None:
    # A subclass may put its own client in place (a proxy, mounts, hooks of its own):
    # its requests must go where that client sends them, not to the built transport.
    built: list[str] = []
    own: list[str] = []

    def serve_built(request: httpx.Request) -> httpx.Response:
        built.append(request.url.path)
        return httpx.Response(200, json=CHAT)

    def serve_own(request: httpx.Request) -> httpx.Response:
        own.append(request.url.path)
        return httpx.Response(200, json=CHAT)

    async def main() -> None:
        adapter = OpenAIChatAdapter(settings("openai", serve_built, api_key="sk-test"))
        built_client = adapter.http
        adapter.http = httpx.AsyncClient(transport=httpx.MockTransport(serve_own))
        response = await adapter.send("POST", "/chat/completions", json_body={})
        await response.aclose()
        await adapter.http.aclose()
        await built_client.aclose()

    asyncio.run(main())
    assert (built, own) == ([], ["/v1/chat/completions"])


def test_event_hooks_on_the_client_still_see_each_request() -> None:
    seen: list[str] = []

    def serve(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=CHAT)

    async def on_request(request: httpx.Request) -> None:
        seen.append("request")

    async def on_response(response: httpx.Response) -> None:
        seen.append("response")

    async def main() -> None:
        adapter = OpenAIChatAdapter(settings("openai", serve, api_key="sk-test"))
        adapter.http.event_hooks = {"request": [on_request], "response": [on_response]}
        response = await adapter.send("POST", "/chat/completions", json_body={})
        await response.aclose()
        await adapter.aclose()

    asyncio.run(main())
    assert seen == ["request", "response"]


def test_a_client_told_to_follow_redirects_still_follows_them() -> None:
    def serve(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/chat/completions":
            return httpx.Response(307, headers={"location": "https://api.openai.com/v2/chat"})
        return httpx.Response(200, json=CHAT)

    async def main() -> str:
        adapter = OpenAIChatAdapter(settings("openai", serve, api_key="sk-test"))
        adapter.http.follow_redirects = True
        response = await adapter.send("POST", "/chat/completions", json_body={})
        await response.aclose()
        await adapter.aclose()
        return response.url.path

    assert asyncio.run(main()) == "/v2/chat"
