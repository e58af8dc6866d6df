"""Cassettes: record real HTTP once, replay it offline forever (vcrpy underneath).

Recording scrubs secrets **before anything touches disk**: auth headers, cookies,
organization/project ids, every secret registered with `anyinfer.register_secret` (which
includes every credential the library resolved), and common key patterns, wherever they
appear — request and response headers, the URL's query, and bodies, including a registered
secret split across two streamed frames (`scrub_frames`). Bodies are stored
decompressed, and multi-line text (SSE streams) as readable YAML literal blocks.

Replay is strict: a request with no recording fails with a message saying how to record
it, and a recorded interaction the test never requested fails the test. While replaying,
any connection attempt that leaves loopback fails loudly.

vcrpy reads a whole response before storing it, so a cassette keeps the bytes and the
SSE framing but not network chunk boundaries or timing: streaming edge cases belong to the
fake servers, cassettes prove the adapters read real traffic.
"""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import json
import re
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from anyinfer._redact import SENSITIVE_HEADERS

__all__ = [
    "MASK",
    "RECORD_MODES",
    "NetworkBlockedError",
    "block_non_loopback",
    "make_vcr",
    "replay_embeddings",
    "replay_interactions",
    "scrub_frames",
    "scrub_request",
    "scrub_response",
    "scrub_text",
    "cassette_path",
    "unplayed",
]

RECORD_MODES = ("none", "once", "new_episodes", "all", "rewrite")
"""Record modes: `none` replays only (the CI default); `once` records a missing cassette;
`new_episodes` records requests the cassette lacks; `all` re-records every request;
`rewrite` deletes the cassette first, then records."""

MASK = "REDACTED"

_SECRET_HEADERS = SENSITIVE_HEADERS  # the library's one list of secret headers
_SECRET_QUERY = frozenset({"key", "api_key", "api-key", "apikey", "token", "access_token", "sig"})
_KEY_PATTERNS = re.compile(
    r"(sk-(?:proj-|ant-)?[A-Za-z0-9_\-]{16,})"  # OpenAI / Anthropic style keys
    r"|(AIza[0-9A-Za-z_\-]{30,})"  # Google API keys
    r"|(hf_[A-Za-z0-9]{20,})"  # Hugging Face tokens
    r"|(gsk_[A-Za-z0-9]{20,})"  # Groq keys
    r"|((?:org|proj)-[A-Za-z0-9]{16,})"  # OpenAI organization / project ids
)


def scrub_text(text: str) -> str:
    """Mask registered secrets and common key patterns in text."""
    from anyinfer._redact import redact

    return _KEY_PATTERNS.sub(MASK, redact(text).replace("[secure]", MASK))


def scrub_frames(text: str) -> str:
    """Mask a registered secret split across the frames of a streamed body.

    The frames are the JSON payloads of SSE `data:` lines or NDJSON lines, else the
    elements of a body that is one JSON array (Gemini's `json-array` stream). A secret
    whose pieces arrive in successive frames at the same key path (streamed text or tool
    arguments) is masked where it starts and removed from the frames it continued into
    (`anyinfer._redact.redact_chunks`); only the frames that changed are rewritten.
    Nothing is parsed while no secret is registered.

    Args:
        text: A response (or request) body, already through `scrub_text`.

    Returns:
        The body with split secrets masked.
    """
    from anyinfer._redact import redact_chunks, secret_pattern

    if secret_pattern() is None:
        return text
    lines = text.split("\n")
    frames: list[tuple[int, tuple[str, str], Any]] = []
    for number, line in enumerate(lines):
        payload = line[5:] if line.startswith("data:") else line
        payload = payload.strip()
        if not payload.startswith(("{", "[")):
            continue
        at = line.index(payload)
        try:
            frames.append((number, (line[:at], line[at + len(payload) :]), json.loads(payload)))
        except ValueError:
            continue
    if len(frames) < 2:
        try:
            whole = json.loads(text)
        except ValueError:
            return text
        if not isinstance(whole, list) or len(whole) < 2:
            return text
        scrubbed = redact_chunks(whole, mask=MASK)
        return text if scrubbed == whole else json.dumps(scrubbed, ensure_ascii=False, indent=2)
    scrubbed = redact_chunks([value for _, _, value in frames], mask=MASK)
    for (number, (head, tail), value), new in zip(frames, scrubbed, strict=True):
        if new != value:
            lines[number] = head + json.dumps(new, ensure_ascii=False) + tail
    return "\n".join(lines)


