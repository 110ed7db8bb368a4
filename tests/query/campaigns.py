"""Write campaign builds into a real Store the way the build layer does: input documents, records
(clawstore.graph.records.make_record), action-cache entries, the build log (clawstore.builder.buildlog),
the campaign head, then refresh_manifest. No provider is involved: scores and costs are chosen here so
tests can predict every number."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from clawstore.builder.buildlog import BuildLog
from clawstore.graph.records import make_record
from clawstore.query.manifest import index_pending
from clawstore.store import Store
from clawstore.values.clock import utc_now

DIMS = ("task", "process", "autonomy", "closeness", "efficiency", "spark")


def score_of(model: str, case: str, judge_rep: int = 0, salt: str = "") -> float:
    """A deterministic score in [1, 9]: predictable, distinct per model/case, noisy per judge rep."""
    base = (sum(map(ord, model + case + salt)) % 70) / 10 + 1.0
    return round(base + 0.5 * judge_rep, 2)


RUN_COST, JUDGE_COST = 0.002, 0.0005


@dataclass
class Spec:
    suite: str = "suite_a"
    run_profile: str = "std"
    evaluation_profile: str | None = "judge_x"
    models: list[str] = field(default_factory=lambda: ["openai/gpt-a", "anthropic/claude-b"])
    cases: list[str] = field(default_factory=lambda: ["case_1", "case_2", "case_3"])
    repetitions: int = 1
    judge_reps: int = 2
    salt: str = ""  # changes judge/result keys (e.g. an edited rubric)
    run_salt: str = ""  # changes run keys (e.g. a new temperature)
    fail: set[tuple[str, str]] = field(default_factory=set)  # (model, case) runs that hit provider_error
    key_model: dict[str, str] = field(default_factory=dict)  # model_id -> model its run key names (aliases)

    @property
    def campaign_id(self) -> str:
        return f"{self.suite}__{self.run_profile}__{self.evaluation_profile or 'none'}"

    @property
    def campaign(self) -> dict[str, Any]:
        return {"id": self.campaign_id, "suite_id": self.suite,
                "run_profile_id": self.run_profile, "evaluation_profile_id": self.evaluation_profile}


@dataclass
class Built:
    build_id: str
    run_nodes: int
    judge_nodes: int
    result_nodes: int
    checks_nodes: int
    check_rows: int
    executed: int
    reused: int


def _node(store: Store, log: BuildLog, kind: str, doc: dict[str, Any], address: dict[str, Any], *,
          status: str = "success", metrics: dict[str, Any] | None = None, summary: dict[str, Any],
          error: dict[str, Any] | None = None, outputs: dict[str, Any] | None = None) -> tuple[str, str]:
    """Reuse a cached record for the input document, or 'execute' (write a new one)."""
    key = store.put_json({"kind": kind, **doc})
    cached = store.get_action(key)
    if cached is not None and cached.cacheable:
        record_id = store.get_action_record_id(key)
        log.add(kind, key, record_id, "reuse", address, cached.to_json())
        return key, "reuse"
    now = utc_now()
    record = make_record(
        kind=kind, key=key, address=address, status=status, cacheable=status in ("success", "passed", "failed"),
        outputs={"input_document": key, **(outputs or {})},
        metrics=metrics or {"input_tokens": 0, "output_tokens": 0, "reasoning_tokens": 0, "cached_tokens": 0,
                            "cost_usd": 0.0, "latency_s": 0.01},
        summary=summary, error=error, started_at=now, finished_at=now, build_id=log.build_id)
    if status == "provider_error":
        record["cacheable"] = False
    record_id = store.put_action(key, record)
    log.add(kind, key, record_id, "fail" if error else "exec", address, record)
    return key, "fail" if error else "exec"


def build(store: Store, spec: Spec, refresh: bool = True) -> Built:
    log = BuildLog(store, spec.campaign)
    log.write()
    counts = {"run": 0, "checks": 0, "judge": 0, "result": 0, "rows": 0}
    with store.batch():  # one flush for the whole build keeps fixtures fast
        _write_nodes(store, log, spec, counts)
    log.end("complete")
    log.advance_head(None)
    log.seal()
    if refresh:
        index_pending(store)
    data = log.counts
    return Built(log.build_id, counts["run"], counts["judge"], counts["result"], counts["checks"], counts["rows"],
                 data["executed"], data["reused"])


def _write_nodes(store: Store, log: BuildLog, spec: Spec, counts: dict[str, int]) -> None:
    for model in spec.models:
        for case in spec.cases:
            for rep in range(spec.repetitions):
                address = {"model_id": model, "case_id": case, "repetition": rep}
                failing = (model, case) in spec.fail
                answer = f"{model} answers {case}"
                artifact = store.put_json({"identity": {"case_id": case}, "final": answer,
                                           "trace": [{"event_type": "final_output", "content": answer}]})
                run_key, _ = _node(
                    store, log, "run",
                    {**address, "model_id": spec.key_model.get(model, model), "salt": spec.run_salt}, address,
                    status="provider_error" if failing else "success",
                    metrics={"input_tokens": 100, "output_tokens": 20 + rep, "reasoning_tokens": 5,
                             "cached_tokens": 0, "cost_usd": RUN_COST, "latency_s": 1.0 + len(model) / 10},
                    summary={"model_id": model, "requested_model": model, "case_id": case, "repetition": rep,
                             "runner_type": "llm_probe", "endpoint": "http://127.0.0.1:9/v1",
                             "error_code": "provider_error" if failing else None,
                             "error_message": "HTTP 503 after 3 attempts" if failing else None},
                    error={"code": "provider_error", "message": "HTTP 503 after 3 attempts"} if failing else None,
                    outputs={"artifact": artifact})
                counts["run"] += 1
                if failing or spec.evaluation_profile is None:
                    continue
                checks = [{"check_id": "has_answer", "kind": "final_response_present", "outcome": "passed",
                           "message": "final response present", "dimensions": ["task"]},
                          {"check_id": "mentions_case", "kind": "file_contains",
                           "outcome": "failed" if case.endswith("2") else "passed", "message": "looked for it",
                           "dimensions": ["task", "closeness"]}]
                _node(store, log, "checks", {"run": run_key, "salt": spec.salt}, address, status="passed",
                      summary={"run_key": run_key, **address, "passed": 1, "failed": 0, "error": 0,
                               "checks": checks})
                counts["checks"] += 1
                counts["rows"] += len(checks)
                scores = []
                for jrep in range(spec.judge_reps):
                    jaddr = {**address, "judge_run_id": "main", "judge_repetition": jrep}
                    score = score_of(model, case, jrep, spec.salt)
                    scores.append(score)
                    _node(store, log, "judge", {"run": run_key, "jrep": jrep, "salt": spec.salt}, jaddr,
                          metrics={"input_tokens": 300, "output_tokens": 50, "reasoning_tokens": 0,
                                   "cached_tokens": 0, "cost_usd": JUDGE_COST, "latency_s": 0.5},
                          summary={"run_key": run_key, **address, "judge_run_id": "main",
                                   "judge_id": "main_judge", "judge_model": "openai/gpt-4o-mini",
                                   "judge_repetition": jrep, "overall_score": score,
                                   "dimensions": {d: score for d in DIMS}})
                    counts["judge"] += 1
                final = sorted(scores)[len(scores) // 2] if scores else None
                _node(store, log, "result", {"run": run_key, "salt": spec.salt}, address,
                      summary={"run_key": run_key, **address, "final_score": final,
                               "final_dimensions": {d: final for d in DIMS}, "passed": (final or 0) >= 5.0,
                               "aggregation_method": "median", "pass_threshold": 5.0,
                               "judge_iterations": spec.judge_reps, "judge_successful": spec.judge_reps,
                               "checks_total": 2, "checks_passed": 2 - case.endswith("2"),
                               "checks_failed": int(case.endswith("2"))})
                counts["result"] += 1


def count_flattened(monkeypatch: Any) -> list[Any]:
    """From now on, the key of every node whose record is read and flattened into rows, as each is
    (rows._node_row: copied rows and rows read back from the manifest never pass there)."""
    from clawstore.query import rows

    seen: list[Any] = []
    real = rows._node_row

    def counting(node, record, ctx):  # type: ignore[no-untyped-def]
        seen.append(node.get("key"))
        return real(node, record, ctx)

    monkeypatch.setattr(rows, "_node_row", counting)
    from clawstore.query import sqlflat

    real_here = sqlflat.flatten_here

    def counting_here(log, nodes, store, work):  # type: ignore[no-untyped-def]  # (flattened by DuckDB)
        def passing() -> Any:
            for node in nodes:
                seen.append(node.get("key") if isinstance(node, dict) else None)
                yield node

        return real_here(log, passing(), store, work)

    monkeypatch.setattr(sqlflat, "flatten_here", counting_here)
    return seen
