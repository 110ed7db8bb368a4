"""Build logs: one JSON document per `claw build` under `builds/` (the history), written atomically at the start, while
executing and at the end. Layout (format 2) and the meaning of each field: docs/store.md (Details by module)."""

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
