"""Replaying real provider recordings (`tests/data/wire`) through the transport seam.

The recordings folder holds vcrpy YAML cassettes that other open-source projects recorded
against live providers (bundled with their licenses: see its README). This module finds
that folder, reads the cassettes into plain `Interaction` objects (decompressing gzip
bodies, re-serializing `parsed_body`), says which wire protocol each interaction speaks,
frames SSE bodies for computing expected values, and serves interactions back in order
through an `httpx.MockTransport`. The replay tests' oracles each read the recorded JSON
their own way (from the provider's documentation, never from the adapter's tables); what
they share is here too: `ExpectedCall` / `ExpectedError`, `replay_with` (one recording,
one adapter, one attempt), `recording_params`, and the protocol-neutral checks
(`check_one_post`, `check_generation`, `check_attempt_failed`, `check_same_result`).

It is protocol-neutral on purpose: the OpenAI Chat replay tests use it, and so can the
Anthropic, Gemini and Responses ones.

Locating the folder: the `ANYINFER_SHARED_WIRE` environment variable wins (to replay another
set of recordings); otherwise the bundled copy, `tests/data/wire`, is used, so a fresh
clone or the sdist runs every replay test. When neither exists, `require_wire_dir()`
skips the calling test.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import zlib
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Protocol

import httpx
import pytest
import yaml

import anyinfer as ai

__all__ = [
    "BUNDLED_WIRE",
    "WIRE_ENV",
    "Interaction",
    "RecordedRequest",
    "RecordedResponse",
    "ReplayTransport",
    "SSEFrame",
    "find_wire_dir",
    "interactions",
    "iter_by_protocol",
    "list_cassettes",
    "load_cassette",
    "protocol_of",
    "replay_transport",
    "require_wire_dir",
    "sse_frames",
    "sse_json",
    "streamed_chunks",
]

WIRE_ENV = "ANYINFER_SHARED_WIRE"
"""Environment variable naming a recordings folder explicitly."""

REPO_ROOT = Path(__file__).resolve().parent.parent

BUNDLED_WIRE = REPO_ROOT / "tests" / "data" / "wire"
"""The recordings bundled with the repository (and the sdist)."""

# Headers that describe the recorded transfer, not the body we serve: the body is stored
# decoded (or re-serialized), so these would lie about it.
_TRANSFER_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})


# --- locating the recordings ---------------------------------------------------------------


def find_wire_dir() -> tuple[Path | None, str]:
    """Find the recordings folder: `$ANYINFER_SHARED_WIRE`, else the bundled copy.

    Returns:
        `(path, how)` when found, `(None, reason)` when not; `reason` says where it looked.
    """
    explicit = os.environ.get(WIRE_ENV)
    if explicit:
        path = Path(explicit).expanduser()
        if path.is_dir():
            return path.resolve(), f"${WIRE_ENV}"
        return None, f"${WIRE_ENV}={explicit!r} is not a directory"
    if BUNDLED_WIRE.is_dir():
        return BUNDLED_WIRE, "bundled"
    return None, f"no recordings folder: {BUNDLED_WIRE} is missing and ${WIRE_ENV} is not set"


def require_wire_dir() -> Path:
    """The recordings folder, or skip the calling test saying why it is missing."""
    path, why = find_wire_dir()
    if path is None:
        pytest.skip(why)
    return path


def list_cassettes(root: Path | None = None) -> list[Path]:
    """Every YAML cassette under `root` (default: `find_wire_dir()`), sorted by path."""
    if root is None:
        root, _ = find_wire_dir()
        if root is None:
            return []
    found = [p for p in root.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file()]
    return sorted(found)


# --- reading cassettes ---------------------------------------------------------------------


@dataclass(frozen=True)
class RecordedRequest:
    """The request half of one recorded interaction.

    Attributes:
        method: HTTP method, upper case.
        uri: The recorded URI, as stored (may carry a `#fragment` vcrpy matchers used).
        headers: Lower-cased header names to their recorded values.
        body: The body bytes (`parsed_body` re-serialized as JSON); empty when none.
    """

    method: str
    uri: str
    headers: Mapping[str, tuple[str, ...]]
    body: bytes

    @property
    def url(self) -> httpx.URL:
        """The URI without a fragment, as an `httpx.URL`."""
        return httpx.URL(self.uri.partition("#")[0])

    @property
    def path(self) -> str:
        """The URL path, e.g. `/v1/chat/completions`."""
        return self.url.path

    @property
    def json(self) -> Any:
        """The body parsed as JSON, or `None` when it is empty or not JSON."""
        return _maybe_json(self.body)

    @property
    def wants_stream(self) -> bool:
        """Whether the request asked for a streamed response.

        True for a JSON body with `"stream": true`, for Gemini's
        `:streamGenerateContent` URLs and Bedrock's `…/converse-stream`.
        """
        payload = self.json
        if isinstance(payload, dict) and payload.get("stream") is True:
            return True
        return ":streamGenerateContent" in self.path or self.path.endswith("/converse-stream")


@dataclass(frozen=True)
class RecordedResponse:
    """The response half of one recorded interaction.

    Attributes:
        status: HTTP status code.
        headers: Lower-cased header names to their recorded values (transfer headers
            included, as recorded).
        body: The decoded body bytes.
    """

    status: int
    headers: Mapping[str, tuple[str, ...]]
    body: bytes

    @property
    def content_type(self) -> str:
        """The media type without parameters, lower case; empty when not recorded."""
        values = self.headers.get("content-type", ())
        return values[0].split(";")[0].strip().lower() if values else ""

    @property
    def is_sse(self) -> bool:
        """Whether the body is a server-sent event stream.

        Judged by the content type, or (some recordings drop it) by the first
        non-blank line being an SSE field or comment.
        """
        if self.content_type == "text/event-stream":
            return True
        for line in self.body.decode("utf-8", "replace").splitlines():
            if line.strip():
                return line.startswith(("data:", "event:", ":", "id:", "retry:"))
        return False

    @property
    def json(self) -> Any:
        """The body parsed as JSON, or `None` when it is empty or not JSON."""
        return _maybe_json(self.body)

    @property
    def text(self) -> str:
        """The body decoded as UTF-8."""
        return self.body.decode("utf-8")

    def served_headers(self) -> list[tuple[str, str]]:
        """The headers to serve with the decoded body (transfer headers dropped)."""
        return [
            (name, value)
            for name, values in self.headers.items()
            if name not in _TRANSFER_HEADERS
            for value in values
        ]


@dataclass(frozen=True)
class Interaction:
    """One recorded request/response pair.

    Attributes:
        cassette: The file it came from.
        index: Its position in that file.
        request: The recorded request.
        response: The recorded response.
    """

    cassette: Path
    index: int
    request: RecordedRequest
    response: RecordedResponse

    @property
    def id(self) -> str:
        """A readable test id: `<file name>#<index>`."""
        return f"{self.cassette.name}#{self.index}"

    @property
    def protocol(self) -> str | None:
        """The wire protocol this interaction speaks (see `protocol_of`)."""
        return protocol_of(self.request)


def load_cassette(path: Path) -> list[Interaction]:
    """Read one vcrpy cassette.

    Handles both request body styles (`body` as text/bytes, pydantic-ai's `parsed_body`)
    and the response body styles (`body: {string: ...}`, `body` as a bare string,
    `parsed_body`, and the older `content` key), gunzipping bodies that the headers or
    the gzip magic bytes say are compressed.

    Args:
        path: The YAML file.

    Returns:
        Its interactions, in recorded order.

    Raises:
        ValueError: If the file is not a vcrpy cassette.
    """
    with path.open("rb") as fh:
        doc = yaml.safe_load(fh)
    if not isinstance(doc, dict) or not isinstance(doc.get("interactions"), list):
        raise ValueError(f"{path}: not a vcrpy cassette (no 'interactions' list)")
    out: list[Interaction] = []
    for index, raw in enumerate(doc["interactions"]):
        req, resp = raw["request"], raw["response"]
        req_headers = _headers(req.get("headers"))
        resp_headers = _headers(resp.get("headers"))
        request = RecordedRequest(
            method=str(req.get("method", "GET")).upper(),
            uri=str(req["uri"]),
            headers=req_headers,
            body=_decode(_request_body(req), req_headers),
        )
        status = resp.get("status")
        code = status.get("code") if isinstance(status, dict) else status
        if not isinstance(code, int | str):
            raise ValueError(f"{path}: interaction {index} has no response status code")
        response = RecordedResponse(
            status=int(code),
            headers=resp_headers,
            body=_decode(_response_body(resp), resp_headers),
        )
        out.append(Interaction(path, index, request, response))
    return out


@cache
def _load_cached(path: Path) -> tuple[Interaction, ...]:
    return tuple(load_cassette(path))


def interactions(
    root: Path | None = None,
    where: Callable[[Interaction], bool] | None = None,
) -> list[Interaction]:
    """Every interaction in every cassette under `root`, optionally filtered.

    Args:
        root: The recordings folder; default: `find_wire_dir()`. Missing means none.
        where: Keep only interactions this returns true for.

    Returns:
        The interactions, ordered by file path then position.
    """
    found: list[Interaction] = []
    for path in list_cassettes(root):
        for item in _load_cached(path):
            if where is None or where(item):
                found.append(item)
    return found


def protocol_of(request: RecordedRequest) -> str | None:
    """Name the wire protocol a recorded request speaks, from its URL.

    Returns:
        `"openai_chat"` (`…/chat/completions`, any host), `"openai_responses"`
        (`…/responses`), `"anthropic_messages"` (`…/v1/messages`), `"gemini"`
        (`:generateContent` / `:streamGenerateContent`), `"cohere_v2"` (`…/v2/chat`),
        `"bedrock_converse"` (`…/model/{id}/converse` / `…/converse-stream`),
        or `None` for anything else
        (token exchanges, model listings, token counting).
    """
    path = request.path.rstrip("/")
    if path.endswith("/chat/completions"):
        return "openai_chat"
    if path.endswith("/responses"):
        return "openai_responses"
    if path.endswith("/v1/messages"):
        return "anthropic_messages"
    if path.endswith((":generateContent", ":streamGenerateContent")):
        return "gemini"
    if path.endswith("/v2/chat"):
        return "cohere_v2"
    if "/model/" in path and path.endswith(("/converse", "/converse-stream")):
        return "bedrock_converse"
    return None


def _headers(raw: Any) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    if not isinstance(raw, dict):
        return out
    for name, values in raw.items():
        seq = values if isinstance(values, list) else [values]
        key = str(name).lower()
        out[key] = out.get(key, ()) + tuple(str(v) for v in seq)
    return out


def _request_body(req: Mapping[str, Any]) -> bytes:
    if "parsed_body" in req and req["parsed_body"] is not None:
        return json.dumps(req["parsed_body"]).encode()
    return _as_bytes(req.get("body"))


def _response_body(resp: Mapping[str, Any]) -> bytes:
    if "parsed_body" in resp and resp["parsed_body"] is not None:
        return json.dumps(resp["parsed_body"]).encode()
    body = resp.get("body")
    if isinstance(body, dict):
        if "string" in body:
            return _as_bytes(body["string"])
        if "parsed_body" in body:
            return json.dumps(body["parsed_body"]).encode()
    if body is not None:
        return _as_bytes(body)
    return _as_bytes(resp.get("content"))


def _as_bytes(value: Any) -> bytes:
    if value is None:
        return b""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    return json.dumps(value).encode()  # a body vcrpy stored as a YAML mapping


def _decode(body: bytes, headers: Mapping[str, tuple[str, ...]]) -> bytes:
    encodings = [
        enc.strip().lower()
        for value in headers.get("content-encoding", ())
        for enc in value.split(",")
        if enc.strip()
    ]
    if body[:2] == b"\x1f\x8b":  # gzip magic, whatever the headers say
        return gzip.decompress(body)
    if "gzip" in encodings and body:
        try:
            return gzip.decompress(body)
        except (OSError, EOFError):
            return body  # already decoded by the recorder; the header is historical
    if "deflate" in encodings and body:
        try:
            return zlib.decompress(body)
        except zlib.error:
            return zlib.decompress(body, -zlib.MAX_WBITS)
    return body


def _maybe_json(body: bytes) -> Any:
    if not body.strip():
        return None
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None


# --- framing recorded bodies ---------------------------------------------------------------


@dataclass(frozen=True)
class SSEFrame:
    """One server-sent event of a recorded body.

    Attributes:
        event: The `event:` field, or `None`.
        data: The `data:` lines joined with newlines.
    """

    event: str | None
    data: str


def sse_frames(body: bytes | str) -> list[SSEFrame]:
    """Split a whole recorded SSE body into events (comments dropped).

    A deliberately plain reading of the SSE format, independent of the library's
    incremental framer: lines end at `\\r\\n`, `\\r` or `\\n`; a blank line dispatches;
    an unterminated event at the end of the body is still returned, because a
    recording's last event may lack its blank line.
    """
    text = body.decode("utf-8") if isinstance(body, bytes) else body
    frames: list[SSEFrame] = []
    data: list[str] = []
    event: str | None = None
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if not line:
            if data:
                frames.append(SSEFrame(event, "\n".join(data)))
            data, event = [], None
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
    if data:
        frames.append(SSEFrame(event, "\n".join(data)))
    return frames


def sse_json(body: bytes | str, *, sentinel: str = "[DONE]") -> tuple[list[Any], bool]:
    """JSON payloads of a recorded SSE body, and whether `sentinel` arrived.

    Args:
        body: The whole body.
        sentinel: A `data:` value that ends the stream instead of carrying JSON.

    Returns:
        `(payloads, saw_sentinel)`; payloads after the sentinel are ignored.
    """
    payloads: list[Any] = []
    for frame in sse_frames(body):
        if frame.data.strip() == sentinel:
            return payloads, True
        payloads.append(json.loads(frame.data))
    return payloads, False


# --- serving recordings ----------------------------------------------------------------------


class _ChunkedBody(httpx.AsyncByteStream):
    def __init__(self, body: bytes, size: int) -> None:
        self._body = body
        self._size = size

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for start in range(0, len(self._body), self._size):
            yield self._body[start : start + self._size]


class ReplayTransport(httpx.MockTransport):
    """An `httpx.MockTransport` serving recorded responses in recorded order.

    Each request gets the next interaction's status, headers (transfer headers
    dropped) and decoded body. Requests are kept in `requests` for assertions. Strict:
    a request beyond the recording fails the test with an `AssertionError`, and
    `assert_all_used()` fails when some recorded response was never asked for.

    Args:
        recorded: The interactions to serve.
        chunk_size: Serve bodies in reads of this many bytes (default: one read), to
            exercise framing across read boundaries.
    """

    def __init__(self, recorded: Iterable[Interaction], *, chunk_size: int | None = None) -> None:
        if chunk_size is not None and chunk_size <= 0:
            raise ValueError(f"chunk_size must be positive, got {chunk_size!r}")
        self.recorded: tuple[Interaction, ...] = tuple(recorded)
        self.chunk_size = chunk_size
        self.requests: list[httpx.Request] = []
        super().__init__(self._serve)

    def _serve(self, request: httpx.Request) -> httpx.Response:
        position = len(self.requests)
        self.requests.append(request)
        if position >= len(self.recorded):
            raise AssertionError(
                f"unexpected request #{position + 1} {request.method} {request.url}: "
                f"the recording has only {len(self.recorded)} interaction(s)"
            )
        recorded = self.recorded[position].response
        headers = recorded.served_headers()
        if self.chunk_size is None:
            return httpx.Response(recorded.status, headers=headers, content=recorded.body)
        return httpx.Response(
            recorded.status, headers=headers, stream=_ChunkedBody(recorded.body, self.chunk_size)
        )

    @property
    def unused(self) -> tuple[Interaction, ...]:
        """Recorded interactions no request has consumed yet."""
        return self.recorded[len(self.requests) :]

    def assert_all_used(self) -> None:
        """Fail if any recorded interaction was never requested."""
        left = self.unused
        assert not left, f"{len(left)} recorded interaction(s) never requested: " + ", ".join(
            i.id for i in left
        )

    def sent_json(self, position: int = -1) -> Any:
        """The JSON body of a request the transport received (default: the last)."""
        return json.loads(self.requests[position].content)


def replay_transport(
    recorded: Iterable[Interaction], *, chunk_size: int | None = None
) -> ReplayTransport:
    """A `ReplayTransport` for `recorded` (see that class)."""
    return ReplayTransport(recorded, chunk_size=chunk_size)


def iter_by_protocol(protocol: str, root: Path | None = None) -> Iterator[Interaction]:
    """Interactions speaking `protocol` (a `protocol_of` name), in file order."""
    yield from interactions(root, lambda i: i.protocol == protocol)


def streamed_chunks(protocol: str, root: Path | None = None) -> Iterator[Any]:
    """Every JSON `data:` chunk of the successful streamed recordings of `protocol`."""
    for item in iter_by_protocol(protocol, root):
        if item.request.wants_stream and item.response.status == 200:
            yield from sse_json(item.response.body)[0]


# --- checks shared by the replay tests -------------------------------------------------

_CONTENT = (ai.TextDelta, ai.ReasoningDelta, ai.ToolCallDelta)


def check_ordering(events: list[Any], *, ended: bool) -> None:
    """The event-stream grammar for one single-target attempt.

    On success: `attempt_start` first, exactly one `first_token` right before the first
    content delta (none without content), exactly one `StreamEnded`, last. On failure: no
    `StreamEnded`, and an `AttemptFailed` only as the last event of an attempt that showed
    no content (after content the typed error itself is raised).
    """
    assert events, "no events at all"
    assert events[0] == ai.TimingMark("attempt_start", 0.0)
    marks = [i for i, e in enumerate(events) if isinstance(e, ai.TimingMark)]
    starts = [i for i in marks if events[i].name == "attempt_start"]
    firsts = [i for i in marks if events[i].name == "first_token"]
    assert starts == [0], "one attempt, one attempt_start"
    content = [i for i, e in enumerate(events) if isinstance(e, _CONTENT)]
    if content:
        assert firsts == [content[0] - 1], "first_token must sit right before the first delta"
    else:
        assert firsts == [], "no content, so no first_token"
    endings = [i for i, e in enumerate(events) if isinstance(e, ai.StreamEnded)]
    failures = [i for i, e in enumerate(events) if isinstance(e, ai.AttemptFailed)]
    if ended:
        assert endings == [len(events) - 1], "exactly one StreamEnded, last"
        assert failures == []
    else:
        assert endings == [], "a failed stream must not claim completion"
        if content:
            assert failures == [], "after content the error is raised, not announced"
        else:
            assert failures in ([], [len(events) - 1])


def check_events_match_result(events: list[Any], result: ai.Generation) -> None:
    """Deltas, joined, are the result (guarantee 4 and its siblings)."""
    text = "".join(e.text for e in events if isinstance(e, ai.TextDelta))
    reasoning = "".join(e.text for e in events if isinstance(e, ai.ReasoningDelta))
    assert text == result.text
    assert reasoning == result.reasoning
    joined: dict[int, list[str]] = {}
    for e in events:
        if isinstance(e, ai.ToolCallDelta):
            joined.setdefault(e.index, []).append(e.arguments_fragment)
    parsed = [json.loads("".join(joined[i]).strip() or "{}") for i in sorted(joined)]
    assert parsed == [dict(c.arguments) for c in result.tool_calls]
    merged = ai.Usage()
    for e in events:
        if isinstance(e, ai.UsageUpdate):
            merged = merged.merge(e.usage)
    assert merged.normalized() == dataclasses.replace(result.usage, cost_usd=None)


@dataclass
class Replay:
    """What replaying one interaction through the client produced."""

    events: list[Any]
    result: ai.Generation | None
    error: BaseException | None
    requests: list[httpx.Request]


def run_replay(
    item: Interaction,
    transport: ReplayTransport,
    settings: ai.ProviderSettings,
    messages: ai.MessagesInput = "Hi",
    *,
    retain_raw: bool = False,
    **kwargs: Any,
) -> Replay:
    """Call the client the way the recording was made (streamed or not) and collect it.

    Typed errors are captured in `Replay.error`; the transport must have served its
    recording exactly once.
    """
    import asyncio

    events: list[Any] = []

    async def run() -> Replay:
        result = error = None
        async with ai.AsyncClient([settings], retain_raw=retain_raw) as client:
            try:
                if item.request.wants_stream:
                    async with client.stream(messages, **kwargs) as st:
                        async for event in st:
                            events.append(event)
                    result = st.result
                else:
                    result = await client.generate(messages, **kwargs)
            except ai.AnyInferError as exc:
                error = exc
        transport.assert_all_used()
        return Replay(events, result, error, transport.requests)

    return asyncio.run(run())


# --- what the replay oracles share ---------------------------------------------------
#
# Each replay test computes its expected values from the recorded JSON with its own
# reading of the provider's documentation (never the adapter's tables); what is the same
# for every protocol lives here: the expected tool call and error, serving one recording
# to one adapter in one attempt, and the checks that do not depend on the protocol.


@dataclass
class ExpectedCall:
    """One tool call as a recording states it: its arguments as the JSON text sent."""

    id: str | None = None
    name: str | None = None
    arguments: str = ""

    def tool_call(self, index: int) -> ai.ToolCall:
        """The `ToolCall` the client should report (`call_<index>` when the wire gave no id)."""
        text = self.arguments.strip()
        arguments = json.loads(text) if text else {}
        return ai.ToolCall(self.id or f"call_{index}", self.name or "", arguments)


@dataclass
class ExpectedError:
    """The typed error a recording calls for."""

    type: type[ai.AnyInferError]
    http_status: int | None
    message: str


def recorded_model(item: Interaction) -> str:
    """The model the recorded request body names."""
    return str((item.request.json or {}).get("model") or "recorded-model")


def endpoint_root(item: Interaction, endpoint: str) -> str:
    """The base URL the recording was made against: its URL without `endpoint` and query."""
    url = item.request.url
    path = url.path[: -len(endpoint)] if url.path.endswith(endpoint) else url.path
    return str(url.copy_with(path=path or "/", query=None)).rstrip("/")


def replay_with(
    item: Interaction,
    provider: str,
    *,
    model: str | None = None,
    endpoint: str | None = None,
    chunk_size: int | None = None,
    messages: ai.MessagesInput = "Hi",
    retain_raw: bool = False,
    call: Mapping[str, Any] | None = None,
    **fields: Any,
) -> Replay:
    """Serve `item` to `provider`'s adapter in one attempt (no retries: one recorded
    exchange, one request) and collect what the client produced.

    Args:
        item: The recording.
        provider: The provider id (also the instance id the route names).
        model: The model the route names; by default the one the recorded body names.
        endpoint: The path the recording's URL ends with; the rest is the `base_url`.
        chunk_size: Serve the body in chunks of this many bytes.
        messages: The conversation sent.
        retain_raw: Keep the raw payload on the result.
        call: Further `generate` / `stream` keywords.
        **fields: `ProviderSettings` fields besides the transport.
    """
    from helpers import NO_RETRY

    if endpoint is not None:
        fields["base_url"] = endpoint_root(item, endpoint)
    transport = replay_transport([item], chunk_size=chunk_size)
    settings = ai.ProviderSettings(provider, transport=transport, **fields)
    route = ai.Route(f"{provider}:{model or recorded_model(item)}", retry=NO_RETRY)
    return run_replay(
        item, transport, settings, messages, retain_raw=retain_raw, route=route, **(call or {})
    )


def check_one_post(item: Interaction, sent: list[httpx.Request]) -> dict[str, Any]:
    """The adapter sent one POST to the recorded path, streamed as recorded, for the
    model the recorded body names (when it names one); its body."""
    (request,) = sent
    assert request.method == "POST"
    assert request.url.path == item.request.path
    body: dict[str, Any] = json.loads(request.content)
    assert body.get("stream", False) is item.request.wants_stream
    recorded = item.request.json or {}
    if "model" in recorded:
        assert body.get("model") == recorded["model"]
    return body


class Expects(Protocol):
    """What a replay oracle's expected values offer `check_generation`."""

    text: str

    @property
    def finish_reason(self) -> str: ...

    def tool_calls(self) -> list[ai.ToolCall]: ...

    def expected_usage(self) -> ai.Usage: ...


