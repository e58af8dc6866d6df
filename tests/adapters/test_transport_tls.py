"""The TLS context an adapter's own transport gets, by base URL."""

from __future__ import annotations

import asyncio
import ssl

import anyinfer as ai
from anyinfer._adapters.registry import default_registry


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


def test_plain_http_base_url_loads_no_ca_bundle_and_still_verifies() -> None:
    ctx = _context("http://127.0.0.1:9/v1")
    assert ctx.cert_store_stats()["x509_ca"] == 0
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname


def test_https_base_url_gets_httpx_default_verification() -> None:
    ctx = _context("https://api.example.invalid/v1")
    assert ctx.cert_store_stats()["x509_ca"] > 0
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
