"""The manifest's tables: every column, its DuckDB type and one line of meaning.

This module is the single source of truth for the physical segment files (the writer uses it to type
columns, the reader to create empty views) and for docs/query.md (a test checks every column is there).
"""

from __future__ import annotations

from dataclasses import dataclass

from clawstore.store.documents import TOKEN_DOCS, TOKEN_METRICS


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    doc: str


# Columns every per-node table carries: which build used the node, for which campaign.
_BUILD_CONTEXT = [
    Column("build_id", "VARCHAR", "the build that used this node (plain views: the one that wrote the head)"),
    Column("build_started_at", "TIMESTAMP", "start time (UTC) of that build"),
    Column("campaign_id", "VARCHAR", "<suite_id>__<run_profile_id>__<evaluation_profile_id or none>"),
    Column("suite_id", "VARCHAR", "suite of that build's campaign"),
    Column("run_profile_id", "VARCHAR", "run profile of that build's campaign"),
    Column("evaluation_profile_id", "VARCHAR", "evaluation profile of that build's campaign (null if none)"),
]

_NODE = [
    Column("key", "VARCHAR", "the node's key (= id of its input document)"),
    Column("record_id", "VARCHAR", "object id of the record the action cache maps the key to"),
    Column("action", "VARCHAR", "what the build did: exec | reuse | fail | skip"),
    Column("record_build_id", "VARCHAR", "the build that produced the record (differs from build_id on reuse)"),
    Column("status", "VARCHAR",
           "record status (run: success | invalid | incomplete | provider_error | timed_out | failed; checks: success, "
           "or since session 75 failed (`hook_not_run`: no working sandbox; since session 76 `hook_no_result`: a hook "
           "process killed or gone without a result) | timed_out (`hook_timed_out`), which the next build runs again)"),
    Column("cacheable", "BOOLEAN", "false for infrastructure failures, which the next build retries"),
]

_ADDRESS = [
    Column("model_id", "VARCHAR", "model_id from the suite"),
    Column("case_id", "VARCHAR", "test case id"),
    Column("repetition", "INTEGER", "run repetition index (0-based)"),
]


def _token_columns(per_build: bool = False) -> list[Column]:
    """A record's token counts (a build's sums), named and described by the record's model."""
    return [Column(name, "BIGINT", TOKEN_DOCS[name][per_build]) for name in TOKEN_METRICS]


# What an unknown cost or token count is known to be at least (docs/building.md, Costs).
_AT_LEAST = ("(an unfinished OpenClaw run: its transcript's answered requests; an llm_probe run with an attempt never "
             "read whole: its answers')")

_TOKENS = [
    *_token_columns(),
    Column("cost_usd", "DOUBLE", "cost of this node in USD; NULL: unknown (never 0); checks, results, skipped: 0"),
    Column("cost_source", "VARCHAR", "reported (the provider's), priced (tokens x declared pricing) or unknown; "
           "NULL for checks, results and skipped nodes"),
    Column("cost_known_usd", "DOUBLE", "the known part of cost_usd: cost_usd when known; of an unknown cost, what the "
           f"node spent at least {_AT_LEAST}, else 0"),
    *(Column(f"{name}_known", "BIGINT", f"the known part of {name}: {name} when known; of unknown tokens, what the "
             f"node spent at least {_AT_LEAST}, else 0")
      for name in ("input_tokens", "output_tokens")),
    Column("latency_s", "DOUBLE", "wall time of this node in seconds"),
]

_TIMES = [
    Column("started_at", "TIMESTAMP", "when the node's work started (UTC)"),
    Column("finished_at", "TIMESTAMP", "when it finished (UTC)"),
]

_ERROR = [
    Column("error_code", "VARCHAR", "error code (null on success)"),
    Column("error_message", "VARCHAR", "error message (null on success)"),
]

DIMENSIONS = ("task", "process", "autonomy", "closeness", "efficiency", "spark")


def _dims(what: str) -> list[Column]:
    return [Column(d, "DOUBLE", f"{what} score for the '{d}' dimension (0-10)") for d in DIMENSIONS]


