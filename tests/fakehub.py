"""A fake Hugging Face Hub on 127.0.0.1, for the real huggingface_hub code path.

Serves model info (`/api/models/{repo}[/revision/{rev}]`, with LFS sizes and SHA-256s)
and file downloads (`/{repo}/resolve/{rev}/{file}`, HEAD and GET with Range). Faults:
cut a download after N bytes once (huggingface_hub resumes with a Range request), serve
corrupt bytes (digest mismatch), or report an absurd size (full disk).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class HubFile:
    data: bytes
    lfs: bool = True
    cut_after: int | None = None  # close the connection after this many bytes, once
    corrupt: bool = False  # serve flipped bytes (the metadata keeps the true digest)
    claimed_size: int | None = None  # report this size instead of the real one

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def size(self) -> int:
        return self.claimed_size if self.claimed_size is not None else len(self.data)


@dataclass
class FakeHub:
    repos: dict[str, dict[str, HubFile]]
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)  # method, path, Range

    def __post_init__(self) -> None:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_HEAD(self) -> None:
                hub._serve(self, head=True)

            def do_GET(self) -> None:
                hub._serve(self, head=False)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FakeHub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def _json(self, h: BaseHTTPRequestHandler, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def _serve(self, h: BaseHTTPRequestHandler, *, head: bool) -> None:
        path = h.path.split("?", 1)[0]
        self.requests.append((h.command, path, h.headers.get("Range")))
        m = re.fullmatch(r"/api/models/(.+?)(?:/revision/[^/]+)?", path)
        if m and not head:
            repo = m.group(1)
            files = self.repos.get(repo)
            if files is None:
                self._json(h, 404, {"error": "Repository not found"})
                return
            siblings = []
            for name, f in files.items():
                entry: dict[str, Any] = {"rfilename": name, "size": f.size, "blobId": "0" * 40}
                if f.lfs:
                    entry["lfs"] = {"sha256": f.sha256, "size": f.size, "pointerSize": 134}
                siblings.append(entry)
            self._json(
                h,
                200,
                {
                    "id": repo,
                    "modelId": repo,
                    "sha": COMMIT,
                    "siblings": siblings,
                    "private": False,
                    "tags": [],
                    "downloads": 0,
                    "likes": 0,
                },
            )
            return
        m = re.fullmatch(r"/(.+?)/resolve/([^/]+)/(.+)", path)
        if not m or m.group(1) not in self.repos or m.group(3) not in self.repos[m.group(1)]:
            h.send_response(404)
            h.send_header("Content-Length", "0")
            h.send_header("X-Error-Code", "EntryNotFound")
            h.end_headers()
            return
        f = self.repos[m.group(1)][m.group(3)]
        data = bytes(b ^ 0xFF for b in f.data) if f.corrupt else f.data
        start = 0
        rng = h.headers.get("Range")
        if rng and (rm := re.fullmatch(r"bytes=(\d+)-", rng.strip())):
            start = int(rm.group(1))
        body = data[start:]
        h.send_response(206 if start else 200)
        h.send_header("X-Repo-Commit", COMMIT)
        etag = f'"{f.sha256}"' if f.lfs else '"0000000000000000000000000000000000000000"'
        h.send_header("ETag", etag)
        if f.lfs:
            h.send_header("X-Linked-Etag", etag)
            h.send_header("X-Linked-Size", str(f.size))
        h.send_header("Accept-Ranges", "bytes")
        h.send_header("Content-Length", str(len(body) if not head else f.size))
        if start:
            h.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        h.end_headers()
        if head:
            return
        if f.cut_after is not None and not start:
            h.wfile.write(body[: f.cut_after])
            h.wfile.flush()
            f.cut_after = None  # only once
            h.close_connection = True
            return
        h.wfile.write(body)
