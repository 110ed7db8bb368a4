"""A campaign head in parts, end to end: an edit adds parts only where it is; heads written before
parts (version 1, nodes inline) still plan, query, report and check; a lost part is found and repaired."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from clawstore.store import Store
from clawstore.store.headdoc import part_ids, read_head_doc
from clawstore.testing.standin import StandIn
from tests.support.claw import Claw
from tests.support.workspace import Workspace, many_cases

REF = "campaigns/main__rp__none"


def _store() -> Store:
    return Store(Path(os.environ["CLAW_STORE"]), create=False)


def _head() -> tuple[str, dict[str, Any]]:
    store = _store()
    head_id = store.get_ref(REF)
    assert head_id is not None
    return head_id, store.get_json(head_id)


def _count(claw: Claw, table: str) -> int:
    code, out, err = claw("query", f"select count(*) as n from {table}", "--format", "json")
    assert code == 0, err
    return int(json.loads(out)[0]["n"])


def _wide(tmp_path: Path, monkeypatch: Any) -> tuple[Workspace, Claw]:
    ws = many_cases(tmp_path / "wide", 160, concurrency=8)  # 320 runs: several parts
    monkeypatch.chdir(ws.root)
    return ws, Claw(ws.root)


def test_an_edit_adds_parts_only_where_its_nodes_are(tmp_path: Path, env: dict[str, str], standin: StandIn,
                                                     monkeypatch: Any) -> None:
    ws, claw = _wide(tmp_path, monkeypatch)
    assert claw.build()[0] == 0
    first_id, first = _head()
    parts = part_ids(first)
    assert first["head_version"] == 2 and len(parts) >= 5, first.get("node_count")
    assert _count(claw, "nodes") == first["node_count"]

    assert claw.build()[0] == 0
    assert _head()[0] == first_id  # a no-op build leaves the head as it was

    ws.edit("cases/c042/test.yaml", lambda d: d["input"]["messages"][1].update(content="Another question?"))
    requests = len(standin.requests)
    assert claw.build()[0] == 0
    assert len(standin.requests) == requests + 2  # c042 on m1 and m2
    _, second = _head()
    new = set(part_ids(second)) - set(parts)
    assert 1 <= len(new) <= 4 and len(new) < len(parts) // 2, (len(new), len(parts))
    nodes = read_head_doc(_store(), _head()[0])["nodes"]
    edited = [n for n in nodes if n["address"]["case_id"] == "c042"]
    assert edited and all(n["action"] == "exec" for n in edited)


def test_a_head_written_before_parts_still_plans_and_reads(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    assert claw.build()[0] == 0
    store = _store()
    head_id, _ = _head()
    inline = read_head_doc(store, head_id)
    old = store.put_json({**inline, "head_version": 1})  # the layout claw wrote before parts
    store.set_ref(REF, old, expected=head_id)
    assert claw.build()[0] == 0 and len(standin.requests) == 4  # planned from it: nothing sent
    assert _head()[0] == old  # unchanged state: not rewritten
    assert _count(claw, "runs") == 4
    code, out, err = claw("report", "--suite", "main", "--run-profile", "rp", "--output", "json")
    assert code == 0 and len(json.loads(out)["rows"]) == 4, err
    assert claw("fsck")[0] == 0

    ws.edit("cases/beta/test.yaml", lambda d: d["input"]["messages"][1].update(content="Name a fruit."))
    assert claw.build()[0] == 0 and len(standin.requests) == 6
    assert _head()[1]["head_version"] == 2  # the next head that changes is written in parts


def test_a_lost_part_is_found_by_fsck_and_repaired(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    assert claw.build()[0] == 0
    store = _store()
    head_id, head = _head()
    lost = "blake3:" + "ab" * 32
    broken = store.put_json({**head, "node_parts": [*head["node_parts"], lost]})
    store.set_ref(REF, broken, expected=head_id)

    code, out, err = claw("fsck")
    assert code != 0 and f"names part {lost}, which is missing" in out + err, out + err
    code, out, err = claw("fsck", "--repair")
    assert _store().get_ref(REF) is None, out + err
    assert claw("fsck")[0] == 0
    assert claw.build()[0] == 0 and len(standin.requests) == 4  # planned from the action cache


def test_a_removed_case_leaves_the_head_and_a_no_op_keeps_it(tmp_path: Path, env: dict[str, str],
                                                             standin: StandIn, monkeypatch: Any) -> None:
    ws, claw = _wide(tmp_path, monkeypatch)
    assert claw.build()[0] == 0
    first_id, first = _head()
    shutil.rmtree(ws.root / "configs" / "cases" / "c042")
    requests = len(standin.requests)
    assert claw.build()[0] == 0
    assert len(standin.requests) == requests  # every other node reused: nothing changed but the plan
    second_id, second = _head()
    assert second_id != first_id and second["node_count"] == first["node_count"] - 2
    assert not [n for n in read_head_doc(_store(), second_id)["nodes"] if n["address"]["case_id"] == "c042"]
    assert claw.build()[0] == 0
    assert _head()[0] == second_id
