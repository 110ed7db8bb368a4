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
    assert read_build_log_streamed(path).nodes == read_build_log(path).nodes == nodes(3)


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
