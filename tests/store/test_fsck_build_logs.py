"""fsck reads a build log a piece at a time (store/services/fsck_logs.py): its memory is LOG_PIECE, not the log's size,
and every log — claw's, damaged, or shaped to trip the pieces — is judged exactly as read whole."""

from __future__ import annotations

import json
import random
import tracemalloc
from pathlib import Path

import pytest

from clawstore.store.services import fsck_logs
from clawstore.store.services.fsck_logs import _whole_log_problem, build_log_problem
from tests.support.fresh import measured_in_fresh_process


def _node(i: int, case: str | None = None) -> dict[str, object]:
    return {"action": "exec", "address": {"case_id": case or f"case_{i:05d}", "model_id": f"m{i % 5}",
                                           "repetition": 0},
            "key": "blake3:" + f"{i:064x}", "kind": "run", "record": "blake3:" + f"{i + 1:064x}"}


def _log(nodes: list[object], **fields: object) -> bytes:
    """A build log as claw seals it (buildlogs.seal_build_log): sorted keys, no spaces, nodes between the fields."""
    doc = {"build_id": "20261205T000000-00000000", "campaign": {"id": "c"}, "counts": {"executed": len(nodes)},
           "format": 2, "started_at": "2026-12-05T00:00:00Z", "state": "complete", **fields, "nodes": nodes}
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def _judged_alike(path: Path, data: bytes) -> str | None:
    path.write_bytes(data)
    streamed = build_log_problem(path)
    assert streamed == _whole_log_problem(path.name, data), data[:200]
    return streamed


def _variants() -> list[bytes]:
    good = _log([_node(i) for i in range(60)])
    at = good.index(b'"nodes":[') + 400
    return [
        good,
        _log([]),
        _log([_node(0)]),
        good[:at],  # truncated in a node
        good[:-1],  # its last brace lost
        good[:at] + b"\xff" + good[at + 1:],  # not UTF-8 inside a node
        good[:at] + b"\xc3" + good[at + 1:],  # a UTF-8 sequence cut short
        good[:good.index(b'"kind":"run"', at)] + b'"kind":tru' + good[good.index(b'"kind":"run"', at) + 12:],
        good.replace(b"},{", b"},,{", 1),  # an empty value between two nodes
        good.replace(b"},{", b"}{", 1),  # a comma lost between two nodes
        good.replace(b"]}", b"]]}", 1),
        _log([_node(i, case="x},{y") for i in range(60)]),  # the separator inside strings
        _log([{"a": [{"b": 1}, {"c": 2}], "n": i} for i in range(60)]),  # objects listed inside a node
        _log([[1, 2], 3, "x"] * 20),  # nodes that are not objects
        _log([_node(i) for i in range(60)], campaign={"nodes": [{"x": 1}, {"y": 2}]}),  # a nested nodes list first
        _log([_node(i) for i in range(60)], build_id=None),  # no build_id
        _log([_node(i) for i in range(60)], format=9),
        good.replace(b'"nodes":[', b'"nodes":{"a":[', 1),  # nodes not a list
        good.replace(b'"campaign"', b'"a\\"', 1),  # a key that ends in an escaped quote
        good.replace(b'"counts":{', b'"counts":"\\",{', 1),
        good + b" ",
        good + b"x",
        good.replace(b'"state":"complete"', b'"nodes":[],"state":"complete"', 1),  # nodes twice
        b'{"nodes":[' + good[good.index(b'"nodes":[') + 9:],  # nodes first
        b"[" + good + b"]",
        b"",
    ]


@pytest.mark.parametrize("piece", [16, 100, 1 << 20])
def test_a_log_read_in_pieces_is_judged_as_read_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      piece: int) -> None:
    monkeypatch.setattr(fsck_logs, "LOG_PIECE", piece)
    verdicts = [_judged_alike(tmp_path / "b.json", data) for data in _variants()]
    assert verdicts[0] is None and verdicts[11] is None and verdicts[14] is None  # (what reads is still fine)
    assert verdicts[3] is not None and verdicts[5] is not None and verdicts[7] is not None


def test_random_damage_is_judged_as_read_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fsck_logs, "LOG_PIECE", 64)
    good = _log([_node(i, case='c},{"' + str(i)) if i % 7 == 0 else _node(i) for i in range(40)])
    alphabet = b'{}[],:"\\ \xff\xc3x0'
    rng = random.Random(61)
    bad = 0
    for _ in range(400):
        data = bytearray(good)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(data))
            choice = rng.random()
            if choice < 0.4:
                data[at] = rng.choice(alphabet)
            elif choice < 0.7:
                del data[at]
            elif choice < 0.85:
                data.insert(at, rng.choice(alphabet))
            else:
                del data[at:]
        bad += _judged_alike(tmp_path / "b.json", bytes(data)) is not None
    assert bad > 200  # (most of the damage is damage)


def log_peak(root: str, nodes: str) -> list[int]:
    """(tracemalloc's peak while a build log of `nodes` nodes is judged, the log's size), in a fresh interpreter."""
    path = Path(root) / f"{nodes}.json"
    path.write_bytes(_log([_node(i) for i in range(int(nodes))]))
    tracemalloc.start()
    assert build_log_problem(path) is None
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return [peak, path.stat().st_size]


def test_a_log_five_times_larger_is_judged_in_the_same_memory(tmp_path: Path) -> None:
    small, small_size = measured_in_fresh_process(log_peak, tmp_path, 10_000)
    large, large_size = measured_in_fresh_process(log_peak, tmp_path, 50_000)
    # (~13 MB: main read it whole, a peak of its size and more: da4be98f^ 4.7 and 15.1 MB here, 7.3 and 28.1 MB at
    # 20,000 and 100,000 nodes; now 1.38 MB at all four)
    assert large_size > 5 * small_size - (1 << 20)
    assert large < 8 * fsck_logs.LOG_PIECE, (small, large)
    assert large < small * 1.1 + (256 << 10), (small, large)
