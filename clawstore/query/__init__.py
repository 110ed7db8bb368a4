"""The manifest (Parquet segments derived from build logs and records) and SQL over it with DuckDB.

Entry points: `manifest.index_pending(store)` (before every `claw query`: indexes the builds that
finished since), `manifest.refresh_manifest(store, build_id)` (one build),
`manifest.rebuild_manifest(store)` (fsck), `engine.run_query(store_root, sql)` (`claw query`).
"""
