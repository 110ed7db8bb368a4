"""Expand (suite, run profile, evaluation profile) into the list of runs a build must produce.

Everything a run needs from the configs is resolved here: the provider model string, the merged
runner settings, messages with `source:` files expanded and attachments injected, and the OpenClaw
agent. Every case is checked at load time; the items are made a window of cases at a time from the
compact cases the workspace holds (`CampaignItems`), each case once for all of its models.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, overload

from pydantic import BaseModel

from clawstore.config.catalog import CaseEntry, Loaded, LoadedAgent, LoadedCase, Workspace
from clawstore.config.crosscheck import run_profile_issues, suite_issues
from clawstore.config.issues import ConfigIssue
from clawstore.config.limits import ATTACHMENT_WARN_TOKENS, BYTES_PER_TOKEN, MAX_CAMPAIGN_RUNS
from clawstore.config.messages import Attachment, ResolvedMessage, inject_attachments, read_attachments
from clawstore.config.models import EvaluationProfile, ModelConfig, RunProfile, Suite
from clawstore.config.references import find_workspace_root, looks_like_path, resolve_reference, split_root
from clawstore.config.resolution import (
    PromptProblem,
    merge_runner_settings,
    resolve_judge_prompt,
    resolve_model,
)
from clawstore.config.selection import matching_assignments, may_select, select_case_ids
from clawstore.config.workspace import collector_paused, load_workspace, parse_config
from clawstore.errors import ConfigError, UsageError
from clawstore.values.costs import declared_prices, usd

if TYPE_CHECKING:
    from clawstore.config.parsed import ParsedCases

T = TypeVar("T", bound=BaseModel)


@dataclass(frozen=True, slots=True)  # (slots: one is held per run of the campaign)
class CampaignItem:
    model: ModelConfig
    resolved_model: str
    case: LoadedCase
    runner_type: str
    settings: dict[str, Any]  # merged llm_probe settings; {} for openclaw
    messages: list[ResolvedMessage]  # sources expanded; attachments injected for llm_probe
    turns: list[ResolvedMessage]
    attachments: list[Attachment]
    agent_id: str | None  # openclaw only

    @property
    def model_id(self) -> str:
        return self.model.model_id

    @property
    def case_id(self) -> str:
        return self.case.case_id

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready view (attachments by name and size, not content)."""
        return {
            "model_id": self.model_id,
            "case_id": self.case_id,
            "resolved_model": self.resolved_model,
            "runner_type": self.runner_type,
            "settings": dict(self.settings),
            "messages": [m.as_dict() for m in self.messages],
            "turns": [m.as_dict() for m in self.turns],
            "attachments": [{"name": a.name, "byte_size": len(a.data)} for a in self.attachments],
            "agent_id": self.agent_id,
        }


@dataclass(frozen=True)
class Campaign:
    root: Path
    suite: Suite
    suite_path: Path
    run_profile: RunProfile
    run_profile_path: Path
    evaluation_profile: EvaluationProfile | None
    evaluation_profile_path: Path | None
    judge_system_prompt: str | None
    judge_system_prompt_source: str | None
    items: CampaignItems  # models (suite order) × cases (sorted by case_id), made a window at a time
    agents: dict[str, LoadedAgent] = field(default_factory=dict)  # the agents the items use
    workspace: Workspace | None = field(default=None, repr=False, compare=False)
    warnings: list[str] = field(default_factory=list)  # worth saying before anything is sent
    # What the whole campaign expects, its --case/--model filter or not: {"cases": N, "models": [model ids]} (N cases
    # each). A build writes it into its log and head: `claw report` says how many of those results the head holds.
    expected: dict[str, Any] | None = None

    @property
    def campaign_id(self) -> str:
        evaluation = self.evaluation_profile.evaluation_profile_id if self.evaluation_profile else "none"
        return f"{self.suite.suite_id}__{self.run_profile.run_profile_id}__{evaluation}"

    @property
    def case_ids(self) -> list[str]:
        return self.items.case_ids if self.items.models else []

    @property
    def model_ids(self) -> list[str]:
        return self.items.model_ids if self.items.cases else []

    def as_dict(self) -> dict[str, Any]:
        """The expanded campaign as plain data (for `--json` output, debugging, diffs)."""
        evaluation = self.evaluation_profile
        return {
            "campaign_id": self.campaign_id,
            "root": str(self.root),
            "suite": {"id": self.suite.suite_id, "path": str(self.suite_path)},
            "run_profile": {"id": self.run_profile.run_profile_id, "path": str(self.run_profile_path)},
            "evaluation_profile": None if evaluation is None else {
                "id": evaluation.evaluation_profile_id, "path": str(self.evaluation_profile_path),
                "judge_system_prompt_source": self.judge_system_prompt_source,
            },
            "items": [item.as_dict() for item in self.items],
        }


