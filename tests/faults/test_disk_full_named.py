"""A full disk names the file it refused, in every command (`claw: error: FILE: No space left on device`, exit 3):
`build`, `pull`, `archive import`, `remote add` and `key show` said only `claw: error: No space left on device` (the
store's disk? the workspace's? the config's?) until session 73, where the store commands named it since session 72."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from clawstore.store import Store
from tests.support.claw import Claw, claw, env, ws  # noqa: F401
from tests.support.tmpfs import mounted_tmpfs
from tests.support.workspace import Workspace


def _fill(mount: Path) -> None:
    try:
        with open(mount / "filler", "wb") as fh:
            while True:
                fh.write(b"\0" * 4096)
                fh.flush()
    except OSError:
        pass  # (full)


@pytest.fixture
def full(tmp_path: Path) -> Iterator[Path]:
    with mounted_tmpfs(tmp_path / "mnt", "4m") as mount:
        yield mount


def _said(err: str, where: Path) -> bool:
    """One line, naming a file under `where`."""
    return re.fullmatch(rf"claw: error: {re.escape(str(where))}/\S+: No space left on device\n", err) is not None


def test_each_command_names_the_file_the_full_disk_refused(claw: Claw, ws: Workspace,  # noqa: F811
                                                          full: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    assert claw.build()[0] == 0
    assert claw("push", str(tmp_path / "remote"))[0] == 0
    assert claw("archive", "export", "--suite", "main", "--run-profile", "rp", "-o", str(tmp_path / "a.claw"))[0] == 0
    shutil.copytree(ws.root, full / "ws")
    for name in ("built", "pulled", "imported"):
        Store(full / name)
    _fill(full)
    cases = [
        (full / "built", ("build", "--suite", "main", "--run-profile", "rp", "--store", str(full / "built"))),
        (full / "pulled", ("pull", str(tmp_path / "remote"), "--store", str(full / "pulled"))),
        (full / "imported", ("archive", "import", str(tmp_path / "a.claw"), "--store", str(full / "imported"))),
    ]
    for where, args in cases:
        code, _, err = claw(*args)
        assert code == 3 and _said(err, where), (args, code, err)
    monkeypatch.chdir(full / "ws")
    code, _, err = claw("remote", "add", "origin", str(tmp_path / "remote"))
    assert (code, err) == (3, f"claw: error: {full / 'ws' / 'claw.yaml'}: No space left on device\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(full / "config"))
    code, out, err = claw("key", "show")
    assert (code, out) == (3, "") and err == f"claw: error: {full / 'config' / 'claw' / 'signing_key'}: " \
                                             "No space left on device\n", err
