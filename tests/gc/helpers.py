"""Shared helpers for the gc and archive tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from clawstore.store import Store
from clawstore.store.core.packfile import iter_pack_ids
from tests.store.helpers import REPO, env
from tests.support.claw import Claw
from tests.support.once import made_once
from tests.support.storefiles import age_packs


def store_of(env: dict[str, str]) -> Store:
    return Store(env["CLAW_STORE"], create=False)


def build_json(claw: Claw, *extra: str) -> tuple[int, dict[str, Any]]:
    code, out, err = claw.build("--output", "json", *extra)
    assert out, err
    return code, json.loads(out)


def actions(report: dict[str, Any]) -> dict[tuple[str, str, int], str]:
    return {(r["model_id"], r["case_id"], r["repetition"]): r["run"] for r in report["rows"]}


def state(store_dir: Path | str) -> dict[str, Any]:
    """Everything visible in a store: objects, action-cache entries, refs, temp files, build logs."""
    store = Store(store_dir, create=False)
    return {
        "objects": sorted(store.iter_objects()),
        "actions": sorted(store.iter_actions(), key=lambda kv: kv[0]),
        "refs": store.list_refs(),
        "tmp": sorted(os.listdir(store.tmp_dir)),
        "builds": sorted(p.name for p in (store.root / "builds").glob("*.json")),
    }


def store_once(tmp_path_factory: pytest.TempPathFactory, name: str, fill: Callable[[Store], str]) -> tuple[Path, str]:
    """(the root of a store `fill` wrote, what it returned: an object's id), made once in the run (made_once) for
    tests that each take a copy (`shutil.copytree` keeps the files' mtimes) and never change it."""
    def make(made: Path) -> None:
        with Store(made / "store") as store:
            (made / "root").write_text(fill(store))

    made = made_once(tmp_path_factory, name, make)
    return made / "store", (made / "root").read_text()


PROC_GC_HELD = Path(__file__).with_name("proc_gc_held.py")


def kill_gc_at(phase: str, cwd: Path, env: dict[str, str]) -> int:
    """A real gc (tests/gc/proc_gc_held.py) SIGKILLed once it says it stopped at `phase`; its exit status."""
    gc = subprocess.Popen([sys.executable, str(PROC_GC_HELD), phase], cwd=cwd, env=env,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert gc.stdout is not None
    line = gc.stdout.readline()
    gc.send_signal(signal.SIGKILL)
    _, err = gc.communicate(timeout=60)
    assert line == f"at {phase}\n".encode(), err.decode()
    return gc.returncode


def store_with_garbage(root: Path) -> Store:
    """Three packs, two hours old, each half garbage (a pin names the other half): gc rewrites them all."""
    store = Store(root)
    live = []
    for n in range(3):
        with store.batch():
            live += [store.put_bytes(b"live %d %d " % (n, i) * 50) for i in range(100)]
            for i in range(100):
                store.put_bytes(b"garbage %d %d " % (n, i) * 50)
        store.runtime.close_writer()
    store.set_ref("pins/live", store.put_json({"nodes": live}))
    store.runtime.close_writer()
    age_packs(store, 7200)
    return store


def killed_gc(root: Path, phase: str = "copied") -> set[str]:
    """A real gc SIGKILLed at `phase` (tests/gc/proc_gc_held.py); the packs it left that were not there."""
    before = set(iter_pack_ids(root / "packs"))
    kill_gc_at(phase, REPO, {**env(), "CLAW_STORE": str(root)})
    return set(iter_pack_ids(root / "packs")) - before


def pinned_graph(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A store of a 1,500-object graph over four packs (tests/gc/test_reach_many.py's _graph, seed 11), pinned, each
    sealed pack's edges file written by its first fsck (clean): made once in the run (store_once, ~1 s of CPU and
    1,500 commits' fsyncs), for tests/gc/test_edges_cache.py and test_reach_many.py, each test walking or changing a
    copy. (The root's id, and the store's root.)"""
    from clawstore.store.services.fsck import fsck
    from tests.gc.test_reach_many import _graph

    def fill(store: Store) -> str:
        root = _graph(store, 1500, seed=11)
        store.set_ref("pins/root", root)
        store.runtime.close_writer()
        assert fsck(store).clean
        return root

    return store_once(tmp_path_factory, "edges-cache", fill)
