"""The details of a run page from less than every record parsed whole: the bodies parsed to the fields the page shows
(view_data BODY_FIELDS, the rest skipped unparsed), and a checks node's planning view in the head standing for its
record when the checks' body holds the checks. Every run's detail is the one the full path gives: each record read,
each body parsed whole (checks in a body, and checks kept in the record's summary alone)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench.view_bench import CAMPAIGN, write_campaign
from clawstore.cli.report_cmd import _indexed
from clawstore.report import view_data
from clawstore.store import Store
from clawstore.values import jsontext
from tests.query.campaigns import Spec, build


def _bench(store: Store) -> str:
    write_campaign(store, runs=12, models=3)  # checks in a body of their own
    return str(CAMPAIGN["id"])


def _summary_checks(store: Store) -> str:
    build(store, Spec())  # checks in the record's summary alone
    return "suite_a__std__judge_x"


def _details(store: Store, campaign: str, read: list[str] | None = None, manifest: bool = False
             ) -> list[dict[str, Any]]:
    """Every run's detail; `read`: the objects they read in bulk (the report's numbers, collected first, read more);
    `manifest`: with the query manifest holding the head's rows, as `claw view` reads them."""
    data = view_data.collect(store, [campaign], manifest=_indexed(store, store.root, campaign) if manifest else None)
    many = store.get_many_bytes
    if read is not None:
        store.get_many_bytes = lambda oids: read.extend(oids := list(oids)) or many(oids)  # type: ignore[method-assign]
    try:
        return list(view_data.run_details(store, data))
    finally:
        store.get_many_bytes = many  # type: ignore[method-assign]


@pytest.mark.parametrize("write", [_bench, _summary_checks])
def test_the_details_are_those_of_every_record_and_body_read_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write: Callable[[Store], str]) -> None:
    store = Store(tmp_path / "store")
    campaign = write(store)
    read: list[str] = []
    fast = _details(store, campaign, read)
    assert fast and all(d["checks"] and d["judgements"] for d in fast)
    head = str(store.get_ref(f"campaigns/{campaign}"))
    checks_records = {n.record for _, nodes in view_data._runs_of_head(store, head, store.get_json(head)) for n in nodes
                      if n.kind == "checks"}
    assert bool(checks_records & set(read)) == (write is _summary_checks)  # (read only when the body has no checks)
    monkeypatch.setattr(view_data, "_fields_of", lambda data, fields: jsontext.loads(data))
    monkeypatch.setattr(view_data, "_planned", lambda node, names: None)
    assert _details(store, campaign) == fast


def test_a_body_that_is_not_an_object_is_parsed_in_full(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    odd = store.put_json(["an artifact that is a list"])
    assert view_data._fields_of(store.get_bytes(odd), view_data.BODY_FIELDS) == ["an artifact that is a list"]
    with pytest.raises(ValueError):
        view_data._fields_of(b"{not json", view_data.BODY_FIELDS)


def test_a_long_workspace_diff_is_shown_to_its_first_characters_and_says_where_the_rest_is(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    long = store.put_bytes(("+é line\n" * 20_000).encode())  # 160,000 characters, 180,000 bytes
    short = store.put_bytes(b"+one\n")
    objects = view_data._Objects(store, [])
    shown = objects.text(long)
    assert shown is not None and shown.startswith("+é line\n")
    assert shown.endswith(f"\n… (the rest is in the store: claw cat {long})")
    assert len(shown) == view_data.MAX_TEXT + len(f"\n… (the rest is in the store: claw cat {long})")
    assert objects.text(short) == "+one\n" and objects.text(None) is None