def _norm(path: Path) -> Path:
    return Path(os.path.normpath(path.absolute()))


def _workspace_root_for(suite: str, cwd: Path) -> Path:
    """The workspace of an explicit suite path is the one whose configs/ holds it; else search from cwd."""
    if looks_like_path(suite):
        path = _norm(cwd / os.path.expanduser(suite))
        for ancestor in path.parents:
            found = split_root(ancestor)
            if found and path.is_relative_to(found[1]):
                return found[0]
    return find_workspace_root(cwd)


def _pick(
    ws: Workspace, kind: str, value: str, cwd: Path, catalog: dict[str, Loaded[T]], model: type[T]
) -> tuple[Loaded[T] | None, Path, bool]:
    """The config a flag names: (loaded or None if invalid, its path, whether it is outside the catalog)."""
    by_id = {loaded_id: loaded.path for loaded_id, loaded in catalog.items()}
    path = _norm(resolve_reference(kind, value, ws.root, cwd, by_id))
    for loaded in catalog.values():
        if loaded.path == path:
            return loaded, path, False
    if any(issue.file == path for issue in ws.issues):
        return None, path, False  # a catalog file that failed validation; its issues block the campaign
    config, _ = parse_config(ws, path, model)
    return (Loaded(config, path) if config is not None else None), path, True


def _input_price(model: ModelConfig) -> float | None:
    """USD per 1M input tokens when the suite model states it (`pricing.input` or `cost.input`), else None."""
    pricing = declared_prices(model.model_extra or {})
    price = pricing.get("input") if isinstance(pricing, dict) else None
    return float(price) if isinstance(price, int | float) and not isinstance(price, bool) and price >= 0 else None


def attachment_warnings(models: list[ModelConfig], sizes: list[int], repetitions: int) -> list[str]:
    """A warning with a cost estimate when attachments alone would send many tokens (`sizes`: the bytes of each
    case's attachments, in case order)."""
    tokens = 0
    cost: float | None = 0.0
    for model in models:
        price = _input_price(model)
        for size in sizes:
            sent = size * repetitions // BYTES_PER_TOKEN
            tokens += sent
            cost = None if cost is None or price is None else cost + sent * price / 1e6
    if tokens <= ATTACHMENT_WARN_TOKENS:
        return []
    estimate = (f"about {usd(cost, 2)} USD at the suite's input prices" if cost is not None
                else "cost unknown: give the suite models pricing.input (USD per 1M tokens) for an estimate")
    return [f"attachments alone send about {tokens:,} input tokens in this campaign "
            f"(1 token ~ {BYTES_PER_TOKEN} bytes, per run and repetition); {estimate}"]


_HEAD_KEPT = " (its head is left as it was: its results stay, and gc keeps them)"


def _nothing_to_run(suite_file: str, suite: Suite, selected: list[str], cases: int) -> list[str]:
    """Why a campaign runs nothing, said before it builds (a misspelt tag selected no case without a word, and the
    build moved the campaign's head to an empty state)."""
    said = []
    if not suite.models:
        said.append(f"{suite_file}: models: none listed: this campaign runs nothing{_HEAD_KEPT}")
    if not selected:
        said.append(f"{suite_file}: case_selection: selects no case of the {cases} in the workspace: this campaign "
                    f"runs nothing{_HEAD_KEPT}")
    return said


def _attachment_sizes(cases: list[CaseEntry]) -> list[int]:
    """The bytes of each case's attachments, read now: one that cannot be read fails the campaign at load time, not
    when its window is planned (the items read them again then)."""
    sizes = []
    for entry in cases:
        try:
            sizes.append(sum(len(a.data) for a in read_attachments([Path(p) for p in entry.attachment_paths])))
        except OSError as exc:
            raise ConfigError(f"cannot read attachment: {exc}", entry.file, "input.attachments") from None
    return sizes


