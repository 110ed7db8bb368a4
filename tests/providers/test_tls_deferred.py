"""A provider client loads the CA bundle only when a connection of its own speaks TLS (providers/client.py
`_DeferredTLS`): requests to http:// servers (a local model server, the stand-in) never pay for it (~20 ms of CPU, a
twentieth of a small build), and a handshake that went around the hand-over could not go unverified."""

from __future__ import annotations

import contextlib
import socket
import ssl
from pathlib import Path

import pytest

from clawstore.providers import Endpoint, ProviderClient, ProviderError
from clawstore.providers.client import _DeferredTLS
from clawstore.testing.standin import StandIn
from tests.providers.test_wire import _self_signed, _Server

BODY = {"model": "m1", "messages": [{"role": "user", "content": "hello"}]}


def test_requests_to_an_http_server_never_make_the_tls_context(standin: StandIn) -> None:
    standin.set_default({"content": "4"})
    endpoint = Endpoint(standin.base_url, None)
    with ProviderClient() as client:
        assert client.chat(endpoint, BODY, timeout=5, retries=0).message["content"] == "4"  # (through the wire)
        (leased,) = client._clients
        leased.cookies.set("seen", "1")  # (a client that keeps cookies sends through httpx: its own transport)
        assert client.chat(endpoint, BODY, timeout=5, retries=0).message["content"] == "4"
        assert client._tls is None  # (made on main: the CA bundle loaded for each ProviderClient's first lease)
    assert len(standin.requests) == 2


def test_the_context_httpx_holds_trusts_nothing_and_requires_a_verified_peer(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # A handshake made by the deferred context itself (not handed over) has no CA to verify the server against: it
    # fails, even for a server the real context would trust.
    cert, key = _self_signed(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", cert)
    server = _tls_server(cert, key)
    deferred = _DeferredTLS(lambda: pytest.fail("not handed over"))  # type: ignore[arg-type, return-value]
    assert deferred.verify_mode == ssl.CERT_REQUIRED and deferred.check_hostname and deferred.get_ca_certs() == []
    try:
        with socket.create_connection(("127.0.0.1", server.listener.getsockname()[1]), timeout=5) as raw, \
                pytest.raises(ssl.SSLCertVerificationError):
            ssl.SSLContext.wrap_socket(deferred, raw, server_hostname="localhost")
    finally:
        server.close()


def test_an_https_server_not_trusted_is_refused_through_httpx(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    # Through httpx's own transport (a kept cookie), the handed-over context verifies as before: a self-signed
    # server that SSL_CERT_FILE does not name is refused.
    cert, key = _self_signed(tmp_path)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    server = _tls_server(cert, key)
    endpoint = Endpoint(f"https://localhost:{server.listener.getsockname()[1]}/v1", None)
    try:
        with ProviderClient() as client:
            http = client._lease()
            http.cookies.set("seen", "1")
            client._give_back(http)
            with pytest.raises(ProviderError) as refused:
                client.chat(endpoint, BODY, timeout=5, retries=0)
            assert "CERTIFICATE_VERIFY_FAILED" in str(refused.value) or "certificate" in str(refused.value).lower()
            assert client._tls is not None  # (the real context was made for it, and refused the server)
    finally:
        server.close()


def _tls_server(cert: str, key: str) -> _Server:
    """A server that completes a TLS handshake as `cert` (for localhost) when the client accepts it, then hangs up."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)

    def answer(conn: socket.socket) -> None:
        with contextlib.suppress(ssl.SSLError, OSError), context.wrap_socket(conn, server_side=True):
            pass

    return _Server(answer)
