"""The official SDKs' Vertex AI clients talk to the `vertex-anthropic` and `vertex-gemini` fakes.

`anthropic.AnthropicVertex` and `google.genai.Client(vertexai=True)` are pointed at a
loopback `FakeServer` speaking each Vertex dialect, with a static access token. What the
fakes accept is what the SDKs send (the Claude fake refuses a body naming `model` or
without `anthropic_version: vertex-2023-10-16`, as Vertex does, so an SDK request it
serves is one the fake's model of Vertex agrees with), and what the SDKs read back equals
the script: text, usage and the stop reason. Note what the SDKs send: `anthropic` 2.x
puts its API version (`2026-10-21`), not `vertex-2023-10-16`, in `anthropic_version`.

The SDKs are test-only dependencies (the `test` extra); without them these tests skip.
"""

from __future__ import annotations

import pytest

from anyinfer.fakeservers import FakeServer, Script, ScriptUsage, Text

pytestmark = pytest.mark.loopback

SCRIPT = Script(
    pieces=(Text("Hello"), Text(" from Vertex")),
    usage=ScriptUsage(input_tokens=11, output_tokens=4),
    usage_placement="cumulative",  # where both providers really put it
    finish_reason="stop",
)


def test_anthropic_vertex_sdk_reads_the_fake() -> None:
    anthropic = pytest.importorskip("anthropic")
    with FakeServer("vertex-anthropic", [SCRIPT, SCRIPT]) as server:
        client = anthropic.AnthropicVertex(
            region="us-east5",
            project_id="sdk-project",
            access_token="ya29.sdk-token",
            base_url=f"{server.url}/v1",
        )
        message = client.messages.create(
            model="claude-fake-4",
            max_tokens=64,
            messages=[{"role": "user", "content": "hi"}],
        )
        assert [b.text for b in message.content if b.type == "text"] == ["Hello from Vertex"]
        assert message.stop_reason == "end_turn"
        assert (message.usage.input_tokens, message.usage.output_tokens) == (11, 4)
        with client.messages.stream(
            model="claude-fake-4",
            max_tokens=64,
            messages=[{"role": "user", "content": "hi"}],
        ) as stream:
            text = "".join(stream.text_stream)
            final = stream.get_final_message()
        assert text == "Hello from Vertex"
        assert final.usage.output_tokens == 4
        whole, streamed = server.requests
    root = "/v1/projects/sdk-project/locations/us-east5/publishers/anthropic/models/claude-fake-4"
    assert whole.path == f"{root}:rawPredict"
    assert streamed.path == f"{root}:streamRawPredict"
    for sent in (whole, streamed):
        assert "model" not in sent.json
        assert isinstance(sent.json["anthropic_version"], str)
    assert streamed.json["stream"] is True


def test_google_genai_vertex_client_reads_the_fake() -> None:
    genai = pytest.importorskip("google.genai")
    credentials = pytest.importorskip("google.oauth2.credentials")
    types = genai.types
    with FakeServer("vertex-gemini", [SCRIPT, SCRIPT]) as server:
        client = genai.Client(
            vertexai=True,
            project="sdk-project",
            location="us-central1",
            credentials=credentials.Credentials(token="ya29.sdk-token"),
            http_options=types.HttpOptions(base_url=server.url, api_version="v1"),
        )
        response = client.models.generate_content(model="gemini-fake", contents="hi")
        assert response.text == "Hello from Vertex"
        assert response.candidates[0].finish_reason == types.FinishReason.STOP
        assert response.usage_metadata.prompt_token_count == 11
        assert response.usage_metadata.candidates_token_count == 4
        chunks = list(client.models.generate_content_stream(model="gemini-fake", contents="hi"))
        assert "".join(c.text or "" for c in chunks) == "Hello from Vertex"
        assert response.create_time is not None  # Vertex's `createTime`, parsed
        whole, streamed = server.requests
    root = "/v1/projects/sdk-project/locations/us-central1/publishers/google/models/gemini-fake"
    assert whole.path == f"{root}:generateContent"
    assert streamed.path == f"{root}:streamGenerateContent"
