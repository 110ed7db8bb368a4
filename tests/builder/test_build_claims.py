"""Work claims: builds started together on one store never pay for one node twice (real processes)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from clawstore.query.engine import run_query
from clawstore.query.manifest import index_pending
from clawstore.store import Store
from clawstore.store.claims import ClaimBoard, list_claims
from clawstore.store.core.ids import oid_of
from clawstore.testing.standin import StandIn, hang, text
from tests.support.claw import Claw
from tests.support.judging import JUDGE, eval_profile, judge_reply
from tests.support.workspace import Workspace

LATENCY = 0.05
EVAL = ("--evaluation-profile", "ev")


def _campaign(ws: Workspace, standin: StandIn, cases: list[str], suite: str = "main") -> None:
    for case_id in cases:
        ws.case(case_id, f"Question {case_id}?")
    ws.suite(suite, ["m1", "m2"], case_selection={"include_case_ids": cases})
    ws.run_profile(concurrency=3)
    eval_profile(ws, repetitions=1)
    standin.set_default(text("An answer.", latency=LATENCY))
    standin.script(JUDGE, {**judge_reply(7), "latency": LATENCY})


def _start(claw: Claw, suite: str = "main") -> subprocess.Popen[str]:
    return claw.popen("build", "--suite", suite, "--run-profile", "rp", *EVAL, "--output", "json")


def _finish(proc: subprocess.Popen[str]) -> dict:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return json.loads(out)


def _runs_sent(standin: StandIn) -> list[tuple[str, str]]:
    """(model, messages) of every subject-model request: equal pairs are one run paid twice."""
    return [(r["model"], json.dumps(r.get("messages"), sort_keys=True)) for r in standin.requests
            if r["model"] != JUDGE]


def _judged(standin: StandIn) -> int:
    return sum(1 for r in standin.requests if r["model"] == JUDGE)


def test_three_identical_builds_send_the_requests_of_one(ws: Workspace, claw: Claw, standin: StandIn,
                                                         env: dict[str, str]) -> None:
    cases = [f"c{i}" for i in range(8)]
    _campaign(ws, standin, cases)
    procs = [_start(claw) for _ in range(3)]
    reports = [_finish(p) for p in procs]
    sent = _runs_sent(standin)
    assert len(sent) == len(set(sent)) == 2 * len(cases), "a run was paid for twice"
    assert _judged(standin) == 2 * len(cases)  # one judgement per run: one build's worth
    executed = sum(r["counts"]["executed"] for r in reports)
    assert executed == 2 * len(cases) * 4  # run, checks, judge, result: each executed by exactly one build
    for report in reports:
        assert {row["status"] for row in report["rows"]} == {"success"}
        assert {row["score"] for row in report["rows"]} == {7.0}
    store = Path(env["CLAW_STORE"])
    index_pending(Store(store))
    assert run_query(store, "select count(*), count(distinct key) from results").rows == [(16, 16)]
    assert run_query(store, "select count(*), count(distinct key) from runs").rows == [(16, 16)]
    # History: each result was made once (one record per key), whichever builds listed it.
    assert run_query(store, "select count(distinct record_id) from result_history").rows == [(16,)]
    assert list_claims(store) == [], "every claim is released"


def test_overlapping_campaigns_send_each_shared_node_once(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    _campaign(ws, standin, ["a", "b", "c", "d"], suite="first")
    _campaign(ws, standin, ["c", "d", "e", "f"], suite="second")
    procs = [_start(claw, "first"), _start(claw, "second"), _start(claw, "first")]
    for proc in procs:
        _finish(proc)
    sent = _runs_sent(standin)
    assert len(sent) == len(set(sent)) == 6 * 2, "a shared run was paid for twice"
    assert _judged(standin) == 6 * 2  # six distinct cases x two models, one judgement each


def test_the_claim_of_a_killed_build_is_taken_over(ws: Workspace, claw: Claw, standin: StandIn,
                                                   env: dict[str, str]) -> None:
    ws.case("slow", "Take your time.")
    ws.suite("one", ["m1"], case_selection={"include_case_ids": ["slow"]})
    ws.run_profile(concurrency=1)
    standin.set_default(hang(60))
    first = claw.popen("build", "--suite", "one", "--run-profile", "rp")
    store = Path(env["CLAW_STORE"])
    deadline = time.monotonic() + 30
    while not standin.requests and time.monotonic() < deadline:
        time.sleep(0.02)
    assert standin.requests and list_claims(store), "the first build claimed its node and called out"
    os.kill(first.pid, signal.SIGKILL)
    first.communicate()
    standin.set_default(text("Done."))
    code, out, err = claw.build("--output", "json", suite="one")
    assert code == 0, err
    assert json.loads(out)["rows"][0]["run"] == "exec"
    assert len(standin.requests) == 2  # the killed attempt, then this build's
    assert list_claims(store) == []


def test_a_live_claim_from_another_machine_is_waited_for_until_it_expires(
        ws: Workspace, claw: Claw, standin: StandIn, env: dict[str, str]) -> None:
    """A claim names its holder's host: one from elsewhere cannot be checked by pid, only by its expiry."""
    ws.case("shared", "Who holds me?")
    ws.suite("one", ["m1"], case_selection={"include_case_ids": ["shared"]})
    ws.run_profile(concurrency=1)
    code, out, _ = claw("build", "--suite", "one", "--run-profile", "rp", "--dry-run", "--output", "json")
    key = json.loads(out)["nodes"][0]["key"]
    store = Path(env["CLAW_STORE"])
    Store(store).close()  # (a dry run makes no store)
    claims = store / "claims"
    claims.mkdir(exist_ok=True)
    now = time.time()
    foreign = {"format": 1, "owner": "20260101T000000-elsewhere", "host": socket.gethostname() + "-other",
               "pid": 1, "start_ticks": 0, "acquired_at": now, "expires_at": now + 1.5}
    (claims / f"{key.removeprefix('blake3:')}.json").write_text(json.dumps(foreign))
    started = time.monotonic()
    code, out, err = claw.build("--output", "json", suite="one")
    assert code == 0, err
    assert time.monotonic() - started >= 1.0, "the build waited for the foreign claim to expire"
    assert json.loads(out)["rows"][0]["run"] == "exec"
    assert len(standin.requests) == 1


