"""`claw import-pae`: a workspace in pae's format (written by the test) imports, and the next build
sends no request for what pae completed; damaged files are reported and skipped; imports are idempotent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clawstore.testing.standin import StandIn
from tests.pae.paefiles import PaeRun, write_outputs
from tests.support.claw import Claw
from tests.support.judging import JUDGE, eval_profile, judge_reply
from tests.support.oldclaw import KEYED_WITH_JUDGE_TYPE, old_claw, old_clawstore
from tests.support.workspace import Workspace

SETTINGS = {"temperature": 0, "timeout_seconds": 5, "retries": 2}  # the standard run profile, merged
SYSTEM = "You are a strict judge. Answer in JSON."
PROMPTS = {"alpha": "What is 2 + 2?", "beta": "Name a colour."}


def pae_runs(**changes: Any) -> list[PaeRun]:
    runs = [PaeRun(m, c, PROMPTS[c]) for m in ("m1", "m2") for c in ("alpha", "beta")]
    for run in runs:
        for name, value in changes.get(f"{run.model_id}/{run.case_id}", {}).items():
            setattr(run, name, value)
    return runs


@pytest.fixture
def pae(ws: Workspace, standin: StandIn) -> Workspace:
    eval_profile(ws)
    standin.script(JUDGE, judge_reply(5))
    return ws


def import_pae(claw: Claw, ws: Workspace) -> tuple[int, dict[str, Any]]:
    code, out, err = claw("import-pae", str(ws.root), "--output", "json")
    assert out, err
    return code, json.loads(out)


def build(claw: Claw) -> dict[str, Any]:
    code, out, err = claw("build", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev",
                          "--output", "json")
    assert code == 0, err
    return json.loads(out)


def test_the_build_after_an_import_sends_nothing_for_what_pae_completed(pae: Workspace, claw: Claw,
                                                                        standin: StandIn) -> None:
    write_outputs(pae.root, pae_runs(**{"m1/alpha": {"judge_scores": [6.0, 7.0, 9.0]}}), SETTINGS, SYSTEM)
    code, report = import_pae(claw, pae)
    assert code == 0 and report["unmapped"] == [] and report["damaged"] == []
    assert (report["runs_imported"], report["judgements_imported"], report["checks_computed"]) == (4, 12, 4)
    out = build(claw)
    assert standin.requests == []
    assert [r["run"] for r in out["rows"]] == ["reuse"] * 4
    scores = {(r["model_id"], r["case_id"]): r["score"] for r in out["rows"]}
    assert scores[("m1", "alpha")] == 7.0 and scores[("m2", "beta")] == 7.0  # medians of pae's judgements
    assert out["metrics"]["cost_usd"] == 0.0


def test_a_gc_between_the_import_and_the_build_keeps_what_pae_paid_for(pae: Workspace, claw: Claw,
                                                                      standin: StandIn) -> None:
    """No head names what the import stored until a build adopts it: before session 76 a `claw gc` past its grace
    period (an hour, or `--grace 0`) between the two deleted every imported run and judgement, and the build paid for
    all of them again (16 requests here). The import is kept by a ref of its own, `imports/<id>`, until deleted."""
    write_outputs(pae.root, pae_runs(), SETTINGS, SYSTEM)
    code, report = import_pae(claw, pae)
    assert code == 0 and (report["runs_imported"], report["judgements_imported"]) == (4, 12), report
    assert report["kept_by"].startswith("imports/"), report
    assert claw("gc", "--grace", "0")[0] == 0
    build(claw)
    assert standin.requests == []

    code, out, err = claw("refs", "--delete", report["kept_by"])  # (once built, the head names them: let it go)
    assert code == 0, err
    assert claw("gc", "--grace", "0")[0] == 0
    assert [r["run"] for r in build(claw)["rows"]] == ["reuse"] * 4 and standin.requests == []


def test_importing_twice_stores_nothing_new(pae: Workspace, claw: Claw) -> None:
    write_outputs(pae.root, pae_runs(), SETTINGS, SYSTEM)
    assert import_pae(claw, pae)[1]["runs_imported"] == 4
    objects = sorted(p.name for p in (pae.root.parent / "store").rglob("*") if p.is_file())
    code, again = import_pae(claw, pae)
    assert code == 0
    assert (again["runs_imported"], again["judgements_imported"], again["checks_computed"]) == (0, 0, 0)
    assert (again["runs_present"], again["judgements_present"]) == (4, 12)
    assert sorted(p.name for p in (pae.root.parent / "store").rglob("*") if p.is_file()) == objects


def _edit_json(path: Path, change: Any) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))  # (Python writes NaN as NaN: JSON has no such number)


# Files a fuzzer made of pae's (fields of another type, numbers no record holds); each was a traceback.
EDITS: dict[str, tuple[str, Any]] = {
    "nan_cost_in_run": ("run", lambda d: d["usage"].update(cost_usd=float("nan"))),
    "usage_counts_not_a_mapping": ("run", lambda d: d["usage"].update(normalized=["x"])),
    "tokens_no_record_holds": ("run", lambda d: d["usage"]["normalized"].update(output_tokens=2**63)),
    "judge_usage_not_a_mapping": ("judge", lambda d: d["raw_results"][0].update(usage=1.5)),
    "judge_tokens_no_record_holds": ("judge", lambda d: d["raw_results"][0]["usage"].update(input_tokens=10**15)),
}


@pytest.mark.parametrize("damage", ["truncate_run", "truncate_judge", "edit_fingerprint_payload", "nest_run",
                                    *EDITS])
def test_a_damaged_file_is_reported_and_skipped_never_half_imported(pae: Workspace, claw: Claw, standin: StandIn,
                                                                    damage: str) -> None:
    files = write_outputs(pae.root, pae_runs(), SETTINGS, SYSTEM)
    if damage == "truncate_run":
        path = files["m1/beta/run"]
        path.write_bytes(path.read_bytes()[:200])
    elif damage == "nest_run":  # valid JSON nested deeper than Python's parser goes (a RecursionError)
        path = files["m1/beta/run"]
        path.write_text("[" * 100_000 + "]" * 100_000)
    elif damage == "truncate_judge":
        path = files["m1/beta/judge"]
        path.write_bytes(path.read_bytes()[:-40])
    elif damage in EDITS:
        which, change = EDITS[damage]
        path = files[f"m1/beta/{which}"]
        _edit_json(path, change)
    else:
        path = files["m1/beta/fingerprint"]
        path.write_text(path.read_text().replace("Name a colour.", "Name a color."))
    code, out, _ = claw("import-pae", str(pae.root))
    assert code == 1
    damaged = [line for line in out.splitlines() if line.startswith("damaged, skipped: ")]
    assert len(damaged) == 1 and str(path) in damaged[0]
    build(claw)
    subject = [r for r in standin.requests if r["model"] != JUDGE]
    judges = [r for r in standin.requests if r["model"] == JUDGE]
    if damage == "truncate_judge" or EDITS.get(damage, ("",))[0] == "judge":  # only the judgements asked again
        assert (len(subject), len(judges)) == (0, 3)
    else:  # neither the run nor its judgements: both are built
        assert [r["model"] for r in subject] == ["vendor/m1"] and len(judges) == 3


def test_what_cannot_be_mapped_is_named_one_line_each(pae: Workspace, claw: Claw, standin: StandIn) -> None:
    runs = pae_runs(**{"m2/alpha": {"status": "provider_error"}})
    runs.append(PaeRun("m3", "alpha", PROMPTS["alpha"]))  # a model the suite no longer has
    write_outputs(pae.root, runs, SETTINGS, SYSTEM)
    pae.case("beta", "Name a colour you like.")  # the config changed since pae ran it
    code, report = import_pae(claw, pae)
    assert code == 0 and report["runs_imported"] == 1  # m1/alpha only
    assert sorted(report["unmapped"]) == [
        "m1/beta rep 0: pae ran it with another input_messages than the configs now say",
        "m2/alpha rep 0: ended provider_error in pae (an infrastructure failure); claw runs it again",
        "m2/beta rep 0: pae ran it with another input_messages than the configs now say",
        "m3/alpha rep 0: in pae's outputs but not in campaign main × rp as the configs now define it",
    ]
    build(claw)
    assert sorted(r["model"] for r in standin.requests if r["model"] != JUDGE) == ["vendor/m1", "vendor/m2",
                                                                                  "vendor/m2"]


def test_another_judge_system_prompt_keeps_the_runs_but_not_the_judgements(pae: Workspace, claw: Claw) -> None:
    write_outputs(pae.root, pae_runs(), SETTINGS, "Some other judge prompt.")
    code, report = import_pae(claw, pae)
    assert code == 0 and report["runs_imported"] == 4 and report["judgements_imported"] == 0
    assert report["unmapped"] == ["evaluation profile ev: pae judged with another system prompt than the configs "
                                  "now say"]


def test_a_directory_without_outputs_is_a_usage_error(tmp_path: Path, claw: Claw,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    code, _, err = claw("import-pae", str(tmp_path))
    assert code == 2 and "is not a directory (expected a pae workspace with outputs/)" in err
    # ... that makes no store first: an empty one was left at $CLAW_STORE, or without it in the directory named
    # (someone else's folder, `claw import-pae ~/Downloads`), before session 77
    assert not (tmp_path / "store").exists()
    monkeypatch.delenv("CLAW_STORE")
    other = tmp_path / "not-pae"
    other.mkdir()
    code, _, err = claw("import-pae", str(other))
    assert code == 2 and "is not a directory" in err and list(other.iterdir()) == [], list(other.iterdir())


def test_what_an_older_claw_stored_is_recorded_under_the_key_now(pae: Workspace, claw: Claw, standin: StandIn,
                                                                 tmp_path: Path) -> None:
    """The campaign built by the claw before session 76 (its judgements keyed with the judge's `type`), then imported:
    the import finds them under that key (Node.earlier), present, and records them under the key now as a build does
    (builder/legacy_keys.py). An edit of the `type` then, which changes that earlier key, asks nothing (before: the
    import left them under the earlier key alone, and the build after the edit asked the 12 judgements again)."""
    write_outputs(pae.root, pae_runs(), SETTINGS, SYSTEM)
    built = old_claw(old_clawstore(tmp_path / "old", KEYED_WITH_JUDGE_TYPE), pae.root, "build", "--suite", "main",
                     "--run-profile", "rp", "--evaluation-profile", "ev")
    assert built.returncode == 0, built.stdout + built.stderr
    sent = len(standin.requests)
    assert sum(1 for r in standin.requests if r["model"] == JUDGE) == 12
    code, report = import_pae(claw, pae)
    assert code == 0 and report["unmapped"] == [] and report["damaged"] == []
    assert (report["runs_present"], report["judgements_present"], report["judgements_imported"]) == (4, 12, 0)
    pae.edit("evaluation_profiles/ev.yaml", lambda d: d["judges"][0].update(type="openai_compatible"))
    build(claw)
    assert len(standin.requests) == sent, standin.requests[sent:]
