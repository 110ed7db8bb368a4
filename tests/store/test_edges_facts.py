"""edges._fact applies actions.py's rules (record_input_id, output_ids) in a faster form of its own: these tests hold
the two to the same answers, so a change to one side that the other lacks fails here."""

from __future__ import annotations

import json
import random
from typing import Any

from clawstore.store.actions import output_ids, record_input_id
from clawstore.store.core.ids import is_oid
from clawstore.store.edges import _fact, children_in, record_facts


def _by_actions_rules(content: bytes, children: list[bytes]) -> tuple[int, list[int]] | None:
    """What _fact answers, by actions.py's functions themselves (the code before its fast form)."""
    facts = record_facts(content)
    if facts is None or not isinstance(facts.get("outputs"), dict):
        return None
    key = facts.get("key")
    if not is_oid(key) or record_input_id(facts) != key:
        return None
    try:
        outputs = output_ids(facts["outputs"])
    except ValueError:
        return None
    where = {child: i for i, child in enumerate(children)}
    found = [where.get(bytes.fromhex(oid[7:])) for oid in [key, *outputs]]
    if None in found:
        return None
    return found[0], found[1:]  # type: ignore[return-value]


def _oid(rng: random.Random) -> str:
    return "blake3:" + rng.randbytes(32).hex()


def _records(rng: random.Random) -> list[dict[str, Any]]:
    key, other = _oid(rng), _oid(rng)
    spelt = _oid(rng)
    odd_values: list[Any] = [None, 7, "", "blake3:" + "A" * 64, _oid(rng)[:-1], _oid(rng) + "0", ["x"], {"a": 1},
                             "sha256:" + "0" * 64, True, [_oid(rng), None, _oid(rng)], [], [[_oid(rng)]], [None],
                             spelt[:20] + " " + spelt[21:], spelt[:20] + "\n" + spelt[21:], spelt[:-2] + "  ",
                             spelt[:7] + "٣" + spelt[8:], "blake3:blake3:" + spelt[14:], spelt[7:] + "blake3:",
                             "blake3:" + spelt[7:-1] + "F", 1.5, [spelt, 3]]
    made: list[dict[str, Any]] = []
    for _ in range(600):
        record: dict[str, Any] = {"key": key, "outputs": {"artifact": _oid(rng), "input_document": key}}
        change = rng.randrange(9)
        if change == 1:
            record["outputs"][rng.choice(["x", "artifact"])] = rng.choice(odd_values)
        elif change == 2:
            record["input"] = rng.choice([key, other, None, 5])
        elif change == 3:
            record["outputs"]["input_document"] = rng.choice([other, None, 3])
        elif change == 4:
            record["key"] = rng.choice([other, "blake3:xyz", None, 1, key.upper(), key[:9] + " " + key[10:]])
        elif change == 5:
            record["outputs"] = rng.choice([[], "blake3:" + "0" * 64, None])
        elif change == 6:
            del record["outputs"]["input_document"]
        elif change == 7:
            record["outputs"].update({f"o{i}": rng.choice([_oid(rng), None]) for i in range(rng.randrange(1, 5))})
        elif change == 8:
            del record["key"]
        made.append(record)
    return made


def test_fact_answers_as_actions_rules_do_on_records_well_formed_and_not() -> None:
    rng = random.Random(55)
    answered = set()
    for record in _records(rng):
        content = json.dumps(record).encode()
        children = children_in(memoryview(content))
        expected = _by_actions_rules(content, children)
        assert _fact(memoryview(content), children) == expected, record
        answered.add(expected is None)
    assert answered == {True, False}  # (both kinds met: the comparison is not of Nones alone)
