"""A SIGKILLed `claw archive import` into a new store: it builds the store whole in a hidden directory beside the target
(`.NAME.importing-<pid>-<ticks>-<random>`) and renames it into place at the end. Killed before the rename, that
directory held the whole archive's objects and nothing ever removed it: no store names it, and each import killed so
left another. The next import into that place removes the ones whose process is gone (never a live import's), and
imports as if none had been killed (a real `claw` process held at the rename, then SIGKILLed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from clawstore.testing.standin import StandIn
from tests.support.claw import Claw, claw, env, ws  # noqa: F401 (fixtures)
from tests.support.workspace import Workspace

RUNS = ("--suite", "main", "--run-profile", "rp")

# `claw archive import` that stops right before it renames the store it built into place, says so, and waits.
_HELD = r"""
import os, sys
from clawstore.cli import main
from clawstore.store.services import archive_import

def held(staging, store_dir):
    os.write(1, b"at rename\n")
    sys.stdin.readline()

archive_import._take_place = held
main(sys.argv[1:])
"""


def _staged(place: Path) -> list[str]:
    return sorted(name for name in os.listdir(place) if ".importing-" in name)


def test_an_import_killed_before_its_new_store_is_in_place_leaves_nothing_once_imported_again(
        ws: Workspace, claw: Claw, standin: StandIn, tmp_path: Path) -> None:  # noqa: F811
    assert claw("build", *RUNS)[0] == 0
    archive = tmp_path / "campaign.claw"
    assert claw("archive", "export", *RUNS, "-o", str(archive))[0] == 0
    place = tmp_path / "elsewhere"
    place.mkdir()
    target = place / "store"

    for _ in range(2):
        held = subprocess.Popen([sys.executable, "-c", _HELD, "archive", "import", str(archive),
                                 "--store", str(target)], env=dict(os.environ), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert held.stdout is not None
        line = held.stdout.readline()
        held.send_signal(signal.SIGKILL)
        _, err = held.communicate(timeout=60)
        assert line == b"at rename\n", err.decode()
    assert _staged(place) and not target.exists()  # (main: two whole stores no one will ever use; now the last one)

    live = place / f".store.importing-{os.getpid()}-0-{'0' * 16}"  # (named as a live import's: this process's)
    live.mkdir()
    code, out, err = claw("archive", "import", str(archive), "--store", str(target))
    assert code == 0, out + err
    assert _staged(place) == [live.name]  # the killed imports' directories are gone, the live one's kept
    assert claw("fsck", "--store", str(target))[0] == 0
    spent = len(standin.requests)
    code, out, err = claw("build", *RUNS, "--store", str(target))
    assert code == 0 and len(standin.requests) == spent, out + err


# `claw archive import --configs-to` that stops once it has made its staging directory inside DIR, before it checks the
# configs out there, says so, and waits.
_HELD_CONFIGS = r"""
import os, sys
from clawstore.cli import main
from clawstore.store.store import Store

def held(self, *args, **kwargs):
    os.write(1, b"at checkout\n")
    sys.stdin.readline()

Store.checkout = held
main(sys.argv[1:])
"""


def test_an_import_killed_while_it_writes_the_configs_can_be_run_again(
        ws: Workspace, claw: Claw, standin: StandIn, tmp_path: Path,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Killed while it checked the configs out, an import left its scratch directory in DIR (`.claw-configs-…`), and
    the same import run again was refused: DIR "not empty (holds .claw-configs-…)", exit 2, until it was removed by
    hand. A scratch directory whose process is gone is the import's own: it is removed, and the import goes on."""
    assert claw("build", *RUNS)[0] == 0
    archive = tmp_path / "campaign.claw"
    assert claw("archive", "export", *RUNS, "-o", str(archive))[0] == 0
    monkeypatch.delenv("CLAW_STORE")
    target = tmp_path / "elsewhere"
    held = subprocess.Popen([sys.executable, "-c", _HELD_CONFIGS, "archive", "import", str(archive),
                             "--configs-to", str(target)], env=dict(os.environ), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert held.stdout is not None
    lines = []
    while (line := held.stdout.readline()) and line != b"at checkout\n":
        lines.append(line)
    held.send_signal(signal.SIGKILL)
    _, err = held.communicate(timeout=60)
    assert line == b"at checkout\n", (lines, err.decode())
    assert [name for name in os.listdir(target) if name != "store"]  # (its scratch directory)

    code, out, err = claw("archive", "import", str(archive), "--configs-to", str(target))
    assert code == 0, out + err
    assert sorted(os.listdir(target)) == ["configs", "store"]
    monkeypatch.chdir(target)
    spent = len(standin.requests)
    code, out, err = claw("build", *RUNS)
    assert code == 0 and len(standin.requests) == spent, out + err
