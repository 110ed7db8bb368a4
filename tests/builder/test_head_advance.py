"""The campaign head a build advances, streamed (its nodes spilled in sorted runs, merged part by part with the
previous head's): the same head, byte for byte, as merging everything in memory, on random campaigns. The
reference below is the in-memory merge claw used before (session 37's BuildLog.advance_head and write_head)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import blake3
import pytest

from clawstore.builder import buildlog
from clawstore.builder.buildlog import BuildLog, head_ref
from clawstore.graph.plan import address_id
from clawstore.store import RefConflict
from clawstore.store.actions import reusable
from clawstore.store.headdoc import PART_MAX, PART_NODES, read_head_doc, write_head
from clawstore.store.store import Store

CAMPAIGN = {"id": "s__rp__ev", "suite_id": "s", "run_profile_id": "rp", "evaluation_profile_id": "ev"}
REF = head_ref(CAMPAIGN["id"])


# ----------------------------------------------------------------- the reference: everything in memory

def _reference_place(node: dict[str, Any]) -> tuple[str, str]:
    address = node["address"]
    fields = sorted(address.items())
    return str(address.get("case_id")), "|".join(f"{n}={v}" for n, v in fields) + f"|{node.get('kind')}"


def _reference_write(store: Store, fields: dict[str, Any], nodes: list[dict[str, Any]]) -> str:
    parts: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    for place, node in sorted(((_reference_place(n), n) for n in nodes), key=lambda pair: pair[0]):
        current.append(node)
        if len(current) >= PART_MAX or blake3.blake3(place[1].encode()).digest()[0] % PART_NODES == 0:
            parts.append(current)
            current = []
    if current:
        parts.append(current)
    actions: list[list[Any]] = []
    part_ids = []
    for part in parts:
        part_ids.append(store.put_json({"head_part": 1, "nodes": [
            {k: v for k, v in node.items() if k != "action"} for node in part]}))
        for node in part:
            if actions and actions[-1][0] == node.get("action"):
                actions[-1][1] += 1
            else:
                actions.append([node.get("action"), 1])
    plain = {k: v for k, v in fields.items() if k not in ("nodes", "node_parts", "node_count", "node_actions")}
    return store.put_json({**plain, "head_version": 2, "node_count": len(nodes), "node_parts": part_ids,
                           "node_actions": actions})


def _reference_advance(store: Store, fields: dict[str, Any], previous_id: str | None,
                       entries: list[list[Any]], planned: set[str] | None) -> str:
    """entries: [kind, key, record, action, address, view] in the order added (unstored ones already failed)."""
    previous = {address_id(n["kind"], n["address"]): n
                for n in (read_head_doc(store, previous_id)["nodes"] if previous_id else [])}
    recorded = []
    for kind, key, record_id, action, address, view in entries:
        if record_id is None:
            continue
        old = previous.get(address_id(kind, address))
        if action == "fail" and old is not None and old["key"] == key and reusable(old.get("record_doc")):
            continue
        recorded.append((kind, key, record_id, action, address, view))
    if previous_id:
        unchanged = all((old := previous.get(address_id(k, a))) is not None and old["key"] == key
                        and old["record"] == r for k, key, r, _, a, _ in recorded)
        if unchanged and (planned is None or all(a in planned for a in previous)):
            return previous_id
    merged = dict(previous)
    for kind, key, record_id, action, address, view in recorded:
        merged[address_id(kind, address)] = {"kind": kind, "key": key, "record": record_id, "action": action,
                                             "address": address, "record_doc": view}
    # the previous evaluation of a run replaced (another record), not evaluated again, goes with it (session 60), unless
    # both runs are results with the same outputs (a legacy key's copy: its evaluations are the new run's)
    of = lambda node: (node["address"]["case_id"], node["address"]["model_id"], node["address"]["repetition"])  # noqa: E731
    same_result = lambda a, b: all(n["record_doc"] and n["record_doc"]["cacheable"] for n in (a, b)) and \
        a["record_doc"]["outputs"] == b["record_doc"]["outputs"]  # noqa: E731
    replaced = {of(node) for at, node in merged.items()
                if node["kind"] == "run" and at in previous and previous[at]["record"] != node["record"]
                and not same_result(previous[at], node)}
    merged = {at: node for at, node in merged.items()
              if node["kind"] == "run" or node is not previous.get(at) or of(node) not in replaced}
    return _reference_write(store, fields, [n for a, n in merged.items() if planned is None or a in planned])


# ----------------------------------------------------------------- random campaigns

KINDS = ("run", "checks", "judge", "result")


def _addresses(rng: random.Random) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for model in range(rng.randint(1, 3)):
        for case in rng.sample(range(400), rng.randint(1, 60)):
            for repetition in range(rng.randint(1, 2)):
                address = {"model_id": f"m{model}", "case_id": f"case_{case:04d}", "repetition": repetition}
                found += [(kind, address) for kind in ("run", "checks", "result")]
                found.append(("judge", {**address, "judge_run_id": "main", "judge_repetition": 0}))
    return found


def _record(rng: random.Random, store: Store, cacheable: bool) -> tuple[str, dict[str, Any]]:
    record = {"status": "success" if cacheable else "runner_error", "cacheable": cacheable,
              "outputs": {"artifact": f"blake3:{rng.getrandbits(1):016x}"},  # (two: a run of another key may
              # have the same outputs)
              "metrics": {"input_tokens": rng.randint(0, 99), "cost_usd": rng.choice([0.25, 1e-05, 0.1 + 0.2])},
              "error": None if cacheable else {"code": "timeout", "message": "ü\n\"x\""},
              "summary": {"final_score": rng.random(), "passed": rng.random() < 0.5, "checks": [1, 2]}}
    return store.put_json(record), record


def _key(rng: random.Random) -> str:
    return f"blake3:{rng.choice(['a', 'b', 'c'])}"


def _previous(rng: random.Random, store: Store, addresses: list[tuple[str, dict[str, Any]]]) -> str | None:
    if rng.random() < 0.2:
        return None
    nodes = []
    with store.batch():  # (the records made durable together: one fsync each was most of these tests' time)
        for kind, address in addresses:
            if rng.random() < 0.7:
                record_id, record = _record(rng, store, rng.random() < 0.8)
                nodes.append({"kind": kind, "key": _key(rng), "record": record_id,
                              "action": rng.choice(["exec", "reuse"]), "address": address,
                              "record_doc": buildlog.planning_view(record)})
    head_id = _reference_write(store, {"build_id": "earlier", "campaign": CAMPAIGN}, nodes)
    store.set_ref(REF, head_id)
    return head_id


def _build(rng: random.Random, store: Store, log: BuildLog, addresses: list[tuple[str, dict[str, Any]]],
           previous_id: str | None) -> list[list[Any]]:
    """Random nodes added to `log` (some reused from the previous head as it is, some twice, some unstored
    afterwards); what the reference merges, the unstored ones failed."""
    old = {address_id(n["kind"], n["address"]): n for n in read_head_doc(store, previous_id)["nodes"]} \
        if previous_id else {}
    reuse_only = rng.random() < 0.25  # a build that changes nothing (unless the campaign plans fewer nodes)
    chosen = [pair for pair in addresses if rng.random() < 0.6]
    chosen += rng.sample(chosen, min(len(chosen), rng.randint(0, 3)))  # an address added twice
    rng.shuffle(chosen)
    entries = []
    with store.batch():  # (as a build's records are: made durable together)
        for kind, address in chosen:
            before = old.get(address_id(kind, address))
            action = "reuse" if reuse_only else rng.choice(["exec", "exec", "reuse", "fail", "skip"])
            if reuse_only and (before is None or not before.get("record")):
                continue
            if action == "reuse" and before is not None and before.get("record"):
                key, record_id = before["key"], before["record"]
                record = store.get_json(record_id)
            elif action == "skip":
                key, record_id, record = _key(rng), None, None
            else:
                key = before["key"] if before is not None and rng.random() < 0.5 else _key(rng)
                record_id, record = _record(rng, store, action != "fail" or rng.random() < 0.3)
                if action == "fail" and rng.random() < 0.2:
                    record_id, record = None, None
            log.add(kind, key, record_id, action, address, record)
            entries.append([kind, key, record_id, action, address, buildlog.planning_view(record) if record_id
                            and record else None])
    for entry in rng.sample(entries, min(len(entries), rng.randint(0, 2) if not reuse_only else 0)):
        if entry[2] is not None and rng.random() < 0.5:
            class Lost:
                key, record_id, address = entry[1], entry[2], entry[4]
            log.unstore(Lost)  # type: ignore[arg-type]
            for same in entries:
                if (same[1], same[2], same[4]) == (entry[1], entry[2], entry[4]):
                    same[2], same[3] = None, "fail"
    return entries


def _planned(rng: random.Random, store: Store, addresses: list[tuple[str, dict[str, Any]]],
             previous_id: str | None) -> set[str] | None:
    if rng.random() < 0.3:
        return None
    planned = {address_id(kind, address) for kind, address in addresses if rng.random() < 0.99}
    if previous_id and rng.random() < 0.5:  # a campaign that still plans every node it had
        planned |= {address_id(n["kind"], n["address"]) for n in read_head_doc(store, previous_id)["nodes"]}
    return planned


@pytest.mark.parametrize("seed", range(40))
def test_the_streamed_head_is_the_head_merged_in_memory(tmp_path: Path, seed: int,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    if seed % 2:  # spilled in small sorted runs, merged over several levels
        monkeypatch.setattr(buildlog, "SPILL_RUN_BYTES", rng.choice([1, 500, 5_000]))
        monkeypatch.setattr(buildlog, "SPILL_FAN_IN", rng.choice([2, 3]))
    store = Store(tmp_path / "store")
    addresses = _addresses(rng)
    previous_id = _previous(rng, store, addresses)
    log = BuildLog(store, CAMPAIGN)
    entries = _build(rng, store, log, addresses, previous_id)
    planned = _planned(rng, store, addresses, previous_id)
    log.end("complete")
    rng.random()  # (the draw that once chose a head read at the start: kept, so each seed is the campaign it was)
    head_id = log.advance_head(planned)

    expected = _reference_advance(store, log._head_fields(), previous_id, entries, planned)
    assert head_id == expected
    assert store.get_ref(REF) == expected
    assert log.doc.head == expected and log.doc.head_written == (expected != previous_id)


def _campaign(tmp_path: Path, seed: int) -> tuple[random.Random, Store, list[tuple[str, dict[str, Any]]], str]:
    """A random campaign with a head."""
    rng = random.Random(seed)
    store = Store(tmp_path / "store")
    addresses = _addresses(rng)
    previous_id = _previous(rng, store, addresses) or _previous(rng, store, addresses)
    assert previous_id is not None
    return rng, store, addresses, previous_id


def test_an_unchanged_state_keeps_the_head(tmp_path: Path) -> None:
    _, store, _, previous_id = _campaign(tmp_path, 7)
    log = BuildLog(store, CAMPAIGN)
    for node in read_head_doc(store, previous_id)["nodes"]:
        log.add(node["kind"], node["key"], node["record"], "reuse", node["address"], store.get_json(node["record"]))
    assert log.advance_head(None) == previous_id and log.doc.head_written is False


def test_a_head_whose_nodes_are_no_longer_all_planned_is_rewritten(tmp_path: Path) -> None:
    _, store, _, previous_id = _campaign(tmp_path, 5)
    nodes = read_head_doc(store, previous_id)["nodes"]
    log = BuildLog(store, CAMPAIGN)
    planned = {address_id(n["kind"], n["address"]) for n in nodes[1:]}
    head_id = log.advance_head(planned)
    assert head_id != previous_id and read_head_doc(store, head_id)["nodes"] == nodes[1:]


def test_a_head_advanced_meanwhile_is_merged_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng, store, addresses, first_id = _campaign(tmp_path, 3)
    log = BuildLog(store, CAMPAIGN)
    entries = _build(rng, store, log, addresses, first_id)
    record_id, record = _record(rng, store, True)
    new = {"model_id": "m8", "case_id": "case_0001", "repetition": 0}
    log.add("run", "blake3:n", record_id, "exec", new, record)  # (a change: the head is written)
    entries.append(["run", "blake3:n", record_id, "exec", new, buildlog.planning_view(record)])
    other_id = _reference_write(store, {"build_id": "other", "campaign": CAMPAIGN},
                                [{"kind": "run", "key": "blake3:o", "record": None, "action": "fail",
                                  "address": {"model_id": "m9", "case_id": "case_0000", "repetition": 0}}])
    set_ref, calls = store.set_ref, []

    def racing(name: str, value: str, expected: Any = None) -> None:
        calls.append(value)
        if len(calls) == 1:  # another build advances the head between our read and our write
            set_ref(name, other_id)
            raise RefConflict(name, expected, other_id)
        set_ref(name, value, expected=expected)

    monkeypatch.setattr(store, "set_ref", racing)
    head_id = log.advance_head(None)
    assert len(calls) == 2 and head_id == _reference_advance(store, log._head_fields(), other_id, entries, None)
    assert {n["address"]["model_id"] for n in read_head_doc(store, head_id)["nodes"]} >= {"m9"}


def test_a_head_not_in_place_order_is_merged_as_one_that_is(tmp_path: Path) -> None:
    """A version-1 head (nodes inline, in any order) and a parted head whose nodes are out of place order."""
    rng, store, addresses, sorted_id = _campaign(tmp_path, 13)
    nodes = read_head_doc(store, sorted_id)["nodes"]
    rng.shuffle(nodes)
    inline_id = store.put_json({"build_id": "old", "campaign": CAMPAIGN, "nodes": nodes})
    part_id = store.put_json({"head_part": 1, "nodes": [{k: v for k, v in n.items() if k != "action"}
                                                         for n in nodes]})
    parted_id = store.put_json({"build_id": "old", "campaign": CAMPAIGN, "head_version": 2,
                                "node_count": len(nodes), "node_parts": [part_id],
                                "node_actions": [[n.get("action"), 1] for n in nodes]})
    for previous_id in (inline_id, parted_id):
        store.set_ref(REF, previous_id)
        log = BuildLog(store, CAMPAIGN)
        entries = _build(rng, store, log, addresses, previous_id)
        head_id = log.advance_head(None)
        assert head_id == _reference_advance(store, log._head_fields(), previous_id, entries, None)


def test_the_spilled_runs_are_removed_once_the_sealed_log_names_the_head(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(buildlog, "SPILL_RUN_BYTES", 1_000)
    rng, store, addresses, previous_id = _campaign(tmp_path, 17)
    log = BuildLog(store, CAMPAIGN)
    _build(rng, store, log, addresses, previous_id)
    assert [p.name for p in store.tmp_dir.iterdir() if p.name.endswith(".sorted")]
    log.end("complete")
    log.advance_head(None)
    log.seal()
    assert not [p.name for p in store.tmp_dir.iterdir() if p.name.endswith(".sorted")]
    assert log.advance_head(None) == log.doc.head  # (a second advance: the head that names them)


def test_a_disk_that_refuses_the_runs_keeps_the_nodes_in_memory(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(buildlog, "SPILL_RUN_BYTES", 1_000)
    rng, store, addresses, previous_id = _campaign(tmp_path, 19)
    log = BuildLog(store, CAMPAIGN)
    real_open, refused = open, []

    def full(path: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if str(path).endswith(".run") and "w" in mode and len(refused) < 5:
            refused.append(path)
            raise OSError(28, "No space left on device")
        return real_open(path, mode, *args, **kwargs)

    monkeypatch.setattr("builtins.open", full)
    entries = _build(rng, store, log, addresses, previous_id)
    assert len(refused) == 5  # (then the disk takes them again)
    log.end("complete")
    head_id = log.advance_head(None)
    assert head_id == _reference_advance(store, log._head_fields(), previous_id, entries, None)


def test_write_head_keeps_its_bytes(tmp_path: Path) -> None:
    rng = random.Random(11)
    store = Store(tmp_path / "store")
    nodes = [{"kind": kind, "key": _key(rng), "record": None, "action": rng.choice(["exec", None]), "address": a}
             for kind, a in _addresses(rng)]
    rng.shuffle(nodes)
    fields = {"build_id": "b", "campaign": CAMPAIGN}
    assert write_head(store, fields, nodes) == _reference_write(store, fields, nodes)



def _judged_run(store: Store) -> tuple[dict[str, Any], dict[str, Any], str]:
    """A head of one run and its judgement (0.50 USD): the run's address, record and the judgement's record id."""
    address = {"model_id": "m", "case_id": "c", "repetition": 0}
    judged = {**address, "judge_run_id": "main", "judge_repetition": 0}
    run = {"status": "success", "cacheable": True, "outputs": {"artifact": store.put_json({"reply": "4"})},
           "metrics": {}, "summary": {}}
    judgement = {"status": "success", "cacheable": True, "outputs": {}, "metrics": {"cost_usd": 0.5},
                 "summary": {"final_score": 8.0}}
    run_id, judgement_id = store.put_json(run), store.put_json(judgement)
    previous = [{"kind": "run", "key": "blake3:legacy", "record": run_id, "action": "exec", "address": address,
                 "record_doc": buildlog.planning_view(run)},
                {"kind": "judge", "key": "blake3:j", "record": judgement_id, "action": "exec", "address": judged,
                 "record_doc": buildlog.planning_view(judgement)}]
    store.set_ref(REF, write_head(store, {"build_id": "earlier", "campaign": CAMPAIGN}, previous))
    return address, run, judgement_id


def _interrupted_after(store: Store, address: dict[str, Any], key: str, record: dict[str, Any],
                       action: str) -> dict[str, str]:
    """A build that logged this run and was interrupted before its evaluation: its head's records by kind."""
    log = BuildLog(store, CAMPAIGN)
    log.add("run", key, store.put_json(record), action, address, record)
    log.end("interrupted")
    return {n["kind"]: n["record"] for n in read_head_doc(store, log.advance_head(None))["nodes"]}


