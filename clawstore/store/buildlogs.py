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
`cost_priced` and `cost_unknown` count them per cost source (clawstore/values/costs.py; logs written before
sources were kept have none).

`nodes` lists only what the build executed, failed or skipped: what it reused is in its head (format 1
logs, without a `format` field, listed every node, reused ones as `"action": "reuse"`). A no-op build
therefore writes a few hundred bytes, whatever the size of the campaign.
"""

from __future__ import annotations

import json
from pathlib import Path

from clawstore.errors import StoreError
from clawstore.host.durable import write_file_atomic
from clawstore.store.core.layout import StoreLayout
from clawstore.store.core.names import check_name
from clawstore.store.documents import BuildLogDoc, read_build_log_doc


def builds_dir(store_root: Path | str) -> Path:
    return StoreLayout(store_root).builds


def build_log_path(store_root: Path | str, build_id: str) -> Path:
    """The one place a build log's path is made (the id passes the store's naming rule first)."""
    return builds_dir(store_root) / f"{check_name(build_id, 'build id')}.json"


def write_build_log(store_root: Path | str, doc: BuildLogDoc) -> Path:
    path = build_log_path(store_root, doc.build_id)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_file_atomic(path, doc.encode(), StoreLayout(store_root).tmp)
    except OSError as exc:
        raise StoreError(f"cannot write build log {path}: {exc.strerror or exc}") from exc
    return path


def read_build_log(path: Path) -> BuildLogDoc:
    """A build log (format 1 or 2); StoreError naming the file and what is wrong."""
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise StoreError(f"no build log {path}") from None
    except (OSError, ValueError) as exc:
        raise StoreError(f"{path}: unreadable build log ({exc})") from None
    return read_build_log_doc(data, str(path))
