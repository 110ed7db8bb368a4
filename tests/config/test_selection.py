"""case_selection precedence and agent-assignment matching."""

from __future__ import annotations

import json

from clawstore.config import CaseSelection, select_case_ids
from clawstore.config.models import AgentAssignment
from clawstore.config.selection import assignment_matches, matching_assignments, may_select
from tests.support.claw import Claw
from tests.support.workspace import Workspace

CATALOG = {"alpha": ("smoke",), "beta": ("skip", "smoke"), "gamma": ("skip",), "delta": ()}


def sel(**kw: list[str]) -> CaseSelection:
    return CaseSelection.model_validate(kw)


def test_explicit_ids_override_excludes_and_tags_still_add() -> None:
    selection = sel(include_case_ids=["gamma"], exclude_case_ids=["alpha", "gamma"],
                    include_tags=["smoke"], exclude_tags=["skip"])
    assert select_case_ids(selection, CATALOG) == ["gamma"]
    assert select_case_ids(sel(include_case_ids=["gamma"], include_tags=["smoke"]), CATALOG) == [
        "alpha", "beta", "gamma"]


def test_no_include_filter_selects_everything_sorted() -> None:
    assert select_case_ids(sel(), CATALOG) == ["alpha", "beta", "delta", "gamma"]
    assert select_case_ids(sel(exclude_tags=["skip"]), CATALOG) == ["alpha", "delta"]
    assert select_case_ids(sel(exclude_case_ids=["delta"]), CATALOG) == ["alpha", "beta", "gamma"]


def test_include_tags_and_explicit_only() -> None:
    assert select_case_ids(sel(include_tags=["smoke"], exclude_tags=["skip"]), CATALOG) == ["alpha"]
    assert select_case_ids(sel(include_case_ids=["delta", "delta", "ghost"]), CATALOG) == ["delta"]


def test_assignment_matching() -> None:
    one = sel(include_tags=["smoke"], exclude_case_ids=["beta"])
    assert assignment_matches(one, "alpha", CATALOG["alpha"])
    assert not assignment_matches(one, "beta", CATALOG["beta"])
    assert not assignment_matches(one, "delta", ())
    two = sel(include_case_ids=["alpha"], exclude_tags=["smoke"])
    assert not assignment_matches(two, "alpha", CATALOG["alpha"])  # excludes win inside an assignment
    assignments = [AgentAssignment(agent_id="a", case_selection=one),
                   AgentAssignment(agent_id="b", case_selection=sel(include_case_ids=["alpha"]))]
    assert matching_assignments(assignments, "alpha", CATALOG["alpha"]) == [0, 1]
    assert matching_assignments(assignments, "gamma", CATALOG["gamma"]) == []


def test_may_select_is_conservative_for_broken_files() -> None:
    explicit = sel(include_case_ids=["alpha"])
    assert may_select(explicit, None, None)
    assert may_select(explicit, "alpha", None)
    assert not may_select(explicit, "zeta", None)
    tagged = sel(include_tags=["smoke"])
    assert may_select(tagged, "zeta", None)  # tags unreadable: could match
    assert not may_select(tagged, "zeta", ("other",))
    assert not may_select(sel(exclude_case_ids=["zeta"]), "zeta", None)
    assert may_select(sel(), "zeta", ())


def test_selection_tags_are_trimmed_as_case_tags_are(ws: Workspace, claw: Claw) -> None:
    """A case's tags are trimmed (docs/configuration.md); a suite's tag filters are trimmed the same way, so a tag
    written alike on both sides matches. Before session 72 `exclude_tags: [" flaky "]` excluded nothing beside a
    case tagged " flaky " (stored as "flaky"): the case meant to be left out ran, and was paid for."""
    ws.edit("cases/alpha/test.yaml", lambda doc: doc.update({"tags": [" flaky ", "smoke"]}))
    ws.edit("suites/main.yaml", lambda doc: doc.update({"case_selection": {"exclude_tags": [" flaky "]}}))
    code, out, err = claw("plan", "--suite", "main", "--run-profile", "rp", "--output", "json")
    assert code == 0, out + err
    assert json.loads(out)["requests"] == 2  # beta on m1 and m2; alpha excluded
    ws.edit("suites/main.yaml", lambda doc: doc.update({"case_selection": {"include_tags": ["flaky  "]}}))
    code, out, err = claw("plan", "--suite", "main", "--run-profile", "rp", "--output", "json")
    assert code == 0, out + err
    assert json.loads(out)["requests"] == 2  # alpha on m1 and m2
    assert sel(include_tags=[" smoke"], exclude_tags=["skip\n"]).model_dump() == {
        "include_case_ids": [], "exclude_case_ids": [], "include_tags": ["smoke"], "exclude_tags": ["skip"]}