def _scrub_body(body: Any) -> Any:
    if body is None:
        return None
    if isinstance(body, bytes):
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            return body
        return scrub_frames(scrub_text(text)).encode("utf-8")
    if isinstance(body, str):
        return scrub_frames(scrub_text(body))
    return body


def _scrub_uri(uri: str) -> str:
    parts = urlsplit(uri)
    if not parts.query:
        return scrub_text(uri)
    query = [
        (k, MASK if k.lower() in _SECRET_QUERY else scrub_text(v))
        for k, v in parse_qsl(parts.query, keep_blank_values=True)
    ]
    return scrub_text(urlunsplit(parts._replace(query=urlencode(query))))


def scrub_request(request: Any) -> Any:
    """vcrpy `before_record_request`: scrub headers, query and body of a request."""
    for name in list(request.headers):
        if name.lower() in _SECRET_HEADERS:
            request.headers[name] = MASK
        else:
            request.headers[name] = scrub_text(str(request.headers[name]))
    request.uri = _scrub_uri(request.uri)
    request.body = _scrub_body(request.body)
    return request


def scrub_response(response: dict[str, Any]) -> dict[str, Any]:
    """vcrpy `before_record_response`: scrub headers and body."""
    headers: dict[str, Any] = response.get("headers", {})
    for name in list(headers):
        if name.lower() in _SECRET_HEADERS:
            del headers[name]
            continue
        headers[name] = [scrub_text(str(v)) for v in headers[name]]
    body = response.get("body", {})
    # vcrpy runs this on load as well as on record, so bytes stay bytes; the serializer
    # writes text bodies as readable strings.
    body["string"] = _scrub_body(body.get("string"))
    return response


class _LiteralDumper:
    """YAML serializer for vcrpy writing multi-line strings as literal blocks."""

    @staticmethod
    def serialize(cassette_dict: dict[str, Any]) -> str:
        import yaml

        class Dumper(yaml.SafeDumper):
            pass

        def represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
            style = "|" if "\n" in value else None
            return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

        Dumper.add_representer(str, represent_str)
        return str(
            yaml.dump(
                cassette_dict, Dumper=Dumper, allow_unicode=True, sort_keys=False, width=1_000_000
            )
        )

    @staticmethod
    def deserialize(cassette_string: str) -> Any:
        import yaml

        return yaml.safe_load(cassette_string)


def _json_body_matcher(r1: Any, r2: Any) -> None:
    """Bodies match when equal as JSON (key order aside), else byte for byte."""

    def parse(body: Any) -> Any:
        if body is None or body == b"" or body == "":
            return None
        try:
            return json.loads(body)
        except (ValueError, TypeError):
            return body

    a, b = parse(r1.body), parse(r2.body)
    if a != b:
        raise AssertionError(f"request bodies differ: {str(a)[:200]!r} != {str(b)[:200]!r}")


