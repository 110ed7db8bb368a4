"""A run page's run and judgement records taken from the head's planning view and the query manifest's rows (the
run's requested model, the judge's model) instead of read: every detail is the one the full path gives (each record
read), over a campaign with failed runs, runs reused and judgements made again, a record gone from the store, and a
model name that could have been a number (its record read); and those records are not read when the manifest
answers."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.view_bench import CAMPAIGN, write_campaign
from clawstore.cli.report_cmd import _indexed
from clawstore.errors import MissingObjectError
from clawstore.report import view_data
from clawstore.report.view_names import UNKNOWN, ManifestField, _plain_text
from clawstore.store import Store
from clawstore.values import jsontext
from tests.query.campaigns import Spec, build
from tests.view.test_view_details import _details

_MODELS = ["openai/gpt-a", "anthropic/claude-b", "7"]  # "7": a run record whose model the manifest cannot tell apart


def _mixed(store: Store) -> str:
    """Failed runs, run repetitions, two judge repetitions; built again with another rubric: runs reused, the
    judgements and results made again; judgements without a body (their scores in the record's summary alone)."""
    spec = Spec(models=_MODELS, repetitions=2, fail={("openai/gpt-a", "case_2")})
    build(store, spec)
    build(store, Spec(models=_MODELS, repetitions=2, fail={("openai/gpt-a", "case_2")}, salt="rubric v2"))
    return spec.campaign_id


def _bench(store: Store) -> str:
    write_campaign(store, runs=12, models=3)  # artifact, checks and judgement bodies of their own
    return str(CAMPAIGN["id"])


def _whole(store: Store, campaign: str, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The details with every record read and every body parsed whole, no manifest."""
    with monkeypatch.context() as patch:
        patch.setattr(view_data, "_fields_of", lambda data, fields: jsontext.loads(data))
        patch.setattr(view_data, "_planned", lambda node, names: None)
        return _details(store, campaign)


def _records(store: Store, campaign: str, kind: str, model: str | None = None) -> set[str]:
    head = str(store.get_ref(f"campaigns/{campaign}"))
    return {str(n.record) for _, nodes in view_data._runs_of_head(store, head, store.get_json(head)) for n in nodes
            if n.kind == kind and (model is None or n.address.get("model_id") == model)}


@pytest.mark.parametrize("write", [_bench, _mixed])
def test_the_details_from_the_manifest_are_those_of_every_record_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write: Callable[[Store], str]) -> None:
    store = Store(tmp_path / "store")
    campaign = write(store)
    read: list[str] = []
    fast = _details(store, campaign, read, manifest=True)
    assert fast == _whole(store, campaign, monkeypatch)
    assert {d["status"] for d in fast} == ({"success"} if write is _bench else {"success", "provider_error"})
    runs, judges = _records(store, campaign, "run"), _records(store, campaign, "judge")
    assert runs and judges
    if write is _bench:  # every body holds the scores: no run or judge record read
        assert not (runs | judges) & set(read)
    else:  # no judgement body: their records are read; the runs' are not, but for model "7"'s
        assert judges <= set(read)
        assert runs & set(read) == _records(store, campaign, "run", "7")
        assert any(d["requested_model"] == "7" for d in fast)


def test_a_run_record_gone_from_the_store_is_shown_as_the_full_path_shows_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "store")
    campaign = _bench(store)
    gone = sorted(_records(store, campaign, "run"))[0]
    _indexed(store, store.root, campaign)  # (before the record goes: the report's rows need it)
    missing, many, get_json = store.missing, store.get_many_bytes, store.get_json

    def without(oids: Iterable[str]) -> dict[str, bytes]:
        return {oid: data for oid, data in many(oids).items() if oid != gone}

    def json_of(oid: str) -> Any:
        if oid == gone:
            raise MissingObjectError(oid)
        return get_json(oid)

    monkeypatch.setattr(store, "missing", lambda oids: sorted({*missing(oids := list(oids)), *({gone} & {*oids})}))
    monkeypatch.setattr(store, "get_many_bytes", without)
    monkeypatch.setattr(store, "get_json", json_of)
    data = view_data.collect(store, [campaign], manifest=store.root / "manifest")
    shown = list(view_data.run_details(store, data))
    assert [d for d in shown if d["status"] == "missing"]
    with monkeypatch.context() as patch:
        patch.setattr(view_data, "_planned", lambda node, names: None)
        assert list(view_data.run_details(store, data)) == shown


def test_a_cell_that_could_be_the_text_of_another_json_value_is_not_taken() -> None:
    for value in (5, -1e-07, 2.5, True, False, [1, "a"], {"a": 1}, float("inf")):
        assert not _plain_text(str(value)), value
    for text in (None, "", "vendor/m0", "gpt-4o", "inf-model", "Truer", "7b"):
        assert _plain_text(text), text


def test_rows_out_of_the_heads_order_answer_nothing() -> None:
    rows = [{"record_id": "r1", "case_id": "b", "judge_model": "j"},
            {"record_id": "r2", "case_id": "c", "judge_model": "k"}]
    field = ManifestField(iter(rows), "judge_model")
    assert field.get("r2", "c") == "k"
    assert field.get("r1", "b") is UNKNOWN  # asked for after a later case: read the record
    assert field.get("r3", "d") is UNKNOWN
    assert ManifestField(None, "judge_model").get("r1", "b") is UNKNOWN


def test_a_stream_left_undrained_is_closed() -> None:
    closed: list[bool] = []

    def rows() -> Iterator[dict[str, Any]]:
        try:
            yield {"record_id": "r1", "case_id": "a", "judge_model": "j"}
            yield {"record_id": "r2", "case_id": "b", "judge_model": "k"}
        finally:
            closed.append(True)

    field = ManifestField(rows(), "judge_model")
    assert field.get("r1", "a") == "j" and not closed
    field.close()
    assert closed == [True] and field.get("r2", "b") is UNKNOWN
