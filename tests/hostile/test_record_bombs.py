"""Action-cache entries pointing at decompression bombs: a pull or an archive import must refuse them
in bounded memory.

Before checking an entry, claw decodes its record, and it used to keep every decoded record for the
checks that follow. A remote or archive whose entries point at "records" of a mebibyte each, a few
hundred bytes compressed, made claw hold all of them at once. Three hundred such records, under a
megabyte on the wire, made a `claw pull --untrusted` grow by 300 MiB before it refused them (three
thousand would have needed 3 GiB).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from clawstore.store import Store
from clawstore.store.actions import set_entries
from clawstore.store.core.ids import PREFIX
from tests.faults.forge import Forgery
from tests.hostile.conftest import RUNS, User
from tests.support.claw import Claw, claw, env, ws  # noqa: F401 (fixtures)
from tests.support.workspace import Workspace, standard

BOMBS = 300
BOMB_SIZE = 1 << 20  # each decodes to 1 MiB; all of them held at once: 300 MiB
GROWTH_MAX = 160 << 20

_PROBE = r"""
import re, sys
from clawstore.cli import main
def status(key):  # this process's own memory (ru_maxrss would include the parent's, across exec)
    return int(re.search(key + r":\s+(\d+) kB", open("/proc/self/status").read()).group(1)) * 1024
base = status("VmRSS")
with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")  # reset the peak (VmHWM) to the current size
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print(f"probe {code} {status('VmHWM') - base}")
"""


def _bomb(i: int) -> bytes:
    return f"{i:08d}".encode() * (BOMB_SIZE // 8)


def _probe(environ: dict[str, str], cwd: Path, *args: str) -> tuple[int, int, str]:
    """Run a claw command in a process that reports its own peak memory growth: (exit code, bytes, stderr)."""
    done = subprocess.run([sys.executable, "-c", _PROBE, *args], cwd=cwd, env=environ, capture_output=True, text=True,
                          timeout=300)
    line = [row for row in done.stdout.splitlines() if row.startswith("probe ")][-1]
    _, code, growth = line.split()
    return int(code), int(growth), done.stderr


def _refused_in_bounded_memory(result: tuple[int, int, str], what: str) -> None:
    code, growth, err = result
    assert code == 2 and "Traceback" not in err and err.count("\n") == 1, err[-2000:]
    assert what in err, err
    assert growth < GROWTH_MAX, f"peak RSS grew by {growth >> 20} MiB"


def test_a_pull_of_entries_pointing_at_bombs_is_refused_in_bounded_memory(
        alice: User, bob: User, tmp_path: Path) -> None:
    # Bob's store: entries whose "records" are bombs, pushed (signed by Bob) to a share Alice pulls from.
    b = standard(tmp_path / "bob")
    bob.ok("build", *RUNS, cwd=b.root)
    store = Store(b.root / "store", create=False)
    with store.batch():
        entries = {}
        for i in range(BOMBS):
            key = store.put_json({"input": i})
            record = store.put_bytes(_bomb(i))
            entries[bytes.fromhex(key[len(PREFIX):])] = (bytes.fromhex(record[len(PREFIX):]), 1)
        set_entries(store, entries)
    remote = tmp_path / "share" / "remote"
    bob.ok("push", str(remote), cwd=b.root)
    assert sum(f.stat().st_size for f in (remote / "packs").glob("*.pack")) < 4 * BOMBS * 1024

    a = standard(tmp_path / "alice")
    environ = {**alice.env, "PYTHONPATH": os.pathsep.join(sys.path)}
    _refused_in_bounded_memory(_probe(environ, a.root, "pull", "--untrusted", str(remote)),
                               "its record is not a record")


def test_an_archive_of_entries_pointing_at_bombs_is_refused_in_bounded_memory(
        ws: Workspace, claw: Claw, tmp_path: Path) -> None:  # noqa: F811 (fixtures)
    code, _, err = claw("build", *RUNS)
    assert code == 0, err
    exported = tmp_path / "good.claw"
    code, _, err = claw("archive", "export", *RUNS, "-o", str(exported))
    assert code == 0, err
    forgery = Forgery.read(exported)
    for i in range(BOMBS):
        forgery.manifest["actions"][forgery.add({"input": i})] = forgery.add(_bomb(i))
    forgery.resign()
    forged = forgery.write(tmp_path / "bombs.claw")
    assert forged.stat().st_size < 4 * BOMBS * 1024

    probe_env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}  # (this test's user: its key signed)
    _refused_in_bounded_memory(_probe(probe_env, ws.root, "archive", "import", str(forged), "--store",
                                      str(tmp_path / "target")), "its record is not a record")