# Columns a record kind's rows copy from its summary, by the same name, each cell typed by its column
# (rows.py `_cells`): spelled here once, for the table and for the flattener.
RUN_SUMMARY = [
    Column("requested_model", "VARCHAR", "model name sent to the provider"),
    Column("runner_type", "VARCHAR", "llm_probe | openclaw"),
    Column("endpoint", "VARCHAR", "provider endpoint (base URL) used"),
    Column("attempts", "INTEGER", "requests sent to the provider, retries after 429/5xx/timeouts included (NULL: "
           "unknown, a record made before session 73 or an OpenClaw run)"),
    Column("prompt_warning", "VARCHAR", "the server may have cut the prompt: its first reply counted implausibly few "
           "prompt tokens for what was sent (a heuristic; NULL: none, or a record made before session 80)"),
]
CHECK_FIELDS = [  # from each check of a checks record's summary
    Column("check_id", "VARCHAR", "id of the deterministic check"),
    Column("kind", "VARCHAR", "check type (e.g. final_response_present, file_contains)"),
    Column("outcome", "VARCHAR", "passed | failed | error"),
    Column("message", "VARCHAR", "the check's explanation"),
]
JUDGE_SUMMARY = [
    Column("judge_id", "VARCHAR", "judge definition id"),
    Column("judge_model", "VARCHAR", "model that judged"),
    Column("attempts", "INTEGER", "requests sent to the judge, retries after 429/5xx/timeouts and invalid answers "
           "asked again included (NULL: unknown, a record made before session 73)"),
    Column("prompt_warning", "VARCHAR", "the server may have cut the judge's prompt: its reply counted implausibly few "
           "prompt tokens for what was sent (a heuristic; NULL: none, or a record made before session 80)"),
]
RESULT_SUMMARY = [
    Column("passed", "BOOLEAN", "pass verdict against pass_threshold (null if no threshold)"),
    Column("aggregation_method", "VARCHAR", "median | mean | majority_vote | all_pass"),
    Column("pass_threshold", "DOUBLE", "threshold used for the verdict (null if none)"),
    Column("judge_iterations", "INTEGER", "judge iterations considered"),
    Column("judge_successful", "INTEGER", "judge iterations that succeeded"),
    Column("checks_total", "INTEGER", "deterministic checks evaluated"),
    Column("checks_passed", "INTEGER", "deterministic checks passed"),
    Column("checks_failed", "INTEGER", "deterministic checks failed"),
]

