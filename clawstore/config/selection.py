"""Which cases a suite selects, and which agent an OpenClaw case runs with."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence

from clawstore.config.models import AgentAssignment, CaseSelection


def select_case_ids(selection: CaseSelection, catalog: Mapping[str, Collection[str]]) -> list[str]:
    """Apply a case_selection to `catalog` (case_id → tags); returns sorted case ids.

    Explicit include_case_ids always win (even over the exclude lists); other cases are candidates
    when they carry an include tag, or when there are no include filters at all; candidates are then
    dropped by exclude_case_ids / exclude_tags. Unknown explicit ids are skipped (validation reports them).
    """
    explicit = {case_id for case_id in selection.include_case_ids if case_id in catalog}
    include_tags = set(selection.include_tags)
    exclude_ids = set(selection.exclude_case_ids)
    exclude_tags = set(selection.exclude_tags)
    chosen = set(explicit)
    for case_id, tags in catalog.items():
        if case_id in explicit:
            continue
        if explicit or include_tags:
            if not include_tags or include_tags.isdisjoint(tags):
                continue
        if case_id in exclude_ids or not exclude_tags.isdisjoint(tags):
            continue
        chosen.add(case_id)
    return sorted(chosen)


def may_select(selection: CaseSelection, case_id: str | None, tags: Iterable[str] | None) -> bool:
    """Could `selection` pick a case we only partly know (a file that failed validation)?"""
    if case_id is None:
        return True
    if case_id in selection.include_case_ids:
        return True
    known_tags = None if tags is None else set(tags)
    if selection.include_case_ids or selection.include_tags:
        if not selection.include_tags:
            return False
        if known_tags is not None and set(selection.include_tags).isdisjoint(known_tags):
            return False
    if case_id in selection.exclude_case_ids:
        return False
    return not (known_tags is not None and not set(selection.exclude_tags).isdisjoint(known_tags))


def assignment_matches(selection: CaseSelection, case_id: str, tags: Collection[str]) -> bool:
    if case_id in selection.exclude_case_ids or not set(selection.exclude_tags).isdisjoint(tags):
        return False
    return case_id in selection.include_case_ids or not set(selection.include_tags).isdisjoint(tags)


def matching_assignments(
    assignments: Sequence[AgentAssignment], case_id: str, tags: Collection[str]
) -> list[int]:
    """Indices of the agent assignments that claim this case (0, 1, or — an error — several)."""
    return [i for i, a in enumerate(assignments) if assignment_matches(a.case_selection, case_id, tags)]
