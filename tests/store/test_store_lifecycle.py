"""A Store lets go of what it opened: closed, left by a `with` block or dropped, it leaves no file open."""

from __future__ import annotations

import gc
import os
from pathlib import Path

import pytest

from clawstore.errors import StoreError
from clawstore.store import Store


def open_files() -> set[str]:
    """What this process holds open under the test's directory (other tests' files in a worker left aside)."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            found.add(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # (the listing's own descriptor, closed by now)
            pass
    return found


def use(store: Store, n: int) -> None:
    """Write a pack and an index segment, read them back, look up a ref: every handle a store opens."""
    with store.batch():
        ids = [store.put_bytes(b"object %d %d " % (n, k) * 64) for k in range(20)]
    store.set_ref("refs/heads/main", store.put_json({"n": n}))
    assert store.get_bytes(ids[-1]).startswith(b"object %d 19" % n)
    assert store.get_json(store.get_ref("refs/heads/main") or "") == {"n": n}


def held_under(root: Path) -> list[str]:
    return sorted(path for path in open_files() if path.startswith(str(root)))


def test_many_stores_opened_and_dropped_leave_no_file_open(tmp_path: Path) -> None:
    before = len(os.listdir("/proc/self/fd"))
    # 20 stores: on the code before they closed what they opened (0a2f0a7e^), each left its pack open (20 held)
    for n in range(20):
        use(Store(tmp_path / f"store-{n}"), n)  # dropped at once: never closed by hand
    gc.collect()
    assert held_under(tmp_path) == []
    assert len(os.listdir("/proc/self/fd")) <= before + 2  # (not 2 a store: 40)
    # What the dropped stores wrote is whole: each pack sealed, everything readable by a new Store.
    for n in (0, 19):
        with Store(tmp_path / f"store-{n}", create=False) as store:
            assert store.get_json(store.get_ref("refs/heads/main") or "") == {"n": n}
    assert held_under(tmp_path) == []


def test_close_and_with_block_let_go_of_the_files(tmp_path: Path) -> None:
    with Store(tmp_path / "a") as store:
        use(store, 1)
        assert held_under(tmp_path / "a")  # the pack being written, its read handle
    assert held_under(tmp_path) == []
    store = Store(tmp_path / "b")
    use(store, 2)
    oid = store.get_ref("refs/heads/main") or ""
    store.close()
    store.close()  # (again: nothing)
    assert held_under(tmp_path) == []
    with pytest.raises(StoreError, match="is closed"):
        store.get_bytes(oid)
    with pytest.raises(StoreError, match="is closed"):
        store.put_bytes(b"more")


def test_the_last_store_of_a_directory_closes_it(tmp_path: Path) -> None:
    first, second = Store(tmp_path / "s"), Store(tmp_path / "s")
    use(first, 1)
    first.close()
    use(second, 2)  # still open: the two shared one pack writer and index view, the second keeps them
    assert held_under(tmp_path)
    del second
    gc.collect()
    assert held_under(tmp_path) == []
    with Store(tmp_path / "s") as again:
        assert again.get_json(again.get_ref("refs/heads/main") or "") == {"n": 2}


def test_a_reader_outlives_the_store_that_opened_it(tmp_path: Path) -> None:
    """A stream from a Store dropped at once keeps reading its own pack, not whatever file took its
    descriptor's number when the store let go of its handles (a shared fd would be closed under it)."""
    content = os.urandom(3 << 20)  # big enough to stream from its own pack
    with Store(tmp_path / "s") as store:
        oid = store.put_bytes(content)
    reader = Store(tmp_path / "s", create=False).open_object(oid)  # the store is dropped here
    gc.collect()
    decoys = [os.open(tmp_path / f"decoy-{k}", os.O_RDWR | os.O_CREAT) for k in range(8)]
    try:
        for fd in decoys:
            os.write(fd, b"not the object" * 1000)
        assert reader.read() == content
    finally:
        reader.close()
        for fd in decoys:
            os.close(fd)
    assert held_under(tmp_path / "s") == []
