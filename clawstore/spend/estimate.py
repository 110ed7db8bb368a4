"""`claw plan`: what a build of a campaign would send, and what it would likely cost and take, from the build's own
planner and the store's history. docs/plan.md (How it estimates; Details by module)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, fields, replace
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from clawstore.builder.inorder import InOrder
from clawstore.builder.workplan import LAYERS, PAID_LAYERS, LayerCounts, Work, work_items
from clawstore.runners.pricing import priced_cost, pricing
from clawstore.spend.history import History, Usage, load_history, prompt_chars
from clawstore.store.core.ids import oid_hex
from clawstore.values.costs import PRICED, REPORTED, UNKNOWN, CostSum, missing_prices, missing_prices_text, usd

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from clawstore.builder.api import NodeState, UntrustedSeen
    from clawstore.builder.casestamp import ByCase
    from clawstore.config.campaign import Campaign, CampaignItem
    from clawstore.config.models import EvaluationProfile, JudgeConfig, RunProfile, Suite
    from clawstore.store.store import Store

# Used only for a model the store has never seen run (the user is told: token source "default").
DEFAULT_TOKENS_PER_CHAR = 0.25
DEFAULT_OUTPUT_TOKENS = 512
DEFAULT_JUDGE_INPUT_TOKENS = 3000
DEFAULT_JUDGE_OUTPUT_TOKENS = 600
# Why an estimate is a floor (Estimate.floor), wherever it is shown
FLOOR = "a floor: the agent's own prompt and workspace are not counted"


@dataclass
class Estimate:
    input_tokens: float
    output_tokens: float
    cost_usd: float | None
    latency_s: float | None
    token_source: str  # same-case | model-rate | model-mean | default
    cost_source: str  # reported | priced | unknown
    # A lower bound: an OpenClaw run estimated from its prompt alone (`default`, `model-rate`), while the agent sends
    # OpenClaw's system prompt and the workspace with every request (session 78: 12 input tokens planned, 3,078 used)
    floor: bool = False


@dataclass
class PlanLine:
    """One model (runs) or one judge (judgements) of the plan."""

    kind: str  # run | judge
    name: str  # model_id, or judge_id
    model: str  # the model the requests go to
    requests: int = 0
    reused: int = 0
    unplanned: int = 0
    open_ended: int = 0  # requests counted once that may be more (a tool loop, an agent: one per turn)
    floor: int = 0  # requests whose tokens and cost are a lower bound (Estimate.floor)
    pending: int = 0  # nodes a provider batch stands for: the build collects them and sends nothing for them
    input_tokens: float = 0.0
    output_tokens: float = 0.0
    cost: CostSum = CostSum()
    latency_s: float = 0.0
    latency_known: bool = True
    token_sources: Counter[str] = field(default_factory=Counter)
    cost_sources: Counter[str] = field(default_factory=Counter)
    batch_factor: float | None = None  # `plan --batch`: a judge's `pricing.batch` (1: none declared)

    @property
    def batch_cost(self) -> CostSum:
        """What the line would cost through the provider's Batch API (its cost when not by batch)."""
        if self.batch_factor is None:
            return self.cost
        return replace(self.cost, known_usd=self.cost.known_usd * self.batch_factor)

    @property
    def batch_cost_usd(self) -> float | None:
        return None if self.batch_factor is None else self.batch_cost.usd

    def add(self, estimate: Estimate) -> None:
        self.requests += 1
        self.input_tokens += estimate.input_tokens
        self.output_tokens += estimate.output_tokens
        self.cost += CostSum.of(estimate.cost_usd, estimate.cost_source)
        if estimate.latency_s is None:
            self.latency_known = False
        else:
            self.latency_s += estimate.latency_s
        self.token_sources[estimate.token_source] += 1
        self.cost_sources[estimate.cost_source] += 1
        self.floor += estimate.floor

    @property
    def cost_usd(self) -> float | None:
        return self.cost.usd

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "model": self.model, "requests": self.requests,
                "reused": self.reused, "unplanned": self.unplanned, "pending": self.pending,
                "requests_minimum": bool(self.open_ended),
                "tokens_minimum": bool(self.floor), "cost_minimum": bool(self.floor),
                "estimated_input_tokens": round(self.input_tokens),
                "estimated_output_tokens": round(self.output_tokens),
                "estimated_cost_usd": None if self.cost_usd is None else round(self.cost_usd, 9),
                "token_sources": dict(self.token_sources), "cost_sources": dict(self.cost_sources),
                **({} if self.batch_factor is None else {"estimated_batch_cost_usd": _rounded(self.batch_cost_usd),
                                                         "batch_factor": self.batch_factor})}


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 9)