def _fail(issues: list[ConfigIssue]) -> ConfigError:
    first = issues[0]
    error = first.to_error()
    if len(issues) > 1:
        more = len(issues) - 1
        error = ConfigError(f"{first.message} (and {more} more problem{'s' * (more > 1)}; "
                            "run 'claw validate')", first.path, first.field or None)
    return error


def _case_inputs(loaded: LoadedCase) -> tuple[list[ResolvedMessage], list[ResolvedMessage], list[Attachment]]:
    """A case's messages (sources expanded; attachments injected for llm_probe), turns and attachments."""
    try:
        attachments = read_attachments(list(loaded.attachment_paths))
    except OSError as exc:
        raise ConfigError(f"cannot read attachment: {exc}", loaded.path.as_posix(), "input.attachments") from None
    messages = list(loaded.messages)
    if loaded.case.runner.type == "llm_probe":
        messages = inject_attachments(messages, attachments)
    return messages, list(loaded.turns), attachments


class CampaignItems(Sequence[CampaignItem]):
    """The campaign's items, models (suite order) × cases (sorted by case_id), made from the workspace's compact
    cases (config/catalog.py `CaseEntry`) when asked for: a build asks a window of cases at a time (`window`) and so
    holds the items and case models of the windows it runs, not the campaign's; iterating makes every item
    (docs/scale/building.md, Scale: the loaded campaign). Each case is made once a window, shared by its models'
    items."""

    def __init__(self, run_profile: RunProfile, models: list[ModelConfig], cases: list[CaseEntry],
                 agent_of: dict[str, str]):
        self.models = models
        self.cases = cases
        self._resolved = [resolve_model(model) for model in models]
        self._run_profile = run_profile
        self._agent_of = agent_of
        # per model: runner type -> the settings of its cases that set none (one dict for all of them)
        self._shared: list[dict[str, dict[str, Any]]] = [{} for _ in models]

    @property
    def case_ids(self) -> list[str]:
        return [entry.case_id for entry in self.cases]

    @property
    def model_ids(self) -> list[str]:
        return [model.model_id for model in self.models]

    def __len__(self) -> int:
        return len(self.models) * len(self.cases)

    def only(self, cases: list[CaseEntry]) -> CampaignItems:
        """The items of these cases alone (some of this campaign's, in its order): builder/casestamp.py."""
        return CampaignItems(self._run_profile, self.models, cases, self._agent_of)

    def __iter__(self) -> Iterator[CampaignItem]:
        return iter(self.window(0, len(self.cases)))

    @overload
    def __getitem__(self, index: int) -> CampaignItem: ...

    @overload
    def __getitem__(self, index: slice) -> list[CampaignItem]: ...

    def __getitem__(self, index: int | slice) -> CampaignItem | list[CampaignItem]:
        if isinstance(index, slice):
            return list(self)[index]
        at = index + len(self) if index < 0 else index
        if not 0 <= at < len(self):
            raise IndexError("campaign item index out of range")
        model, case = divmod(at, len(self.cases))
        return self.window(case, case + 1)[model]

    def window(self, start: int, stop: int) -> list[CampaignItem]:
        """The items of cases `start` to `stop` (in case_id order), in the campaign's order: models, then cases."""
        cases = [(loaded, _case_inputs(loaded)) for loaded in (entry.load() for entry in self.cases[start:stop])]
        return [self._item(index, loaded, inputs) for index in range(len(self.models)) for loaded, inputs in cases]

    def _item(self, index: int, loaded: LoadedCase,
              inputs: tuple[list[ResolvedMessage], list[ResolvedMessage], list[Attachment]]) -> CampaignItem:
        model, runner = self.models[index], loaded.case.runner
        shared = self._shared[index]
        settings = None if runner.settings else shared.get(runner.type)
        if settings is None:
            settings = merge_runner_settings(self._run_profile, model.model_id, loaded.case)
            if not runner.settings:
                shared[runner.type] = settings
        messages, turns, attachments = inputs
        return CampaignItem(model=model, resolved_model=self._resolved[index], case=loaded, runner_type=runner.type,
                            settings=settings, messages=messages, turns=turns, attachments=attachments,
                            agent_id=self._agent_of.get(loaded.case_id))


