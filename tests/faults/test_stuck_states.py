"""States that used to leave a store stuck or unclear: each is named, and has a way out."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from clawstore.store import Store
from clawstore.testing.standin import StandIn, hang
from tests.faults.helpers import build_report
from tests.support.claw import Claw
from tests.support.reaped import reaped
from tests.support.storefiles import flip_in_frame, lose_object
from tests.support.workspace import Workspace

RUNS = ("--suite", "main", "--run-profile", "rp")
HEAD = "campaigns/main__rp__none"
STORE_TESTS = Path(__file__).parent.parent / "store"


def test_a_missing_campaign_head_is_named_and_fsck_repair_is_the_way_out(
        ws: Workspace, claw: Claw, standin: StandIn, env: dict[str, str]) -> None:
    assert build_report(claw, *RUNS)[0] == 0
    store = Store(env["CLAW_STORE"], create=False)
    head = store.get_ref(HEAD)
    assert head is not None
    lose_object(store, head)  # quarantined (by an older fsck), lost to a disk, removed by hand

    code, out, err = claw("build", *RUNS)
    assert code == 3 and err.count("\n") == 1, out + err
    assert f"ref {HEAD} points at {head}" in err and "claw fsck --repair" in err
    code, out, err = claw("fsck", "--repair")
    assert code == 0 and f"removed ref {HEAD}" in out, out + err
    requests = len(standin.requests)
    code, report, err = build_report(claw, *RUNS)
    assert code == 0 and report["counts"]["reused"] == 4, err  # planned from the action cache
    assert len(standin.requests) == requests


def test_a_corrupt_campaign_head_is_quarantined_and_its_ref_removed(
        ws: Workspace, claw: Claw, standin: StandIn, env: dict[str, str]) -> None:
    assert build_report(claw, *RUNS)[0] == 0
    store = Store(env["CLAW_STORE"], create=False)
    head = store.get_ref(HEAD)
    flip_in_frame(store, head, -5)
    code, out, err = claw("build", *RUNS)
    assert code == 3 and HEAD in err and "claw fsck --repair" in err and err.count("\n") == 1, err
    code, out, _ = claw("fsck", "--repair")
    assert code == 0 and f"quarantined corrupt object {head}" in out and f"removed ref {HEAD}" in out, out
    requests = len(standin.requests)
    assert build_report(claw, *RUNS)[0] == 0
    assert len(standin.requests) == requests
    assert claw("fsck")[0] == 0


def test_a_truncated_build_log_is_skipped_by_query_found_by_fsck_and_repaired(
        ws: Workspace, claw: Claw, env: dict[str, str]) -> None:
    assert build_report(claw, *RUNS)[0] == 0
    ws.case("gamma", "A third question?")
    code, second, _ = build_report(claw, *RUNS)
    assert code == 0
    log = Path(env["CLAW_STORE"]) / "builds" / f"{second['build_id']}.json"
    log.write_bytes(log.read_bytes()[:300])

    code, out, err = claw("query", "select count(*) as n from run_history", "--format", "csv")
    assert code == 0, err
    assert f"claw: warning: {log}" in err and "claw fsck --repair" in err
    code, out, _ = claw("fsck")
    assert code == 1 and f"build log builds/{log.name}: unreadable" in out, out
    code, out, _ = claw("fsck", "--repair")
    assert code == 0 and f"quarantined build log builds/{log.name}" in out
    code, out, err = claw("query", "select count(*) as n from run_history", "--format", "csv")
    assert code == 0 and err == "" and out.splitlines()[1] == "4"  # the first build's rows
    assert claw("fsck")[0] == 0


def test_a_deleted_index_folder_is_reported_and_rebuilt_from_the_packs(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    data = b'{"kind":"run","what":"an input document whose index folder was deleted"}'  # its id is the key
    with store.batch():
        oid = store.put_bytes(data)
        store.put_action(oid, {"kind": "run", "key": oid, "outputs": {"artifact": oid}})
    shutil.rmtree(store.root / "index")
    claw = Claw(tmp_path)
    code, out, _ = claw("fsck", "--store", str(store.root))
    assert code == 1 and "the index is empty" in out, out
    code, out, _ = claw("fsck", "--repair", "--store", str(store.root))
    assert code == 0 and "rebuilt the index from the packs" in out, out
    fresh = Store(store.root)
    assert fresh.get_bytes(oid) == data and fresh.get_action_record_id(oid) is not None
    assert claw("fsck", "--store", str(store.root))[0] == 0
    shutil.rmtree(store.root / "index")
    other = fresh.put_bytes(b"a put still works")  # the folder comes back with the write
    assert Store(store.root).has(other)


def _spawn(script: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(STORE_TESTS / script), *args], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


def test_leftovers_of_sigkilled_writers_are_removed_by_the_next_build(
        ws: Workspace, claw: Claw, standin: StandIn, env: dict[str, str]) -> None:
    store_dir = env["CLAW_STORE"]
    assert build_report(claw, *RUNS)[0] == 0
    ws.case("gamma", "Slow question?")
    standin.script("*", hang(30), match="Slow question?")
    build = claw.popen("build", *RUNS)  # a build killed while a request is in flight
    deadline = time.monotonic() + 20
    while not any("Slow question?" in str(r["body"]) for r in standin.requests) and time.monotonic() < deadline:
        time.sleep(0.05)
    build.send_signal(signal.SIGKILL)
    build.communicate()
    for seed in range(6):  # writers killed mid-put leave temp files (and every one a lease here)
        writer = _spawn("proc_writer.py", store_dir, str(seed))
        with reaped(writer):  # (it writes until killed)
            assert writer.stdout is not None and writer.stdout.readline() == "ready\n"
            time.sleep(0.05 + 0.03 * seed)
            writer.send_signal(signal.SIGKILL)
            writer.wait()
        holder = _spawn("proc_holder.py", store_dir, f"holder {seed}")
        with reaped(holder):  # (it sleeps 600 s)
            assert holder.stdout is not None and holder.stdout.readline() == "held\n"
            holder.send_signal(signal.SIGKILL)
            holder.wait()
    store = Store(store_dir, create=False)
    leases = len(store.list_leases())
    leftovers = os.listdir(store.tmp_dir)
    assert leases >= 7, (leases, leftovers)  # 6 holders + the build's (writers' leases are not held)

    standin.reset()
    code, _, err = claw("build", *RUNS)
    assert code == 0, err
    assert os.listdir(store.tmp_dir) == [] and store.list_leases() == []


def test_a_damaged_manifest_file_is_found_by_fsck_and_rebuilt_by_repair(
        ws: Workspace, claw: Claw, env: dict[str, str]) -> None:
    assert build_report(claw, *RUNS)[0] == 0
    code, out, err = claw("query", "select count(*) as n from runs", "--format", "csv")
    assert code == 0 and out.splitlines()[1] == "4", err
    manifest = Path(env["CLAW_STORE"]) / "manifest"
    damaged = sorted((manifest / "heads").rglob("runs.parquet"))[0]  # (a query remakes a damaged answers file)
    damaged.write_bytes(damaged.read_bytes()[:100])
    assert claw("query", "select count(*) as n from runs")[0] != 0  # every query over runs fails

    code, out, _ = claw("fsck")
    assert code == 1 and f"manifest file {damaged.relative_to(manifest)}: unreadable" in out, out
    code, out, err = claw("fsck", "--repair")
    assert code == 0 and "repaired: manifest rebuilt" in out, out + err
    code, out, err = claw("query", "select count(*) as n from runs", "--format", "csv")
    assert code == 0 and out.splitlines()[1] == "4", err
    assert claw("fsck")[0] == 0
