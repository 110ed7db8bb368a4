"""The one field a run page reads of a run's record (its summary's `requested_model`) and of a judgement's record (its
summary's `judge_model`) beyond what the head's planning view of it holds, taken from the rows the query manifest
holds of the head, so that those two records a run need not be read. Why and when a record is read all the same:
docs/view.md (Details by module, `report/view_data.py`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

UNKNOWN = object()  # a record these rows do not answer for: read it


class ManifestField:
    """record id -> its summary's `field` as the manifest's `table` holds it, the head's rows streamed in case order
    (as the head lists its nodes): one case's rows held at a time. A record asked for out of that order, or one whose
    cell could be the text of a non-string value, is UNKNOWN."""

    def __init__(self, rows: Iterator[dict[str, Any]] | None, field: str):
        self._rows, self.field = rows, field
        self._case: str | None = None
        self._held: dict[str, Any] = {}
        self._ahead: dict[str, Any] | None = None

    def get(self, record_id: Any, case_id: Any) -> Any:
        if self._rows is None or not isinstance(case_id, str):
            return UNKNOWN
        if self._case is None or case_id > self._case:
            self._advance(case_id)
        value = self._held.get(record_id, UNKNOWN) if case_id == self._case else UNKNOWN
        return value if value is UNKNOWN or _plain_text(value) else UNKNOWN

    def close(self) -> None:
        """Let the rows' stream go (its DuckDB connection, and whatever it spilled) before the campaign's end."""
        close = getattr(self._rows, "close", None)
        if close is not None:
            close()
        self._rows, self._held = None, {}

    def _advance(self, case_id: str) -> None:
        import duckdb

        self._case, self._held = case_id, {}
        try:
            while (row := self._ahead or next(self._rows, None)) is not None:  # type: ignore[arg-type]
                self._ahead = None
                if not isinstance(row["case_id"], str) or row["case_id"] < case_id:
                    continue
                if row["case_id"] > case_id:
                    self._ahead = row
                    return
                self._held[row["record_id"]] = row[self.field]
        except duckdb.Error:  # the directory went away meanwhile (another process's refresh): read the records
            self._rows, self._held = None, {}


def _plain_text(value: Any) -> bool:
    """Whether a VARCHAR cell says what the record held: the manifest keeps str() of the summary's value, so only a
    string or null is exact; "5", "True", "[...]" or "{...}" could have been a number, a boolean, a list or an
    object, and the record is read."""
    if value is None:
        return True
    if not isinstance(value, str) or value in ("True", "False") or value.startswith(("[", "{")):
        return False
    try:
        float(value)
    except ValueError:
        return True
    return False


def manifest_fields(manifest: Path | None, head_id: str, node_count: Any) -> tuple[ManifestField, ManifestField]:
    """The runs' `requested_model` and the judgements' `judge_model` of a head whose rows the manifest holds, stamped
    as flattened by this code (heads.stamped_rows); when it does not, lookups that answer nothing."""
    from clawstore.query.heads import stamped_rows, streamed_rows

    if manifest is None or stamped_rows(manifest, head_id, node_count, ()) is None:
        return ManifestField(None, "requested_model"), ManifestField(None, "judge_model")
    return (ManifestField(streamed_rows(manifest, head_id, "runs", ("record_id", "case_id", "requested_model"),
                                        ("case_id",)), "requested_model"),
            ManifestField(streamed_rows(manifest, head_id, "judgements", ("record_id", "case_id", "judge_model"),
                                        ("case_id",)), "judge_model"))