def test_claim_board_take_release_expire_and_lose(tmp_path: Path) -> None:
    (tmp_path / "locks").mkdir()
    (tmp_path / "tmp").mkdir()
    key = oid_of(b"a node's input document")
    a = ClaimBoard(tmp_path, owner="build-a", ttl_s=0.5)
    b = ClaimBoard(tmp_path, owner="build-b", ttl_s=0.5)
    assert a.take(key)
    assert not a.take(key), "a second node of the same build waits for the first"
    assert not b.take(key) and b.holder(key) is not None and b.holder(key).owner == "build-a"
    a.heartbeat()
    assert not b.take(key)
    a.release(key)
    assert b.take(key) and a.holder(key).owner == "build-b"
    # b stalls past its expiry (no heartbeat thread beat it in time): a takes over, b notices.
    b._stop.set()
    time.sleep(0.6)
    assert a.take(key)
    b.heartbeat()
    assert key in b.lost
    b.release(key)  # never deletes a's claim
    assert a.holder(key) is None and b.holder(key).owner == "build-a"
    a.close()
    assert list_claims(tmp_path) == []
    b.close()  # (its file in tmp/: a board's descriptors are closed by close() alone)


def test_a_claim_released_while_the_heartbeat_renews_it_is_not_written_again(tmp_path: Path) -> None:
    # The heartbeat thread read the claim (ours), then the node's record became durable and the claim
    # was released on another thread, then the heartbeat rewrote it: a claim file nobody held was left
    # behind (two after a 500x4 benchmark build), which another build waits on until this one exits.
    (tmp_path / "locks").mkdir()
    (tmp_path / "tmp").mkdir()
    key = oid_of(b"a node finishing as the heartbeat beats")
    board = ClaimBoard(tmp_path, owner="build-a", ttl_s=30)
    assert board.take(key)
    board._held[key] -= 10  # written long enough ago for the heartbeat to renew it (a young one is left alone)
    read = board.read

    def read_then_release(name: str) -> Any:
        claim = read(name)
        board.release(name)  # the commit thread, at the end of the node's window
        return claim

    board.read = read_then_release  # type: ignore[method-assign]
    board.heartbeat()
    board.read = read  # type: ignore[method-assign]
    assert list_claims(tmp_path) == []
    assert board.take(key)  # and the key can be claimed again at once
    board.close()
    assert list_claims(tmp_path) == []


