"""The manifest (Parquet segments derived from build logs and records) and SQL over it with DuckDB.

Entry points: `manifest.index_pending(store)` (before a `claw query` of a history view: indexes the
builds that finished since), `manifest.index_current(store)` (before a `claw query` of the plain views:
the campaigns' current heads), `manifest.index_heads(store, campaign)` (`claw report`: one head),
`manifest.refresh_manifest(store, build_id)` (one build),
`manifest.rebuild_manifest(store)` (fsck), `engine.run_query(store_root, sql)` (`claw query`).
"""