def check_generation(run: Replay, exp: Expects, *, reasoning: str | None = None) -> ai.Generation:
    """The replay succeeded and its result says what the recording says: text, tool
    calls, finish reason, usage (as the wire carried it: `cost_usd` comes from the
    pricing table) and, given, the reasoning text. Returns the result."""
    assert run.error is None, f"unexpected {run.error!r}"
    result = run.result
    assert result is not None
    assert result.text == exp.text
    if reasoning is not None:
        assert result.reasoning == reasoning
    assert list(result.tool_calls) == exp.tool_calls()
    assert result.finish_reason == exp.finish_reason
    assert dataclasses.replace(result.usage, cost_usd=None) == exp.expected_usage()
    return result


def usage_seen(events: list[Any]) -> ai.Usage:
    """Every `UsageUpdate` of a replay, merged: what an observer of the stream saw."""
    merged = ai.Usage()
    for e in events:
        if isinstance(e, ai.UsageUpdate):
            merged = merged.merge(e.usage)
    return merged.normalized()


def check_attempt_failed(
    error: BaseException | None, expected: ExpectedError, provider: str, *, prefix: int = 80
) -> ai.ErrorInfo:
    """The request failed in its one attempt with the expected typed error; its record.

    The recorded message's first `prefix` characters must be in the error's detail.
    """
    assert isinstance(error, ai.AllTargetsFailedError), repr(error)
    (attempt,) = error.attempts
    assert attempt.outcome == "failed"
    assert attempt.target.provider == provider
    info = attempt.error
    assert info is not None
    assert info.type_name == expected.type.__name__, info
    assert info.http_status == expected.http_status
    assert info.provider == provider
    if expected.message:
        assert expected.message[:prefix] in info.detail
    return info


