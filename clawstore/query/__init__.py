"""The manifest (Parquet segments derived from build logs and records) and SQL over it with DuckDB.

Entry points: `manifest.refresh_manifest(store, build_id)` (end of every build),
`manifest.rebuild_manifest(store)` (fsck), `engine.run_query(store_root, sql)` (`claw query`).
"""