def test_a_run_re_keyed_with_the_same_outputs_keeps_its_evaluations(tmp_path: Path) -> None:
    """An OpenClaw run found under its legacy key (a price was in it) is recorded under its key now: another key, the
    same outputs, so the same judgements (a judgement's key covers the run's outputs, not its key). A build that logs
    the run and is interrupted before its window's evaluations (builder/engine.py: a window's reused runs are logged
    first) dropped them from the head as if the run had been replaced; gc then deleted the paid judgement, and the
    next build asked the judge again (s60-review2)."""
    from clawstore.store.services.gc import collect

    store = Store(tmp_path / "store")
    address, run, judgement_id = _judged_run(store)
    # (legacy_keys.record_as: the same outputs under the key now)
    kept = _interrupted_after(store, address, "blake3:now", {**run, "key": "blake3:now"}, "reuse")
    assert kept.get("judge") == judgement_id, kept
    collect(store, grace_s=0)
    assert store.has(judgement_id)


def test_a_run_executed_again_under_its_key_takes_the_evaluation_of_the_one_it_replaced(tmp_path: Path) -> None:
    """`claw build --force` executes a run again under the same key; interrupted before its judgement, the head kept
    the judgement of the run replaced beside it (its score shown as the new run's), as a case edited did before
    32a761b (s60-review2)."""
    store = Store(tmp_path / "store")
    address, run, _ = _judged_run(store)
    again = {**run, "outputs": {"artifact": store.put_json({"reply": "5"})}}
    kept = _interrupted_after(store, address, "blake3:legacy", again, "exec")
    assert "judge" not in kept, kept
