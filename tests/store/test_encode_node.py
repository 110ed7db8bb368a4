"""A journal line is json.dumps(node, sort_keys=True, separators=(",", ":")) byte for byte, whichever encoder makes it
(msgspec for plain printable-ASCII nodes, the json module for anything else)."""

from __future__ import annotations

import json
import random
from typing import Any

from clawstore.store.buildlogs import encode_node

_AWKWARD: list[Any] = [1e16, 0.1, -0.0, float("nan"), float("inf"), 1e-7, 2**70, -(2**63), True, False, None, "é",
                       "a\x7fb", "tab\there", "nl\n", "\x00\x1f", "quote\"back\\slash", "ünï", "\u2028", [1, "x"],
                       {"z": 1, "a": 2.5}, ""]


def _value(rng: random.Random) -> Any:
    if rng.random() < 0.5:
        return rng.choice(["case_00012", "openai/gpt-4o-mini", "blake3:" + "ab" * 32, 0, 3, 12345678901234567890])
    return rng.choice(_AWKWARD)


def _expected(node: dict[str, Any]) -> bytes:
    return json.dumps(node, sort_keys=True, separators=(",", ":")).encode()


def test_a_plain_node_and_every_awkward_value_encode_as_json_does() -> None:
    plain = {"kind": "judge", "key": "blake3:" + "ab" * 32, "record": None, "action": "exec",
             "address": {"model_id": "m0", "case_id": "case_00012", "repetition": 0, "judge_id": "j"}}
    assert encode_node(plain) == _expected(plain)
    assert encode_node({"fix": 7}) == b'{"fix":7}'
    for value in _AWKWARD:
        for node in ({**plain, "record": value}, {**plain, "address": {**plain["address"], "case_id": value}},
                     {**plain, "address": {**plain["address"], "é": 1}}):
            assert encode_node(node) == _expected(node), node


def test_random_nodes_encode_as_json_does() -> None:
    rng = random.Random(44)
    for _ in range(3000):
        address = {rng.choice(["case_id", "model_id", "repetition", "judge_id", "b", "A", "é"]): _value(rng)
                   for _ in range(rng.randrange(1, 6))}
        node = {name: _value(rng) for name in rng.sample(["kind", "key", "record", "action"], rng.randrange(5))}
        node["address"] = address
        assert encode_node(node) == _expected(node), node