def test_the_heartbeat_renews_claims_written_a_sixth_of_their_ttl_ago_and_leaves_younger_ones(tmp_path: Path) -> None:
    # A build's claims mostly live under a second (until their node's commit window ends): a beat rewrote each
    # one it found held, a file write and rename per claim, about 1 % of a cold build's CPU.
    (tmp_path / "locks").mkdir()
    (tmp_path / "tmp").mkdir()
    old, young = oid_of(b"a node running for a while"), oid_of(b"a node just claimed")
    board = ClaimBoard(tmp_path, owner="build-a", ttl_s=30)
    assert board.take(old) and board.take(young)
    board._held[old] -= 6  # taken 6 s ago: more than ttl / 6
    before = {key: board.read(key) for key in (old, young)}
    board.heartbeat()
    after = {key: board.read(key) for key in (old, young)}
    assert after[young] == before[young], "a claim written 0 s ago is not written again"
    assert after[old].expires_at > before[old].expires_at and after[old].owner == "build-a"
    assert board._held[old] >= after[old].acquired_at - 1  # renewed: counted as written now
    board.close()
    assert list_claims(tmp_path) == []


def test_a_board_reuses_its_claim_files_and_leaves_none_behind(tmp_path: Path) -> None:
    # Making a file (an inode) cost half a millisecond on the bench machine's /tmp, per node: a board
    # makes one file per claim held at once, links it under the claim's name and reuses it after.
    (tmp_path / "locks").mkdir()
    (tmp_path / "tmp").mkdir()
    board = ClaimBoard(tmp_path, owner="build-a", ttl_s=30)
    spares = set()
    for round_ in range(20):
        keys = [oid_of(b"node %d-%d" % (round_, i)) for i in range(3)]  # three nodes at once
        assert all(board.take(key) for key in keys)
        claims = list_claims(tmp_path)
        assert sorted(c.key for c in claims) == sorted(keys) and {c.owner for c in claims} == {"build-a"}
        held = {(s.st_dev, s.st_ino) for s in (os.stat(board.path(key)) for key in keys)}
        files = {p.name: os.stat(p) for p in tmp_path.joinpath("tmp").iterdir()}
        assert {(s.st_dev, s.st_ino) for s in files.values()} == held, "each claim is a board's file, linked"
        spares |= set(files)
        for key in keys:
            board.release(key)
        assert list_claims(tmp_path) == []
    assert len(spares) == 3, "three files served sixty claims"
    other = ClaimBoard(tmp_path, owner="build-b", ttl_s=30)
    key = oid_of(b"contested")
    assert board.take(key) and not other.take(key)  # a claim is still created only if absent
    board.close()
    other.close()
    assert list_claims(tmp_path) == [] and list(tmp_path.joinpath("tmp").iterdir()) == []


def _backdate(directory: Path) -> None:
    """As if the directory last changed 5 s ago (a directory's time is coarse: one changed within the last
    second is always listed again)."""
    past = time.time() - 5
    os.utime(directory, (past, past))


_ANOTHER_WRITER = """
import sys
from clawstore.store import Store
store = Store(sys.argv[1])
with store.lease("build b"), store.batch():
    store.put_action(sys.argv[2], {"key": sys.argv[2], "status": "success", "cacheable": True, "outputs": {}})
store.close()
"""


def _lone_build(tmp_path: Path) -> tuple[Store, str, Any, ClaimBoard]:
    """A store, a checks node of it and the claim board of a build that will run alone on it."""
    from clawstore.graph.plan import Node

    store = Store(tmp_path / "store")
    key = store.put_json({"the node's": "input document"})
    return store, key, Node("checks", {"model_id": "m", "case_id": "c", "repetition": 0}, {}, key), \
        ClaimBoard(store.root, owner="build-a")


@contextlib.contextmanager
def _leased_alone(store: Store, board: ClaimBoard) -> Iterator[None]:
    """The build's lease taken, and its board's first looks at leases/ done: it knows it is alone."""
    with store.lease("build a"):
        _backdate(store.root / "leases")
        assert board.neighbours.present(), "the first look lists leases/"
        assert not board.neighbours.present(), "this process's lease alone: nobody else may write"
        yield


def _refusing(executed: list[Any], why: str) -> Callable[[Any], tuple[str, dict[str, Any]]]:
    def work(n: Any) -> tuple[str, dict[str, Any]]:
        executed.append(n)
        raise AssertionError(why)
    return work


