"""`list_refs(prefix)` reads the refs under its prefix's directory only: a build asks for `batches/` before every paid
node it runs one by one (builder/claimed.py), and reading every campaign head's ref each time cost ~3 % of a cold
build's CPU (docs/scale/building.md, session 61)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from clawstore.store import Store


def _refs(store: Store) -> dict[str, str]:
    target = store.put_json({"x": 1})
    names = [f"campaigns/c{i}" for i in range(20)] + ["batches/b1", "batches/b2", "batchesque", "pins/p",
                                                     "untrusted/u/1"]
    for name in names:
        store.set_ref(name, target)
    return dict.fromkeys(names, target)


def test_a_prefix_reads_only_the_refs_under_its_directory(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    everything = _refs(store)
    read: list[str] = []
    real = Path.read_text

    def counted(path: Path, *args: object, **kwargs: object) -> str:
        read.append(str(path))
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "read_text", counted)
    assert store.list_refs("batches/") == {n: t for n, t in everything.items() if n.startswith("batches/")}
    assert sorted(os.path.relpath(p, store.root / "refs") for p in read) == ["batches/b1", "batches/b2"]
    read.clear()
    assert store.list_refs("no-such/") == {} and read == []
    # every other prefix still answers as a filter of the whole listing
    for prefix in ("", "b", "batches", "batches/b", "campaigns/c1", "untrusted/", "untrusted/u/", "pins/p"):
        assert store.list_refs(prefix) == {n: t for n, t in sorted(everything.items()) if n.startswith(prefix)}, prefix


def test_a_prefix_does_not_leave_the_refs_directory_nor_follow_a_link(store: Store, tmp_path: Path) -> None:
    target = store.put_json({"x": 1})
    store.set_ref("campaigns/c", target)
    outside = tmp_path / "outside"
    (outside / "x").mkdir(parents=True)
    (outside / "x" / "r").write_text(target + "\n")
    (store.root / "refs" / "linked").symlink_to(outside)  # a whole listing does not follow it either
    assert "linked/x/r" not in store.list_refs()
    assert store.list_refs("linked/") == {} and store.list_refs("linked/x/") == {}
    for prefix in ("../", "campaigns/../", "/", "./campaigns/"):
        assert store.list_refs(prefix) == {n: t for n, t in store.list_refs().items() if n.startswith(prefix)}, prefix
    # a `..` segment climbing out of refs/ (to a file holding an object id, as a ref does) lists nothing there
    (store.root / "planted").write_text(target + "\n")
    for prefix in ("../", "../p", "../../", "../../outside/", "../../outside/x/", "campaigns/../../"):
        assert store.list_refs(prefix) == {}, prefix