RESULT_FIELDS = ("text", "reasoning", "tool_calls", "finish_reason", "usage", "warnings")
"""The `Generation` fields a replay read in small chunks must share with the whole read."""


def check_same_result(whole: Replay, split: Replay, *also: str) -> None:
    """A replay whose body arrived in small chunks ended as the whole-body one did."""
    assert type(split.error) is type(whole.error)
    if whole.result is None:
        assert split.result is None
        return
    assert split.result is not None
    for name in (*RESULT_FIELDS, *also):
        assert getattr(split.result, name) == getattr(whole.result, name), name


# --- shapes --------------------------------------------------------------------------


def json_type(value: Any) -> str:
    """The JSON type of a parsed value: `null`, `bool`, `number`, `string`, `array`,
    `object`."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def typed_key_paths(value: Any, prefix: str = "", *, opaque: Iterable[str] = ()) -> dict[str, str]:
    """Every field path of a JSON value (`a.b`, `a[].c`) and the JSON type found there.

    The walk stops below a field named in `opaque` (a tool's arguments are the model's,
    not the protocol's shape).
    """
    stop = frozenset(opaque)
    out: dict[str, str] = {}
    if prefix:
        out[prefix] = json_type(value)
        if prefix.rsplit(".", 1)[-1] in stop:
            return out
    if isinstance(value, dict):
        for key, item in value.items():
            out.update(typed_key_paths(item, f"{prefix}.{key}" if prefix else key, opaque=stop))
    elif isinstance(value, list):
        for item in value:
            for path, kind in typed_key_paths(item, f"{prefix}[]", opaque=stop).items():
                out.setdefault(path, kind)
    return out


@dataclass
class Shapes:
    """Typed key paths per kind of message (an event type, a chunk kind): every path
    seen, with the JSON types found there, and the paths every message of the kind has.

    The wire-shape tests build one from the recordings and one from a fake server's
    rendering, and `differences` says where the rendering strays from the recordings.
    """

    seen: dict[str, dict[str, set[str]]]
    always: dict[str, set[str]]

    @classmethod
    def of(cls, messages: Iterable[tuple[str, Any]], *, opaque: Iterable[str] = ()) -> Shapes:
        """The shapes of `(kind, message)` pairs (`opaque`: as for `typed_key_paths`)."""
        stop = tuple(opaque)
        seen: dict[str, dict[str, set[str]]] = {}
        always: dict[str, set[str]] = {}
        for kind, message in messages:
            paths = typed_key_paths(message, opaque=stop)
            by_path = seen.setdefault(kind, {})
            for path, json_kind in paths.items():
                by_path.setdefault(path, set()).add(json_kind)
            always[kind] = set(paths) if kind not in always else always[kind] & set(paths)
        return cls(seen, always)

    def differences(
        self, real: Shapes, what: str, *, noun: str, documented: Iterable[str] = ()
    ) -> list[str]:
        """Where these (rendered) shapes differ from `real` (the recordings'): a kind or
        a path no recording has (unless `documented`), a JSON type no recording has
        there, or a path every recording of the kind has and these lack."""
        allowed = frozenset(documented)
        problems: list[str] = []
        for kind, paths in self.seen.items():
            if kind not in real.seen:
                problems.append(f"{what}: no recording has a {kind!r} {noun}")
                continue
            for path, types in paths.items():
                real_types = real.seen[kind].get(path)
                if real_types is None:
                    if path not in allowed:
                        problems.append(f"{what}: a {kind} {noun} has {path}, no recording has")
                elif not types <= real_types:
                    found = f"{sorted(types)}; recordings: {sorted(real_types)}"
                    problems.append(f"{what}: {kind}.{path} is {found}")
            missing = real.always[kind] - set(paths)
            if missing:
                problems.append(f"{what}: a {kind} {noun} lacks {sorted(missing)}, which all have")
        return problems


def recording_params(
    items: Sequence[Interaction], empty: str, known_bugs: Mapping[str, str] | None = None
) -> list[Any]:
    """`pytest.param`s, one per recording, or one skipped param saying why there are none.

    Args:
        items: The recordings.
        empty: The skip reason when the recordings folder holds none of this kind.
        known_bugs: Recording id -> why the adapter reads it wrongly; those params are
            strict `xfail`s (the test keeps asserting the right behaviour, and an
            unexpected pass fails).
    """
    wire_dir, why = find_wire_dir()
    if wire_dir is None:
        return [pytest.param(None, id="no-recordings", marks=pytest.mark.skip(reason=why))]
    if not items:
        return [pytest.param(None, id="none", marks=pytest.mark.skip(reason=empty))]
    bugs = known_bugs or {}
    return [
        pytest.param(
            item,
            id=item.id,
            marks=[pytest.mark.xfail(strict=True, reason=bugs[item.id])] if item.id in bugs else [],
        )
        for item in items
    ]


class ServedScript:
    """One loopback `FakeServer` for a whole test, serving whichever script is current.

    Starting a server per Hypothesis example costs more than the example; the SDK
    fidelity tests start one and switch its script with `serve`.

    Attributes:
        server: The server (use it as a context manager).
        script: The script being served.
        urls: The URL of every generation request served, in order.
    """

    def __init__(self, dialect: Any) -> None:
        import threading

        from anyinfer.fakeservers import FakeServer, Script

        self.script = Script()
        self.urls: list[str] = []
        self._lock = threading.Lock()
        self.server = FakeServer(dialect, self._current)

    def _current(self, request: Any) -> Any:
        with self._lock:
            self.urls.append(str(request.url))
            return self.script

    def serve(self, script: Any) -> Any:
        """Serve `script` from now on, and return it."""
        with self._lock:
            self.script = script
        return script


def check_every_script(
    sdk: AbstractContextManager[tuple[ServedScript, Any]],
    scripts: Any,
    check: Callable[[Any, Any], None],
    *,
    settings: Any = None,
) -> None:
    """Run `check(client, script)` on every script Hypothesis draws from `scripts`, each
    served in turn by the one server of `sdk` to its SDK client.

    Args:
        sdk: A context manager yielding the `ServedScript` and the SDK client bound to it.
        scripts: The Hypothesis strategy of scripts.
        check: The property; it calls the SDK and asserts on what it got.
        settings: Hypothesis settings for the run (the SDK tests relax the deadline).
    """
    from hypothesis import given

    with sdk as (served, client):

        @given(script=scripts)
        def run(script: Any) -> None:
            served.serve(script)
            check(client, script)

        (settings(run) if settings is not None else run)()


def split_params(
    items: Sequence[Interaction],
    splits: tuple[int | None, ...] = (None,),
    *,
    what: str,
) -> list[Any]:
    """`(item, split)` parameters: each recording read whole (`None`) and in reads of each
    size in `splits`; one skipped parameter, saying why, when there are none.

    Args:
        items: The recordings.
        splits: Read sizes (`None`: the whole body in one read).
        what: What the recordings are, for the skip reason (`"Gemini"`).
    """
    if not items:
        where, why = find_wire_dir()
        reason = why if where is None else f"no {what} recordings under {where}"
        return [pytest.param(None, None, id="no-recordings", marks=pytest.mark.skip(reason=reason))]
    return [
        pytest.param(
            item, size, id=f"{item.id}-{'one-read' if size is None else f'reads-of-{size}'}"
        )
        for item in items
        for size in splits
    ]
