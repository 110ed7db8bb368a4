"""`canonical_json` writes with msgspec where it can and json's C encoder where it must: the bytes must be json's
(`strict_json`) for every JSON value, since keys and object ids are BLAKE3 of them (a byte more re-bills every user),
and what json refuses (NaN, infinity, a lone surrogate, a type neither knows) stays refused with the same error."""

from __future__ import annotations

import math
import random
import struct
from typing import Any

import pytest

from clawstore.values.canonical import canonical_json, strict_json


def _verdict(encode: Any, value: Any) -> tuple[str, Any]:
    try:
        return "ok", encode(value)
    except Exception as exc:  # noqa: BLE001 - the kind of refusal is what is compared
        return "refused", type(exc)


def _same(value: Any) -> None:
    assert _verdict(canonical_json, value) == _verdict(strict_json, value), value


def _edges() -> list[float]:
    """Floats around every place where msgspec's writing and repr's part ways, or a detector could slip."""
    out = [0.0, -0.0, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 1e-4, 1e16, 1e15, 1e17, 0.1,
           1.7e-05, 123456789012345680.0, 9999999999999998.0, 2.0**-13, 2.0**-14, 2.0**52, 2.0**53, 2.0**63, 2.0**64]
    for exponent in range(-325, 309):
        for mantissa in ("1", "9.999999999999999", "3.3333333333333335") if -8 < exponent < 20 or exponent % 7 == 0 \
                else ("1",):
            try:
                out.append(float(f"{mantissa}e{exponent}"))
            except OverflowError:
                pass
    for x in list(out):
        out += [math.nextafter(x, math.inf), math.nextafter(x, -math.inf)]
    return [s * x for x in out if math.isfinite(x) for s in (1, -1)]


_EDGES = _edges()
_SOME = _EDGES[::97] + [1.7e-05, 1e-05, 1e16, 0.082296, 7.0]


def test_every_float_magnitude_is_written_as_repr_alone_in_a_list_and_in_a_record() -> None:
    rnd = random.Random(46)
    bits = [struct.unpack("<d", rnd.getrandbits(64).to_bytes(8, "little"))[0] for _ in range(5_000)]
    floats = [x for x in _EDGES + bits if math.isfinite(x)]
    for x in floats:
        assert canonical_json(x) == repr(x).encode(), x
    for at in range(0, len(floats), 50):
        chunk = floats[at:at + 50]
        _same(chunk)
        _same({f"k{i}": x for i, x in enumerate(chunk)})


_AWKWARD = ["", "a", "é", "\U0001f600", "\uffff", '"', "\\", "\\\\", '\\"', "\x00", "\x1f", "\x7f", "\u2028",
            "\ufeff", ":0.00001,", ",1e16]", "[1e-07}", '":0.00001,"', '\\":0.00001,', "0.00001", "1e+16", "null"]


def _value(rnd: random.Random, depth: int) -> Any:
    kind = rnd.randrange(9 if depth < 4 else 6)
    if kind == 0:
        return rnd.choice([None, True, False])
    if kind == 1:
        return rnd.choice([0, 1, -1, 2**63, -(2**63) - 1, 2**64, 10**30, rnd.randrange(-10**6, 10**6)])
    if kind in (2, 3):
        return rnd.choice(_SOME)
    if kind in (4, 5):
        return "".join(rnd.choice(_AWKWARD) for _ in range(rnd.randrange(4)))
    if kind == 6:
        return [_value(rnd, depth + 1) for _ in range(rnd.randrange(5))]
    if kind == 7:
        return tuple(_value(rnd, depth + 1) for _ in range(rnd.randrange(3)))
    return {"".join(rnd.choice(_AWKWARD) for _ in range(rnd.randrange(3))): _value(rnd, depth + 1)
            for _ in range(rnd.randrange(6))}


def test_random_nested_values_give_json_s_bytes() -> None:
    rnd = random.Random(54)
    for _ in range(3_000):
        _same({"doc": _value(rnd, 0), "cost_usd": rnd.choice([1.7e-05, 0.5, 3e-09, 2e20])})


@pytest.mark.parametrize("text", [
    ':0.00001,', '":0.00001,', '\\":0.00001,', '\\\\":0.00001,', '\\\\\\":0.00001,', '[1e16]', 'x",1e16,"y',
])
def test_a_number_spelt_inside_a_string_is_left_as_it_is(text: str) -> None:
    # the string's own text next to the same floats as numbers: only the numbers are respelt
    for value in ({"a": text, "b": 1e-05, "c": [1e16, text, 1e-05]}, [text, 1e-05, 1e16], [1e-05, text]):
        _same(value)


def test_many_distinct_odd_floats_and_big_documents() -> None:
    floats = [i * 1.1e-07 for i in range(1, 40)]
    _same({"nodes": [{"cost_usd": x, "note": f":{x!r}," if i % 2 else "y"} for i, x in enumerate(floats)]})
    _same({"nodes": [{"cost_usd": 1.7e-05, "latency_s": 0.01 * i} for i in range(2_000)]})


@pytest.mark.parametrize("value", [
    float("nan"), float("inf"), -float("inf"), [1.0, float("nan")], {"a": {"b": [float("inf")]}},
    "\ud800", {"\udc00": 1}, {"a": ["x\udfff"]}, {1: 2, "a": 3}, object(), {"a": object()}, {(1, 2): 3},
])
def test_what_json_refuses_stays_refused_with_its_error(value: Any) -> None:
    kind, error = _verdict(canonical_json, value)
    assert kind == "refused"
    assert (kind, error) == _verdict(strict_json, value)


def test_keys_json_turns_into_strings_give_its_bytes() -> None:
    for value in ({1: "a", 2: 1e-05}, {10: 1, 9: 2}, {True: 1, None: 2}, {1.5: 1e16}):
        _same(value)
