"""fsck's records' step on two cores (services/fsck.py `_check_records`, fsck_beside.FromTheEnd): a helper forked once
the records are grouped by pack checks groups from the last one back; what fsck reports — the entries counted, each
bad entry and each bad head node with its reason — is the same as one process's, and the same with the helper
SIGKILLed at work (its groups are then checked by fsck)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from clawstore.store import Store
from clawstore.store.actions import key_digest, set_entries
from clawstore.store.core.ids import PREFIX
from clawstore.store.headdoc import part_ids, write_head
from clawstore.store.services import fsck as fsck_module
from clawstore.store.services.fsck import fsck
from tests.support.fresh import in_fresh_process
from tests.support.storefiles import flip_in_frame, lose_object

PACKS = 5


def _campaign_runs(store: Store, packs: int, per_pack: int
                   ) -> tuple[list[str], list[str], list[str], list[dict[str, Any]]]:
    """`per_pack` runs in each of `packs` packs: a record naming its key (its input document) and an artifact, and a
    head node naming the record. Returns the keys, records, artifacts and nodes."""
    keys, records, artifacts, nodes = [], [], [], []
    for number in range(packs):
        for i in range(per_pack):
            key = store.put_json({"node": f"{number}.{i}"})
            artifact = store.put_bytes(f"artifact {number} {i} ".encode() * 30)
            record = store.put_action(key, {"kind": "run", "key": key, "input": key,
                                            "outputs": {"input_document": key, "artifact": artifact}})
            keys.append(key)
            records.append(record)
            artifacts.append(artifact)
            nodes.append({"kind": "run", "key": key, "record": record,
                          "address": {"model_id": "m", "case_id": f"c{number}.{i}", "repetition": 0}})
        store.runtime.close_writer()
    return keys, records, artifacts, nodes


def _damaged(root: Path) -> Path:
    """Records, their input documents and artifacts in PACKS packs, an entry and a head node each; then damage in
    three of them: an input document lost, an artifact damaged (its record's entry and node are bad), an entry
    pointed at another key's record. Fsck'd once first (its packs verified: the later fsck is the quick one)."""
    store = Store(root)
    keys, records, artifacts, nodes = _campaign_runs(store, PACKS, 8)
    store.set_ref("campaigns/x", write_head(store, {"campaign": "x"}, nodes))
    store.runtime.close_writer()
    assert fsck(store).problems == []
    lose_object(store, keys[1])
    flip_in_frame(store, artifacts[8 * 2 + 3], -5)
    set_entries(store, {key_digest(keys[8 * 4 + 6]): (bytes.fromhex(records[8 * 4 + 7][len(PREFIX):]),
                                                       time.time_ns())})
    return root


def _run(root: Path, beside: bool, log: Path, monkeypatch: pytest.MonkeyPatch, kill_at: int = 0) -> tuple[Any, ...]:
    """fsck of the store at `root` (a fresh Store): what it found of the entries and nodes. Which process checked
    which group is appended to `log`; the helper kills itself at its `kill_at`-th group (0: never)."""
    check_group, parent, calls = fsck_module._check_group, os.getpid(), [0]

    def noted(store: Store, report: Any, reach: Any, pack: str, rows: list[bytes], bad_nodes: Any) -> None:
        calls[0] += 1  # (each process's own count: the helper is forked)
        with open(log, "a") as out:
            out.write(f"{os.getpid()} {pack or '-'}\n")
        if os.getpid() != parent and calls[0] == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(0.05)  # (groups this small: both sides get some)
        check_group(store, report, reach, pack, rows, bad_nodes)

    monkeypatch.setattr(fsck_module, "_check_group", noted)
    report = fsck(Store(root), beside=beside)
    monkeypatch.setattr(fsck_module, "_check_group", check_group)
    return report.actions, report.bad_actions, report.bad_head_nodes, report.problems


def _who(log: Path) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {}
    for line in log.read_text().splitlines():
        pid, pack = line.split()
        found.setdefault(int(pid), []).append(pack)
    return found


def test_the_helper_checks_groups_and_fsck_reports_the_same(tmp_path: Path) -> None:
    in_fresh_process(__name__, "_helper_checks", tmp_path)  # (fsck forks only where no other thread runs)


def _helper_checks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _damaged(tmp_path / "a")
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    expected = _run(tmp_path / "a", False, tmp_path / "alone.log", monkeypatch)
    actions, bad_actions, bad_nodes, _ = expected
    assert actions == 8 * PACKS and len(bad_actions) == 3 and len(bad_nodes["campaigns/x"]) == 2
    assert _run(tmp_path / "b", True, tmp_path / "beside.log", monkeypatch) == expected
    alone, beside = _who(tmp_path / "alone.log"), _who(tmp_path / "beside.log")
    groups = alone[os.getpid()]
    helped = [pack for pid, packs in beside.items() if pid != os.getpid() for pack in packs]
    assert helped and helped == sorted(helped, reverse=True) and groups[-1] in helped  # (from the last one back)
    assert sorted(helped + beside[os.getpid()]) == sorted(groups)  # (each group checked once)


def test_a_helper_killed_at_work_leaves_its_groups_to_fsck(tmp_path: Path) -> None:
    in_fresh_process(__name__, "_helper_killed", tmp_path)  # (its timeout: a dead helper's answers awaited would hang)


def _helper_killed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _damaged(tmp_path / "a")
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    expected = _run(tmp_path / "a", False, tmp_path / "alone.log", monkeypatch)
    assert _run(tmp_path / "b", True, tmp_path / "beside.log", monkeypatch, kill_at=2) == expected
    beside = _who(tmp_path / "beside.log")
    assert [len(packs) for pid, packs in beside.items() if pid != os.getpid()] == [2], "forked, killed at its second"


def test_a_garbled_answer_leaves_its_groups_to_fsck(tmp_path: Path) -> None:
    in_fresh_process(__name__, "_garbled", tmp_path)


def _garbled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The helper's first answer has a line of garbage before it: a newline inside one (on the old code its second
    line, the group's findings, was taken for the next group's answer, that group never checked)."""
    _damaged(tmp_path / "a")
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    expected = _run(tmp_path / "a", False, tmp_path / "alone.log", monkeypatch)
    parent, dumps = os.getpid(), json.dumps

    class Garbling:
        loads = staticmethod(json.loads)

        @staticmethod
        def dumps(value: Any) -> str:
            garbled = os.getpid() != parent and not Garbling.done
            Garbling.done = Garbling.done or garbled
            return ("[garbled\n" if garbled else "") + dumps(value)

        done = False

    monkeypatch.setattr(fsck_module, "json", Garbling)
    assert _run(tmp_path / "b", True, tmp_path / "beside.log", monkeypatch) == expected
    assert len(_who(tmp_path / "beside.log")) == 2, "forked"


def test_a_damaged_head_or_part_is_named_as_before_with_or_without_the_helper(tmp_path: Path) -> None:
    in_fresh_process(__name__, "_damaged_heads", tmp_path)


def _damaged_heads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The heads are read (their nodes grouped) before the packs are verified; a head or a part found damaged then
    makes its ref unsound, named as before, and its nodes' verdicts are dropped (a bad node under it is not named)."""
    store = Store(tmp_path / "a")
    _, _, artifacts, nodes = _campaign_runs(store, 3, 80)
    parted = write_head(store, {"campaign": "x"}, nodes)
    whole = write_head(store, {"campaign": "y"}, nodes[:3])
    store.set_ref("campaigns/x", parted)
    store.set_ref("campaigns/y", whole)
    store.runtime.close_writer()
    assert fsck(store).problems == []
    part = part_ids(store.get_json(parted))[1]
    flip_in_frame(store, part, -5)
    flip_in_frame(store, whole, -5)
    lose_object(store, artifacts[0])  # (node 0 of both heads is bad: not named, their refs being unsound)
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    expected = _run(tmp_path / "a", False, tmp_path / "alone.log", monkeypatch)
    found = fsck(Store(tmp_path / "a"))
    assert found.bad_refs == {"campaigns/x": f"target {parted} names part {part}, which is corrupt",
                              "campaigns/y": f"target {whole} is corrupt"}
    assert expected[2] == {} and len(expected[1]) == 1  # (the entry whose artifact is lost: named)
    assert _run(tmp_path / "b", True, tmp_path / "beside.log", monkeypatch) == expected
    assert len(_who(tmp_path / "beside.log")) == 2, "forked"
