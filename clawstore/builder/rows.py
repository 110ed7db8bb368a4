"""A build's rows (one per run, as `claw build` shows them), written to a temporary file per model as each window of
the build ends and read back in the campaign's order, so the build holds no row (about 1 KB a run) to its end."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, Any

from clawstore.values.costs import source_of

if TYPE_CHECKING:
    from clawstore.builder.eval_layer import RunEvaluation
    from clawstore.graph.plan import Node


def run_row(node: Node) -> dict[str, Any]:
    """A run's row."""
    # A skipped run may hold an earlier record (a --force build that stopped): this build used none of it.
    record = {} if node.action == "skip" else node.record or {}
    metrics = record.get("metrics") or {}
    pending = bool(node.batch)  # in a provider batch: the next build collects it
    return {
        **node.address,
        "run": "pending" if pending else node.action,
        "status": record.get("status") or ("skip" if node.action == "skip" else "pending" if pending else "failed"),
        "latency_s": metrics.get("latency_s"),
        "cost_usd": metrics.get("cost_usd"),
        "cost_source": source_of(metrics) if record else None,
        **({"cost_known_usd": metrics["cost_known_usd"]} if "cost_known_usd" in metrics else {}),  # (unknown: `≥` it)
        "key": node.key,
        "error": (record.get("error") or {}).get("message") or node.error,
    }


def window_rows(runs: list[Node], evaluations: list[RunEvaluation] | None) -> Iterator[dict[str, Any]]:
    """The rows of a window's runs, with their evaluation's columns when the campaign has an evaluation profile."""
    evals = {id(ev.run): ev for ev in evaluations or ()}
    for node in runs:
        row = run_row(node)
        ev = evals.get(id(node))
        if ev is not None:
            row.update(ev.row())
        if row["run"] == "skip" and "eval" in row:  # nothing of it was built, or evaluated, by this build
            row.update(eval="skip", eval_status="skip", score=None, passed=None)
        yield row


class BuildRows:
    """The rows of a build, kept in anonymous temporary files (gone when closed or when the process ends), one a
    model: windows go case by case (builder/engine.py), rows are shown model by model (the campaign's order). Iterate
    it as often as needed."""

    def __init__(self) -> None:
        self._files: dict[str, IO[bytes]] = {}  # model id -> its rows, one JSON line each; in the campaign's order
        self.count = 0

    def add(self, runs: list[Node], evaluations: list[RunEvaluation] | None) -> None:
        """Keep the rows of a window's runs (in the campaign's order within the window)."""
        for row in window_rows(runs, evaluations):
            model = str(row["model_id"])
            out = self._files.get(model)
            if out is None:
                out = self._files[model] = tempfile.TemporaryFile(prefix="claw-rows-")
            out.write(json.dumps(row).encode() + b"\n")
            self.count += 1

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for out in self._files.values():
            out.flush()
            out.seek(0)
            for line in out:
                yield json.loads(line)
            out.seek(0, 2)  # (appends go to the end again)

    def __len__(self) -> int:
        return self.count

    def close(self) -> None:
        for out in self._files.values():
            out.close()
        self._files = {}