# Physical tables: one set of Parquet files per build (one row per node per build that used it).
PHYSICAL: dict[str, list[Column]] = {
    "runs": [
        *_NODE[:2],
        Column("input_document_id", "VARCHAR", "object id of the run's canonical input document"),
        Column("artifact_id", "VARCHAR", "object id of the RunArtifact JSON"),
        Column("sandbox_id", "VARCHAR", "tree id of the run's sandbox / workspace (null if none)"),
        Column("output_ids", "VARCHAR[]", "every output object id of the record"),
        *_ADDRESS,
        *RUN_SUMMARY,
        *_NODE[2:],
        *_ERROR,
        *_TOKENS,
        *_TIMES,
        *_BUILD_CONTEXT,
    ],
    "checks": [
        *_NODE[:2],
        Column("run_key", "VARCHAR", "key of the run these checks judged"),
        *_ADDRESS,
        *CHECK_FIELDS,
        Column("dimensions", "VARCHAR[]", "judge dimensions this check informs"),
        *_NODE[2:],
        *_TIMES,
        *_BUILD_CONTEXT,
    ],
    "judgements": [
        *_NODE[:2],
        Column("run_key", "VARCHAR", "key of the judged run"),
        *_ADDRESS,
        Column("judge_run_id", "VARCHAR", "judge run plan id from the evaluation profile"),
        *JUDGE_SUMMARY,
        Column("judge_repetition", "INTEGER", "judge repetition index (0-based)"),
        *_NODE[2:],
        Column("overall_score", "DOUBLE", "the judge's overall score 0-10 (null unless status = success)"),
        *_dims("judge"),
        *_ERROR,
        *_TOKENS,
        *_TIMES,
        *_BUILD_CONTEXT,
    ],
    "results": [
        *_NODE[:2],
        Column("run_key", "VARCHAR", "key of the run this result scores"),
        *_ADDRESS,
        *_NODE[2:],
        Column("final_score", "DOUBLE", "aggregated final score 0-10 (null if no judge iteration succeeded)"),
        *_dims("final aggregated"),
        *RESULT_SUMMARY,
        Column("run_status", "VARCHAR", "status of the scored run in the same build"),
        Column("latency_s", "DOUBLE", "latency of the scored run in seconds"),
        Column("run_cost_usd", "DOUBLE", "cost of the scored run (NULL: unknown)"),
        Column("eval_cost_usd", "DOUBLE", "cost of its judge calls in the same build (NULL: one is unknown)"),
        Column("total_cost_usd", "DOUBLE", "run_cost_usd + eval_cost_usd (NULL: a part is unknown)"),
        *_ERROR,
        *_TIMES,
        *_BUILD_CONTEXT,
    ],
    "nodes": [
        Column("kind", "VARCHAR", "run | checks | judge | result"),
        *_NODE,
        *_ADDRESS,
        Column("judge_run_id", "VARCHAR", "judge nodes: judge run plan id"),
        Column("judge_repetition", "INTEGER", "judge nodes: judge repetition index"),
        *_ERROR,
        Column("prompt_warning", "VARCHAR", "run and judge nodes: the server may have cut the prompt (runs' and "
               "judgements' prompt_warning)"),
        *_TOKENS,
        *_TIMES,
        *_BUILD_CONTEXT,
    ],
    "builds": [
        Column("build_id", "VARCHAR", "build id (its log is <store>/builds/<build_id>.json)"),
        Column("started_at", "TIMESTAMP", "build start (UTC)"),
        Column("finished_at", "TIMESTAMP", "build end (UTC; null if it never finished)"),
        Column("state", "VARCHAR", "stopped (its run profile's execution_policy, `--max-cost` or an endpoint's "
               "HTTP 402 kept nodes from starting: the log's `stopped`), running (indexed: a killed build, its counts "
               "as its log last had them, its input and output tokens and cost NULL), complete, interrupted, or "
               "refused (a key missing or a bad URL found as a later window was planned: nothing in flight, what it "
               "recorded is what it spent)"),
        Column("campaign_id", "VARCHAR", "campaign built"),
        Column("suite_id", "VARCHAR", "suite id"),
        Column("run_profile_id", "VARCHAR", "run profile id"),
        Column("evaluation_profile_id", "VARCHAR", "evaluation profile id (null if none)"),
        Column("nodes", "INTEGER", "nodes in the build"),
        Column("executed", "INTEGER", "nodes executed"),
        Column("reused", "INTEGER", "nodes reused from the action cache"),
        Column("failed", "INTEGER", "nodes that failed"),
        Column("skipped", "INTEGER", "nodes skipped (an upstream node failed, or fail-fast stopped the build)"),
        *_token_columns(per_build=True),
        Column("cost_usd", "DOUBLE", "money spent by this build (executed nodes only; NULL: a part is unknown, or "
               "the build was killed)"),
        Column("cost_known_usd", "DOUBLE", "the known part of cost_usd: its reported and priced costs, and what its "
               "unknown ones spent at least (NULL: the build was killed)"),
        Column("cost_priced", "INTEGER", "runs and judgements of cost_usd priced from declared pricing"),
        Column("cost_unknown", "INTEGER", "runs and judgements of cost_usd whose cost is unknown"),
        Column("results_cost_usd", "DOUBLE", "cost of every record the build used, reused ones included "
               "(NULL: a part is unknown, the build was killed, or it was a no-op, whose log lists none it reused)"),
    ],
}

# Tables whose plain name is a 'current' view: the rows of every campaign's current head (the rows
# `claw report` shows). Their full history (one row per build that used the node) is here.
HISTORY_VIEW = {"runs": "run_history", "checks": "check_history", "judgements": "judgement_history",
                "results": "result_history", "nodes": "build_nodes"}

OBJECTS: list[Column] = [
    Column("object_id", "VARCHAR", "blake3:<64 hex>"),
    Column("logical_size", "BIGINT", "uncompressed size in bytes"),
    Column("stored_size", "BIGINT", "size on disk (zstd frame) in bytes"),
]


# Columns of the current views only, computed when the views are made (not stored in Parquet): a
# campaign imported with --untrusted is queryable, marked, until its signer is trusted.
TRUST: list[Column] = [
    Column("trusted", "BOOLEAN", "false for a campaign kept apart (imported or pulled with --untrusted)"),
    Column("signer", "VARCHAR", "the key that signed a kept-apart campaign (null when trusted)"),
]


def view_columns() -> dict[str, list[Column]]:
    """Every view `claw query` offers, with its columns (current views add the TRUST columns)."""
    views: dict[str, list[Column]] = {}
    for table, cols in PHYSICAL.items():
        if table in HISTORY_VIEW:
            views[table] = cols + TRUST
            views[HISTORY_VIEW[table]] = cols
        else:
            views[table] = cols
    views["objects"] = OBJECTS
    _add_answers(views)
    return views


def duckdb_columns(table: str) -> dict[str, str]:
    """{column: type} for read_json(columns=...)."""
    return {c.name: c.type for c in PHYSICAL[table]}


