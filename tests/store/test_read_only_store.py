"""A store the user can read but not write (a shared results store mounted read-only): what only reads it works (fsck
without --repair, as report, status and view did); what must write it says so in one line, exit 3, naming the store
and what it would write. Before session 73 fsck failed on its scratch file in tmp/, and the others each named a file
(`tmp/….json: Read-only file system`) without saying why a reading command wrote there."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.claw import Claw, claw, env, ws  # noqa: F401
from tests.support.tmpfs import mounted_read_only


@pytest.fixture
def read_only(claw: Claw, env: dict[str, str], tmp_path: Path) -> Iterator[Path]:  # noqa: F811
    """The campaign's store, built, seen read-only (its query manifest not yet made: stale)."""
    assert claw.build()[0] == 0
    with mounted_read_only(Path(env["CLAW_STORE"]), tmp_path / "ro") as mount:
        yield mount


def test_fsck_of_a_read_only_store_checks_it(claw: Claw, read_only: Path) -> None:  # noqa: F811
    # (the program: its packs verified beside by a helper, which spills the index's rows into a scratch file)
    done = subprocess.run([sys.executable, "-m", "clawstore.cli", "fsck", "--store", str(read_only)], cwd=claw.root,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("checked ") and "problem" not in done.stdout, done


@pytest.mark.parametrize(("args", "what"), [
    (("fsck", "--repair"), "fsck --repair"),
    (("archive", "export", "--suite", "main", "--run-profile", "rp", "-o", "OUT"),
     "archive export stores the workspace's configs in it before it writes them out"),
    (("push", "REMOTE"), "push keeps what it pushed under remotes/"),
])
def test_a_command_that_must_write_a_read_only_store_says_so(claw: Claw, read_only: Path,  # noqa: F811
                                                            tmp_path: Path, args: tuple[str, ...], what: str) -> None:
    args = tuple({"OUT": str(tmp_path / "a.claw"), "REMOTE": str(tmp_path / "remote")}.get(a, a) for a in args)
    code, out, err = claw(*args, "--store", str(read_only))
    assert (code, out) == (3, ""), (code, out, err)
    assert err.startswith(f"claw: error: store {read_only} is read-only: {what}") and err.count("\n") == 1, err
    assert not (tmp_path / "a.claw").exists() and not (tmp_path / "remote").exists()


def test_query_of_a_read_only_store_answers_from_a_temporary_manifest(claw: Claw, read_only: Path,  # noqa: F811
                                                                      tmp_path: Path, env: dict[str, str],  # noqa: F811
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Its manifest behind its builds and its place in the store not writable: `claw query` indexes into a temporary
    manifest outside the store, answers, and removes it (before session 74 it refused, exit 3). The store is left as
    it was; the answer is the writable store's."""
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    sql = ("select (select count(*) from runs) as runs, (select count(*) from builds) as builds, "
           "(select count(*) from run_history) as history")
    code, out, err = claw("query", sql, "--format", "csv", "--store", str(read_only))
    assert code == 0, (code, out, err)
    assert f"store {read_only} is read-only" in err and "temporary manifest" in err, err
    assert not (read_only / "manifest").exists() or not any((read_only / "manifest").iterdir())
    assert list(temp.iterdir()) == []  # (removed once answered)
    assert claw("query", sql, "--format", "csv", "--store", env["CLAW_STORE"])[1] == out  # (the store itself)
    runs = int(out.splitlines()[1].split(",")[0])
    assert runs > 0 and out.splitlines()[1].split(",")[1] == "1", out
