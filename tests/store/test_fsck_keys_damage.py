"""fsck by the index's keys (fsck_keys.ROWS_HELD = 0) reports what fsck by its rows reports on a store damaged many
ways, crafted index tables among them (their checksums made to hold): rows out of order, a row twice, an id sharing
another's first 8 bytes in its place, a row pointing past its pack, a slot the table lacks, a second table naming an
id elsewhere; and an object's bytes flipped. Each mode on its own copy (a process shares a store's runtime)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import blake3
import pytest

from clawstore.errors import StoreError
from clawstore.store import Store
from clawstore.store.actions import key_digest, set_entries
from clawstore.store.core import index
from clawstore.store.core.ids import PREFIX
from clawstore.store.core.index import Segment, new_segment_name, write_segment
from clawstore.store.services import fsck_keys
from clawstore.store.services.fsck import fsck
from tests.store.test_fsck_memory import _campaign
from tests.support.storefiles import flip_in_frame

_SIZE = 52  # an index table's object row: digest, slot, offset, length


def _edit_table(root: Path, store: Store, edit: Callable[[bytearray, int, list[bytes]], None]) -> None:
    """Edit the object rows of the store's biggest table in place (`edit(data, first row's byte, row ids)`), its
    checksum made again: a writer's bug or a hand, not a disk."""
    table = max(store.runtime.index.snapshot().entries.tables, key=lambda table: table._head.n_objects)
    path = root / "index" / f"{table.name}.idx"
    data = bytearray(path.read_bytes())
    edit(data, table._head.objects_at, [bytes(digest) for digest, _ in table.iter_objects()])
    data[-32:] = blake3.blake3(bytes(data[:-32])).digest()
    path.chmod(0o644)
    path.write_bytes(bytes(data))


def _swapped(data: bytearray, at: int, ids: list[bytes]) -> None:
    row = at + 100 * _SIZE
    data[row:row + 2 * _SIZE] = data[row + _SIZE:row + 2 * _SIZE] + data[row:row + _SIZE]


def _twice(data: bytearray, at: int, ids: list[bytes]) -> None:
    row = at + 100 * _SIZE
    data[row + _SIZE:row + 2 * _SIZE] = data[row:row + _SIZE]


def _key_shared_between(data: bytearray, at: int, ids: list[bytes]) -> None:
    """Row 101 names an id sharing row 100's first 8 bytes, and row 102 is row 100 again (ids out of order)."""
    row = at + 100 * _SIZE
    twice = bytes(data[row:row + _SIZE])
    between = bytearray(twice)
    between[8:32] = bytes(b ^ 0xFF for b in twice[8:32])
    data[row + _SIZE:row + 3 * _SIZE] = bytes(between) + twice


def _key_shared_in_order(data: bytearray, at: int, ids: list[bytes]) -> None:
    """Row 101 names an id sharing row 100's first 8 bytes, in order by whole id (its object then unnamed)."""
    row = at + 100 * _SIZE
    between = bytearray(data[row:row + _SIZE])
    between[8:32] = b"\xff" * 24
    data[row + _SIZE:row + _SIZE + 32] = between[:32]


def _past_the_pack(data: bytearray, at: int, ids: list[bytes]) -> None:
    for n in (5, 150, 300):
        row = at + n * _SIZE
        data[row + 36:row + 44] = (1 << 40).to_bytes(8, "little")


def _bad_slot(data: bytearray, at: int, ids: list[bytes]) -> None:
    row = at + 120 * _SIZE
    data[row + 32:row + 36] = (999).to_bytes(4, "little")


DAMAGE = {"swapped": _swapped, "twice": _twice, "key_shared_between": _key_shared_between,
          "key_shared_in_order": _key_shared_in_order, "past_the_pack": _past_the_pack, "bad_slot": _bad_slot}


def _outcome(root: Path) -> object:
    try:
        report = fsck(Store(root, create=False))
    except StoreError as exc:
        return f"{type(exc).__name__}: {exc}"
    return report.problems


def _both(tmp_path: Path, base: Path, damage: Callable[[Path], None], monkeypatch: pytest.MonkeyPatch) -> list[object]:
    outcomes = []
    for rows_held in (fsck_keys.ROWS_HELD, 0):  # (0: by keys)
        root = tmp_path / f"held{rows_held}"
        shutil.copytree(base, root)
        damage(root)
        monkeypatch.setattr(fsck_keys, "ROWS_HELD", rows_held)
        outcomes.append(_outcome(root))
    return outcomes


@pytest.fixture
def base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Store, list[str]]:
    monkeypatch.setattr(index, "SMALL_ROWS", 64)  # (each batch's segment a table)
    store, _, artifacts = _campaign(tmp_path / "store", 300)
    store.put_json({"in": "a small segment"})
    store.runtime.close_writer()
    assert fsck(store).problems == []  # (the packs' edges files written: their ids then looked up in bulk)
    return store.root, store, artifacts


@pytest.mark.parametrize("name", sorted(DAMAGE))
def test_a_crafted_table_gets_the_same_report_by_keys_as_by_rows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, base: tuple[Path, Store, list[str]], name: str) -> None:
    root, store, _ = base
    by_rows, by_keys = _both(tmp_path, root, lambda copy: _edit_table(copy, store, DAMAGE[name]), monkeypatch)
    assert by_keys == by_rows
    assert by_rows, name  # (the damage is seen)


def test_a_flipped_object_gets_the_same_report_by_keys_as_by_rows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, base: tuple[Path, Store, list[str]]) -> None:
    root, store, artifacts = base

    def flip(copy: Path) -> None:
        flip_in_frame(Store(copy, create=False), artifacts[150], -3)

    by_rows, by_keys = _both(tmp_path, root, flip, monkeypatch)
    assert by_keys == by_rows and by_rows


def test_an_input_document_flipped_in_another_pack_gets_the_same_report_by_keys_as_by_rows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Records whose keys' input documents are in an earlier pack (its edges file verified by the first fsck), one of
    those documents flipped: the quick check by rows answers for the key's document without reading its pack's file,
    so the ids found damaged must count as not there when a file's ids are looked up in bulk by the keys."""
    monkeypatch.setattr(index, "SMALL_ROWS", 64)
    store, keys, _ = _campaign(tmp_path / "store", 200)
    entries: dict[bytes, tuple[bytes, int]] = {}
    with store.batch():  # (a pack of its own: records naming batch 0's input documents)
        for i in range(100):
            artifact = store.put_bytes(f"again {i} ".encode() * 20)
            outputs = {"artifact": artifact}
            record = store.put_json({"kind": "run", "key": keys[i], "input": keys[i], "outputs": outputs})
            entries[key_digest(keys[i])] = (bytes.fromhex(record[len(PREFIX):]), time.time_ns())
    set_entries(store, entries)
    store.runtime.close_writer()
    assert fsck(store).problems == []

    def flip(copy: Path) -> None:
        flip_in_frame(Store(copy, create=False), keys[5], -3)

    by_rows, by_keys = _both(tmp_path, store.root, flip, monkeypatch)
    assert by_keys == by_rows
    assert any("action-cache entry" in problem for problem in by_rows), by_rows


def test_a_second_table_naming_an_id_elsewhere_gets_the_same_report_by_keys_as_by_rows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, base: tuple[Path, Store, list[str]]) -> None:
    """A table written after the others naming some of their objects at another pack's offsets (and past it)."""
    root, store, artifacts = base
    named = [bytes.fromhex(oid[len(PREFIX):]) for oid in artifacts[::7]]
    locs = [store.runtime.index.snapshot().entries.find_object(digest) for digest in named]
    other = sorted({loc[0] for loc in locs if loc is not None})
    name = new_segment_name()  # (one name in both copies: the reports name it)

    def elsewhere(copy: Path) -> None:
        segment = Segment(name)
        for i, (digest, loc) in enumerate(zip(named, locs, strict=True)):
            assert loc is not None
            pack = other[(other.index(loc[0]) + 1) % len(other)]
            segment.objects[digest] = (pack, loc[1] if i % 2 else 1 << 40, loc[2])
        for i in range(80):  # (enough rows for a table)
            segment.objects[blake3.blake3(f"pad {i}".encode()).digest()] = (other[0], 1 << 40, 10)
        write_segment(copy / "index", copy / "tmp", segment)

    by_rows, by_keys = _both(tmp_path, root, elsewhere, monkeypatch)
    assert by_keys == by_rows and by_rows


def test_fsck_of_an_index_within_rows_held_does_not_import_numpy(
        tmp_path: Path, base: tuple[Path, Store, list[str]]) -> None:
    """numpy's import (~9 MB of RSS) is the keys' alone: below ROWS_HELD fsck holds the rows and imports none of it
    (the guard of the build's modules does not load fsck's look-ups)."""
    root, store, _ = base
    store.runtime.index.reload()
    assert index.object_rows_size(store.runtime.index.snapshot().entries) > 0  # (tables: not all small segments)
    code = ("import sys\n"
            "from clawstore.store import Store\n"
            "from clawstore.store.core import index\n"
            "from clawstore.store.services.fsck import fsck\n"
            "index.SMALL_ROWS = 64\n"
            f"assert fsck(Store({str(root)!r}, create=False)).problems == []\n"
            "print('numpy' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"