# --- The answers themselves (query/answers.py): read from the store when first asked for, not stored in
# the segments. The columns runs and judgements (and their history) gain, after their own.
ANSWER_COLUMNS: dict[str, list[Column]] = {
    "runs": [
        Column("final_response", "VARCHAR", "the run's final answer (its last non-blank final output; null when none)"),
        Column("turns", "INTEGER",
               "model replies in the run (provider turns of its tool loop); NULL for an OpenClaw run "
               "(its agent loop runs in its container, out of claw's sight; before session 60: 0)"),
        Column("tool_calls", "INTEGER",
               "tool calls the model made in the run; of an OpenClaw run, the sum its turns reported "
               "(`meta.toolSummary.calls`); NULL when a turn left no result or no count (OpenClaw 2026.9.6 leaves the "
               "count out of a turn that called no tool) and for a run of several turns recorded before session 78"),
    ],
    "judgements": [
        Column("summary", "VARCHAR", "the judge's summary of the run (null when it gave none)"),
    ],
}

MESSAGES: list[Column] = [
    Column("campaign_id", "VARCHAR", "campaign of the run (as in runs)"),
    *_ADDRESS,
    Column("run_key", "VARCHAR", "key of the run (runs.key)"),
    Column("artifact_id", "VARCHAR", "object id of the run's artifact (runs.artifact_id)"),
    Column("position", "INTEGER", "order in the conversation (0-based)"),
    Column("turn", "INTEGER", "model reply this entry belongs to (0: the input messages, 1: the first reply...)"),
    Column("kind", "VARCHAR", "message | tool_call | tool_result | runner"),
    Column("role", "VARCHAR", "system | user | assistant | tool (null for a runner event)"),
    Column("content", "VARCHAR", "the message's text (a runner event: its detail)"),
    Column("tool_call_id", "VARCHAR", "tool calls and results: the call's id"),
    Column("tool_name", "VARCHAR", "tool calls and results: the tool (a runner event: its name)"),
    Column("tool_arguments", "VARCHAR", "tool calls: the arguments as JSON text"),
    Column("tool_status", "VARCHAR", "tool results: the tool's status"),
    Column("tool_result", "VARCHAR", "tool results: the tool's output"),
    TRUST[0],
]

JUDGEMENT_DIMENSIONS: list[Column] = [
    Column("campaign_id", "VARCHAR", "campaign of the judge call (as in judgements)"),
    *_ADDRESS,
    Column("judge_run_id", "VARCHAR", "judge run plan id from the evaluation profile"),
    Column("judge_repetition", "INTEGER", "judge repetition index (0-based)"),
    Column("judge_model", "VARCHAR", "model that judged"),
    Column("run_key", "VARCHAR", "key of the judged run"),
    Column("record_id", "VARCHAR", "the judge call's record (judgements.record_id)"),
    Column("dimension", "VARCHAR", "task | process | autonomy | closeness | efficiency | spark, or overall"),
    Column("score", "DOUBLE", "the judge's score for the dimension (0-10)"),
    Column("evidence", "VARCHAR", "the judge's evidence for that score, one item a line"),
    TRUST[0],
]


def _add_answers(views: dict[str, list[Column]]) -> None:
    for table, added in ANSWER_COLUMNS.items():
        views[table] = views[table] + added
        views[HISTORY_VIEW[table]] = views[HISTORY_VIEW[table]] + added
    views["messages"] = MESSAGES
    views["judgement_dimensions"] = JUDGEMENT_DIMENSIONS


VIEW_DOCS: dict[str, str] = {
    "runs": "one row per run of each campaign's current head",
    "checks": "one row per deterministic check of each campaign's current head",
    "judgements": "one row per judge call (judge run x repetition) of each campaign's current head",
    "results": "one row per aggregated result (final score, verdict, costs) of each campaign's current head",
    "nodes": "every node of any kind of each campaign's current head",
    "run_history": "every run row ever indexed, one per build that used the run",
    "check_history": "every check row ever indexed, one per build that used the checks node",
    "judgement_history": "every judgement row ever indexed, one per build that used the judge node",
    "result_history": "every result row ever indexed, one per build that used the result node",
    "build_nodes": "every node of every build, with what that build did with it",
    "builds": "one row per build: its campaign, state, counts and spending",
    "objects": "one row per object in the store, with its logical and stored size",
    "messages": "one row per message, tool call and tool result of each current run's conversation",
    "judgement_dimensions": "one row per judge call x dimension (and overall): score and evidence",
}


def schema_rows() -> list[tuple[str, str, str, str]]:
    """(view, column, type, meaning) for every column of every view, views in `view_columns` order."""
    return [(view, c.name, c.type, c.doc) for view, cols in view_columns().items() for c in cols]
