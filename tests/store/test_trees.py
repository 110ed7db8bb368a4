"""Trees: snapshot and checkout round trip, dedup across trees, refusal of escaping entries."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from clawstore.errors import UsageError
from clawstore.host.scratch import remove_tree
from clawstore.store import NotATreeError, Store, TreeEntry, UnsafeTreeError
from tests.support.nesting import nest


def _make_sample(root: Path) -> None:
    (root / "nested" / "deeper" / "deepest").mkdir(parents=True)
    (root / "empty_dir").mkdir()
    (root / "nested" / "also_empty").mkdir()
    (root / "empty.txt").write_bytes(b"")
    (root / "nested" / "deeper" / "data.json").write_text('{"k": [1, 2, 3]}\n')
    (root / "nested" / "deeper" / "deepest" / "blob.bin").write_bytes(os.urandom(3000))
    (root / "héllo wörld ✓.txt").write_text("unicode name\n", encoding="utf-8")
    (root / "日本語").mkdir()
    (root / "日本語" / "ファイル.md").write_text("# title\n", encoding="utf-8")
    script = root / "run.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o755)
    (root / "link_to_data").symlink_to("nested/deeper/data.json")
    (root / "nested" / "up_link").symlink_to("../empty.txt")


def _describe(root: Path) -> dict[str, tuple]:
    """Everything a round trip must preserve, per relative path."""
    found: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                found[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(info.st_mode):
                found[rel] = ("dir",)
            else:
                found[rel] = ("file", path.read_bytes(), bool(info.st_mode & stat.S_IXUSR))
    return found


def test_round_trip_preserves_everything(store: Store, tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    _make_sample(source)
    tree = store.put_tree(source)
    dest = tmp_path / "out"
    store.checkout(tree, dest)
    assert _describe(dest) == _describe(source)
    assert store.put_tree(dest) == tree  # same content, same id


def test_tree_listing_is_sorted_and_canonical(store: Store, tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    _make_sample(source)
    entries = store.read_tree(store.put_tree(source))
    paths = [e.path for e in entries]
    assert paths == sorted(paths)
    by_path = {e.path: e for e in entries}
    assert by_path["run.sh"].mode == 0o100755
    assert by_path["empty.txt"] == TreeEntry("empty.txt", "file", 0o100644, 0, by_path["empty.txt"].object)
    assert by_path["empty_dir"].type == "dir"
    assert by_path["link_to_data"].target == "nested/deeper/data.json"
    assert by_path["link_to_data"].object is None


def test_modes_are_normalised(store: Store, tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    for root, file_mode, dir_mode in ((first, 0o600, 0o700), (second, 0o664, 0o775)):
        (root / "d").mkdir(parents=True)
        (root / "d" / "f").write_text("x")
        (root / "d" / "f").chmod(file_mode)
        (root / "d").chmod(dir_mode)
    assert store.put_tree(first) == store.put_tree(second)


def test_identical_files_are_stored_once(store: Store, tmp_path: Path) -> None:
    shared = os.urandom(5000)
    for name in ("one", "two"):
        root = tmp_path / name
        (root / "sub").mkdir(parents=True)
        (root / "sub" / "same.bin").write_bytes(shared)
        (root / "copy.bin").write_bytes(shared)
        (root / "own.txt").write_text(name)
    before = set(store.iter_objects())
    store.put_tree(tmp_path / "one")
    store.put_tree(tmp_path / "two")
    added = set(store.iter_objects()) - before
    assert len(added) == 5  # shared content once, two own.txt, two tree objects


def test_symlink_to_outside_is_recorded_not_followed(store: Store, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("outside the snapshot")
    root = tmp_path / "src"
    root.mkdir()
    (root / "escape").symlink_to(secret)
    (root / "escape_dir").symlink_to(tmp_path)
    tree = store.put_tree(root)
    entries = store.read_tree(tree)
    assert [(e.path, e.type) for e in entries] == [("escape", "symlink"), ("escape_dir", "symlink")]
    assert all(store.get_bytes(o) != secret.read_bytes() for o in store.iter_objects())
    with pytest.raises(UnsafeTreeError, match="points outside"):
        store.checkout(tree, tmp_path / "out")
    store.checkout(tree, tmp_path / "out2", allow_external_links=True)
    assert os.readlink(tmp_path / "out2" / "escape") == str(secret)


def _crafted_tree(store: Store, *entries: dict) -> str:
    return store.put_json({"tree_version": 1, "entries": list(entries)})


@pytest.mark.parametrize(
    "bad_path", ["../evil.txt", "/tmp/evil.txt", "a/../../evil.txt", "a/./b", "a//b", "", ".."]
)
def test_checkout_refuses_escaping_paths(store: Store, tmp_path: Path, bad_path: str) -> None:
    content = store.put_bytes(b"evil")
    tree = _crafted_tree(store, {"path": bad_path, "type": "file", "mode": 0o100644, "size": 4, "object": content})
    dest = tmp_path / "out" / "inner"
    with pytest.raises(UnsafeTreeError, match="refusing"):
        store.checkout(tree, dest)
    assert not (tmp_path / "out" / "evil.txt").exists() and not (tmp_path / "evil.txt").exists()
    assert not dest.exists()  # nothing was written before the refusal


def test_checkout_refuses_writing_through_a_symlink(store: Store, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    content = store.put_bytes(b"evil")
    tree = _crafted_tree(
        store,
        {"path": "d/f", "type": "file", "mode": 0o100644, "size": 4, "object": content},
        {"path": "d", "type": "symlink", "mode": 0o120000, "size": len(str(outside)), "target": str(outside)},
    )
    with pytest.raises(UnsafeTreeError, match="parent is a symlink"):
        store.checkout(tree, tmp_path / "out", allow_external_links=True)
    assert list(outside.iterdir()) == []


def test_checkout_needs_an_empty_directory(store: Store, tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "f").write_text("x")
    tree = store.put_tree(tmp_path / "src")
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "existing").write_text("keep me")
    with pytest.raises(UsageError, match="not an empty directory"):
        store.checkout(tree, busy)
    assert (busy / "existing").read_text() == "keep me"
    (tmp_path / "empty").mkdir()
    store.checkout(tree, tmp_path / "empty")
    assert (tmp_path / "empty" / "f").read_text() == "x"


def test_empty_tree_round_trip(store: Store, tmp_path: Path) -> None:
    (tmp_path / "nothing").mkdir()
    tree = store.put_tree(tmp_path / "nothing")
    assert store.read_tree(tree) == []
    store.checkout(tree, tmp_path / "out")
    assert list((tmp_path / "out").iterdir()) == []


def test_non_tree_objects_are_rejected(store: Store) -> None:
    with pytest.raises(NotATreeError):
        store.read_tree(store.put_bytes(b"plain text"))
    with pytest.raises(NotATreeError):
        store.read_tree(store.put_json({"entries": [{"path": "x"}], "tree_version": 1}))


def test_the_empty_tree_is_the_tree_of_an_empty_directory(tmp_path: Path) -> None:
    from clawstore.store.trees import empty_tree

    store = Store(tmp_path / "store")
    (tmp_path / "empty").mkdir()
    assert empty_tree(store) == store.put_tree(tmp_path / "empty")


def test_a_tree_nested_deeper_than_the_interpreter_recurses_is_stored(store: Store, tmp_path: Path) -> None:
    # A model's shell made such a sandbox in a loop; the recursive walk failed the paid run with
    # RecursionError.
    (tmp_path / "deep").mkdir()
    deep = nest(tmp_path / "deep", 1500)
    try:
        entries = store.read_tree(store.put_tree(deep))
        assert len(entries) == 1501 and entries[-1].path == "/".join(["d"] * 1500) + "/bottom.txt"
        assert store.get_bytes(entries[-1].object) == b"deep"
    finally:
        remove_tree(deep)  # (pytest's own clean-up of old temporary directories would recurse too)
    assert not deep.exists()


def test_a_name_that_is_not_utf8_is_refused_or_escaped_for_what_a_run_wrote(store: Store, tmp_path: Path) -> None:
    root = tmp_path / "sandbox"
    (root / "dir").mkdir(parents=True)
    (root / "dir" / os.fsdecode(b"caf\xe9.txt")).write_text("latin-1 name\n")
    os.symlink(os.fsdecode(b"target-\xff"), root / "link")
    with pytest.raises(UsageError, match="not valid UTF-8"):
        store.put_tree(root)  # (a config tree, `claw put`: the user renames it)
    entries = {e.path: e for e in store.read_tree(store.put_tree(root, escape_names=True))}
    assert set(entries) == {"dir", "dir/caf\\xe9.txt", "link"}
    assert store.get_bytes(str(entries["dir/caf\\xe9.txt"].object)) == b"latin-1 name\n"
    assert entries["link"].target == "target-\\xff"
    (root / "dir" / "caf\\xe9.txt").write_text("the escaped name, literally\n")
    with pytest.raises(UsageError, match="not valid UTF-8"):  # (two names would be one path)
        store.put_tree(root, escape_names=True)
    (root / "dir" / "caf\\xe9.txt").unlink()
    (root / "dir" / os.fsdecode(b"a\\xe9\xff")).write_text("one\n")  # both escape to a\xe9\xff
    (root / "dir" / os.fsdecode(b"a\xe9\\xff")).write_text("two\n")
    with pytest.raises(UsageError, match="not valid UTF-8"):
        store.put_tree(root, escape_names=True)
