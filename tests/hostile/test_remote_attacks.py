"""A shared remote directory planted with files claw never writes there: FIFOs, devices, symlinks,
a ref the size of a disk. Whoever can write to the share can plant them; `claw push`, `claw pull`
and `claw build --remote` must refuse each with one line (exit 2), promptly, and change nothing.

Before the fix a FIFO ref hung `push` and `build --remote` forever and a ref linked to /dev/zero
ended them in a MemoryError traceback.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from clawstore.store.core.ids import PREFIX
from tests.config.workspace_builder import _claw_command
from tests.faults.test_hostile_archives import snapshot
from tests.hostile.conftest import RUNS, User
from tests.support.workspace import Workspace, standard

REF = "refs/campaigns/main__rp__none"
PROMPT = 60  # seconds: a refused command answers in a few; a hang is what this file guards against


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _dev_zero(path: Path) -> None:
    os.symlink("/dev/zero", path)


def _huge(path: Path) -> None:
    with open(path, "wb") as fh:
        fh.truncate(8 << 30)  # 8 GiB, sparse: a ref read whole would exhaust memory


def _link_out(path: Path) -> None:
    outside = path.parents[3] / "elsewhere"
    outside.write_text(PREFIX + "a" * 64 + "\n")
    os.symlink(outside, path)


ATTACKS: dict[str, Callable[[Path], None]] = {
    "FIFO": _fifo, "symlink to /dev/zero": _dev_zero, "8 GiB sparse file": _huge, "symlink out": _link_out}


def _claw(user: User, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*_claw_command(), *args], cwd=cwd, env=user.env, capture_output=True, text=True,
                          timeout=PROMPT)


def _refused(done: subprocess.CompletedProcess[str], what: str) -> None:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and len(lines) == 1, done.stderr[-2000:]
    assert what in lines[0] and ("not a regular file" in lines[0] or "too big" in lines[0]), lines[0]


def _nothing_pulled(ws: Workspace) -> None:
    """No pack, index segment, entry or ref reached the store (it may have been created, empty)."""
    store = ws.root / "store"
    held = snapshot(store) if store.exists() else {}
    assert not [name for name in held if name.split("/")[0] in ("packs", "index", "refs")], sorted(held)


def _plant(remote: Path, name: str, attack: Callable[[Path], None]) -> None:
    target = remote / name
    target.unlink()
    attack(target)


@pytest.mark.parametrize("attack", ATTACKS, ids=list(ATTACKS))
def test_a_planted_ref_is_refused_by_push(alice: User, pushed: tuple[Workspace, Path], attack: str) -> None:
    a, remote = pushed
    _plant(remote, REF, ATTACKS[attack])
    _refused(_claw(alice, "push", str(remote), cwd=a.root), REF)


@pytest.mark.parametrize("attack", ATTACKS, ids=list(ATTACKS))
def test_a_planted_ref_is_refused_by_pull_and_build_remote(alice: User, pushed: tuple[Workspace, Path],
                                                           tmp_path: Path, attack: str) -> None:
    _, remote = pushed
    _plant(remote, REF, ATTACKS[attack])
    b = standard(tmp_path / "bob")
    _refused(_claw(alice, "pull", str(remote), cwd=b.root), REF)
    _nothing_pulled(b)
    _refused(_claw(alice, "build", *RUNS, "--remote", str(remote), cwd=b.root), REF)


def test_a_planted_listing_is_refused_by_pull(alice: User, pushed: tuple[Workspace, Path], tmp_path: Path) -> None:
    _, remote = pushed
    listing = sorted((remote / "packs").glob("*.ids"))[0]
    name = f"packs/{listing.name}"
    moved = tmp_path / "share" / "moved.ids"
    shutil.move(listing, moved)
    os.symlink(moved, listing)  # the very same bytes, but through a link out of the remote
    b = standard(tmp_path / "bob")
    _refused(_claw(alice, "pull", str(remote), cwd=b.root), name)
    _nothing_pulled(b)