def resolve_campaign(
    root_or_cwd: Path,
    suite: str,
    run_profile: str,
    evaluation_profile: str | None = None,
    cases: Sequence[str] = (),
    models: Sequence[str] = (),
    parsed: ParsedCases | None = None,
) -> Campaign:
    """Load the workspace and expand one campaign into items; raise on any problem that concerns it.

    Problems in files the campaign does not use (another suite, an unselected case) do not block it. `parsed`: case
    files parsed before, by their bytes (config/parsed.py).
    """
    with collector_paused():
        return _resolve(_norm(Path(root_or_cwd)), suite, run_profile, evaluation_profile, cases, models, parsed)


def campaign_profiles(cwd: Path, suite: str, run_profile: str, evaluation_profile: str | None
                      ) -> tuple[Suite, RunProfile, EvaluationProfile | None] | None:
    """The suite and profiles a campaign names, read without its cases (`claw plan` of a campaign its
    stamp proves fresh); None when one cannot be read cleanly: the full load then says why."""
    from clawstore.config.workspace import load_profiles

    cwd = _norm(Path(cwd))
    try:
        ws = load_profiles(_workspace_root_for(suite, cwd))
        picked = [_pick(ws, "suite", suite, cwd, ws.suites, Suite)[0],
                  _pick(ws, "run profile", run_profile, cwd, ws.run_profiles, RunProfile)[0]]
        if evaluation_profile is not None:
            picked.append(_pick(ws, "evaluation profile", evaluation_profile, cwd, ws.evaluation_profiles,
                                EvaluationProfile)[0])
    except (ConfigError, UsageError, OSError):
        return None
    if ws.issues or any(loaded is None for loaded in picked):
        return None
    suite_cfg, rp_cfg, *ep = (loaded.config for loaded in picked if loaded is not None)
    return suite_cfg, rp_cfg, ep[0] if ep else None  # type: ignore[return-value]