@dataclass
class SpendPlan:
    campaign_id: str
    concurrency: int
    lines: list[PlanLine]
    layers: dict[str, dict[str, int]]

    @property
    def batch(self) -> bool:
        """Are some judgements priced as the provider's Batch API sells them (`--batch`, `batch: true`)?"""
        return any(line.batch_factor is not None for line in self.lines)

    @property
    def requests(self) -> int:
        return sum(line.requests for line in self.lines)

    @property
    def pending(self) -> int:
        """Nodes a provider batch stands for (docs/batch.md): collected by the build, never sent again."""
        return sum(line.pending for line in self.lines)

    @property
    def exact(self) -> bool:
        """True when every counted request belongs to a keyed node (none waits for this build's output)."""
        return not any(line.unplanned for line in self.lines)

    @property
    def estimated_cost(self) -> CostSum:
        """What the build would cost: by batch for the judgements with `--batch`."""
        return CostSum.total(line.batch_cost for line in self.lines)

    @property
    def minimum(self) -> bool:
        """True when some run may send more than the one request counted (tools or an agent)."""
        return any(line.open_ended for line in self.lines)

    @property
    def floor(self) -> bool:
        """True when some estimate is a lower bound (an agent planned from its prompt alone: Estimate.floor)."""
        return any(line.floor for line in self.lines)

    @property
    def estimated_cost_usd(self) -> float | None:
        """None when a part cannot be estimated (`unknown`); by batch for the judgements with `--batch`."""
        return self.estimated_cost.usd

    @property
    def one_by_one_cost(self) -> CostSum:
        return CostSum.total(line.cost for line in self.lines)

    @property
    def one_by_one_cost_usd(self) -> float | None:
        return self.one_by_one_cost.usd

    @property
    def estimated_wall_s(self) -> float | None:
        """Runs, then judgements (the build's order), each layer spread over `concurrency` slots."""
        if any(not line.latency_known for line in self.lines if line.requests):
            return None
        return sum(line.latency_s for line in self.lines) / max(1, self.concurrency)

    def to_json(self) -> dict[str, Any]:
        cost = self.estimated_cost_usd
        wall = self.estimated_wall_s
        return {"campaign": self.campaign_id, "requests": self.requests, "pending": self.pending,
                "requests_exact": self.exact,
                "requests_minimum": self.minimum,
                "tokens_minimum": self.floor, "cost_minimum": self.floor,
                "estimated_cost_usd": None if cost is None else round(cost, 9),
                "estimated_known_cost_usd": round(self.estimated_cost.known_usd, 9),
                "cost_sources": self.estimated_cost.sources(),
                **({"batch": True, "estimated_one_by_one_cost_usd": _rounded(self.one_by_one_cost_usd)}
                   if self.batch else {}),
                "estimated_input_tokens": round(sum(line.input_tokens for line in self.lines)),
                "estimated_output_tokens": round(sum(line.output_tokens for line in self.lines)),
                "estimated_wall_s": None if wall is None else round(wall, 3), "concurrency": self.concurrency,
                "layers": self.layers, "lines": [line.to_json() for line in self.lines]}


def _cost(tokens_in: float, tokens_out: float, same: Usage | None, model: Usage | None,
          declared: dict[str, float] | None) -> tuple[float | None, str]:
    if same is not None and same.mean_cost is not None:
        return same.mean_cost, REPORTED
    prices = model.token_prices() if model is not None else None
    if prices is not None:
        return tokens_in * prices[0] + tokens_out * prices[1], REPORTED
    if declared is not None:
        return priced_cost(declared, tokens_in, tokens_out), PRICED
    return None, UNKNOWN


