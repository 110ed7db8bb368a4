"""A sealed build log read with its nodes left in its file (store/logstream.py): the same document read_build_log
gives, a node at a time, a chunk of the file at a time; a hostile or damaged log refused as read_build_log refuses
it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clawstore.errors import StoreError
from clawstore.store import logstream
from clawstore.store.buildlogs import read_build_log
from clawstore.store.logstream import StreamedNodes, read_build_log_streamed

HEAD = {"build_id": "20261206T100207-935d3a45", "campaign": {"id": "s__r__e", "suite_id": "s"},
        "counts": {"executed": 3, "failed": 1, "reused": 0, "skipped": 0}, "filter": None,
        "finished_at": "2026-12-06T10:06:31.687903Z", "format": 2, "head": "blake3:" + "a" * 64,
        "head_written": True, "metrics": {"cost_usd": 16.449999999974338, "input_tokens": 12250000}}
TAIL = {"started_at": "2026-12-06T10:02:07.527957Z", "state": "complete"}


def nodes(count: int) -> list[dict[str, Any]]:
    return [{"action": "fail" if n % 7 == 3 else "exec", "kind": "run", "key": f"blake3:{n:064x}",
             "address": {"case_id": f"case é \"{n}\" \\u \U0001f600", "model_id": "m", "repetition": n * 10**15},
             "record": None if n % 7 == 3 else f"blake3:{n + 1:064x}", "score": n / 3 if n % 2 else -n}
            for n in range(count)]


def write(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("utf-8"))
    return path


def sealed(tmp_path: Path, listed: list[Any], indent: int | None = None, ascii_only: bool = True) -> Path:
    doc = {**HEAD, "nodes": listed, **TAIL}
    return write(tmp_path / "log.json", json.dumps(doc, sort_keys=True, indent=indent, ensure_ascii=ascii_only,
                                                   separators=None if indent else (",", ":")))


@pytest.fixture(params=[7, 64, logstream.CHUNK], ids=["chunk7", "chunk64", "chunk1MiB"])
def chunk(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(logstream, "CHUNK", request.param)  # (7: every value, number and escape cut somewhere)
    return int(request.param)


@pytest.mark.parametrize("shape", ["compact", "indented", "utf-8"])
@pytest.mark.parametrize("count", [0, 1, 50])
def test_a_streamed_log_is_the_document_read_whole(tmp_path: Path, chunk: int, shape: str, count: int) -> None:
    path = sealed(tmp_path, nodes(count), indent=2 if shape == "indented" else None, ascii_only=shape != "utf-8")
    whole, streamed = read_build_log(path), read_build_log_streamed(path)
    assert isinstance(streamed.nodes, StreamedNodes) and len(streamed.nodes) == count
    assert bool(streamed.nodes) is (count > 0)
    assert list(streamed.nodes) == whole.nodes == nodes(count)
    assert list(streamed.nodes) == whole.nodes  # (as often as it is iterated)
    assert {**streamed.to_json(), "nodes": None} == {**whole.to_json(), "nodes": None}


def test_the_log_claw_writes_is_streamed_as_sealed(tmp_path: Path) -> None:
    from clawstore.store import Store
    from clawstore.store.buildlogs import build_log_path
    from tests.query.campaigns import Spec, build

    store = Store(tmp_path / "store")
    built = build(store, Spec(fail={("openai/gpt-a", "case_2")}), refresh=False)
    path = build_log_path(store.root, built.build_id)
    whole, streamed = read_build_log(path), read_build_log_streamed(path)
    assert len(whole.nodes) == 26 and list(streamed.nodes) == whole.nodes
    assert {**streamed.to_json(), "nodes": None} == {**whole.to_json(), "nodes": None}


HOSTILE = {
    "cut short": lambda text: text[:len(text) // 2],
    "cut in the last field": lambda text: text[:-3],
    "extra data after it": lambda text: text + ' {"build_id": "x"}',
    "a comma missing between nodes": lambda text: text.replace('},{"action"', '}{"action"', 1),
    "a bracket for a brace": lambda text: text[:-1] + "]",
    "not an object": lambda text: "[" + text + "]",
    "a name that is not text": lambda text: '{1:' + text[1:],
    "empty": lambda text: "",
}


@pytest.mark.parametrize("damage", sorted(HOSTILE))
def test_a_damaged_log_is_refused_naming_the_file(tmp_path: Path, chunk: int, damage: str) -> None:
    text = sealed(tmp_path, nodes(5)).read_text()
    path = write(tmp_path / "damaged.json", HOSTILE[damage](text))
    with pytest.raises(StoreError, match="damaged.json"):
        read_build_log(path)  # (what the whole read says, for each)
    with pytest.raises(StoreError, match="damaged.json: unreadable build log"):
        list(read_build_log_streamed(path).nodes)


def test_a_log_not_in_utf_8_is_refused(tmp_path: Path) -> None:
    text = sealed(tmp_path, nodes(2)).read_bytes().replace(b"case", b"ca\xffe", 1)
    path = tmp_path / "latin.json"
    path.write_bytes(text)
    with pytest.raises(StoreError, match="latin.json: unreadable build log"):
        read_build_log_streamed(path)


@pytest.mark.parametrize("listed", [{"a": 1}, "nodes", None])
def test_nodes_that_are_not_a_list_are_named_as_the_whole_read_names_them(tmp_path: Path, listed: Any) -> None:
    path = sealed(tmp_path, listed)
    with pytest.raises(StoreError, match="not a build log") as whole:
        read_build_log(path)
    with pytest.raises(StoreError, match="not a build log") as streamed:
        read_build_log_streamed(path)
    assert str(streamed.value) == str(whole.value)


def test_a_log_without_nodes_is_refused_as_the_whole_read_refuses_it(tmp_path: Path) -> None:
    path = write(tmp_path / "log.json", json.dumps({**HEAD, **TAIL}))
    with pytest.raises(StoreError, match="not a build log"):
        read_build_log_streamed(path)


def test_a_log_naming_its_nodes_twice_is_read_as_json_reads_it(tmp_path: Path) -> None:
    text = sealed(tmp_path, nodes(2)).read_text()
    path = write(tmp_path / "twice.json", text[:-1] + ',"nodes":[{"kind":"run","key":"blake3:last"}]}')
    streamed = read_build_log_streamed(path)
    assert streamed.nodes == read_build_log(path).nodes == [{"kind": "run", "key": "blake3:last"}]


def test_a_running_builds_log_is_read_with_its_journals_nodes(tmp_path: Path) -> None:
    path = write(tmp_path / "b.json", json.dumps({**HEAD, "format": 3, "nodes": [], **TAIL}))
    (tmp_path / "b.jsonl").write_text("".join(json.dumps(node) + "\n" for node in nodes(3)))
    assert list(read_build_log_streamed(path).nodes) == read_build_log(path).nodes == nodes(3)


def _killed(tmp_path: Path, count: int) -> Path:
    """A killed build's log (format 3) and its journal: `count` nodes, fix lines among them, and what read_journal
    passes over (a fix of a node that is not an object, of one not there yet, not an index) or keeps (a node that is
    not an object), and a torn last line."""
    path = write(tmp_path / "k.json", json.dumps({**HEAD, "format": 3, "nodes": [], **TAIL, "state": "running"}))
    lines = []
    for n, node in enumerate(nodes(count)):
        lines.append(json.dumps(node))
        if n % 5 == 4:
            lines.append(json.dumps({"fix": n - 2}))
    lines += ['["not", "an object"]', json.dumps({"fix": count}), json.dumps({"fix": count + 5}),
              json.dumps({"fix": "1"}), json.dumps({"fix": 0})]
    (tmp_path / "k.jsonl").write_text("\n".join(lines) + '\n{"kind":"run","torn')
    return path


def test_a_killed_builds_log_is_streamed_from_its_journal_as_read_whole(tmp_path: Path) -> None:
    path = _killed(tmp_path, 12)
    whole, streamed = read_build_log(path), read_build_log_streamed(path)
    assert isinstance(streamed.nodes, logstream.JournalNodes) and len(streamed.nodes) == 13
    assert list(streamed.nodes) == whole.nodes and list(streamed.nodes) == whole.nodes  # (as often as iterated)
    assert whole.nodes[0]["action"] == "fail" and whole.nodes[0]["record"] is None and whole.nodes[2]["record"] is None
    assert {**streamed.to_json(), "nodes": None} == {**whole.to_json(), "nodes": None}
    with open(tmp_path / "k.jsonl", "a") as fh:
        fh.write('":1}\n')  # (the torn line ended: a node more)
    with pytest.raises(StoreError, match="journal changed while read"):
        list(streamed.nodes)


def test_a_killed_builds_journal_that_is_not_json_is_refused_when_its_log_is_read(tmp_path: Path) -> None:
    path = _killed(tmp_path, 3)
    with open(tmp_path / "k.jsonl", "a") as fh:
        fh.write('\n{not json\n')
    for read in (read_build_log, read_build_log_streamed):
        with pytest.raises(StoreError, match=r"k\.jsonl: line 9: not a JSON node"):
            read(path)


def test_a_killed_builds_nodes_are_not_held_while_its_log_is_read(tmp_path: Path) -> None:
    """Indexing a build for the query reads its log streamed: a killed build's nodes were read from its journal into a
    list (read_journal): +286 MB of the first query of the history after a 10,000 x 5 build was killed late."""
    import tracemalloc

    path = _killed(tmp_path, 20_000)  # (~6 MB of journal, ~20 MB as a list of dicts)
    tracemalloc.start()
    try:
        streamed = read_build_log_streamed(path)
        assert sum(1 for _ in streamed.nodes) == 20_001
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 << 20, peak


def test_a_log_changed_after_it_was_first_read_is_refused_not_half_read(tmp_path: Path) -> None:
    path = sealed(tmp_path, nodes(4))
    streamed = read_build_log_streamed(path)
    sealed(tmp_path, nodes(3))
    with pytest.raises(StoreError, match="build log changed while read .3 nodes, 4 before"):
        list(streamed.nodes)
    sealed(tmp_path, nodes(5))
    with pytest.raises(StoreError, match="changed while read"):
        list(streamed.nodes)


def test_one_long_value_is_read_in_chunks_that_double(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logstream, "CHUNK", 16)
    path = sealed(tmp_path, [{"kind": "run", "key": "k", "note": "x" * 100_000}])
    reads: list[int] = []
    real = logstream._Scanner._more

    def counting(self: Any) -> bool:
        reads.append(1)
        return real(self)

    monkeypatch.setattr(logstream._Scanner, "_more", counting)
    assert list(read_build_log_streamed(path).nodes)[0]["note"] == "x" * 100_000
    assert len(reads) < 80  # (two passes, its count and its nodes: 16-character reads, each decoding again: ~12,500)