def _another_process(script: str, *args: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    subprocess.run(["python3", "-c", script, *args], check=True, env=env)


def test_a_node_another_process_stored_and_left_is_adopted_though_the_build_was_alone(tmp_path: Path) -> None:
    # Alone on its store, a build does not list the index again for each node it claims (a listing a node, 2 % of
    # a cold build's CPU); a writer that came, committed a node's record and went between two of its nodes
    # changed leases/ twice: the build looks again, adopts the record and does not execute the node.
    from clawstore.builder.claimed import Adopted, claimed
    from clawstore.graph.plan import Node
    from clawstore.store.core import index as index_module

    store, key, node, board = _lone_build(tmp_path)
    listings = []
    real_list = index_module.list_segments

    def counted(index_dir: Path) -> list[str]:
        listings.append(index_dir)
        return real_list(index_dir)

    executed: list[Node] = []
    work = _refusing(executed, "executed a node another process had stored")
    with _leased_alone(store, board):
        others = [store.put_json({"another": n}) for n in range(20)]
        index_module.list_segments = counted
        try:
            for other in others:
                assert claimed(lambda n: (n.key, {}), store, board, Node("checks", {}, {}, other)) == (other, {})
            assert len(listings) <= 2, "alone: a claimed node's lookup does not list the index (but now and then)"
            listings.clear()
            _another_process(_ANOTHER_WRITER, str(store.root), key)
            _backdate(store.root / "leases")  # (the same, whatever the clock says: it changed since the listing)
            store.runtime.index._recheck = lambda: None  # not the index's own look every 50 ms: the claim's
            found = claimed(work, store, board, node)
        finally:
            index_module.list_segments = real_list
    assert isinstance(found, Adopted) and not executed
    assert listings, "leases/ changed: the index was listed again"
    board.close()
    store.close()


def test_another_lease_makes_every_claim_look_again_while_it_is_there(tmp_path: Path) -> None:
    from clawstore.store.claims import Neighbours

    leases = tmp_path / "leases"
    leases.mkdir()
    own = leases / "own.json"
    own.write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname()}))
    _backdate(leases)
    neighbours = Neighbours(tmp_path)
    assert neighbours.present() and not neighbours.present()
    (leases / "other.json").write_text(json.dumps({"pid": os.getpid(), "host": "another-machine"}))
    _backdate(leases)
    assert neighbours.present() and neighbours.present() and neighbours.present()
    (leases / "other.json").unlink()
    _backdate(leases)
    assert neighbours.present(), "once more after it went: what it committed is still to be seen"
    assert not neighbours.present()
    (leases / "unreadable.json").write_text("{half a lease")  # a holder killed mid-write: counted as someone
    assert neighbours.present() and neighbours.present()


_ADOPTER = """
import sys
from clawstore.store import Store
store = Store(sys.argv[1])
assert store.adopt_orphans().entries == 1  # (as `claw status` does, with no lease of its own around it)
store.close()
"""


def test_a_killed_builds_node_adopted_by_another_process_is_not_executed_by_a_build_alone(tmp_path: Path) -> None:
    # A build killed with a node finished but not indexed leaves it in its pack; whoever comes next adopts it — here
    # a `claw status`, which holds no lease, while a build runs alone on the store (its killed neighbour's lease
    # removed meanwhile by a gc). The adoption changes leases/ (it holds a lease while it adopts), so the build looks
    # again before executing the node, adopts its record and pays nothing a second time.
    from clawstore.builder.claimed import Adopted, claimed
    from clawstore.store.core.codec import encode
    from clawstore.store.core.ids import PREFIX
    from clawstore.store.core.packfile import KIND_ACTION, KIND_OBJECT, PackWriter, encode_action

    store, key, node, board = _lone_build(tmp_path)
    record = json.dumps({"key": key, "status": "success", "cacheable": True, "outputs": {}},
                        sort_keys=True, separators=(",", ":")).encode()
    record_id = oid_of(record)
    dead = PackWriter(store.runtime.packs_dir)  # (closed unsealed: its writer is gone)
    dead.append_many([(KIND_OBJECT, bytes.fromhex(record_id[len(PREFIX):]), [b"".join(encode(record, 3))]),
                      (KIND_ACTION, bytes.fromhex(key[len(PREFIX):]),
                       [encode_action(bytes.fromhex(record_id[len(PREFIX):]), time.time_ns())])])
    dead.close()
    executed: list[Any] = []
    work = _refusing(executed, "executed a node a killed build had finished")
    with _leased_alone(store, board):
        assert store.get_action_record_id(key) is None  # (not adopted yet: the index holds no entry for it)
        _another_process(_ADOPTER, str(store.root))  # (leases/ as it finds it)
        store.runtime.index._recheck = lambda: None  # not the index's own look every 50 ms: the claim's
        found = claimed(work, store, board, node)
    assert isinstance(found, Adopted) and not executed, found
    board.close()
    store.close()


