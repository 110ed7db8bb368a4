"""A later fsck takes a pack an earlier one verified (its edges file says so, its bytes hash the same) by its table's
rows, without a blob made a row (services/fsck.py `_verified_table`): the index's entries of that pack are still
matched against it, and anything else about the pack is judged the long way as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawstore.store import Store, edges
from clawstore.store.core.edgefile import says_verified
from clawstore.store.core.ids import PREFIX
from clawstore.store.core.index import Segment
from clawstore.store.core.packfile import NotAPackError
from clawstore.store.services import fsck as fsck_module
from clawstore.store.services.fsck import fsck
from tests.support.storefiles import blob_span, rewrite_index


def _store(root: Path) -> tuple[Store, list[str]]:
    store = Store(root)
    oids = []
    for number in range(2):
        with store.batch():
            oids += [store.put_bytes(f"blob {number} {i} ".encode() * 40) for i in range(10)]
        store.runtime.close_writer()
    assert fsck(store).problems == []  # (verified: its files written)
    return store, oids


def _tables(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each pack fsck took up was taken by its verified table."""
    taken: list[bool] = []
    verified_table = fsck_module._verified_table

    def noted(*args: object) -> tuple[bytes | None, bytes | None]:
        found = verified_table(*args)  # type: ignore[arg-type]
        taken.append(found[0] is not None)
        return found

    monkeypatch.setattr(fsck_module, "_verified_table", noted)
    return taken


@pytest.mark.parametrize("wrong", ["offset", "length", "id"])
def test_an_index_entry_a_verified_pack_does_not_hold_is_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wrong: str) -> None:
    store, oids = _store(tmp_path / "store")
    victim, other = oids[3], oids[4]
    path, offset, length = blob_span(store, victim)
    digest = bytes.fromhex(victim[len(PREFIX):])

    def moved(segment: Segment) -> None:
        pack = path.name[:-len(".pack")]
        if wrong == "id":  # (another object's id at this one's place; the other's own entry gone)
            del segment.objects[digest]
            segment.objects[bytes.fromhex(other[len(PREFIX):])] = (pack, offset, length)
        else:
            segment.objects[digest] = (pack, offset + (8 if wrong == "offset" else 0),
                                       length + (1 if wrong == "length" else 0))

    rewrite_index(store, moved)
    taken = _tables(monkeypatch)
    report = fsck(Store(tmp_path / "store"))
    assert taken == [True, True]  # (both packs unchanged: taken by their tables)
    assert len(report.bad_index) == 1 and "where the pack does not hold it intact" in report.bad_index[0]
    assert (other if wrong == "id" else victim) in report.bad_index[0]


def test_a_pack_whose_table_does_not_read_is_judged_as_before(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A table `scan_pack` refuses is refused here too: the pack is then read the long way, which names it."""
    store, _ = _store(tmp_path / "store")
    taken = _tables(monkeypatch)
    monkeypatch.setattr(fsck_module, "scanned_table", _refused)
    report = fsck(Store(tmp_path / "store"))
    assert taken == [False, False] and report.problems == []  # (the long way: the packs' tables read and fine)


def _refused(path: Path) -> bytes:
    raise NotAPackError(f"{path}: trailer names a blob outside the pack")


def test_a_writers_file_is_not_read_whole_to_be_dropped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A first fsck finds each pack's writer's file, which no fsck verified: its head says so, and it is dropped
    unread (it was hashed and decoded whole first, ~20 ms a pack at 10,000 x 5); the pack is verified and its file
    written anew, which a later fsck takes up."""
    store = Store(tmp_path / "store")
    for number in range(2):
        with store.batch():
            [store.put_json({"n": number, "i": i}) for i in range(10)]
        store.runtime.close_writer()
    files = sorted((tmp_path / "store" / edges.DIR).iterdir())
    assert len(files) == 2 and not any(says_verified(path.read_bytes()) for path in files)  # (the writer's)
    decoded: list[bool] = []
    decode = edges.decode

    def noted(pack: str, data: bytes, *args: object) -> object:
        decoded.append(says_verified(data))
        return decode(pack, data, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(edges, "decode", noted)
    assert fsck(Store(tmp_path / "store")).problems == []
    assert False not in decoded  # (the base decoded both writer's files whole)
    assert all(says_verified(path.read_bytes()) for path in files)
    taken = _tables(monkeypatch)
    assert fsck(Store(tmp_path / "store")).problems == [] and taken == [True, True]
