"""The TLS context of an adapter's own transport: httpx's verification, loaded lazily.

httpx's default context loads the whole CA bundle (certifi's) when the client is built,
about 35 ms of a process's first request (measured on the benchmark machine). A client
that only talks to plain-http servers (a local engine, a fake server) never uses it, and
one talking to an https provider needs it only at its first handshake. This context is
the same one httpx builds (`ssl.create_default_context(cafile=certifi.where())`: a TLS
client context that requires a certificate and checks the host name) except that the
bundle is loaded just before the first handshake instead of up front.
"""

from __future__ import annotations

import socket
import ssl
import threading

__all__ = ["LazyTrustContext"]

_LOAD_LOCK = threading.Lock()


class LazyTrustContext(ssl.SSLContext):
    """A client `SSLContext` that loads certifi's CA bundle at its first handshake."""

    _anyinfer_trusted = False

    def __new__(cls) -> LazyTrustContext:
        # PROTOCOL_TLS_CLIENT sets CERT_REQUIRED and check_hostname, as httpx's has.
        return super().__new__(cls, ssl.PROTOCOL_TLS_CLIENT)

    def trust(self) -> None:
        """Load the CA bundle now, if it has not been loaded (thread-safe, idempotent)."""
        if self._anyinfer_trusted:
            return
        with _LOAD_LOCK:
            if not self._anyinfer_trusted:
                import certifi

                self.load_verify_locations(certifi.where())
                self._anyinfer_trusted = True

    def wrap_bio(
        self,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
        server_side: bool = False,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLObject:
        """`SSLContext.wrap_bio`, with the CA bundle loaded first (asyncio and anyio)."""
        self.trust()
        return super().wrap_bio(incoming, outgoing, server_side, server_hostname, session)

    def wrap_socket(
        self,
        sock: socket.socket,
        server_side: bool = False,
        do_handshake_on_connect: bool = True,
        suppress_ragged_eofs: bool = True,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLSocket:
        """`SSLContext.wrap_socket`, with the CA bundle loaded first."""
        self.trust()
        return super().wrap_socket(
            sock,
            server_side,
            do_handshake_on_connect,
            suppress_ragged_eofs,
            server_hostname,
            session,
        )
