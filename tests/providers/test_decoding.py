"""A reply's Content-Encoding and charset, undone by claw's own decoders (providers/decoding.py) for the replies the
wire reads itself: the same bytes httpx's `iter_bytes` gives (its public Response the oracle), through the client
against a real server too. An unknown coding passes the body through as it is (as httpx does: a compressed body then
fails to parse); a body that does not decompress is a malformed reply, not a traceback."""

from __future__ import annotations

import gzip
import json
import threading
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
import zstandard

from clawstore.providers import Endpoint, ProviderClient, ProviderError
from clawstore.providers.decoding import decoded, text_encoding

BODY = {"model": "m1", "messages": [{"role": "user", "content": "hello"}]}
REPLY = json.dumps({"id": "gen-1", "choices": [{"message": {"role": "assistant", "content": "déjà vu " * 50},
                                                "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}).encode()


def _raw_deflate(data: bytes) -> bytes:
    squeeze = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return squeeze.compress(data) + squeeze.flush()


def _two_zstd_frames(data: bytes) -> bytes:
    half = len(data) // 2
    return zstandard.compress(data[:half]) + zstandard.compress(data[half:])


ENCODED = {
    "gzip": gzip.compress,
    "deflate": zlib.compress,
    "Deflate": _raw_deflate,  # (raw deflate, as some servers send it; the name in any case)
    "identity": lambda data: data,
    "zstd": _two_zstd_frames,
    "gzip, deflate": lambda data: zlib.compress(gzip.compress(data)),
    "x-unknown": lambda data: data,  # passed through
}


class _Pieces(httpx.SyncByteStream):
    def __init__(self, pieces: list[bytes]):
        self.pieces = pieces

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.pieces)


def _httpx_reads(headers: httpx.Headers, pieces: list[bytes]) -> bytes:
    return httpx.Response(200, headers=headers, stream=_Pieces(pieces)).read()


@pytest.mark.parametrize("coding", list(ENCODED))
@pytest.mark.parametrize("piece", [1, 7, 1 << 20])
def test_the_body_decoded_is_httpxs(coding: str, piece: int) -> None:
    raw = ENCODED[coding](REPLY)
    pieces = [raw[i:i + piece] for i in range(0, len(raw), piece)]
    headers = httpx.Headers({"content-encoding": coding})
    assert b"".join(decoded(iter(pieces), headers)) == REPLY
    if piece > 1 or coding not in ("Deflate", "zstd"):
        assert _httpx_reads(headers, pieces) == REPLY
    else:  # (what httpx gets wrong: raw deflate in a one-byte first chunk, a zstd frame ending with a chunk)
        with pytest.raises(httpx.DecodingError):
            _httpx_reads(headers, pieces)


@pytest.mark.parametrize("raw", [b"", zlib.compress(b""), _raw_deflate(b""), _raw_deflate(b"x")[:1]])
def test_a_short_deflate_body(raw: bytes) -> None:
    headers = httpx.Headers({"content-encoding": "deflate"})
    assert b"".join(decoded(iter([raw]), headers)) == _httpx_reads(headers, [raw])


@pytest.mark.parametrize("coding,raw", [("gzip", b"not gzip at all"), ("deflate", b"\xff" * 40),
                                        ("zstd", zstandard.compress(REPLY)[:-9]), ("zstd", b"nonsense")])
def test_a_body_that_does_not_decompress_is_a_decoding_error_as_for_httpx(coding: str, raw: bytes) -> None:
    headers = httpx.Headers({"content-encoding": coding})
    with pytest.raises(httpx.DecodingError):
        _httpx_reads(headers, [raw])
    with pytest.raises(httpx.DecodingError):
        b"".join(decoded(iter([raw]), headers))


@pytest.mark.parametrize("content_type", ["application/json", "application/json; charset=latin-1",
                                          'text/plain; Charset="ISO-8859-1"', "application/json; charset=nonesuch",
                                          "application/json; charset=", "text/plain; charset=utf-16"])
def test_the_text_encoding_is_httpxs(content_type: str) -> None:
    headers = httpx.Headers({"content-type": content_type})
    assert text_encoding(headers) == httpx.Response(200, headers=headers).encoding


class _Coded(BaseHTTPRequestHandler):
    coding = "gzip"
    body = b""
    content_type = "application/json"

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", self.content_type)
        self.send_header("Content-Encoding", self.coding)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)


def _chat(coding: str, body: bytes, content_type: str = "application/json") -> dict[str, object]:
    handler = type("Handler", (_Coded,), {"coding": coding, "body": body, "content_type": content_type})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with ProviderClient() as client:
            endpoint = Endpoint(f"http://127.0.0.1:{server.server_address[1]}/v1", None)
            return client.chat(endpoint, BODY, timeout=5, retries=0).message
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("coding", list(ENCODED))
def test_a_coded_reply_through_the_client(coding: str) -> None:
    assert _chat(coding, ENCODED[coding](REPLY))["content"] == "déjà vu " * 50


def test_a_reply_in_latin_1_is_read_in_latin_1() -> None:
    reply = json.dumps(json.loads(REPLY), ensure_ascii=False).encode("latin-1")
    assert "é".encode("latin-1") in reply
    assert _chat("identity", reply, "application/json; charset=iso-8859-1")["content"] == "déjà vu " * 50


# mtime=0: a gzip stream holds the time it was made, and a bytes parameter is part of the test's id — pytest-xdist's
# workers, collecting in different seconds, would collect different tests and the run would stop.
@pytest.mark.parametrize("coding,raw", [("gzip", b"not gzip at all"), ("x-unknown", gzip.compress(REPLY, mtime=0))])
def test_a_reply_that_does_not_decode_is_a_malformed_reply(coding: str, raw: bytes) -> None:
    with pytest.raises(ProviderError) as failed:
        _chat(coding, raw)
    assert failed.value.code == "invalid_response"
