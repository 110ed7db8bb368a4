"""The `objects` table: every object in the store with its logical and stored size.

Sizes are read from each object's frame header once and cached in `<store>/manifest/objects.parquet`
(objects are immutable, so a cached size never goes stale); a query lists the object directories,
sizes only objects it has not seen, and drops ids gc removed.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from clawstore.errors import MissingObjectError, StoreError
from clawstore.query.schema import OBJECTS
from clawstore.query.sqltext import literal

if TYPE_CHECKING:
    from clawstore.store.face import StoreReader


def _cached(con: duckdb.DuckDBPyConnection, cache: Path) -> set[str]:
    if not cache.exists():
        return set()
    try:
        return {r[0] for r in con.execute(f"SELECT object_id FROM read_parquet({literal(str(cache))})").fetchall()}
    except duckdb.Error:
        return set()  # a damaged cache is rebuilt below


def create_objects_view(con: duckdb.DuckDBPyConnection, store: StoreReader, manifest: Path) -> int:
    """Create view `objects` over a cache refreshed to the store's current objects. Returns rows."""
    cache = manifest / "objects.parquet"
    present = set(store.iter_objects())
    cached = _cached(con, cache)
    if present != cached or not cache.exists():
        try:
            _rewrite_cache(con, store, manifest, cache, present, cached)
        except OSError as exc:
            raise StoreError(f"cannot write the objects cache under {manifest}: {exc.strerror}") from None
    con.execute(f"CREATE VIEW objects AS SELECT * FROM read_parquet({literal(str(cache))})").fetchall()
    return len(present)


def _rewrite_cache(con: duckdb.DuckDBPyConnection, store: StoreReader, manifest: Path, cache: Path,
                   present: set[str], cached: set[str]) -> None:
    tmp_dir = manifest / "tmp"
    tmp_dir.mkdir(parents=True, exist_ok=True)
    stamp = f"{os.getpid()}.{time.time_ns()}"
    ndjson = tmp_dir / f"objects.{stamp}.ndjson"
    with open(ndjson, "w", encoding="utf-8") as fh:
        for oid in sorted(present - cached):
            try:
                logical, stored = store.object_sizes(oid)
            except MissingObjectError:
                continue  # collected between listing and sizing
            fh.write(json.dumps({"object_id": oid, "logical_size": logical, "stored_size": stored}) + "\n")
    columns = "{" + ", ".join(f"'{c.name}': '{c.type}'" for c in OBJECTS) + "}"
    fresh = f"SELECT * FROM read_json({literal(str(ndjson))}, format='newline_delimited', columns={columns})"
    kept = tmp_dir / f"objects.{stamp}.keep"
    kept.write_text("".join(f"{oid}\n" for oid in present & cached))
    old = ""
    if present & cached:
        old = (f" UNION ALL SELECT * FROM read_parquet({literal(str(cache))}) WHERE object_id IN "
               f"(SELECT column0 FROM read_csv({literal(str(kept))}, header=false, columns={{'column0': 'VARCHAR'}}))")
    tmp = tmp_dir / f"objects.{stamp}.parquet"
    try:
        con.execute(f"COPY ({fresh}{old} ORDER BY object_id) TO {literal(str(tmp))} (FORMAT parquet)").fetchall()
    finally:
        ndjson.unlink()
        kept.unlink()
    os.replace(tmp, cache)  # concurrent queries may both rewrite it: each result is complete