def estimate_run(work: Work, history: History) -> Estimate:
    item = work.item
    model, case = item.resolved_model, item.case.case.case_id
    same = history.runs.get((model, case))
    seen = history.run_models.get(model)
    latency: float | None = None
    if same is not None:
        tin, tout, latency, source = (same.mean("input_tokens"), same.mean("output_tokens"),
                                      same.mean("latency_s"), "same-case")
    else:
        chars = prompt_chars(work.node.document) if work.node is not None else 0
        rate = seen.tokens_per_char if seen is not None else None
        if seen is not None and rate is not None:
            tin, tout, latency, source = chars * rate, seen.mean("output_tokens"), seen.mean("latency_s"), "model-rate"
        else:
            max_tokens = item.settings.get("max_tokens")
            tin, tout, source = chars * DEFAULT_TOKENS_PER_CHAR, float(max_tokens or DEFAULT_OUTPUT_TOKENS), "default"
    cost, cost_source = _cost(tin, tout, same, seen, pricing(dict(item.model.model_extra or {})))
    floor = source != "same-case" and item.case.case.runner.type == "openclaw"
    return Estimate(tin, tout, cost, latency, source, cost_source, floor)


def may_loop(item: CampaignItem) -> bool:
    """Can this run send more than one request? An llm_probe run with tools sends one per turn of its
    tool loop; an OpenClaw agent as many as it decides."""
    from clawstore.runners.tools import enabled_tools

    case = item.case.case
    if case.runner.type != "llm_probe":
        return True
    probe = (case.input.context or {}).get("llm_probe") or {}
    return bool(enabled_tools(list(probe.get("tools") or [])))


def judge_model(judge: JudgeConfig) -> str:
    from clawstore.evaluate import resolve_judge_model

    return resolve_judge_model(judge)


def estimate_judge(work: Work, history: History) -> Estimate:
    model, case = judge_model(work.judge), work.address["case_id"]
    same = history.judges.get((model, case))
    seen = history.judge_models.get(model)
    latency: float | None = None
    if same is not None:
        usage, source = same, "same-case"
    elif seen is not None:
        usage, source = seen, "model-mean"
    else:
        usage, source = None, "default"
    if usage is not None:
        tin, tout, latency = usage.mean("input_tokens"), usage.mean("output_tokens"), usage.mean("latency_s")
    else:
        tin, tout = float(DEFAULT_JUDGE_INPUT_TOKENS), float(DEFAULT_JUDGE_OUTPUT_TOKENS)
    cost, cost_source = _cost(tin, tout, same, seen, pricing(dict(work.judge.model_extra or {})))
    return Estimate(tin, tout, cost, latency, source, cost_source)


def _judge_line(judge: JudgeConfig, batch: bool) -> PlanLine:
    line = PlanLine("judge", judge.judge_id, judge_model(judge))
    extras = judge.model_extra or {}
    if batch or extras.get("batch") is True:
        from clawstore.builder.batching import batch_factor

        line.batch_factor = batch_factor(extras.get("pricing"))
    return line


def fresh_plan(campaign_id: str, layers: list[tuple[str, dict[str, int]]], suite: Suite, run_profile: RunProfile,
               evaluation: EvaluationProfile | None, max_concurrency: int | None = None, batch: bool = False
               ) -> SpendPlan | None:
    """The plan of a campaign whose stamp proves every node fresh (`layers`: its nodes per model and layer),
    the same as `plan_spend` finds: nothing sent, every node reused. None when the layers do not fit the
    configs (each run judged once per judge run repetition): then plan in full."""
    models = {model.model_id: model for model in suite.models}
    judge_plan = [jr for jr in (evaluation.judge_runs if evaluation else []) for _ in range(jr.repetitions)]
    lines: dict[tuple[str, str], PlanLine] = {}
    totals: Counter[str] = Counter()
    for model_id, kinds in layers:
        runs = kinds.get("run", 0)
        if model_id not in models or set(kinds) - set(LAYERS) or kinds.get("judge", 0) != runs * len(judge_plan):
            return None
        totals.update(kinds)
        if runs:
            from clawstore.config.resolution import resolve_model

            lines.setdefault(("run", model_id), PlanLine("run", model_id, resolve_model(models[model_id])))
            lines[("run", model_id)].reused += runs
            for jr in judge_plan:
                assert evaluation is not None
                line = lines.setdefault(("judge", jr.judge_id), _judge_line(evaluation.judge(jr.judge_id), batch))
                line.reused += runs
    concurrency = max_concurrency or run_profile.execution_policy.max_concurrency
    ordered = sorted(lines.values(), key=lambda line: line.kind != "run")  # runs first, as plan_spend
    return SpendPlan(campaign_id, concurrency, ordered,
                     {kind: {"execute": 0, "reuse": totals[kind], "unplanned": 0} for kind in LAYERS if totals[kind]})


