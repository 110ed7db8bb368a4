"""ProviderClient's own HTTP/1.1 wire (providers/wire.py) against real servers on 127.0.0.1: it is what a leased
client sends through, and each way a server answers or fails reads the same as through httpx (the path a client
with a given transport, a proxy or cookies still takes)."""

from __future__ import annotations

import contextlib
import gzip
import json
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from clawstore.providers import Endpoint, ProviderClient, ProviderError
from tests.support.sockets import stop_listening

BODY = {"model": "m1", "messages": [{"role": "user", "content": "hello"}]}
REPLY = {"id": "gen-1", "model": "m1", "choices": [{"message": {"role": "assistant", "content": "héllo"},
                                                    "finish_reason": "stop"}],
         "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}


def _read_request(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        more = conn.recv(65536)
        if not more:
            return b""
        data += more
    head, rest = data.split(b"\r\n\r\n", 1)
    length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
    while len(rest) < length:
        rest += conn.recv(65536)
    return head


def _reply(body: bytes, *extra: bytes, content_type: bytes = b"application/json") -> bytes:
    return b"\r\n".join([b"HTTP/1.1 200 OK", b"Content-Type: " + content_type, *extra,
                         b"Content-Length: %d" % len(body), b"", body])


class _Server:
    """A socket server answering each connection with `answer(conn)`; counts the connections it accepted."""

    def __init__(self, answer: Callable[[socket.socket], None]) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.connections = 0
        self.answer = answer
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            self.answer(conn)

    @property
    def endpoint(self) -> Endpoint:
        return Endpoint(f"http://127.0.0.1:{self.listener.getsockname()[1]}/v1", None)

    def close(self) -> None:
        stop_listening(self.listener)


def _outcome(client: ProviderClient, endpoint: Endpoint) -> Any:
    """What a chat comes to: the message and usage, or the error's code, text and flags."""
    try:
        result = client.chat(endpoint, BODY, timeout=2, retries=0)
    except ProviderError as exc:
        return ("error", exc.code, str(exc), exc.retryable, exc.status_code, exc.timed_out)
    return ("ok", result.message, result.usage.total_tokens, result.provider_meta)


@pytest.fixture(scope="module")
def clients() -> Any:
    """A client sending through its wire and one through httpx (a given transport), made once: each loads the
    CA bundle."""
    with ProviderClient() as wire, ProviderClient(transport=httpx.HTTPTransport()) as through_httpx:
        yield wire, through_httpx


def _both(clients: tuple[ProviderClient, ProviderClient], answer: Callable[[socket.socket], None],
          requests: int = 1) -> tuple[list[Any], list[Any]]:
    """The outcomes through the wire and through httpx, each against its own server answering the same way."""
    found = []
    for client in clients:
        server = _Server(answer)
        try:
            found.append([_outcome(client, server.endpoint) for _ in range(requests)])
        finally:
            server.close()
    # each server has its own port: compare with it taken out
    return tuple(json.loads(re.sub(r"127\.0\.0\.1:\d+", "HOST", json.dumps(f))) for f in found)  # type: ignore


def _keep_alive(replies: list[bytes]) -> Callable[[socket.socket], None]:
    def answer(conn: socket.socket) -> None:
        for reply in replies:
            if not _read_request(conn):
                return
            conn.sendall(reply)
    return answer


def test_requests_go_through_the_wire_on_one_kept_alive_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_httpx(*args: object, **kwargs: object) -> None:
        raise AssertionError("sent through httpx")

    monkeypatch.setattr(httpx.Client, "send", no_httpx)
    server = _Server(_keep_alive([_reply(json.dumps(REPLY).encode())] * 3))
    try:
        with ProviderClient() as client:
            for _ in range(3):
                assert client.chat(server.endpoint, BODY, timeout=2, retries=0).message["content"] == "héllo"
    finally:
        server.close()
    assert server.connections == 1


def test_a_proxy_in_the_environment_sends_through_httpx(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[str] = []

    def through_httpx(self: httpx.Client, request: httpx.Request, **kwargs: object) -> None:
        sent.append(str(request.url))
        raise httpx.ConnectError("not here")

    monkeypatch.setattr(httpx.Client, "send", through_httpx)
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    with ProviderClient() as client, pytest.raises(ProviderError, match="ConnectError"):
        client.chat(Endpoint("http://127.0.0.1:9/v1", None), BODY, timeout=2, retries=0)
    assert sent == ["http://127.0.0.1:9/v1/chat/completions"]


SCENARIOS: dict[str, tuple[Callable[[socket.socket], None], int]] = {
    "a plain reply twice": (_keep_alive([_reply(json.dumps(REPLY).encode())] * 2), 2),
    "a chunked reply": (_keep_alive([b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: "
                                     b"chunked\r\n\r\n" + b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (
                                         json.dumps(REPLY).encode()[:20], json.dumps(REPLY).encode()[20:]))
                                     + b"0\r\n\r\n"]), 1),
    "a gzip reply": (_keep_alive([_reply(gzip.compress(json.dumps(REPLY).encode()), b"Content-Encoding: gzip")]), 1),
    "a gzip reply that does not decompress": (_keep_alive([_reply(b"not gzip", b"Content-Encoding: gzip")]), 1),
    "a latin-1 reply": (_keep_alive([_reply(json.dumps(REPLY, ensure_ascii=False).encode("latin-1"),
                                            content_type=b"application/json; charset=latin-1")]), 1),
    "a 503 with Retry-After": (_keep_alive([b"HTTP/1.1 503 Busy\r\nRetry-After: 0\r\nContent-Length: 4\r\n\r\nbusy"]),
                               1),
    "a redirect (not followed)": (_keep_alive([b"HTTP/1.1 302 Found\r\nLocation: /elsewhere\r\n"
                                               b"Content-Length: 0\r\n\r\n"]), 1),
    "closed before any reply": (lambda conn: _read_request(conn) and None, 1),
    "closed mid-body": (lambda conn: _read_request(conn) and conn.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"id\""), 1),
    "not HTTP": (lambda conn: _read_request(conn) and conn.sendall(b"HELLO THERE\r\n\r\n"), 1),
    "a 100 Continue first": (_keep_alive([b"HTTP/1.1 100 Continue\r\n\r\n" + _reply(json.dumps(REPLY).encode())]), 1),
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_each_answer_reads_the_same_as_through_httpx(clients: tuple[ProviderClient, ProviderClient],
                                                     scenario: str) -> None:
    answer, requests = SCENARIOS[scenario]
    wire, through_httpx = _both(clients, answer, requests)
    assert wire == through_httpx
    assert len(wire) == requests


def test_a_refused_connection_reads_the_same_as_through_httpx(clients: tuple[ProviderClient, ProviderClient]) -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        endpoint = Endpoint(f"http://127.0.0.1:{free.getsockname()[1]}/v1", None)  # bound, not listening
        outcomes = [_outcome(client, endpoint) for client in clients]
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][1] == "transport_error" and "ConnectError" in outcomes[0][2]


def test_a_header_h11_refuses_reads_the_same_as_through_httpx(clients: tuple[ProviderClient, ProviderClient],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAW_TEST_WIRE_KEY", "sk-one\nline-two-0123456789")  # an API key pasted with a line break
    # The endpoint refuses such a key before any request (tests/hostile/test_key_characters.py); past that check,
    # the layer below must still refuse it alike on both paths and never quote it.
    monkeypatch.setattr(Endpoint, "api_key", lambda self: "sk-one\nline-two-0123456789")
    server = _Server(_keep_alive([_reply(json.dumps(REPLY).encode())] * 2))
    try:
        outcomes = [_outcome(client, Endpoint(server.endpoint.base_url, "CLAW_TEST_WIRE_KEY")) for client in clients]
    finally:
        server.close()
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][1] == "transport_error" and "LocalProtocolError" in outcomes[0][2]
    assert "line-two" not in outcomes[0][2]


def test_a_connection_the_server_closed_while_idle_is_not_used_again() -> None:
    closed = threading.Event()

    def answer_then_close(conn: socket.socket) -> None:
        _read_request(conn)
        conn.sendall(_reply(json.dumps(REPLY).encode()))  # kept alive by HTTP/1.1's default, then closed
        conn.shutdown(socket.SHUT_WR)
        closed.set()

    server = _Server(answer_then_close)
    try:
        with ProviderClient() as client:
            for _ in range(2):
                closed.clear()
                assert client.chat(server.endpoint, BODY, timeout=2, retries=0).message["content"] == "héllo"
                assert closed.wait(2)
    finally:
        server.close()
    assert server.connections == 2


def test_a_server_that_stops_answering_times_out_and_its_connection_is_not_used_again() -> None:
    replies = iter([b"", _reply(json.dumps(REPLY).encode())])  # the first request hangs, the second is answered

    def answer(conn: socket.socket) -> None:
        _read_request(conn)
        reply = next(replies)
        if reply:
            conn.sendall(reply)
        else:
            conn.recv(1)  # until the client gives up and closes

    server = _Server(answer)
    try:
        with ProviderClient() as client:
            with pytest.raises(ProviderError) as raised:
                client.chat(server.endpoint, BODY, timeout=0.3, retries=0)
            assert raised.value.timed_out
            assert client.chat(server.endpoint, BODY, timeout=2, retries=0).message["content"] == "héllo"
    finally:
        server.close()
    assert server.connections == 2


def _self_signed(directory: Any) -> tuple[str, str]:
    """A certificate for localhost and its key, as files (the test's own CA: SSL_CERT_FILE names it)."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_path), str(key_path)


def test_over_tls_replies_keep_alive_and_a_silent_server_times_out(tmp_path: Any,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # A TLS read whose kernel timeout ends is tried again for ever by the ssl module: the wire must keep Python's
    # timeout on a TLS socket, or this hangs past its 0.3 s.
    cert, key = _self_signed(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", cert)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    replies = iter([_reply(json.dumps(REPLY).encode())] * 2 + [b""] + [_reply(json.dumps(REPLY).encode())])

    def answer(conn: socket.socket) -> None:
        with context.wrap_socket(conn, server_side=True) as tls:
            while _read_request(tls):
                reply = next(replies)
                if not reply:
                    tls.settimeout(3)  # silent until the client gives up and closes (or 3 s: the test fails)
                    with contextlib.suppress(OSError):
                        tls.recv(1)
                    return
                tls.sendall(reply)

    server = _Server(answer)
    endpoint = Endpoint(f"https://localhost:{server.listener.getsockname()[1]}/v1", None)
    try:
        with ProviderClient() as client:
            for _ in range(2):
                assert client.chat(endpoint, BODY, timeout=2, retries=0).message["content"] == "héllo"
            started = time.monotonic()
            with pytest.raises(ProviderError) as raised:
                client.chat(endpoint, BODY, timeout=0.3, retries=0)
            assert raised.value.timed_out and time.monotonic() - started < 2
            assert client.chat(endpoint, BODY, timeout=2, retries=0).message["content"] == "héllo"
            assert client._clients[0].wire is not None  # through the wire, not httpx
    finally:
        server.close()
    assert server.connections == 2
