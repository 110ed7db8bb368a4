"""A run page's bodies are parsed to the fields it shows (view_data BODY_FIELDS, the rest skipped unparsed): every
run's detail is the one the bodies parsed whole give, and a body that is not a JSON object is read as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.view_bench import CAMPAIGN, write_campaign
from clawstore.report import view_data
from clawstore.store import Store
from clawstore.values import jsontext


def _details(store: Store) -> list[dict[str, object]]:
    data = view_data.collect(store, [CAMPAIGN["id"]])
    return list(view_data.run_details(store, data))


def test_the_details_from_the_fields_a_page_shows_are_those_of_the_bodies_parsed_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "store")
    write_campaign(store, runs=12, models=3)
    odd = store.put_json(["an artifact that is a list"])  # (not an object: parsed in full, as before)
    fast = _details(store)
    assert len(fast) == 12 and all(d["conversation"] and d["checks"] and d["judgements"] for d in fast)
    assert view_data._fields_of(store.get_bytes(odd), view_data.BODY_FIELDS) == ["an artifact that is a list"]
    monkeypatch.setattr(view_data, "_fields_of", lambda data, fields: jsontext.loads(data))
    assert _details(store) == fast
