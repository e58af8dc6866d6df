"""The TLS context an adapter's own transport gets: httpx's verification, the CA bundle
loaded at the first handshake rather than when the client is built."""

from __future__ import annotations

import asyncio
import ssl
import threading

import pytest

import anyinfer as ai
from anyinfer._adapters.registry import default_registry
from anyinfer._adapters.tls import LazyTrustContext


def _context(base_url: str) -> ssl.SSLContext:
    settings = ai.ProviderSettings("openai", api_key="k", base_url=base_url)
    adapter = default_registry().adapter_class("openai")(settings)
    try:
        pool = adapter.http._transport.inner._pool  # type: ignore[attr-defined]
        ctx = pool._ssl_context
        assert isinstance(ctx, ssl.SSLContext)
        return ctx
    finally:
        asyncio.run(adapter.aclose())


@pytest.mark.parametrize("base_url", ["http://127.0.0.1:9/v1", "https://api.example.invalid/v1"])
def test_no_ca_bundle_is_loaded_when_the_adapter_is_built(base_url: str) -> None:
    ctx = _context(base_url)
    assert ctx.cert_store_stats()["x509_ca"] == 0
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname


def test_the_bundle_loads_before_the_first_handshake() -> None:
    ctx = _context("https://api.example.invalid/v1")
    ctx.wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), server_hostname="api.example.invalid")
    loaded = ctx.cert_store_stats()["x509_ca"]
    assert loaded > 0
    default = ssl.create_default_context(cafile=__import__("certifi").where())
    assert loaded == default.cert_store_stats()["x509_ca"]  # httpx's own trust, exactly


def test_concurrent_first_handshakes_load_the_bundle_once() -> None:
    ctx = LazyTrustContext()
    calls: list[int] = []
    original = ctx.load_verify_locations

    def counting(*args: object, **kwargs: object) -> None:
        calls.append(1)
        original(*args, **kwargs)  # type: ignore[arg-type]

    ctx.load_verify_locations = counting  # type: ignore[method-assign]
    threads = [
        threading.Thread(
            target=ctx.wrap_bio,
            args=(ssl.MemoryBIO(), ssl.MemoryBIO()),
            kwargs={"server_hostname": "h"},
        )
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [1]


def test_a_handshake_with_an_untrusted_certificate_fails(tmp_path: object) -> None:
    """Verification is on: a server whose certificate chains to no trusted root is
    refused (a self-signed certificate, made here)."""
    crypto = pytest.importorskip("cryptography.x509")
    import datetime
    import socket
    from pathlib import Path

    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = crypto.Name([crypto.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        crypto.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(crypto.SubjectAlternativeName([crypto.DNSName("localhost")]), False)
        .sign(key, hashes.SHA256())
    )
    folder = Path(str(tmp_path))
    (folder / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(folder / "cert.pem", folder / "key.pem")
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        try:
            with server_ctx.wrap_socket(conn, server_side=True):
                pass
        except (ssl.SSLError, OSError):
            pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    client = LazyTrustContext()
    with socket.create_connection(("127.0.0.1", port)) as raw:
        with pytest.raises(ssl.SSLCertVerificationError):
            client.wrap_socket(raw, server_hostname="localhost")
    thread.join(5)
    listener.close()