def make_vcr(cassette_dir: Path, record_mode: str) -> Any:
    """A configured `vcr.VCR`: scrubbing, literal blocks, strict JSON-aware matching.

    Args:
        cassette_dir: Where cassettes live.
        record_mode: One of `RECORD_MODES` (`rewrite` is `all` after deleting the file;
            the caller deletes).
    """
    import vcr

    if record_mode not in RECORD_MODES:
        raise ValueError(
            f"record mode must be one of {', '.join(RECORD_MODES)}, got {record_mode!r}"
        )
    v = vcr.VCR(
        cassette_library_dir=str(cassette_dir),
        record_mode="all" if record_mode == "rewrite" else record_mode,
        serializer="anyinfer-yaml",
        decode_compressed_response=True,
        before_record_request=scrub_request,
        before_record_response=scrub_response,
        match_on=("method", "scheme", "host", "port", "path", "query", "json_body"),
        filter_headers=[(h, MASK) for h in sorted(_SECRET_HEADERS)],
    )
    v.register_serializer("anyinfer-yaml", _LiteralDumper)
    v.register_matcher("json_body", _json_body_matcher)
    return v


class NetworkBlockedError(OSError):
    """A connection tried to leave loopback while cassettes were replaying."""


def _is_loopback(address: Any) -> bool:
    if isinstance(address, str | bytes):
        return True  # a Unix socket path
    if not (isinstance(address, tuple) and address):
        return False
    host = str(address[0])
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


@contextlib.contextmanager
def block_non_loopback() -> Iterator[None]:
    """Make every socket connection that would leave loopback raise `NetworkBlockedError`."""
    real_connect: Callable[..., Any] = socket.socket.connect
    real_connect_ex: Callable[..., Any] = socket.socket.connect_ex

    def guard(address: Any) -> None:
        if not _is_loopback(address):
            raise NetworkBlockedError(
                f"network access to {address!r} during cassette replay: the test made a request "
                "that has no recording (record it with --anyinfer-record-mode=once)"
            )

    def connect(self: socket.socket, address: Any) -> Any:
        guard(address)
        return real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> Any:
        guard(address)
        return real_connect_ex(self, address)

    socket.socket.connect = connect  # type: ignore[method-assign, assignment]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign, assignment]
    try:
        yield
    finally:
        socket.socket.connect = real_connect  # type: ignore[method-assign]
        socket.socket.connect_ex = real_connect_ex  # type: ignore[method-assign]


def cassette_path(cassette_dir: Path, provider: str, module: str, name: str) -> Path:
    """`<dir>/<provider>/<test module>/<test name>.yaml`, with unsafe characters replaced."""

    def safe(part: str) -> str:
        return re.sub(r"[^A-Za-z0-9_.\-\[\]]+", "_", part)

    return cassette_dir / safe(provider) / safe(module) / f"{safe(name)}.yaml"


def unplayed(cassette: Any) -> list[str]:
    """Descriptions of recorded interactions a replay never used."""
    out = []
    for index, (request, _response) in enumerate(cassette.data):
        if not cassette.play_counts[index]:
            out.append(f"{request.method} {request.uri}")
    return out


def _request_body(request: dict[str, Any]) -> Any:
    """A recorded request's JSON body, or `None` (no body, or not JSON)."""
    try:
        return json.loads(request.get("body") or "null")
    except ValueError:
        return None


def _recorded_response(response: dict[str, Any]) -> tuple[bytes, list[tuple[str, str]]]:
    """A recorded response's body bytes and headers, without the ones that describe the
    recorded transfer (encoding, length), which do not hold for the replayed bytes."""
    content = response["body"]["string"]
    raw = content.encode() if isinstance(content, str) else bytes(content)
    headers = [
        (k, v)
        for k, values in response["headers"].items()
        for v in values
        if k.lower() not in ("content-encoding", "transfer-encoding", "content-length")
    ]
    return raw, headers


