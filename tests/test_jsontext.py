"""`jsontext.loads` reads JSON with msgspec first and Python's parser where msgspec refuses: the result must
be exactly what Python's parser gives (the same values, of the same types), and what it refuses must stay
refused. Records, listings and documents are read this way everywhere, and a value read differently
would hash differently or change a verdict."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from clawstore.values import jsontext

PYTHON = json.JSONDecoder(parse_constant=jsontext._no_constant)  # what loads promised before msgspec


def _python(data: bytes) -> tuple[str, str]:
    try:
        return "ok", _exact(PYTHON.decode(data.decode("utf-8")))
    except (ValueError, RecursionError):
        return "refused", ""


def _claw(data: bytes) -> tuple[str, str]:
    try:
        return "ok", _exact(jsontext.loads(data))
    except ValueError:  # (loads turns RecursionError into ValueError: one never escapes it)
        return "refused", ""


def _exact(value: Any) -> str:
    """A rendering that tells 1 from 1.0 and True, -0.0 from 0.0, and a dict's key order (and writes a
    lone surrogate, infinity and a big integer as they are)."""
    return json.dumps(value)


TRICKY = [
    b"1e999", b"-1e999", b"[1e308, 1e309]", b"123.456e789", b"1e-400", b"-0.0", b"-0", b"0e0", b"1E5", b"1.5e+3",
    b"123456789012345678901234567890", b"18446744073709551615", b"18446744073709551616",
    b"-9223372036854775808", b"-9223372036854775809", b"1" * 400, b"0." + b"1" * 400,
    b"4.9e-324", b"2.4703282292062328e-324", b"1.7976931348623157e308", b"0.1", b"1.0",
    b'"\\ud800"', b'"\\udc00\\ud800"', b'"\\uD834\\uDD1E"', b'"\\u0000"', b'"\\/"', b'"a\\"b"', b'"\\u12"',
    b'"\\x"', b'"\\a"', b'"\t"', b'"\x01"', b'"\x7f"', b'"\xff"', b'"\xed\xa0\x80"', b'"\xc0\xaf"',
    b'"\xf0\x9f\x98\x80"', b"\xef\xbb\xbf{}", b"\xc2\xa0[]", b"\x0c[]", b"[]\x00", b" \t\n\r[] ",
    b'{"a":1,"a":2}', b'{"b":1,"a":2}', b'{"":""}', b'{"a"  :  [ 1 , 2 ] }', b"{1:2}", b"[1 2]",
    b"NaN", b"-NaN", b"Infinity", b"-Infinity", b"[1,]", b'{"a":1,}', b"{}x", b"", b"  ", b"-", b"00", b"01",
    b"1.e5", b"-.5", b"1e", b"+1", b"true", b"tru", b"null ", b"[true,false,null]", b"-0e-0",
    b"[" * 500 + b"]" * 500, b"[" * 5000 + b"]" * 5000, b"[" * 100_000,
]


@pytest.mark.parametrize("data", TRICKY, ids=lambda data: repr(data[:24]))
def test_tricky_json_reads_as_pythons_parser_reads_it(data: bytes) -> None:
    assert _claw(data) == _python(data)


def test_fragments_of_json_read_as_pythons_parser_reads_them() -> None:
    # Seeded random strings of JSON's pieces: most are malformed, a few thousand are not.
    pieces = [b"{", b"}", b"[", b"]", b'"', b"\\", b"u", b"0", b"1", b"9", b"e", b"E", b"-", b"+", b".", b",",
              b":", b" ", b"a", b"\t", b"\n", b"true", b"null", b"false", b"\x00", b"\xff", b"\xc3\xa9", b"d8",
              b"D800", b"12345678901234567890"]
    rng = random.Random(16)
    read = 0
    for _ in range(40_000):
        data = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        expected = _python(data)
        assert _claw(data) == expected, data
        read += expected[0] == "ok"
    assert read > 500  # (the comparison covered documents that parse, not only refusals)


def test_numbers_read_to_the_same_values() -> None:
    rng = random.Random(7)
    for _ in range(20_000):
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 25))).lstrip("0") or "0"
        text = ("-" if rng.random() < 0.3 else "") + digits
        if rng.random() < 0.5:
            text += "." + "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 20)))
        if rng.random() < 0.5:
            text += rng.choice("eE") + rng.choice(["", "+", "-"]) + str(rng.randint(0, 330))
        data = f'{{"n": [{text}]}}'.encode()
        assert _claw(data) == _python(data), text


def test_documents_read_back_as_written() -> None:
    rng = random.Random(3)

    def value(depth: int) -> Any:
        kind = rng.randrange(9 if depth < 6 else 7)
        if kind == 0:
            return rng.randint(-(1 << 80), 1 << 80)
        if kind == 1:
            return rng.uniform(-1e6, 1e6) * 10.0 ** rng.randint(-300, 300)
        if kind == 2:
            return "".join(chr(rng.choice([rng.randrange(32, 127), rng.randrange(0x80, 0xD7FF),
                                           rng.randrange(0x10000, 0x10FFFF), rng.randrange(0, 32)]))
                           for _ in range(rng.randint(0, 12)))
        if kind in (3, 4, 5, 6):
            return [True, False, None, rng.randint(-5, 5)][kind - 3]
        if kind == 7:
            return [value(depth + 1) for _ in range(rng.randint(0, 4))]
        return {str(value(depth + 1))[:8]: value(depth + 1) for _ in range(rng.randint(0, 4))}

    for _ in range(3_000):
        document = value(0)
        for text in (json.dumps(document), json.dumps(document, ensure_ascii=False, indent=1)):
            data = text.encode("utf-8", "surrogatepass")
            assert _claw(data) == _python(data)
            assert _claw(data)[0] == "ok"


def test_text_and_buffers_read_alike() -> None:
    document = '{"key": "blake3:00", "outputs": {"answer": [1, 2.5, null]}, "é": "\\u00e9"}'
    expected = json.loads(document)
    for data in (document, document.encode(), bytearray(document.encode()), memoryview(document.encode())):
        assert jsontext.loads(data) == expected
    assert jsontext.loads('"\udcff"') == "\udcff"  # (text holding a lone surrogate: msgspec cannot encode it)


@pytest.mark.parametrize(("reply", "value"), [
    (b'"high \\ud800 low \\uDC00 end"', "high \ufffd low \ufffd end"),
    (b'{"k\\ud83d": ["\\ud83d\\ude00", "\\\\ud800", 1.5, null, {"x": "\\udfff"}]}',
     {"k\ufffd": ["\U0001f600", "\\ud800", 1.5, None, {"x": "\ufffd"}]}),
    (b'"pair \\ud83d\\ude00 then lone \\ud83d"', "pair \U0001f600 then lone \ufffd"),
    ('"\udcff as text"', "\ufffd as text"),
    (b'{"plain": "\\u00e9\\u2028"}', {"plain": "\u00e9\u2028"}),
])
def test_a_reply_reads_each_lone_surrogate_as_a_replacement_character(reply: str | bytes, value: Any) -> None:
    # A reply is kept in a record, whose UTF-8 cannot hold a lone surrogate: the paid run failed.
    read = jsontext.loads_reply(reply)
    assert read == value
    json.dumps(read, ensure_ascii=False).encode("utf-8")  # writable
    assert jsontext.loads(reply) == json.loads(reply)  # (what claw reads back of its own stays exact)

