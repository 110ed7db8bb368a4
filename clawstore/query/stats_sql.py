"""SQL macros for the saved queries' intervals, the same formulas as clawstore.stats (docs/query.md):
t975(df), the t quantile of a 95 % interval; wilson_low(k, n) and wilson_high(k, n), the Wilson interval
of k successes in n."""

from __future__ import annotations

import duckdb

from clawstore.stats.intervals import T975, Z975

_TABLE = " ".join(f"WHEN {df} THEN {t}" for df, t in T975.items())
_Z = repr(Z975)
MACROS = [
    # tabled below 10 degrees of freedom, else the Cornish-Fisher expansion (stats/intervals.py: t975)
    f"""CREATE MACRO t975(df) AS CASE CAST(df AS INTEGER) {_TABLE} ELSE
        {_Z} + ({_Z}^3 + {_Z}) / (4 * df) + (5 * {_Z}^5 + 16 * {_Z}^3 + 3 * {_Z}) / (96 * df^2)
        + (3 * {_Z}^7 + 19 * {_Z}^5 + 17 * {_Z}^3 - 15 * {_Z}) / (384 * df^3) END""",
    # the Wilson bound on the side `sign` (-1: low, +1: high), exactly 0 and 1 at the ends
    # (NULL k or n: NULL, not the 0 greatest() makes of a NULL)
    f"""CREATE MACRO wilson_bound(k, n, sign) AS CASE WHEN n IS NULL OR k IS NULL OR n = 0 THEN NULL
        WHEN sign < 0 AND k = 0 THEN 0.0 WHEN sign > 0 AND k = n THEN 1.0
        ELSE least(1.0, greatest(0.0, (k / n + {_Z}^2 / (2 * n)
        + sign * {_Z} * sqrt(k / n * (1 - k / n) / n + {_Z}^2 / (4 * n^2))) / (1 + {_Z}^2 / n))) END""",
    "CREATE MACRO wilson_low(k, n) AS wilson_bound(k, n, -1)",
    "CREATE MACRO wilson_high(k, n) AS wilson_bound(k, n, 1)",
]


def create_stats_macros(con: duckdb.DuckDBPyConnection) -> None:
    for macro in MACROS:
        con.execute(macro).fetchall()
