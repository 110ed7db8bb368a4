"""A chat body's bytes as sent (providers/client.py `request_payload`, one encoder made once) are exactly what
`json.dumps(body, ensure_ascii=False, allow_nan=False)` wrote per request, and a body it refused is refused the same
way: NaN and infinities, objects JSON has no form for, text UTF-8 cannot hold."""

from __future__ import annotations

import json
import threading
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from clawstore.providers.client import request_payload

keys = st.one_of(st.text(max_size=6), st.integers(), st.booleans(), st.none(), st.floats(allow_nan=False))
leaves = st.one_of(st.text(max_size=12), st.integers(), st.floats(), st.booleans(), st.none(),
                   st.sampled_from(["ünïcödé ß", "\u2028", "\ud800", "\"\\\n\t", "😀"]))
bodies = st.dictionaries(st.text(max_size=8), st.recursive(leaves, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.tuples(inner, inner), st.dictionaries(keys, inner, max_size=4)), max_leaves=15),
    max_size=5)


def _outcome(make: Any, body: Any) -> tuple[str, Any]:
    try:
        return "bytes", make(body)
    except Exception as exc:  # (the same kind and text either way)
        return type(exc).__name__, str(exc)


@settings(max_examples=300, deadline=None)
@given(bodies)
def test_the_bytes_are_json_dumps_bytes(body: dict[str, Any]) -> None:
    assert _outcome(request_payload, body) == _outcome(
        lambda b: json.dumps(b, ensure_ascii=False, allow_nan=False).encode("utf-8"), body)


def test_refused_bodies_are_refused_alike() -> None:
    for body in ({"t": float("nan")}, {"t": float("inf")}, {"t": object()}, {"t": "\ud800"}, {"t": {1j: 1}}):
        assert _outcome(request_payload, body)[0] == _outcome(
            lambda b: json.dumps(b, ensure_ascii=False, allow_nan=False).encode("utf-8"), body)[0] != "bytes"


def test_threads_share_the_encoder() -> None:
    made: list[bool] = []
    bodies = [{"model": f"m{i}", "messages": [{"role": "user", "content": "x" * i}] * (i % 7)} for i in range(200)]

    def encode() -> None:
        made.append(all(request_payload(b) == json.dumps(b, ensure_ascii=False).encode() for b in bodies * 20))

    threads = [threading.Thread(target=encode) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert made == [True] * 4
