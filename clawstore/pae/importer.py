"""`claw import-pae`: store the runs and judgements a pae workspace already paid for under claw's keys, planned by the
build's own planner, so that they are never paid again. What is matched and how: docs/import-pae.md (Details by module).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawstore.errors import ConfigError, UsageError
from clawstore.pae.layout import (
    PaeFileError,
    PaeRun,
    RunProfileDir,
    case_dirs,
    eval_profile_dirs,
    read_judge_file,
    read_run,
    run_profile_dirs,
)
from clawstore.pae.mapping import claw_artifact, judge_iteration, mismatch
from clawstore.values.clock import utc_now

if TYPE_CHECKING:
    from clawstore.store.store import Store

# Run statuses claw keeps as the model's outcome (pae's provider_error/timed_out/failed are retried).
IMPORTABLE_RUN_STATUSES = frozenset({"success", "invalid"})


@dataclass
class ImportReport:
    runs_imported: int = 0
    runs_present: int = 0  # already in the store under the same key
    checks_computed: int = 0
    judgements_imported: int = 0
    judgements_present: int = 0
    unmapped: list[str] = field(default_factory=list)  # one line each: what and why
    damaged: list[str] = field(default_factory=list)  # files that failed verification, skipped
    warnings: list[str] = field(default_factory=list)  # the configs' (said on stderr, not in the JSON)
    kept_by: str | None = None  # the ref that keeps them from gc until deleted (`keep_imported`); None: nothing to keep
    records: list[str] = field(default_factory=list)  # the runs' and judgements' records it stored or found

    def to_json(self) -> dict[str, Any]:
        return {name: value for name, value in self.__dict__.items() if name not in ("warnings", "records")}


def _label(model: str, case: str, rep: int) -> str:
    return f"{model}/{case} rep {rep}"


def pae_outputs(root: Path) -> Path:
    """The `outputs/` of the pae workspace at `root`; a usage error when there is none (checked before a store is
    made: a failed import left an empty one in the directory named, someone else's folder perhaps)."""
    outputs = root / "outputs"
    if not outputs.is_dir():
        raise UsageError(f"import-pae: {outputs} is not a directory (expected a pae workspace with outputs/)")
    return outputs


def import_pae(store: Store, root: Path) -> ImportReport:
    outputs = pae_outputs(root)
    report = ImportReport()
    build_id = "import-pae-" + utc_now().replace(":", "").replace("-", "").replace(".", "")[:15]
    try:
        run_dirs, eval_dirs = run_profile_dirs(outputs), eval_profile_dirs(outputs)
    except PaeFileError as exc:
        report.damaged.append(str(exc))
        return report
    with store.lease("import-pae"):
        for rp in run_dirs:
            mapped = _import_runs(store, root, rp, report, build_id)
            for ev in eval_dirs:
                if (ev.suite_id, ev.run_profile_id) == (rp.suite_id, rp.run_profile_id):
                    _import_judgements(store, root, ev, mapped, report, build_id)
        keep_imported(store, report)
    return report


def keep_imported(store: Store, report: ImportReport) -> None:
    """Keep what the import stored or found from gc: no head names it until a build adopts it, and before session 76 a
    `claw gc` past its grace period in between deleted every imported run and judgement, so the build paid for all of
    them again (tests/pae/test_import_pae.py). The ref `imports/pae-<id>` (store/kept.py) keeps them, until the user
    deletes it (`claw refs --delete`), as a pin (docs/import-pae.md)."""
    from clawstore.store.kept import keep_imported as keep

    report.kept_by = keep(store, "pae", report.records)


def _load(root: Path, suite: str, run_profile: str, evaluation: str | None, report: ImportReport) -> Any:
    from clawstore.builder.api import CampaignRequest, load_campaign

    try:
        campaign = load_campaign(CampaignRequest(root, suite, run_profile, evaluation))
    except ConfigError as exc:
        report.unmapped.append(f"campaign {suite} × {run_profile} × {evaluation or 'none'}: "
                               f"the workspace's configs do not load ({exc})")
        return None
    report.warnings += campaign.warnings
    return campaign


def _import_runs(store: Store, root: Path, rp: RunProfileDir, report: ImportReport,
                 build_id: str) -> dict[tuple[str, str, int], tuple[Any, PaeRun]]:
    from clawstore.builder.api import plan_campaign
    from clawstore.builder.legacy_keys import record_under_key_now
    from clawstore.builder.run_exec import record_run
    from clawstore.graph.plan import attach_records

    campaign = _load(root, rp.suite_id, rp.run_profile_id, None, report)
    if campaign is None:
        return {}
    nodes = plan_campaign(campaign, store)
    attach_records(nodes, store)
    cases, problems = case_dirs(rp.path)
    report.damaged += [str(p) for p in problems]
    mapped: dict[tuple[str, str, int], tuple[Any, PaeRun]] = {}
    planned: set[tuple[str, str, int]] = set()
    for node in nodes:
        model, case_id, rep = node.address["model_id"], node.address["case_id"], node.address["repetition"]
        planned.add((model, case_id, rep))
        case = cases.get((model, case_id))
        if case is None or rep not in case.iterations:
            continue  # pae never ran it: the build will
        label = _label(model, case_id, rep)
        if node.item.runner_type != "llm_probe":
            report.unmapped.append(f"{label}: {node.item.runner_type} runs are not imported (pae's container "
                                   "evidence does not map onto claw's run outputs); claw runs it again")
            continue
        try:
            run = read_run(case, rep)
            different = mismatch(run.payload, node.item)
            if different is not None:
                report.unmapped.append(f"{label}: pae ran it with another {different} than the configs now say")
                continue
            status = run.artifact["status"]
            if status not in IMPORTABLE_RUN_STATUSES:
                report.unmapped.append(f"{label}: ended {status} in pae (an infrastructure failure); "
                                       "claw runs it again")
                continue
            artifact = claw_artifact(run)
        except PaeFileError as exc:
            report.damaged.append(str(exc))
            continue
        mapped[(model, case_id, rep)] = (node, run)
        if node.fresh:
            report.runs_present += 1
            record_under_key_now(store, node)
            if node.record_id is not None:
                report.records.append(node.record_id)
            continue
        try:
            with store.batch():  # the run's objects, then its record, then its cache entry
                outputs = {"pae_source": store.put_bytes(run.raw)}
                node.record_id, node.record = record_run(store, node, artifact, outputs,
                                                         float(artifact["timing"]["duration_seconds"]),
                                                         artifact["timing"]["started_at"], build_id)
        except ValueError as exc:  # numbers a record refuses (its metrics' bounds): no entry was written
            report.damaged.append(str(PaeFileError(run.path, str(exc))))
            del mapped[(model, case_id, rep)]
            continue
        report.runs_imported += 1
        report.records.append(node.record_id)
    for (model, case_id), case in sorted(cases.items()):
        for rep in sorted(case.iterations):
            if (model, case_id, rep) not in planned:
                report.unmapped.append(f"{_label(model, case_id, rep)}: in pae's outputs but not in campaign "
                                       f"{rp.suite_id} × {rp.run_profile_id} as the configs now define it")
    return mapped


def _import_judgements(store: Store, root: Path, ev: Any, mapped: dict[tuple[str, str, int], tuple[Any, PaeRun]],
                       report: ImportReport, build_id: str) -> None:
    from clawstore.builder.eval_layer import EvalLayer
    from clawstore.builder.legacy_keys import record_under_key_now
    from clawstore.evaluate import resolve_judge_model

    campaign = _load(root, ev.suite_id, ev.run_profile_id, ev.evaluation_profile_id, report)
    if campaign is None:
        return
    layer = EvalLayer(campaign, store)
    profile = campaign.evaluation_profile
    where = f"evaluation profile {ev.evaluation_profile_id}"
    if ev.judge_system_prompt is not None and ev.judge_system_prompt.strip() != layer.system_prompt.strip():
        report.unmapped.append(f"{where}: pae judged with another system prompt than the configs now say")
        return
    if len(profile.judge_runs) != 1:
        report.unmapped.append(f"{where}: {len(profile.judge_runs)} judge runs (pae gives no final score "
                               "for more than one); claw judges again")
        return
    judge_run = profile.judge_runs[0]
    judge_model = resolve_judge_model(profile.judge(judge_run.judge_id))
    cases, problems = case_dirs(ev.path)
    report.damaged += [str(p) for p in problems]
    for (model, case_id, rep), (node, run) in sorted(mapped.items(), key=lambda kv: kv[0]):
        case = cases.get((model, case_id))
        if case is None or rep not in case.iterations:
            continue
        label = _label(model, case_id, rep)
        try:
            path, judge_file = read_judge_file(case, rep, run.fingerprint)
        except PaeFileError as exc:
            report.damaged.append(str(exc))
            continue
        if judge_file["judge_name"] != judge_run.judge_run_id:
            report.unmapped.append(f"{label}: pae's judge run is {judge_file['judge_name']!r}, "
                                   f"the profile's {judge_run.judge_run_id!r}")
            continue
        evaluation = layer.start(node)
        if evaluation.checks is None:
            continue
        if not evaluation.checks.fresh:
            evaluation.checks.record_id, evaluation.checks.record = layer.execute_checks(evaluation.checks, build_id)
            report.checks_computed += 1
        layer.plan_judges(evaluation)
        # The whole file is converted before any judgement from it is stored.
        converted = []
        try:
            for judge_node in evaluation.judges:
                if judge_node.fresh:
                    report.judgements_present += 1
                    record_under_key_now(store, judge_node)
                    if judge_node.record_id is not None:
                        report.records.append(judge_node.record_id)
                    continue
                jrep = judge_node.address["judge_repetition"]
                try:
                    iteration, request = judge_iteration(path, judge_file, jrep, judge_run.judge_run_id)
                except LookupError as exc:
                    report.unmapped.append(f"{label}: {exc}; claw asks the judge again")
                    continue
                if iteration.judge_model != judge_model:
                    report.unmapped.append(f"{label} judge #{jrep}: pae asked {iteration.judge_model}, "
                                           f"the profile names {judge_model}")
                    continue
                converted.append((judge_node, iteration, request))
        except PaeFileError as exc:
            report.damaged.append(str(exc))
            continue
        raw = path.read_bytes()
        for judge_node, iteration, request in converted:
            source = store.put_bytes(raw)  # written (and made durable) with the record's batch
            record_id, _ = layer.record_judgement(judge_node, iteration, request, utc_now(), 0.0, build_id,
                                                  extra_outputs={"pae_source": source})
            report.judgements_imported += 1
            report.records.append(record_id)
