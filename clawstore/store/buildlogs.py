"""Build logs: one JSON document per `claw build`, `<store>/builds/<build id>.json` (the history).

Layout, format 2 (written atomically at the start of a build, every few seconds while it executes,
and at its end; keys sorted, no whitespace):

    {"format": 2,
     "build_id": "20261123T202753-c5f82c00",          UTC start stamp + random, unique per build
     "started_at": "2026-11-23T20:27:53.123456Z", "finished_at": "…Z" | null,
     "state": "running" | "complete" | "interrupted",
     "campaign": {"id": "<suite>__<run profile>__<evaluation profile|none>", "suite_id": "…",
                  "run_profile_id": "…", "evaluation_profile_id": "…" | null},
     "filter": {"cases": ["…"], "models": ["…"]} | null,   --case/--model of a filtered build
     "head": "blake3:…" | null,      the campaign head this build ended on (confirmed or written)
     "head_written": true | false,   true when this build wrote that head: its nodes within the
                                     filter then carry this build's action (reused ones included)
     "nodes": [{"kind": "run|checks|judge|result", "key": "blake3:…", "record": "blake3:…" | null,
                "action": "exec|fail|skip", "address": {…}}],
     "counts": {"executed": 0, "reused": 0, "failed": 0, "skipped": 0},
     "metrics": {"input_tokens": 0, "output_tokens": 0, "reasoning_tokens": 0, "cached_tokens": 0,
                 "cost_usd": 0.0, "cost_reported": 0, "cost_priced": 0, "cost_unknown": 0}}

`metrics.cost_usd` is the known part of what the build's runs and judgements cost; `cost_reported`,
`cost_priced` and `cost_unknown` count them per cost source (clawstore/costs.py; logs written before
sources were kept have none).

`nodes` lists only what the build executed, failed or skipped: what it reused is in its head (format 1
logs, without a `format` field, listed every node, reused ones as `"action": "reuse"`). A no-op build
therefore writes a few hundred bytes, whatever the size of the campaign.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clawstore.canonical import field_values
from clawstore.costs import CostSum
from clawstore.durable import write_file_atomic
from clawstore.errors import StoreError
from clawstore.store.layout import StoreLayout
from clawstore.store.names import check_name

BUILD_LOG_FORMAT = 2
STATES = ("running", "complete", "interrupted")
ACTIONS = ("exec", "reuse", "fail", "skip")
COUNTERS = {"exec": "executed", "reuse": "reused", "fail": "failed", "skip": "skipped"}
TOKEN_METRICS = ("input_tokens", "output_tokens", "reasoning_tokens", "cached_tokens")


def builds_dir(store_root: Path | str) -> Path:
    return StoreLayout(store_root).builds


def build_log_path(store_root: Path | str, build_id: str) -> Path:
    """The one place a build log's path is made (the id passes the store's naming rule first)."""
    return builds_dir(store_root) / f"{check_name(build_id, 'build id')}.json"


@dataclass
class BuildLogDoc:
    """A build log document (layout above)."""

    build_id: str
    started_at: str
    campaign: dict[str, Any]
    finished_at: str | None = None
    state: str = "running"
    filter: dict[str, list[str]] | None = None
    head: str | None = None
    head_written: bool = False
    nodes: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: {name: 0 for name in COUNTERS.values()})
    metrics: dict[str, Any] = field(default_factory=lambda: {**{name: 0 for name in TOKEN_METRICS},
                                                              **CostSum().build_metrics()})
    format: int = BUILD_LOG_FORMAT

    def to_json(self) -> dict[str, Any]:
        # Shallow: the nodes are plain dicts already, and asdict's deep copy of thousands of them on
        # every periodic write of a running build's log cost seconds of CPU per campaign.
        return field_values(self)

    def encode(self) -> bytes:
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":")).encode()


def write_build_log(store_root: Path | str, doc: BuildLogDoc) -> Path:
    path = build_log_path(store_root, doc.build_id)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_file_atomic(path, doc.encode(), StoreLayout(store_root).tmp)
    except OSError as exc:
        raise StoreError(f"cannot write build log {path}: {exc.strerror or exc}") from exc
    return path


def read_build_log(path: Path) -> dict[str, Any]:
    """A build log as a dict (format 1 or 2); StoreError naming the file and what is wrong."""
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise StoreError(f"no build log {path}") from None
    except (OSError, ValueError) as exc:
        raise StoreError(f"{path}: unreadable build log ({exc})") from None
    return check_build_log(data, str(path))


def check_build_log(data: Any, where: str) -> dict[str, Any]:
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        raise StoreError(f"{where}: not a build log (a JSON object with a nodes list)")
    version = data.get("format", 1)
    if version not in (1, BUILD_LOG_FORMAT):
        raise StoreError(f"{where}: unsupported build log format {version!r} (this claw reads 1 and 2)")
    if not isinstance(data.get("build_id"), str):
        raise StoreError(f"{where}: build_id: expected a string")
    if not isinstance(data.get("campaign", {}), Mapping):
        raise StoreError(f"{where}: campaign: expected an object")
    head = data.get("head")
    if head is not None and not isinstance(head, str):
        raise StoreError(f"{where}: head: expected an object id or null")
    return data