def replay_interactions(harness: Any, recordings: list[Path]) -> int:
    """Replay every generation request in `recordings` through `harness`'s adapter.

    Each recorded response is served (by an httpx transport, in place of the provider)
    to a request the client makes for the same streaming mode; the resulting events are
    checked against the stream grammar, text concatenation and the usage merge. A
    recorded failure (an error status, an error frame, a blocked prompt) must surface as
    a typed `AnyInferError`; anything else escapes and fails the test.

    Returns:
        How many interactions were checked.

    Raises:
        AssertionError: Naming the cassette, the interaction and what broke.
    """
    import asyncio

    import httpx
    import yaml

    import anyinfer as ai

    from .checker import check_grammar

    checked = 0
    for path in recordings:
        data = yaml.safe_load(path.read_text("utf-8"))
        for number, interaction in enumerate(data.get("interactions", [])):
            request, response = interaction["request"], interaction["response"]
            body = _request_body(request)
            if request["method"] != "POST" or not isinstance(body, dict):
                continue  # discovery and other non-generation traffic
            if harness.dialect.is_embedding("POST", urlsplit(request["uri"]).path):
                continue  # replayed by `replay_embeddings`
            stream = bool(body.get("stream"))
            raw, headers = _recorded_response(response)

            def answer(
                _request: httpx.Request,
                raw: bytes = raw,
                headers: Any = headers,
                status: int = response["status"]["code"],
            ) -> httpx.Response:
                return httpx.Response(status, headers=headers, content=raw)

            settings = harness.settings(transport=httpx.MockTransport(answer))
            route = ai.Route(f"{harness.entry.name}:recorded", retry=ai.RetryPolicy(max_retries=0))

            async def run(
                settings: Any = settings, route: Any = route, stream: bool = stream
            ) -> tuple[list[Any], Any, Any]:
                events: list[Any] = []
                async with ai.AsyncClient([settings], registry=harness._providers) as client:
                    try:
                        if stream:
                            async with client.stream("recorded", route=route) as s:
                                async for event in s:
                                    events.append(event)
                            return events, s.result, None
                        return events, await client.generate("recorded", route=route), None
                    except ai.AnyInferError as exc:
                        return events, None, exc

            events, result, error = asyncio.run(run())
            where = f"{path.name} interaction {number}"
            if stream:
                problems = check_grammar(events, succeeded=error is None)
                assert not problems, f"{where}: " + "; ".join(str(p) for p in problems)
            if error is None:
                assert result is not None
                if stream:
                    text = "".join(e.text for e in events if isinstance(e, ai.TextDelta))
                    assert text == result.text, f"{where}: deltas do not make the result text"
                    merged = ai.Usage()
                    for e in events:
                        if isinstance(e, ai.UsageUpdate):
                            merged = merged.merge(e.usage)
                    got = dataclasses.replace(result.usage, cost_usd=None)
                    assert merged.normalized() == got, f"{where}: usage {got} != updates {merged}"
            checked += 1
    return checked


def _recorded_model(body: dict[str, Any], path: str) -> str:
    """The model a recorded request names: its body's `model`, else the path segment
    after `/model/` (Bedrock) or `/models/` (Gemini), URL-decoded."""
    from urllib.parse import unquote

    if isinstance(body.get("model"), str) and body["model"]:
        return str(body["model"])
    found = re.search(r"/models?/([^/:]+)", path)
    return unquote(found.group(1)) if found else "recorded"


