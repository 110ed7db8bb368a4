"""Differential fuzzing of the wire's reply read without h11 (providers/wire.py `_plain_head`) against h11 alone: real
replies (the stand-in's, llama.cpp's, an OpenRouter-shaped gzip reply, a 429, a chunked one) mutated byte by byte
and header by header, cut into random reads, must each come to what h11 alone makes of them — status, reason,
headers, body, the connection kept or not, or the same error and text."""

from __future__ import annotations

import gzip
import json
import random
import re
from collections.abc import Callable

import pytest

from clawstore.providers import wire as wire_module
from tests.providers.test_wire_plain import _exchanges

ANSWER = json.dumps({"id": "gen-1", "object": "chat.completion", "model": "m", "choices": [
    {"index": 0, "message": {"role": "assistant", "content": "stand-in answer"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5, "cost": 8e-06}}).encode()
BLANK_LINE = wire_module._BLANK_LINE
GZIPPED = gzip.compress(ANSWER, mtime=0)


def _head(status: bytes, *lines: bytes) -> bytes:
    return b"\r\n".join([b"HTTP/1.1 " + status, *lines]) + b"\r\n\r\n"


SEEDS: dict[str, bytes] = {  # as each server sends it (headers copied from real replies)
    "stand-in": _head(b"200 OK", b"Server: BaseHTTP/0.6 Python/3.11.7", b"Date: Sat, 05 Dec 2026 17:14:12 GMT",
                      b"Content-Type: application/json", b"Content-Length: %d" % len(ANSWER),
                      b"x-request-id: req-b3f5163ab804") + ANSWER,
    "llama.cpp": _head(b"200 OK", b"Keep-Alive: timeout=5, max=100",
                       b"Content-Type: application/json; charset=utf-8", b"Server: llama.cpp",
                       b"Content-Length: %d" % len(ANSWER), b"Access-Control-Allow-Origin: ") + ANSWER,
    "openrouter gzip": _head(b"200 OK", b"Date: Sat, 05 Dec 2026 17:14:12 GMT", b"Content-Type: application/json",
                             b"Content-Length: %d" % len(GZIPPED), b"Connection: keep-alive",
                             b"Content-Encoding: gzip", b"Access-Control-Allow-Origin: *", b"Vary: Accept-Encoding",
                             b"Server: cloudflare", b"CF-RAY: 8f1e2d3c4b5a6978-AMS") + GZIPPED,
    "429": _head(b"429 Too Many Requests", b"Content-Type: application/json", b"Retry-After: 2",
                 b"Content-Length: 27") + b'{"error": "rate limited"}\n\n',
    "chunked": _head(b"200 OK", b"Content-Type: application/json", b"Transfer-Encoding: chunked")
    + b"%x\r\n%s\r\n0\r\n\r\n" % (len(ANSWER), ANSWER),
}
LENGTHS = [b"0", b"00", b"+5", b"-1", b"0x10", b" 5", b"5 ", b"5,5", b"5, 6", b"", b"99999999999999999999",
           b"999999999999999999999", b"1e3", b"\xd9\xa3", b"5\x00"]
INSERTS = [b"\r", b"\n", b"\r\n", b"\r\n ", b"\r\n\t", b" ", b"\t", b":", b"\x00", b"\x0b", b"\x0c", b"\x7f", b"\xe9",
           b"\xff", b",", b"H", b"\r\n\r\n"]
BEFORE = [b"HTTP/1.1 100 Continue\r\n\r\n", b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n",
          b"HTTP/1.1 101 Switching Protocols\r\n\r\n", b"\r\n", b"\n"]


def _split(reply: bytes) -> tuple[list[bytes], bytes]:
    head, _, body = reply.partition(b"\r\n\r\n")
    return head.split(b"\r\n"), body


def _join(lines: list[bytes], body: bytes) -> bytes:
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def _byte(reply: bytes, rng: random.Random) -> bytes:
    head_end = reply.find(b"\r\n\r\n") + 5 if b"\r\n\r\n" in reply else len(reply) + 1
    at = rng.randrange(len(reply) + 1) if rng.random() < 0.3 else rng.randrange(head_end)
    kind = rng.randrange(3)
    if kind == 0:
        return reply[:at] + rng.choice(INSERTS) + reply[at:]
    if kind == 1:
        return reply[:at] + reply[at + rng.randint(1, 3):]
    return reply[:at] + bytes([rng.randrange(256)]) + reply[at + 1:]


def _line(reply: bytes, rng: random.Random) -> bytes:
    lines, body = _split(reply)
    if len(lines) < 2:
        return reply
    at = rng.randrange(1, len(lines))
    line = lines[at]
    name, _, value = line.partition(b":")
    kind = rng.randrange(7)
    if kind == 0:
        lines.insert(at, line)  # a duplicated header
    elif kind == 1:
        lines[at] = name.upper() + b":" + value if rng.random() < 0.5 else name.lower() + b":" + value
    elif kind == 2:
        lines[at] = name + b" :" + value  # a space before the colon
    elif kind == 3:
        lines[at:at + 1] = [name + b":" + value[: len(value) // 2], b" " + value[len(value) // 2:]]  # obs-fold
    elif kind == 4:
        lines[at] = line + rng.choice([b"\x00", b"\xe9", b"\xc3\xa9", b" \t", b"\x01"])
    elif kind == 5:
        lines[0] = lines[0] + rng.choice([b" \xe9t\xe9", b"\x00", b" \t ", b"  ", b"\x7f"])  # the reason
    else:
        del lines[at]
    return _join(lines, body)


def _length(reply: bytes, rng: random.Random) -> bytes:
    lines, body = _split(reply)
    lines = [line for line in lines if not line.lower().startswith(b"content-length:")]
    for _ in range(rng.choice([1, 1, 1, 2])):
        value = rng.choice([*LENGTHS, b"%d" % len(body), b"%d" % (len(body) - 1), b"%d" % (len(body) + 1)])
        lines.insert(rng.randrange(1, len(lines) + 1), b"Content-Length: " + value)
    return _join(lines, body)


def _around(reply: bytes, rng: random.Random) -> bytes:
    kind = rng.randrange(4)
    if kind == 0:
        return rng.choice(BEFORE) + reply  # an informational reply (or a blank line) first
    if kind == 1:
        return reply + SEEDS["stand-in"]  # a second reply glued after the first
    if kind == 2:
        return reply + rng.choice([b"x", b"\r\n", b"HTTP/1.1 200 OK\r\n"])  # bytes past its length
    return re.sub(rb"(?i)connection: [^\r]*", rng.choice(
        [b"Connection: CLOSE", b"connection: keep-alive,close", b"Connection: Keep-Alive, \tclose ",
         b"Connection: closed", b"Connection: ,close,", b"Connection: upgrade"]), reply) if b"onnection" in reply \
        else _join([*_split(reply)[0], b"Connection: Close"], _split(reply)[1])


MUTATIONS: list[Callable[[bytes, random.Random], bytes]] = [_byte, _line, _length, _around]


def _cuts(data: bytes, rng: random.Random) -> list[bytes]:
    if rng.random() < 0.2:
        return [data[i:i + 1] for i in range(len(data))]
    points = sorted(rng.sample(range(1, len(data)), min(rng.randint(0, 5), len(data) - 1))) if len(data) > 1 else []
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


def test_mutated_real_replies_come_to_what_h11_makes_of_them() -> None:
    rng = random.Random(6202)
    for round_ in range(4000):
        reply = SEEDS[sorted(SEEDS)[round_ % len(SEEDS)]]
        for _ in range(rng.choice([1, 1, 2, 3])):
            reply = rng.choice(MUTATIONS)(reply, rng)
        then = rng.choice([b"", SEEDS["llama.cpp"]])  # the next request's reply (silence, or another)
        for _ in range(2):
            script = _cuts(reply, rng) + ([then] if then else []) + ([b""] if rng.random() < 0.5 else [])
            assert _exchanges(script, h11_only=False) == _exchanges(script, h11_only=True), (reply, script)


def test_a_head_trickled_a_byte_a_read_is_searched_once_not_once_a_read(monkeypatch: pytest.MonkeyPatch) -> None:
    head = b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 50_000 + b"\r\nContent-Length: 2\r\n\r\n{}"
    reads = [head[i:i + 1] for i in range(len(head))]
    scanned = [0]

    class Counted:
        def search(self, data: bytearray, pos: int = 0) -> re.Match[bytes] | None:
            scanned[0] += len(data) - pos
            return BLANK_LINE.search(data, pos)

    monkeypatch.setattr(wire_module, "_BLANK_LINE", Counted())
    assert _exchanges(reads, h11_only=False, requests=1) == _exchanges(reads, h11_only=True, requests=1)
    assert scanned[0] < 3 * len(head)  # (searched from the start each read: ~len(head) ** 2 / 2)
