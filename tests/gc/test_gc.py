"""`claw gc`, pins and refs against real builds (stand-in server, real store, real files)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from clawstore.host.durable import temp_name
from clawstore.store import Store
from clawstore.store.core.ids import PREFIX
from clawstore.store.headdoc import part_ids, read_head_doc
from clawstore.store.reach import head_closure
from clawstore.store.services.gc import READING_HEAD_LEASE_PREFIX
from clawstore.testing.standin import StandIn, text
from tests.gc.helpers import actions, build_json, state, store_of
from tests.support.claw import Claw
from tests.support.storefiles import age, age_actions, age_packs, blob_span
from tests.support.workspace import Workspace

HEAD = "campaigns/main__rp__none"


def _edit_beta(ws: Workspace, text: str = "Name a fruit.") -> None:
    ws.edit("cases/beta/test.yaml", lambda d: d["input"]["messages"][1].update(content=text))


def _gc(claw: Claw, *args: str) -> dict:
    code, out, err = claw("gc", "--json", *args)
    assert code == 0, err
    return json.loads(out)


def test_gc_removes_exactly_what_the_head_no_longer_reaches(ws: Workspace, claw: Claw, standin: StandIn,
                                                            env: dict[str, str]) -> None:
    assert claw.build()[0] == 0
    store = store_of(env)
    first = read_head_doc(store, store.get_ref(HEAD))
    old_beta = {n["record"]: n["key"] for n in first["nodes"] if n["address"]["case_id"] == "beta"}
    _edit_beta(ws)
    assert claw.build()[0] == 0
    assert len(standin.requests) == 6
    head_id = store.get_ref(HEAD)
    keep = {PREFIX + h for h in head_closure(store, head_id).objects}
    before = state(store.root)
    garbage = set(before["objects"]) - keep
    assert set(old_beta) <= garbage  # the superseded records, with their artifacts and input documents
    assert set(old_beta.values()) <= garbage and store.get_ref(HEAD) not in garbage

    code, out, err = claw("gc", "--grace", "0", "--dry-run")
    assert code == 0, err
    assert "would delete object " not in out  # a summary: counts and bytes by kind, no list
    assert f"would delete {len(garbage)} objects" in out and "2 action-cache entries" in out
    code, out, err = claw("gc", "--grace", "0", "--dry-run", "--verbose")
    assert code == 0, err
    listed = {line.split()[3] for line in out.splitlines() if line.startswith("would delete object ")}
    assert listed == garbage
    listed_actions = {line.split()[3] for line in out.splitlines() if line.startswith("would delete action ")}
    assert listed_actions == set(old_beta.values())
    assert "would free" in out
    assert state(store.root) == before  # a dry run deletes nothing
    dry = _gc(claw, "--grace", "0", "--dry-run")

    report = _gc(claw, "--grace", "0")
    for name in ("objects_deleted", "object_bytes_deleted", "actions_deleted", "reachable", "objects_seen"):
        assert dry[name] == report[name], (name, dry, report)
    assert report["objects_deleted"] == len(garbage) and report["actions_deleted"] == 2
    assert report["bytes_freed"] > 0 and report["live_leases"] == [], json.dumps(report)
    assert set(store.iter_objects()) == keep
    assert all(store.get_action(key) is None for key in old_beta.values())
    code, out, err = claw("fsck")
    assert code == 0, out + err

    code, report_after = build_json(claw)
    assert code == 0 and set(actions(report_after).values()) == {"reuse"}
    assert len(standin.requests) == 6  # nothing was paid for twice
    # The manifest still answers (its rows name records gc removed; nothing dereferences them).
    code, out, err = claw("query", "select count(*) as n from run_history", "--format", "json")
    assert code == 0, err
    # first build: 2 of its 4 runs (beta's records were collected); second: 4; the no-op build: none.
    assert json.loads(out)[0]["n"] == 6
    code, out, err = claw("query", "select count(*) as n from objects", "--format", "json")
    assert code == 0 and json.loads(out)[0]["n"] == len(set(store.iter_objects()))
    assert claw("fsck", "--rebuild-manifest")[0] == 0
    assert claw("report", "--suite", "main", "--run-profile", "rp", "--no-chart")[0] == 0
    assert _gc(claw, "--grace", "0")["objects_deleted"] == 0  # a second gc finds nothing more


def test_grace_period_keeps_recent_garbage(ws: Workspace, claw: Claw, env: dict[str, str]) -> None:
    assert claw.build()[0] == 0
    _edit_beta(ws)
    assert claw.build()[0] == 0
    store = store_of(env)
    keep = {PREFIX + h for h in head_closure(store, store.get_ref(HEAD)).objects}
    garbage = sorted(set(store.iter_objects()) - keep)
    before = state(store.root)
    report = _gc(claw)  # default grace 1h: everything is younger (and young entries keep their records)
    assert report["objects_deleted"] == 0 and report["actions_deleted"] == 0
    assert state(store.root) == before
    entries = [k for k, rid in store.iter_actions() if rid not in keep]
    assert len(entries) == 2
    age_actions(store, entries, 2 * 3600)
    report = _gc(claw, "--grace", "90m")  # old entries go; the objects are in young packs
    assert report["actions_deleted"] == 2
    assert report["objects_deleted"] == 0 and report["kept_young"] == len(garbage)
    assert all(store.has(oid) for oid in garbage)
    age_packs(store, 2 * 3600)
    report = _gc(claw, "--grace", "90m")
    assert report["objects_deleted"] == len(garbage) and report["kept_young"] == 0
    assert not any(store.has(oid) for oid in garbage)
    assert claw("fsck")[0] == 0


def test_pin_freezes_a_campaign_state_until_unpinned(ws: Workspace, claw: Claw, standin: StandIn,
                                                     env: dict[str, str]) -> None:
    assert claw.build()[0] == 0
    code, out, err = claw("pin", "v1", "--suite", "main", "--run-profile", "rp")
    assert code == 0, err
    store = store_of(env)
    pinned = store.get_ref("pins/v1")
    assert pinned == store.get_ref(HEAD) and pinned in out
    assert claw("pin", "v1", "--suite", "main", "--run-profile", "rp")[1].count("already") == 1
    _edit_beta(ws)
    assert claw.build()[0] == 0
    assert store.get_ref("pins/v1") == pinned != store.get_ref(HEAD)  # a pin does not follow later builds
    code, out, err = claw("pin", "v1", "--suite", "main", "--run-profile", "rp")
    assert code == 2 and err.count("\n") == 1 and "--force" in err
    code, out, _ = claw("refs")
    assert f"pins/v1\t{pinned}" in out and f"{HEAD}\t" in out

    pinned_objects = {PREFIX + h for h in head_closure(store, pinned).objects}
    report = _gc(claw, "--grace", "0")
    assert report["objects_deleted"] == 0 and report["actions_deleted"] == 0  # the pin reaches all of it
    assert all(store.has(oid) for oid in pinned_objects)
    assert claw("fsck")[0] == 0

    _edit_beta(ws, "Name a colour.")  # back to the pinned inputs: served from the pin's records
    code, report = build_json(claw)
    assert code == 0 and set(actions(report).values()) == {"reuse"}
    assert len(standin.requests) == 6

    _edit_beta(ws)
    assert claw.build()[0] == 0  # the head moves away from v1's beta records again (no new request)
    code, out, err = claw("unpin", "v1")
    assert code == 0 and pinned in out
    assert store.get_ref("pins/v1") is None
    report = _gc(claw, "--grace", "0")
    assert report["objects_deleted"] > 0
    assert not store.has(pinned)
    code, _, err = claw("unpin", "v1")
    assert code == 2 and "no pin named v1" in err
    assert claw("fsck")[0] == 0


def test_entries_of_an_unfinished_build_are_roots_within_the_grace_period(ws: Workspace, claw: Claw,
                                                                          env: dict[str, str]) -> None:
    """A killed build leaves cache entries no head names: kept (with their outputs) while they are young."""
    assert claw.build()[0] == 0
    store = store_of(env)
    data = os.urandom(3 << 20)  # a big output: streamed, not JSON
    blob = store.put_bytes(data)
    tree_dir = Path(env["CLAW_STORE"]).parent / "sandbox"
    (tree_dir / "sub").mkdir(parents=True)
    (tree_dir / "sub" / "notes.txt").write_text("kept by an orphan record\n")
    tree = store.put_tree(tree_dir)
    key = store.put_json({"kind": "orphan", "n": 1})
    record = {"key": key, "kind": "run", "status": "success", "cacheable": True,
              "outputs": {"sandbox": tree, "blob": blob, "input_document": key}}
    record_id = store.put_action(key, record)
    report = _gc(claw, "--grace", "10m")
    assert report["actions_deleted"] == 0
    assert store.get_action_record_id(key) == record_id and store.get_json(record_id) == record
    assert store.has(blob) and store.has(tree)
    assert all(store.has(e.object) for e in store.read_tree(tree) if e.object)

    age_actions(store, [key], 3600)
    report = _gc(claw, "--grace", "10m")  # the entry is old now; its objects are still young
    assert report["actions_deleted"] == 1 and store.get_action(key) is None
    assert store.has(record_id) and report["kept_young"] >= 4
    age_packs(store, 3600)
    report = _gc(claw, "--grace", "10m")
    assert not store.has(blob) and not store.has(record_id) and not store.has(tree)
    assert claw("fsck")[0] == 0


def test_live_lease_makes_gc_keep_the_action_cache_and_recent_objects(ws: Workspace, claw: Claw,
                                                                      env: dict[str, str]) -> None:
    assert claw.build()[0] == 0
    _edit_beta(ws)
    assert claw.build()[0] == 0
    store = store_of(env)
    before = state(store.root)
    with Store(env["CLAW_STORE"]).lease("build test-holder"):
        code, out, err = claw("gc", "--grace", "0", "--json")
        assert code == 0
        report = json.loads(out)
        assert report["live_leases"] == ["build test-holder"]
        assert "running" in err
    assert report["actions_deleted"] == 0 and report["objects_deleted"] == 0
    assert state(store.root)["objects"] == before["objects"]
    # Old garbage nothing in the action cache names goes even while a build runs.
    stray = store.put_bytes(b"stray bytes nobody names")
    age([blob_span(store, stray)[0]], 3600)  # this process's pack: only the stray is in it
    with Store(env["CLAW_STORE"]).lease("build test-holder"):
        report = _gc(claw, "--grace", "0")
    assert report["objects_deleted"] == 1 and not store.has(stray)


def test_stale_temp_files_go_live_ones_stay_and_two_gcs_do_not_overlap(ws: Workspace, claw: Claw,
                                                                       env: dict[str, str]) -> None:
    assert claw.build()[0] == 0
    store = store_of(env)
    dead = store.tmp_dir / "999999999-1-deadbeefdeadbeef.tmp"
    dead.write_bytes(b"x" * 1000)
    foreign = store.tmp_dir / "not-a-claw-temp-file"
    foreign.write_bytes(b"y")
    live = store.tmp_dir / temp_name()
    live.write_bytes(b"z")
    report = _gc(claw, "--grace", "0")
    assert report["temp_files_deleted"] == 2 and report["bytes_freed"] >= 1001
    assert not dead.exists() and not foreign.exists() and live.exists()
    with store.exclusive("gc"):
        code, out, err = claw("gc", "--grace", "0")
    assert code == 3 and err.startswith("claw: error:") and "busy" in err and err.count("\n") == 1
    code, _, err = claw("gc", "--grace", "5 minutes")
    assert code == 2 and "--grace" in err and err.count("\n") == 1
    for good in ("0", "30s", "15m", "2d", "1h30m"):
        assert claw("gc", "--grace", good, "--dry-run")[0] == 0


def test_reachability_follows_ids_in_any_json_object_even_across_read_chunks(tmp_path: Path) -> None:
    """Ids are found anywhere in JSON objects (big ones are streamed 1 MiB at a time); bytes that are not
    JSON name nothing."""
    store = Store(tmp_path / "store")
    named = [store.put_bytes(f"named object {i}".encode()) for i in range(3)]
    in_text = store.put_bytes(b"not named: only a text file mentions it")
    filler = os.urandom(5 << 20).hex()  # barely compressible: the JSON object is stored > 4 MiB, so it is streamed
    cut = (1 << 20) - len('{"a":"') - 20  # the second id straddles the first 1 MiB boundary
    doc = {"a": filler[:cut] + named[1] + filler[cut:], "b": [{"deep": {"x": named[0]}}], "z": named[2]}
    big = store.put_json(doc)
    assert store.object_sizes(big)[1] > 4 << 20
    text = store.put_bytes(b"a log line naming " + in_text.encode() + b" in plain text")
    root = store.put_json({"nodes": [big, text]})
    store.set_ref("pins/root", root)
    age_packs(store, 7200)
    from clawstore.store.services.gc import collect

    report = collect(store, grace_s=0)
    assert [oid for oid, _ in report.objects] == [in_text]
    assert all(store.has(o) for o in (*named, big, text, root))


def _campaigns(claw: Claw, view: str) -> list[str]:
    code, out, err = claw("query", f"select distinct campaign_id from {view} order by 1", "--format", "json")
    assert code == 0, err
    return [row["campaign_id"] for row in json.loads(out)]


def test_a_campaign_no_longer_built_is_reclaimed_once_its_head_is_deleted(ws: Workspace, claw: Claw,
                                                                          standin: StandIn,
                                                                          env: dict[str, str]) -> None:
    # Every campaign ever built keeps a head, a gc root: without a way to delete one, a suite dropped
    # from the workspace kept its runs forever.
    ws.suite("other", ["m9"])
    assert claw.build()[0] == 0 and claw.build(suite="other")[0] == 0
    store = store_of(env)
    other = "campaigns/other__rp__none"
    other_head = store.get_ref(other)
    keep = {PREFIX + h for h in head_closure(store, store.get_ref(HEAD)).objects}
    only_other = {PREFIX + h for h in head_closure(store, other_head).objects} - keep
    assert only_other and _gc(claw, "--grace", "0")["objects_deleted"] == 0

    for bad, why in ((["campaigns/nothing__rp__none"], "no ref campaigns/nothing__rp__none"),
                     ([other, "campaigns/../../x"], "bad ref name"), (["objects"], "no ref objects")):
        code, _, err = claw("refs", *(arg for name in bad for arg in ("--delete", name)))
        assert code == 2 and err.count("\n") == 1 and why in err, err
        assert store.get_ref(other) == other_head  # all or nothing: a bad name deletes none
    assert claw("remote", "add", "team", str(ws.root.parent / "share"))[0] == 0
    assert claw("push", "team")[0] == 0  # leaves tracking refs, gc roots too: the deletion names them
    code, out, err = claw("refs", "--delete", other)
    assert code == 0 and f"removed {other} (was -> {other_head})" in out, err
    assert store.get_ref(other) is None and store.get_ref(HEAD) is not None
    assert _campaigns(claw, "runs") == ["main__rp__none"]  # what queries show as current goes with it
    assert _campaigns(claw, "run_history") == ["main__rp__none", "other__rp__none"]  # the history stays
    tracking = f"remotes/team/{other}"
    assert f"claw refs --delete {tracking} lets gc reclaim it" in err
    assert _gc(claw, "--grace", "0")["objects_deleted"] == 0
    assert claw("refs", "--delete", tracking)[0] == 0
    report = _gc(claw, "--grace", "0")
    assert report["objects_deleted"] == len(only_other)
    assert not any(store.has(oid) for oid in only_other) and all(store.has(oid) for oid in keep)
    assert claw("fsck")[0] == 0
    sent = len(standin.requests)
    assert claw.build()[0] == 0 and len(standin.requests) == sent  # the campaign kept: nothing paid again


def test_a_head_a_build_is_reading_is_kept_though_no_ref_names_it(ws: Workspace, claw: Claw, standin: StandIn,
                                                                  env: dict[str, str]) -> None:
    # A build reads its campaign's previous head a window at a time to its end (builder/api.py), under a lease naming
    # it: another build may move the ref meanwhile, and a gc then must not take the parts still to be read.
    assert claw.build()[0] == 0
    store = store_of(env)
    old_head = store.get_ref(HEAD)
    old_doc = store.get_json(old_head)
    _edit_beta(ws)
    assert claw.build()[0] == 0 and store.get_ref(HEAD) != old_head
    age_packs(store, 7200)  # (a live lease keeps every recent object: only the head lease may keep these)
    with Store(env["CLAW_STORE"]).lease(READING_HEAD_LEASE_PREFIX + old_head):
        _gc(claw, "--grace", "0")
    assert store.has(old_head) and all(store.has(part) for part in part_ids(old_doc))
    age_packs(store, 7200)  # (the gc above rewrote packs it took objects from)
    with Store(env["CLAW_STORE"]).lease("build another"):  # a lease naming no head keeps no old head
        _gc(claw, "--grace", "0")
    assert not store.has(old_head)

    # The build itself holds that lease while it runs (the slow answers keep it running to look).
    _edit_beta(ws, "Name a river.")
    standin.set_default(text("slow", latency=1.5))
    reading = store.get_ref(HEAD)
    build = claw.popen("build", "--suite", "main", "--run-profile", "rp")
    try:
        purposes: list[str] = []
        deadline = time.monotonic() + 20
        while build.poll() is None and time.monotonic() < deadline and not purposes:
            purposes = [lease.purpose for lease in store.list_leases()
                        if lease.purpose == READING_HEAD_LEASE_PREFIX + reading]
            time.sleep(0.05)
        assert purposes, "no lease named the head the build read"
    finally:
        assert build.wait(timeout=30) == 0
    assert not store.list_leases()  # (every lease of the build ended with it)