def replay_embeddings(harness: Any, recordings: list[Path]) -> int:
    """Replay every embedding request in `recordings` through `harness`'s adapter.

    Each recorded request (one the adapter's dialect routes as an embedding, with inputs
    it reads: `Dialect.embedding_inputs`) is made again with `embed()` (the recorded
    inputs, model, `dimensions` and `encoding_format`), and answered with the recorded
    response. The request sent must carry the recorded inputs. A recorded answer must
    come back as the vectors the dialect reads from it (`Dialect.read_embedding_answer`,
    which knows the protocol without the adapter's code), each as float32 and in input
    order, with the recorded token count or `None` where it has none; a recorded error
    status must fail typed, with that status. A call the adapter refuses before sending
    anything (`ConfigError`: a model it cannot place, such as a Bedrock inference-profile
    ARN recorded with settings the cassette does not carry) is not counted.

    Returns:
        How many interactions were checked.

    Raises:
        AssertionError: Naming the cassette, the interaction and what broke.
    """
    import asyncio
    from array import array

    import httpx
    import yaml

    import anyinfer as ai

    dialect = harness.dialect
    checked = 0
    for path in recordings:
        data = yaml.safe_load(path.read_text("utf-8"))
        for number, interaction in enumerate(data.get("interactions", [])):
            request, response = interaction["request"], interaction["response"]
            body = _request_body(request)
            inputs = dialect.embedding_inputs(body) if isinstance(body, dict) else None
            uri_path = urlsplit(request["uri"]).path
            if request["method"] != "POST" or not inputs:
                continue
            if not dialect.is_embedding("POST", uri_path):
                continue
            assert isinstance(body, dict)
            where = f"{path.name} interaction {number}"
            raw, headers = _recorded_response(response)
            status = response["status"]["code"]
            sent: list[Any] = []

            def answer(
                request_: httpx.Request,
                raw: bytes = raw,
                headers: Any = headers,
                status: int = status,
                sent: list[Any] = sent,
            ) -> httpx.Response:
                sent.append(json.loads(request_.content or b"null"))
                return httpx.Response(status, headers=headers, content=raw)

            settings = harness.settings(transport=httpx.MockTransport(answer))
            model = _recorded_model(body, uri_path)
            route = ai.Route(f"{harness.entry.name}:{model}", retry=ai.RetryPolicy(max_retries=0))
            encoding = body.get("encoding_format")
            kw: dict[str, Any] = {
                "route": route,
                "dimensions": body.get("dimensions"),
                "encoding": encoding if encoding in ("base64", "float") else "float",
                "batch_size": len(inputs),
            }

            async def run(
                settings: Any = settings, inputs: list[str] = inputs, kw: dict[str, Any] = kw
            ) -> tuple[Any, BaseException | None]:
                async with ai.AsyncClient([settings], registry=harness._providers) as client:
                    try:
                        return await client.embed(inputs, **kw), None
                    except Exception as exc:
                        return None, exc

            result, error = asyncio.run(run())
            refusals = error.attempts if isinstance(error, ai.AllTargetsFailedError) else ()
            refused = isinstance(error, ai.ConfigError) or (
                bool(refusals)
                and all(
                    a.error is not None and a.error.type_name == "ConfigError" for a in refusals
                )
            )
            if not sent and refused:
                continue  # refused before dispatch (a model the adapter cannot place)
            assert len(sent) == 1, f"{where}: {len(sent)} requests for one recorded batch"
            assert dialect.embedding_inputs(sent[0]) == inputs, (
                f"{where}: the request carried {dialect.embedding_inputs(sent[0])!r}, the "
                f"recording {inputs!r}"
            )
            if status >= 400:
                assert isinstance(error, ai.AllTargetsFailedError), (
                    f"{where}: a recorded HTTP {status} must fail typed; got "
                    f"{'a result' if error is None else repr(error)}"
                )
                last = error.attempts[-1].error if error.attempts else None
                assert last is not None and last.http_status == status, (
                    f"{where}: the attempt error {last!r} does not carry HTTP {status}"
                )
            else:
                assert error is None, f"{where}: the recorded answer failed: {error!r}"
                recorded = dialect.read_embedding_answer(json.loads(raw))
                assert recorded is not None, f"{where}: {dialect.name} cannot read the answer"
                vectors, tokens = recorded
                want = [array("f", v) for v in vectors]
                assert len(result.vectors) == len(inputs) == len(want), (
                    f"{where}: {len(result.vectors)} vectors for {len(inputs)} inputs"
                )
                for i, (got, expected) in enumerate(zip(result.vectors, want, strict=True)):
                    assert got == expected, f"{where}: vector {i} is not the recorded one"
                assert result.dimensions == len(want[0]), f"{where}: dimensions"
                assert result.usage.input_tokens == tokens, (
                    f"{where}: usage {result.usage.input_tokens!r}, recorded {tokens!r}"
                )
            checked += 1
    return checked