def plan_spend(campaign: Campaign, store: Store, force: bool = False, max_concurrency: int | None = None,
               batch: bool = False, seen: UntrustedSeen | None = None) -> SpendPlan:
    """The plan of one campaign (nothing executed; the manifest is brought up to date to read history), planned a
    window at a time: each paid node's part of its line is kept in a file and added in the campaign's order, so
    every sum is the same float as the whole campaign's plan (builder/inorder.py)."""
    from clawstore.builder.api import fold_windows
    from clawstore.builder.batch_doc import covered_keys, pending

    # What a build collects from a provider batch instead of asking (builder/batch_layer.py): no request, no cost
    batched = covered_keys(pending(store))

    def fold(windows: Iterator[list[NodeState]]) -> tuple[InOrder, LayerCounts]:
        parts, counts = InOrder(campaign.model_ids), LayerCounts()
        history: History | None = None
        for states in windows:
            if history is None:  # (after the first window adopted what a killed build left)
                history = load_history(store)
            for work in work_items(campaign, states, force):
                counts.add(work)
                if work.kind in PAID_LAYERS:
                    parts.add(work.kind, work.address["model_id"], _part(work, history, batched))
            parts.end_window()
        if history is None:
            load_history(store)  # (the manifest brought up to date all the same)
        return parts, counts

    parts, counts = fold_windows(campaign, store, force, fold, seen, reasoned=False)  # (a plan prints no reasons)
    lines: dict[tuple[str, str], PlanLine] = {}
    profile = campaign.evaluation_profile
    for kind, name, model, estimate, unplanned, open_ended, in_batch in parts:
        line = lines.get((kind, name))
        if line is None:
            line = lines[(kind, name)] = (PlanLine("run", name, model) if kind == "run"
                                          else _judge_line(_profile(profile).judge(name), batch))
        if in_batch:
            line.pending += 1
            continue
        if estimate is None:
            line.reused += 1
            continue
        line.add(Estimate(*estimate))
        line.unplanned += unplanned
        line.open_ended += open_ended
    concurrency = max_concurrency or campaign.run_profile.execution_policy.max_concurrency
    ordered = sorted(lines.values(), key=lambda line: line.kind != "run")  # runs first, as the build goes
    return SpendPlan(campaign.campaign_id, concurrency, ordered, counts.layers())


def plan_by_case(by_case: ByCase, store: Store, max_concurrency: int | None = None, batch: bool = False,
                 seen: UntrustedSeen | None = None) -> SpendPlan | None:
    """The plan of a campaign of which the stamp answers for all but `by_case`'s cases (builder/casestamp.py):
    those planned alone, each node the stamp answers for added to its line as reused (no estimate, no float
    added: every sum is the whole plan's). None when the stamp's nodes do not fit the lines: then plan in full."""
    campaign, fresh = by_case.campaign, by_case.fresh_layers()
    profile = campaign.evaluation_profile
    if not campaign.items.cases:
        return fresh_plan(campaign.campaign_id, fresh, campaign.suite, campaign.run_profile, profile,
                          max_concurrency, batch)
    plan = plan_spend(campaign, store, False, max_concurrency, batch, seen)
    lines = {(line.kind, line.name): line for line in plan.lines}
    judge_plan = [jr for jr in (profile.judge_runs if profile else []) for _ in range(jr.repetitions)]
    reused: Counter[str] = Counter()
    for model_id, kinds in fresh:
        runs = kinds.get("run", 0)
        wanted = [("run", model_id), *(("judge", jr.judge_id) for jr in judge_plan)]
        if set(kinds) - set(LAYERS) or kinds.get("judge", 0) != runs * len(judge_plan) or any(
                key not in lines for key in wanted):
            return None
        for key in wanted:
            lines[key].reused += runs
        reused.update(kinds)
    zero = {"execute": 0, "reuse": 0, "unplanned": 0}
    layers = {kind: {**zero, **plan.layers.get(kind, {})} for kind in LAYERS}
    for kind, n in reused.items():
        layers[kind]["reuse"] += n
    plan.layers = {kind: counts for kind, counts in layers.items() if sum(counts.values())}
    return plan


