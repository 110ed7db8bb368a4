"""`claw archive export` killed by SIGKILL: its temp file beside the output is found through its pointer in
the store's tmp/ and removed by `claw gc`, `claw fsck --repair` or the next export."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clawstore.host.durable import OUTSIDE_SUFFIX
from tests.support.claw import Claw
from tests.support.workspace import Workspace

RUNS = ("--suite", "main", "--run-profile", "rp")
BIG = 64 << 20  # incompressible bytes in a case: an export long enough to kill half-way


HALF_WAY = 1 << 20  # written before the kill: the bytes gc frees then read in MiB, as the first test compares


def _written(out: Path, size: int) -> bool:
    """Has the export's temp file beside `out` reached `size` bytes? (Killed as soon as it appeared, it could be
    empty: gc then freed its pointer's 132 B alone, and the freed size printed in bytes.)"""
    for temp in out.parent.glob(f".{out.name}.*.tmp"):
        try:
            if temp.stat().st_size >= size:
                return True
        except FileNotFoundError:  # renamed into place meanwhile: the export finished first
            pass
    return False


def _killed_export(ws: Workspace, out: Path) -> Path:
    """A real `claw archive export` SIGKILLed half-way through its write; the temp file it left."""
    for _attempt in range(5):
        export = subprocess.Popen([sys.executable, "-m", "clawstore.cli", "archive", "export", *RUNS, "-o", str(out)],
                                  cwd=ws.root, env=dict(os.environ), stderr=subprocess.PIPE)
        while export.poll() is None and not _written(out, HALF_WAY):
            time.sleep(0.001)
        export.send_signal(signal.SIGKILL)
        export.wait()
        temps = list(out.parent.glob(f".{out.name}.*.tmp"))
        if export.returncode == -signal.SIGKILL and temps and not out.exists():
            return temps[0]
        assert export.returncode in (0, -signal.SIGKILL), export.stderr.read() if export.stderr else ""
        out.unlink(missing_ok=True)  # it finished first: again
    pytest.fail("the export always finished before the kill")


@pytest.fixture
def killed(ws: Workspace, claw: Claw, env: dict[str, str]) -> tuple[Path, Path, Path]:
    """(the temp file a killed export left, the output it was for, the store's tmp/)."""
    assert claw.build()[0] == 0
    (ws.configs / "cases" / "alpha" / "big.bin").write_bytes(os.urandom(BIG))
    out = ws.root / "exports" / "c.clawarchive"
    out.parent.mkdir()
    temp = _killed_export(ws, out)
    tmp_dir = Path(env["CLAW_STORE"]) / "tmp"
    pointers = [p for p in tmp_dir.iterdir() if p.name.endswith(OUTSIDE_SUFFIX)]
    assert [os.readlink(p) for p in pointers] == [str(temp)]
    return temp, out, tmp_dir


def test_fsck_counts_it_and_gc_removes_it(killed: tuple[Path, Path, Path], claw: Claw) -> None:
    temp, out, tmp_dir = killed
    size = temp.stat().st_size + sum(p.lstat().st_size for p in tmp_dir.iterdir())  # and its pointer's ~130 bytes
    code, stdout, _ = claw("fsck")
    assert code == 0 and "temp files: 2 (2 stale)" in stdout, stdout  # the temp file and its pointer
    code, stdout, err = claw("gc")
    assert code == 0 and "2 stale temp files" in stdout, stdout + err
    assert not temp.exists() and list(out.parent.iterdir()) == [] and list(tmp_dir.iterdir()) == []
    assert f"({size / 2**20:.1f} MiB)" in stdout  # the bytes freed are the temp file's (and its pointer's: a size
    # a few bytes under a tenth of a MiB read one tenth lower without them)


def test_fsck_repair_removes_it(killed: tuple[Path, Path, Path], claw: Claw) -> None:
    temp, out, tmp_dir = killed
    code, stdout, err = claw("fsck", "--repair")
    assert code == 0 and "removed 2 stale temp file(s)" in stdout, stdout + err
    assert not temp.exists() and list(tmp_dir.iterdir()) == []


def test_the_next_export_removes_it_and_writes_its_own(killed: tuple[Path, Path, Path], claw: Claw,
                                                     ws: Workspace) -> None:
    temp, out, tmp_dir = killed
    elsewhere = ws.root / "c2.clawarchive"
    code, stdout, err = claw("archive", "export", *RUNS, "-o", str(elsewhere))
    assert code == 0 and elsewhere.is_file(), stdout + err
    assert not temp.exists() and list(out.parent.iterdir()) == [] and list(tmp_dir.iterdir()) == []
    assert claw("archive", "verify", str(elsewhere))[0] == 0


def test_a_pointer_to_anything_but_its_writers_temp_file_removes_only_itself(tmp_path: Path) -> None:
    """A dead writer's pointer whose target was swapped (by hand, or by someone hostile) for another file:
    that file stays."""
    from clawstore.store import Store
    from clawstore.store.core.leftovers import remove_stale_temp_files

    store = Store(tmp_path / "store")
    out = tmp_path / "out.bin"
    child = subprocess.run([sys.executable, "-c", (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from clawstore.host.durable import atomic_file\n"
        f"with atomic_file(Path({str(out)!r}), registry=Path({str(store.tmp_dir)!r})) as fh:\n"
        "    fh.write(b'half')\n"
        "    fh.flush()\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n")], capture_output=True, check=False)
    assert child.returncode == -signal.SIGKILL, child.stderr
    [pointer] = store.tmp_dir.iterdir()
    [temp] = tmp_path.glob(".out.bin.*.tmp")
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me")
    os.unlink(pointer)
    os.symlink(victim, pointer)
    assert remove_stale_temp_files(store)[0] == 1  # the pointer alone
    assert victim.read_text() == "keep me" and temp.exists() and not os.path.lexists(pointer)