def test_alone_an_unpaid_node_run_here_takes_no_claim_and_with_a_neighbour_it_does(tmp_path: Path) -> None:
    # Hook-free checks and results (no provider, outputs a function of their inputs) run in the build's thread
    # without a claim while no other process holds a lease on the store; a paid node, or any node once another
    # lease is there, is claimed as before.
    from clawstore.builder.claimed import claimed
    from clawstore.graph.plan import Node

    store, key, node, board = _lone_build(tmp_path)
    seen: list[bool] = []

    def work(n: Node) -> tuple[str, dict[str, Any]]:
        seen.append(board.path(n.key).exists())
        return store.put_json({"record of": n.key}), {}

    def fresh_node(n: int) -> Node:
        return Node("checks", {}, {}, store.put_json({"node": n}))

    with _leased_alone(store, board):
        claimed(work, store, board, fresh_node(1), unpaid_here=True)
        claimed(work, store, board, fresh_node(2))  # (not unpaid_here: a paid node, or one on a worker)
        assert seen == [False, True], "alone: the unpaid node ran unclaimed, the other under its claim"
        (store.root / "leases" / "other.json").write_text(json.dumps({"pid": 1, "host": "another-machine"}))
        _backdate(store.root / "leases")
        claimed(work, store, board, fresh_node(3), unpaid_here=True)
        claimed(work, store, board, fresh_node(4), unpaid_here=True)
        assert seen == [False, True, True, True], "another lease: every node claimed while it is there"
    board.close()
    store.close()


def test_alone_an_unpaid_node_whose_key_this_build_just_recorded_is_adopted(tmp_path: Path) -> None:
    # Two addresses of one campaign can share a key: unclaimed, the second finds the first's record (still in the
    # group commit's window) and adopts it instead of running the node again.
    from clawstore.builder.claimed import Adopted, claimed
    from clawstore.graph.plan import Node

    store, key, node, board = _lone_build(tmp_path)

    def work(n: Node) -> tuple[str, dict[str, Any]]:
        record = {"key": n.key, "status": "success", "cacheable": True, "outputs": {}}
        with store.batch():
            return store.put_action(n.key, record), record

    executed: list[Node] = []
    with _leased_alone(store, board), store.group_commit(window_s=60):
        first = claimed(work, store, board, node, unpaid_here=True)
        twin = Node("checks", {"model_id": "m2", "case_id": "c", "repetition": 0}, {}, key)
        found = claimed(_refusing(executed, "ran a node this build had just recorded"), store, board, twin,
                        unpaid_here=True)
    assert isinstance(found, Adopted) and found.record_id == first[0] and not executed
    board.close()
    store.close()


@pytest.mark.parametrize("neighbour", [False, True])
def test_a_build_alone_claims_its_paid_nodes_and_with_a_neighbour_every_node(
        ws: Workspace, claw: Claw, standin: StandIn, monkeypatch: pytest.MonkeyPatch, neighbour: bool) -> None:
    # Whether another process is there is Neighbours' to say (test_another_lease_makes_every_claim_look_again...):
    # here it says so from the start (a build of a second lasts less than a listing of leases/ is trusted).
    from clawstore.store.claims import Neighbours

    cases = [f"c{i}" for i in range(3)]
    _campaign(ws, standin, cases)
    monkeypatch.setattr(Neighbours, "present", lambda self: neighbour)
    taken: list[str] = []
    take = ClaimBoard.take

    def counted(board: ClaimBoard, key: str) -> bool:
        taken.append(key)
        return take(board, key)

    monkeypatch.setattr(ClaimBoard, "take", counted)
    code, out, err = claw("build", "--suite", "main", "--run-profile", "rp", *EVAL, "--output", "json")
    assert code == 0, err
    runs = 2 * len(cases)
    assert json.loads(out)["counts"]["executed"] == 4 * runs
    # Alone: the runs and judgements (paid) under claims; checks and results (unpaid, in the build's thread) not.
    assert len(taken) == len(set(taken)) == (4 * runs if neighbour else 2 * runs)