def _profile(profile: EvaluationProfile | None) -> EvaluationProfile:
    assert profile is not None, "judge work comes of an evaluation profile"
    return profile


def _part(work: Work, history: History, batched: Mapping[str, Any]) -> tuple[Any, ...]:
    """A paid node's part of its plan line: (kind, line name, model, estimate or None when reused, unplanned,
    open-ended, pending in a provider batch), plain values (kept in a file until added in the campaign's order).
    `batched`: the node keys (hex) a provider batch stands for."""
    run = work.kind == "run"
    name = work.address["model_id"] if run else work.judge.judge_id
    model = work.item.resolved_model if run else ""
    if not work.executes:
        return (work.kind, name, model, None, 0, 0, 0)
    if batched and _in_batch(work, batched):
        return (work.kind, name, model, None, 0, 0, 1)
    estimate = _fields_of(estimate_run(work, history) if run else estimate_judge(work, history))
    return (work.kind, name, model, estimate, 0 if work.exact else 1, 1 if run and may_loop(work.item) else 0, 0)


def _in_batch(work: Work, batched: Mapping[str, Any]) -> bool:
    """Does a provider batch stand for the work's node: under its key, its legacy key or (made only then) an earlier
    one, as the build looks for it (builder/batch_layer.py)? Before the review of session 75 a batch an older claw
    submitted under an earlier key was counted as requests and cost."""
    node = work.node
    if node is None:
        return False
    keys = (node.key, *((node.legacy[0],) if node.legacy else ()))
    if any(oid_hex(key) in batched for key in keys):
        return True
    return node.earlier is not None and any(oid_hex(before[0]) in batched for before in node.earlier())


# An estimate's fields as a tuple, in their order (as dataclasses.astuple, which copies each value deeply: 12.5 µs an
# estimate, 1.25 s of a stale campaign's `claw plan` at 10,000 x 5; the fields are floats, strings and None).
_fields_of = attrgetter(*(f.name for f in fields(Estimate)))


def over_budget(estimate: float, limit: float, floor: bool = False) -> str:
    """Why `--max-cost` refuses a plan it can price (a floor above the limit: the build would spend more still)."""
    cost = f"≥{usd(estimate, 6)} USD ({FLOOR})" if floor else f"{usd(estimate, 6)} USD"
    return f"the plan's estimated cost {cost} exceeds --max-cost {limit:g} USD"


def floor_under_budget(estimate: float, limit: float) -> str:
    """What a build under `--max-cost` says as it starts when its plan is a floor: the limit, not the plan, bounds
    its spend (builder/session.py Budget)."""
    return (f"--max-cost {limit:g} USD: the plan's estimate ≥{usd(estimate, 6)} USD is {FLOOR} until each agent's case "
            "has run once; the build stops at the limit")


def unpriced(campaign: Campaign, plan: SpendPlan) -> str:
    """Why the plan's lines of unknown cost have none (`claw build --max-cost` refuses them): no price declared, or a
    `pricing` without `input` or `output`, which prices nothing ("no `pricing` declared" beside the one the user had
    declared misled, session 77)."""
    evaluation = campaign.evaluation_profile
    extras = {("run", m.model_id): m.extras for m in campaign.suite.models}
    extras.update({("judge", j.judge_id): j.extras for j in (evaluation.judges if evaluation else [])})
    unknown = [(line.kind, line.name) for line in plan.lines if line.cost.unknown]
    partial = {where: missing_prices(extras.get(where, {})) for where in unknown}
    undeclared = [f"{kind} {name}" for kind, name in unknown if partial[(kind, name)] is None]
    said = [f"no cost reported in the store's history and no `pricing` declared for {', '.join(undeclared)}"
            ] if undeclared else []
    said += [f"{kind} {name}: {missing_prices_text(*found)}" for (kind, name), found in partial.items() if found]
    names = ", ".join(f"{kind} {name}" for kind, name in unknown)
    return f"the cost of {names} cannot be estimated ({'; '.join(said)}): declare `pricing` on the model or judge"
