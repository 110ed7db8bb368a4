"""A real `claw gc` SIGKILLed at each phase of its work (tests/gc/proc_gc_held.py stops it there): planning, copying
kept objects into new packs, copying the kept entries (packs sealed at gc.COPY_PACK_BLOBS), after the copy, during
the index swap, during the deletion of old packs. After each kill `claw fsck` exits 0, a build sends no request (every
object the campaign needs is still readable), and a second `claw gc` leaves what an uninterrupted one leaves: the same
objects and entries, the same bytes on disk but for a pack.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from clawstore.store import Store
from clawstore.store.core.ids import PREFIX
from clawstore.store.core.packfile import is_sealed
from clawstore.store.reach import head_closure
from clawstore.testing.standin import StandIn
from tests.gc.helpers import PROC_GC_HELD, actions, build_json, kill_gc_at, state
from tests.support.claw import Claw
from tests.support.storefiles import age_actions, age_packs
from tests.support.workspace import SECRET, Workspace, standard

HEAD = "campaigns/main__rp__none"
CASES = 10
PHASES = ("plan", "copy", "entries", "copied", "segment", "swapped", "delete")


def _du(root: Path) -> int:
    return int(subprocess.run(["du", "-s", "-B1", str(root)], capture_output=True, text=True, check=True)
               .stdout.split()[0])


def _pack_sizes(root: Path) -> list[int]:
    return [path.stat().st_size for path in (root / "packs").rglob("*.pack")]


def _campaign(ws: Workspace, claw: Claw, standin: StandIn, store: Path) -> None:
    """Three builds (a model more each: a pack each), then half the cases dropped: garbage in every pack."""
    for i in range(CASES):
        ws.case(f"c{i:02d}", f"Question {i}?")
    for models in (["m1"], ["m1", "m2"], ["m1", "m2", "m3"]):
        ws.suite("main", models)
        assert claw.build()[0] == 0
    for i in range(CASES // 2):
        shutil.rmtree(ws.configs / "cases" / f"c{i:02d}")
    sent = len(standin.requests)
    assert claw.build()[0] == 0 and len(standin.requests) == sent
    opened = Store(store, create=False)  # two hours old: garbage to the grace period's hour
    age_actions(opened, [key for key, _ in opened.iter_actions()], 7200)
    age_packs(opened, 7200)
    opened.close()


@dataclass(frozen=True)
class Built:
    """The campaign's workspace and store, built once a module (four builds, ~1 s of CPU) and copied by each test; and
    what an uninterrupted `claw gc` of that store leaves, the same for every phase's kill."""
    ws: Path
    store: Path
    whole: dict[str, Any]
    du: int
    packs: list[int]


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    """One stand-in for the module: its address is in the runs' keys, so the copies' builds reuse what `built` made."""
    with StandIn() as server:
        yield server


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, standin: StandIn) -> Built:
    root = tmp_path_factory.mktemp("killed_phases")
    store = root / "store"
    with pytest.MonkeyPatch.context() as patch:
        for name, value in {"XDG_CONFIG_HOME": str(root / "xdg-config"), "OPENROUTER_API_KEY": SECRET,
                            "OPENROUTER_BASE_URL": standin.base_url, "CLAW_STORE": str(store)}.items():
            patch.setenv(name, value)
        ws = standard(root / "ws")
        patch.chdir(ws.root)
        _campaign(ws, Claw(ws.root), standin, store)
        reference = root / "reference"
        shutil.copytree(store, reference)
        patch.setenv("CLAW_STORE", str(reference))
        _gc_to_the_end(ws)
    return Built(ws.root, store, state(reference), _du(reference), _pack_sizes(reference))


def _listing(store: Path) -> dict[str, set[str]]:
    return {part: {path.name for path in (store / part).rglob("*") if path.is_file()}
            for part in ("packs", "edges", "index", "tmp")}


# What the kill at each phase left, beside what was there before: (new packs sealed, new packs unsealed, index
# segments added, temp files, edges files whose pack is gone).
LEFT = {"plan": (False, 0, 0, 0, 0), "copy": (True, 1, 0, 0, 0), "entries": (True, 1, 0, 0, 0),
        "copied": (True, 0, 0, 0, 0), "segment": (True, 0, 0, 1, 0), "swapped": (True, 0, 1, 0, 0),
        "delete": (True, 0, 1, 0, 1)}


def _left(store: Path, before: dict[str, set[str]]) -> tuple[bool, int, int, int, int]:
    now = _listing(store)
    new = [store / "packs" / name for name in now["packs"] - before["packs"]]
    unsealed = sum(not is_sealed(path) for path in new)
    packs = {name.split(".")[0] for name in now["packs"]}
    return (len(new) > unsealed, unsealed, len(now["index"] - before["index"]), len(now["tmp"]),
            sum(name.split(".")[0] not in packs for name in now["edges"]))


def _gc_to_the_end(ws: Workspace) -> None:
    """`claw gc` (its default grace period), at the limits the killed one had, not stopped."""
    subprocess.run([sys.executable, str(PROC_GC_HELD), "none"], cwd=ws.root, env=dict(os.environ), check=True,
                   capture_output=True)


def _closure_readable(root: Path) -> None:
    """Every object the campaign's head reaches reads back (verified) from the store a kill left."""
    store = Store(root, create=False)
    head = store.get_ref(HEAD)
    assert head is not None
    for digest in head_closure(store, head).objects:
        store.get_bytes(PREFIX + digest)


def _after(claw: Claw, standin: StandIn, sent: int) -> None:
    """What the campaign needs is all there: a build reuses every run and asks nothing."""
    code, report = build_json(claw)
    assert code == 0 and set(actions(report).values()) == {"reuse"}, report
    assert len(standin.requests) == sent


@pytest.mark.parametrize("phase", PHASES)
def test_gc_killed_at_a_phase_leaves_a_store_a_second_gc_finishes(phase: str, built: Built, ws: Workspace, claw: Claw,
                                                                   standin: StandIn, env: dict[str, str],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    store = Path(env["CLAW_STORE"])  # (the campaign copied: a build in it sends nothing, `sent` counts from here)
    shutil.rmtree(ws.root)
    shutil.copytree(built.ws, ws.root)
    monkeypatch.chdir(ws.root)  # (the directory made again)
    shutil.copytree(built.store, store)
    sent = len(standin.requests)

    before = _listing(store)
    assert kill_gc_at(phase, ws.root, dict(os.environ)) == -signal.SIGKILL
    assert _left(store, before) == LEFT[phase], phase  # the kill came where it was meant to

    code, out, err = claw("fsck")
    assert code == 0, out + err
    _closure_readable(store)
    _gc_to_the_end(ws)
    assert claw("fsck")[0] == 0
    killed = state(store)
    killed_du, killed_packs = _du(store), _pack_sizes(store)
    _after(claw, standin, sent)

    whole = built.whole  # the same store, its gc (at the same limits) not interrupted
    assert killed["objects"] == whole["objects"] and killed["actions"] == whole["actions"]
    assert killed["refs"] == whole["refs"] and killed["tmp"] == whole["tmp"] == []
    # A pack and its edges file more or less, in du's 4 KiB blocks.
    assert abs(killed_du - built.du) <= max(killed_packs + built.packs) + 2 * 4096, (killed_du, built.du)
