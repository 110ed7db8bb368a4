"""Checks that need more than one file: suites → cases and agents, run profiles → agents."""

from __future__ import annotations

from clawstore.config.catalog import Loaded, Workspace
from clawstore.config.issues import ConfigIssue
from clawstore.config.models import CaseSelection, RunProfile, Suite
from clawstore.config.selection import matching_assignments, select_case_ids


def _known_case_ids(ws: Workspace) -> set[str]:
    return set(ws.cases) | {stub.case_id for stub in ws.broken_cases if stub.case_id}


def _unknown_ids(selection: CaseSelection, known: set[str], base: str) -> list[tuple[str, str]]:
    problems = []
    for name in ("include_case_ids", "exclude_case_ids"):
        unknown = [case_id for case_id in getattr(selection, name) if case_id not in known]
        if unknown:
            problems.append((f"{base}{name}", f"unknown case ids: {', '.join(unknown)}"))
    return problems


def _agent_missing(ws: Workspace, agent_id: str) -> str | None:
    if agent_id in ws.agent_dirs:
        return None  # present; if it is broken, its own file carries the issue
    return f"agent '{agent_id}' not found (expected configs/agents/{agent_id}/agent.yaml)"


def suite_issues(ws: Workspace, suite: Suite) -> list[tuple[str, str]]:
    """(field, message) problems of one suite against the catalog."""
    known = _known_case_ids(ws)
    problems = _unknown_ids(suite.case_selection, known, "case_selection.")
    assignments = suite.openclaw.agent_assignments
    for index, assignment in enumerate(assignments):
        base = f"openclaw.agent_assignments[{index}]."
        problems += _unknown_ids(assignment.case_selection, known, f"{base}case_selection.")
        missing = _agent_missing(ws, assignment.agent_id)
        if missing:
            problems.append((f"{base}agent_id", missing))
    if assignments:
        tags = ws.case_tags()
        for case_id in select_case_ids(suite.case_selection, tags):
            if ws.cases[case_id].runner_type != "openclaw":
                continue
            hits = matching_assignments(assignments, case_id, tags[case_id])
            if len(hits) > 1:
                which = ", ".join(f"[{i}] (agent {assignments[i].agent_id})" for i in hits)
                problems.append(("openclaw.agent_assignments",
                                 f"case '{case_id}' matches {len(hits)} assignments: {which}; "
                                 "a case may match at most one"))
    return problems


def run_profile_issues(ws: Workspace, profile: RunProfile) -> list[tuple[str, str]]:
    if profile.openclaw is None:
        return []
    missing = _agent_missing(ws, profile.openclaw.agent_id)
    return [("openclaw.agent_id", missing)] if missing else []


def _report(ws: Workspace, loaded: Loaded, problems: list[tuple[str, str]]) -> None:
    for field_path, message in problems:
        ws.add_issue(loaded.path, field_path, message)


def check_references(ws: Workspace) -> None:
    for loaded in ws.suites.values():
        _report(ws, loaded, suite_issues(ws, loaded.config))
    for loaded in ws.run_profiles.values():
        _report(ws, loaded, run_profile_issues(ws, loaded.config))


__all__ = ["ConfigIssue", "check_references", "run_profile_issues", "suite_issues"]