def _resolve(
    cwd: Path, suite: str, run_profile: str, evaluation_profile: str | None,
    cases: Sequence[str], models: Sequence[str], parsed: ParsedCases | None = None,
) -> Campaign:
    ws = load_workspace(_workspace_root_for(suite, cwd), parsed)
    suite_loaded, suite_path, suite_outside = _pick(ws, "suite", suite, cwd, ws.suites, Suite)
    rp_loaded, rp_path, rp_outside = _pick(ws, "run profile", run_profile, cwd, ws.run_profiles, RunProfile)
    ep_loaded: Loaded[EvaluationProfile] | None = None
    ep_path: Path | None = None
    if evaluation_profile is not None:
        ep_loaded, ep_path, ep_outside = _pick(ws, "evaluation profile", evaluation_profile, cwd,
                                               ws.evaluation_profiles, EvaluationProfile)
        if ep_loaded and ep_outside:
            try:
                resolve_judge_prompt(ep_loaded.config, ep_path, ws.root)
            except PromptProblem as exc:
                ws.add_issue(ep_path, exc.field, str(exc))
    relevant = {suite_path, rp_path} | ({ep_path} if ep_path else set())
    # Files outside the catalog were not cross-checked by load_workspace.
    if suite_loaded and suite_outside:
        for field_path, message in suite_issues(ws, suite_loaded.config):
            ws.add_issue(suite_path, field_path, message)
    if rp_loaded and rp_outside:
        for field_path, message in run_profile_issues(ws, rp_loaded.config):
            ws.add_issue(rp_path, field_path, message)

    if suite_loaded is None or rp_loaded is None or (evaluation_profile is not None and ep_loaded is None):
        raise _fail(ws.issues_in(relevant))
    suite_cfg, rp_cfg = suite_loaded.config, rp_loaded.config

    tags = ws.case_tags()
    selected = select_case_ids(suite_cfg.case_selection, tags)
    expected = {"cases": len(selected), "models": list(suite_cfg.model_ids)}  # (before --case and --model)
    wanted = list(dict.fromkeys(cases))
    for stub in ws.broken_cases:
        if wanted:
            blocks = stub.case_id is None or stub.case_id in wanted
        else:
            blocks = may_select(suite_cfg.case_selection, stub.case_id, stub.tags)
        if blocks:
            relevant.add(stub.path)
    if wanted:
        unknown = [case_id for case_id in wanted if case_id not in selected and not any(
            stub.case_id == case_id for stub in ws.broken_cases)]
        if unknown:
            raise UsageError(f"--case {', '.join(unknown)}: not selected by suite '{suite_cfg.suite_id}' "
                             f"(selected: {', '.join(selected) or 'none'})")
        selected = [case_id for case_id in selected if case_id in wanted]
    model_list = list(suite_cfg.models)
    if models:
        unknown = [m for m in dict.fromkeys(models) if m not in suite_cfg.model_ids]
        if unknown:
            raise UsageError(f"--model {', '.join(unknown)}: not in suite '{suite_cfg.suite_id}' "
                             f"(models: {', '.join(suite_cfg.model_ids) or 'none'})")
        model_list = [m for m in model_list if m.model_id in models]

    relevant |= {ws.cases[case_id].path for case_id in selected}
    openclaw_cases = [c for c in selected if ws.cases[c].runner_type == "openclaw"]
    agent_of: dict[str, str] = {}
    idle: list[str] = []  # assignments that select none of the campaign's openclaw cases
    if openclaw_cases and rp_cfg.openclaw is None:
        ws.add_issue(rp_path, "openclaw", f"suite '{suite_cfg.suite_id}' selects openclaw cases "
                                          f"({', '.join(openclaw_cases)}) but this run profile has no "
                                          "'openclaw' block (agent_id, image, timeout_seconds)")
    elif openclaw_cases:
        assert rp_cfg.openclaw is not None
        assignments = suite_cfg.openclaw.agent_assignments
        used: set[int] = set()
        for case_id in openclaw_cases:
            hits = matching_assignments(assignments, case_id, tags[case_id])
            used.update(hits)
            agent_of[case_id] = assignments[hits[0]].agent_id if len(hits) == 1 else rp_cfg.openclaw.agent_id
        if not wanted:  # (with --case, an assignment may be for the cases left out)
            idle = [f"{ws.rel(suite_path)}: openclaw.agent_assignments[{index}]: selects none of the campaign's "
                    f"{len(openclaw_cases)} openclaw case(s): agent '{assignment.agent_id}' runs nothing, and a case "
                    f"matched by no assignment runs the run profile's agent '{rp_cfg.openclaw.agent_id}'"
                    for index, assignment in enumerate(assignments) if index not in used]
        for agent_id in set(agent_of.values()):
            relevant.add(ws.configs_dir / "agents" / agent_id / "agent.yaml")
            relevant.add(ws.configs_dir / "agents" / agent_id)

    blocking = ws.issues_in(relevant)
    if blocking:
        raise _fail(blocking)

    prompt: tuple[str | None, str | None] = (None, None)
    if ep_loaded is not None:
        if not ep_loaded.config.judge_runs:
            raise ConfigError("no judge_runs: add at least one judge run, or omit --evaluation-profile",
                              ws.rel(ep_loaded.path), "judge_runs")
        prompt = resolve_judge_prompt(ep_loaded.config, ep_loaded.path, ws.root)

    repetitions = rp_cfg.execution_policy.run_repetitions
    runs = len(model_list) * len(selected) * repetitions
    if runs > MAX_CAMPAIGN_RUNS:
        raise ConfigError(f"the campaign would have {runs:,} runs ({len(model_list)} models x {len(selected)} "
                          f"cases x {repetitions} repetitions); at most {MAX_CAMPAIGN_RUNS:,}",
                          ws.rel(rp_path), "execution_policy.run_repetitions")
    agents = {agent_id: ws.agents[agent_id] for agent_id in sorted(set(agent_of.values()))}
    entries = [ws.cases[case_id] for case_id in selected]
    warned = {entry.path for entry in entries} | {agent.path for agent in agents.values()}
    warned |= {rp_path} if openclaw_cases else set()  # (its llm_probe settings, which OpenClaw does not read)
    warned |= {ep_loaded.path} if ep_loaded is not None else set()  # (its judges' options that leave no verdict)
    warned.add(suite_path)  # (a model's `pricing` that prices nothing)
    warnings = ws.warnings_in(warned)
    warnings += _nothing_to_run(ws.rel(suite_path), suite_cfg, selected, len(ws.cases)) + idle
    warnings += attachment_warnings(model_list, _attachment_sizes(entries), repetitions)
    return Campaign(
        root=ws.root,
        suite=suite_cfg,
        suite_path=suite_path,
        run_profile=rp_cfg,
        run_profile_path=rp_path,
        evaluation_profile=ep_loaded.config if ep_loaded else None,
        evaluation_profile_path=ep_path,
        judge_system_prompt=prompt[0],
        judge_system_prompt_source=prompt[1],
        items=CampaignItems(rp_cfg, model_list, entries, agent_of),
        agents=agents,
        workspace=ws,
        warnings=warnings,
        expected=expected,
    )
