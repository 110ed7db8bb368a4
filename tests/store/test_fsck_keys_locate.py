"""IndexKeys.locate searches fsck_keys.LOCATE ids at a time (session 62; an edges file's ~150,000 ids were searched
whole): cut into parts, its answers (pack, offset, length; NOT_FOUND; ASKED) are those of one search, and an fsck by
keys with parts of 7 ids names what one by rows names."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawstore.store import Store
from clawstore.store.core import index as index_module
from clawstore.store.core.lean_numpy import np
from clawstore.store.services import fsck_keys
from clawstore.store.services.fsck import fsck
from tests.store.test_fsck_memory import _campaign
from tests.support.storefiles import flip_in_frame


def test_located_in_parts_as_in_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_module, "SMALL_ROWS", 64)  # (each commit's segment a table, as at scale)
    store, keys, artifacts = _campaign(tmp_path / "store", 300)
    monkeypatch.setattr(fsck_keys, "ROWS_HELD", 0)
    index = fsck_keys.IndexKeys(store.runtime.index.snapshot().entries)
    assert index.by_keys
    missing = [bytes([i]) * 32 for i in range(1, 40)]
    ids = [bytes.fromhex(oid.split(":", 1)[1]) for oid in keys + artifacts] + missing
    digests = np.array(ids[::3] + ids[1::3] + ids[2::3], dtype="S32")
    whole = [part.tolist() for part in index.locate(digests)]
    monkeypatch.setattr(fsck_keys, "LOCATE", 7)
    parts = [part.tolist() for part in index.locate(digests)]
    assert parts == whole
    assert whole[0].count(-1) == len(missing) and min(whole[0]) == -1  # (the missing ones NOT_FOUND)


def test_fsck_by_keys_in_parts_of_7_names_what_fsck_by_rows_names(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_module, "SMALL_ROWS", 64)
    store, keys, artifacts = _campaign(tmp_path / "store", 300)
    assert fsck(store).problems == []  # (edges files written: the records' facts then come from them, located)
    flip_in_frame(store, artifacts[150], -2)
    flip_in_frame(store, keys[7], -2)
    by_rows = fsck(Store(store.root, create=False)).problems
    monkeypatch.setattr(fsck_keys, "ROWS_HELD", 0)
    monkeypatch.setattr(fsck_keys, "LOCATE", 7)
    searched: list[int] = []
    search = fsck_keys.IndexKeys._locate

    def counted(self: fsck_keys.IndexKeys, digests: object) -> object:
        searched.append(len(digests))  # type: ignore[arg-type]
        return search(self, digests)

    monkeypatch.setattr(fsck_keys.IndexKeys, "_locate", counted)
    assert fsck(Store(store.root, create=False)).problems == by_rows
    assert len(by_rows) >= 2 and max(searched) == 7 and len(searched) > 100  # (an edges file's ids in parts)
