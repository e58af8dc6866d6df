#!/usr/bin/env python3
"""Copy the real provider recordings in tests/data/wire into `cassettes/` (vcrpy format).

    python scripts/import_wire_cassettes.py [--wire FOLDER]   # default: tests/data/wire

Each generation or embedding exchange becomes
`cassettes/<provider>/shared-wire/<source>__<file>__<n>.yaml` with its body decoded to
text, so `pytest --anyinfer-conformance` replays real traffic through every built-in
adapter. The recordings were made by other open-source projects;
their licenses are copied beside them (`cassettes/LICENSES/`), as their terms require.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

# protocol -> adapter for the recordings it can replay (hosted OpenAI goes to `openai`,
# other OpenAI-compatible hosts to `openai-compat`).
_PROTOCOL_ADAPTER = {
    "anthropic_messages": "anthropic",
    "bedrock_converse": "bedrock",
    "cohere_v2": "cohere",
    "gemini": "gemini",
    "openai_responses": "openai-responses",
}


# hosts whose `/embeddings` is their own protocol's, not OpenAI's
_EMBEDDING_HOSTS = {"api.voyageai.com": "voyage", "api.jina.ai": "jina"}


def _embedding_adapter(path: str, host: str) -> str | None:
    """The adapter for an embedding recording: OpenAI's `/embeddings` (hosted OpenAI to
    `openai`, Voyage AI's and Jina AI's hosts to their adapters, other hosts to
    `openai-compat`), Ollama's `/api/embed`, Cohere's `/v2/embed`, the Gemini API's
    `:batchEmbedContents` and `:embedContent`, and Bedrock's `InvokeModel`."""
    path = path.rstrip("/")
    if path.endswith("/embeddings"):
        if host in _EMBEDDING_HOSTS:
            return _EMBEDDING_HOSTS[host]
        return "openai" if host == "api.openai.com" else "openai-compat"
    if path.endswith("/api/embed"):
        return "ollama"
    if path.endswith("/v2/embed"):
        return "cohere"
    if host == "generativelanguage.googleapis.com" and path.endswith(
        (":batchEmbedContents", ":embedContent")
    ):
        return "gemini"
    if host.startswith("bedrock-runtime.") and "/model/" in path and path.endswith("/invoke"):
        return "bedrock"
    return None


def _adapter(protocol: str, host: str) -> str | None:
    if protocol == "gemini" and host.endswith("aiplatform.googleapis.com"):
        return "vertex-gemini"  # Gemini on Vertex AI (same response shape, Vertex URLs)
    if protocol == "openai_chat":
        return "openai" if host == "api.openai.com" else "openai-compat"
    return _PROTOCOL_ADAPTER.get(protocol)


def _response_text(item: object) -> str | bytes:
    """The response body as scrubbed text; a binary AWS event stream (Bedrock) stays
    bytes (`!!binary` in the YAML), since its frames carry checksums over the bytes."""
    from anyinfer.conformance.cassettes import scrub_text

    response = item.response  # type: ignore[attr-defined]
    if response.content_type == "application/vnd.amazon.eventstream":
        return bytes(response.body)
    return scrub_text(response.body.decode("utf-8", "replace"))


def main() -> None:
    import wire

    from anyinfer.conformance.cassettes import _LiteralDumper, scrub_text

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--wire", type=Path, default=None)
    args = parser.parse_args()
    root = args.wire or wire.require_wire_dir()
    out = ROOT / "cassettes"
    written = 0
    for item in wire.interactions(root):
        protocol = item.protocol
        if item.request.method != "POST":
            continue
        host = urlsplit(item.request.uri).hostname or ""
        if protocol is None:
            adapter = _embedding_adapter(item.request.path, host)
            protocol = "embeddings"
        else:
            adapter = _adapter(protocol, host)
        if adapter is None:
            continue
        source = item.cassette.relative_to(root).parts[0]
        name = re.sub(r"[^A-Za-z0-9_.\-]+", "_", item.cassette.stem)
        path = out / adapter / "shared-wire" / f"{source}__{name}__{item.index}.yaml"
        body = item.request.json
        if isinstance(body, dict) and protocol in ("gemini", "bedrock_converse"):
            body = {**body, "stream": item.request.wants_stream}  # the URL says; keep it visible
        data = {
            "version": 1,
            "interactions": [
                {
                    "request": {
                        "method": "POST",
                        "uri": scrub_text(item.request.uri),
                        "body": json.dumps(body),
                        "headers": {},
                    },
                    "response": {
                        "status": {"code": item.response.status, "message": ""},
                        "headers": {
                            k: list(v)
                            for k, v in item.response.headers.items()
                            if k in ("content-type", "retry-after", "retry-after-ms")
                        },
                        "body": {"string": _response_text(item)},
                    },
                }
            ],
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_LiteralDumper.serialize(data), "utf-8")
        written += 1
    licenses = out / "LICENSES"
    licenses.mkdir(parents=True, exist_ok=True)
    for lic in root.glob("*/LICENSE.upstream"):
        shutil.copy2(lic, licenses / f"{lic.parent.name}.LICENSE")
    shutil.copy2(root / "README.md", licenses / "SOURCES.md")
    print(f"wrote {written} cassettes under {out}")


if __name__ == "__main__":
    main()
