"""A request that went out and whose reply was never read whole (it timed out, the connection was lost, the reply
was too large) may have been counted and billed by the provider: its tokens and cost are unknown, never the 0 that
a declared price makes of 0 tokens. A request that never left (no connection could be made) cost nothing: a known
0. Real `claw` processes and the stand-in on 127.0.0.1 (the queries of what a build left in the test's own process);
the client alone against a real closed port."""

from __future__ import annotations

import json

import pytest

from clawstore.providers import ProviderClient, ProviderError
from clawstore.providers.endpoint import Endpoint
from clawstore.providers.usage import SENT_UNANSWERED
from clawstore.testing.standin import StandIn, error, hang
from tests.hostile.attack import run_claw
from tests.support.claw import env, ws  # noqa: F401 - fixtures
from tests.support.prepared import run_here
from tests.support.sockets import closed_port
from tests.support.workspace import Workspace

CAMPAIGN = ("--suite", "main", "--run-profile", "rp")
PRICES = {"input": 1.0, "output": 2.0}


def test_a_timed_out_run_s_cost_is_unknown_an_error_reply_s_priced(ws: Workspace,  # noqa: F811
                                                                     standin: StandIn) -> None:
    ws.edit("suites/main.yaml", lambda d: [m.update(pricing=PRICES) for m in d["models"]])
    ws.run_profile(defaults={"timeout_seconds": 1, "retries": 0})
    standin.script("vendor/m1", hang(5), hang(5))
    standin.script("vendor/m2", error(400, "context length exceeded"), error(400, "context length exceeded"))
    built = run_claw(ws.root, "build", *CAMPAIGN)
    assert built.code == 1 and "Traceback" not in built.stderr, built
    line = next(line for line in built.stdout.splitlines() if line.startswith("build "))
    assert "cost spent ≥0.000000 USD (2 of 4 unknown, 2 of 4 priced)" in line, line  # (was 0.000000, 4 of 4 priced)
    done = run_here(ws.root, "query", "select model_id, status, input_tokens, cost_usd, cost_source from runs "
                                      "order by 1", "--format", "json")
    rows = {(r["model_id"], r["status"], r["input_tokens"], r["cost_usd"], r["cost_source"])
            for r in json.loads(done.stdout)}
    assert rows == {("m1", "timed_out", None, None, "unknown"), ("m2", "provider_error", 0, 0, "priced")}, rows


def test_the_client_says_what_a_failed_attempt_may_have_cost(standin: StandIn) -> None:
    standin.script("vendor/slow", hang(5))
    with ProviderClient() as client:
        with pytest.raises(ProviderError) as sent:
            client.chat(Endpoint(standin.base_url, None), {"model": "vendor/slow", "messages": []}, timeout=0.5,
                        retries=0)
        assert sent.value.timed_out and sent.value.usage.rejected == SENT_UNANSWERED
        assert not sent.value.usage.nothing_sent
        assert sent.value.usage.cost_usd is None and sent.value.usage.cost_source == "unknown"

        with pytest.raises(ProviderError) as refused:  # (the connection refused: nothing is sent)
            client.chat(Endpoint(f"http://127.0.0.1:{closed_port()}/v1", None), {"model": "m", "messages": []},
                        timeout=2, retries=1)
        assert refused.value.code == "transport_error" and refused.value.attempts == 2
        usage = refused.value.usage
        assert usage.rejected is None and usage.cost_source is None and usage.input_tokens == 0
        assert usage.nothing_sent and usage.to_json()["nothing_sent"] is True  # (two attempts, neither left)


def test_a_timed_out_judgement_s_cost_is_unknown(ws: Workspace, standin: StandIn) -> None:  # noqa: F811
    from tests.support.judging import JUDGE, eval_profile

    eval_profile(ws, repetitions=1, judges=[{"judge_id": "j1", "type": "llm_probe", "model": JUDGE, "retries": 0,
                                             "timeout_seconds": 1, "pricing": PRICES}])
    standin.script(JUDGE, *[hang(5) for _ in range(4)])
    built = run_claw(ws.root, "build", *CAMPAIGN, "--evaluation-profile", "ev")
    assert built.code == 1 and "Traceback" not in built.stderr, built
    done = run_here(ws.root, "query", "select status, cost_usd, cost_source from judgements", "--format", "json")
    rows = json.loads(done.stdout)
    assert len(rows) == 4 and all(r["cost_usd"] is None and r["cost_source"] == "unknown" for r in rows), rows


def _shown(workspace: Workspace, *campaign: str) -> tuple[str, list[dict[str, object]]]:
    """`claw report`'s cost line for the campaign, and the saved query cost_by_model's rows (`claw status` counts
    nodes and shows no cost)."""
    report = run_claw(workspace.root, "report", *campaign, "--no-chart")
    by_model = run_here(workspace.root, "query", "cost_by_model", "--format", "json")
    for done in (report, by_model):
        assert done.code == 0 and "Traceback" not in done.stderr, done
    return next(line for line in report.stdout.splitlines() if line.startswith("Cost (USD)")), json.loads(
        by_model.stdout)


def test_a_run_whose_request_never_left_costs_a_known_0_at_undeclared_prices(
        ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    # no price declared and the connection refused: nothing was sent, so nothing is unknown (before: '?', 4 of 4)
    monkeypatch.setenv("OPENROUTER_BASE_URL", f"http://127.0.0.1:{closed_port()}/v1")
    ws.run_profile(defaults={"retries": 1})
    built = run_claw(ws.root, "build", *CAMPAIGN)
    assert built.code == 1 and "Traceback" not in built.stderr, built
    line = next(line for line in built.stdout.splitlines() if line.startswith("build "))
    assert line.endswith("cost spent 0.000000 USD (4 of 4 priced)"), line
    done = run_here(ws.root, "query", "select status, input_tokens, cost_usd, cost_source from runs", "--format",
                    "json")
    assert json.loads(done.stdout) == [{"status": "provider_error", "input_tokens": 0, "cost_usd": 0.0,
                                        "cost_source": "priced"}] * 4, done
    cost, by_model = _shown(ws, *CAMPAIGN)
    assert cost == "Cost (USD): runs 0.00000  evaluation 0.00000  total 0.00000 (4 of 4 priced)", cost
    assert [(r["model_id"], r["run_cost_usd"], r["total_cost_usd"], r["cost_unknown"]) for r in by_model] == [
        ("m1", 0.0, 0.0, 0), ("m2", 0.0, 0.0, 0)], by_model


def test_a_judgement_whose_request_never_left_costs_a_known_0_one_that_timed_out_stays_unknown(
        ws: Workspace, standin: StandIn) -> None:  # noqa: F811
    from tests.support.judging import JUDGE, eval_profile

    refused = {"judge_id": "j1", "type": "llm_probe", "model": JUDGE, "retries": 1,
               "base_url": f"http://127.0.0.1:{closed_port()}/v1"}
    eval_profile(ws, repetitions=1, judges=[refused])
    campaign = (*CAMPAIGN, "--evaluation-profile", "ev")
    built = run_claw(ws.root, "build", *campaign)
    assert built.code == 1 and "Traceback" not in built.stderr, built
    assert len(standin.requests) == 4  # the runs; no judge request reached a server
    done = run_here(ws.root, "query", "select status, cost_usd, cost_source from judgements", "--format", "json")
    assert json.loads(done.stdout) == [{"status": "provider_error", "cost_usd": 0.0, "cost_source": "priced"}] * 4, \
        done.stdout
    cost, by_model = _shown(ws, *campaign)
    assert "evaluation 0.00000" in cost and "?" not in cost and "unknown" not in cost, cost
    assert [(r["model_id"], r["eval_cost_usd"]) for r in by_model] == [("m1", 0.0), ("m2", 0.0)], by_model
    # the same judge at the stand-in, its requests sent and never answered: unknown, as before
    eval_profile(ws, repetitions=1, judges=[{**refused, "base_url": standin.base_url, "timeout_seconds": 1,
                                             "retries": 0}])
    standin.script(JUDGE, *[hang(5) for _ in range(4)])
    built = run_claw(ws.root, "build", *campaign)
    assert built.code == 1 and judge_count(standin) == 4, built
    done = run_here(ws.root, "query", "select status, cost_usd, cost_source from judgements", "--format", "json")
    assert json.loads(done.stdout) == [{"status": "timed_out", "cost_usd": None, "cost_source": "unknown"}] * 4, \
        done.stdout


def judge_count(standin: StandIn) -> int:
    from tests.support.judging import judge_requests

    return judge_requests(standin)


def _runs(workspace: Workspace) -> dict[str, dict[str, object]]:
    done = run_here(workspace.root, "query", "select model_id, case_id, cost_usd, cost_source, cost_known_usd, "
                                             "input_tokens_known from runs", "--format", "json")
    assert done.code == 0, done
    return {f"{r['model_id']}/{r['case_id']}": r for r in json.loads(done.stdout)}


def test_a_run_whose_first_attempt_timed_out_and_whose_retry_answered_costs_at_least_the_answer(
        ws: Workspace, standin: StandIn) -> None:  # noqa: F811
    """docs/building.md: such a run "costs `≥` the answer's". Before session 73 it said `?`, its `cost_known_usd` 0:
    the answer's reported cost (m1) and its tokens at the declared prices (m2) were dropped with the timed-out
    attempt's unknown."""
    ws.edit("suites/main.yaml", lambda d: d["models"][1].update(pricing=PRICES))
    ws.run_profile(defaults={"timeout_seconds": 1, "retries": 1})
    for model in ("vendor/m1", "vendor/m2"):
        standin.script(model, hang(3), {"content": "four", **({"usage": {"cost": None}} if model[-1] == "2" else {})},
                       match="2 + 2")
    standin.script("vendor/m2", {"content": "blue", "usage": {"cost": None}})
    built = run_claw(ws.root, "build", *CAMPAIGN)
    assert built.code == 0 and "Traceback" not in built.stderr, built
    runs = _runs(ws)
    for timed_out in ("m1/alpha", "m2/alpha"):
        row = runs[timed_out]
        assert row["cost_usd"] is None and row["cost_source"] == "unknown", row
        assert isinstance(row["cost_known_usd"], float) and row["cost_known_usd"] > 0, row
        assert isinstance(row["input_tokens_known"], int) and row["input_tokens_known"] > 0, row
    known = sum(float(r["cost_known_usd"]) for r in runs.values())  # type: ignore[arg-type]
    line = next(line for line in built.stdout.splitlines() if line.startswith("build "))
    assert f"cost spent ≥{known:.6f} USD (2 of 4 unknown, 1 of 4 priced)" in line, (line, runs)
    cost, _ = _shown(ws, *CAMPAIGN)
    assert cost.startswith(f"Cost (USD): runs ≥{known:.5f}"), cost


def test_an_error_reply_s_tokens_without_a_cost_are_not_dropped_from_the_answer_s_cost(
        ws: Workspace, standin: StandIn) -> None:  # noqa: F811
    """A 500 that counts 150 tokens and reports no cost, then its retry's answer that reports its cost: the run's
    cost was the answer's alone, `reported` and exact (0.000012 USD), its 150 tokens' part dropped without a word.
    Now it is unknown without declared prices (`≥` the answer's), and all its tokens at them with (m2)."""
    ws.edit("suites/main.yaml", lambda d: d["models"][1].update(pricing=PRICES))
    ws.run_profile(defaults={"retries": 1})
    counted = {"prompt_tokens": 100, "completion_tokens": 50}
    for model in ("vendor/m1", "vendor/m2"):
        standin.script(model, error(500, "upstream failed", usage=counted), {"content": "four"}, match="2 + 2")
    built = run_claw(ws.root, "build", *CAMPAIGN)
    assert built.code == 0 and "Traceback" not in built.stderr, built
    runs = _runs(ws)
    m1, m2 = runs["m1/alpha"], runs["m2/alpha"]
    assert m1["cost_usd"] is None and m1["cost_source"] == "unknown", m1
    assert isinstance(m1["cost_known_usd"], float) and m1["cost_known_usd"] > 0, m1  # the answer's, at least
    done = run_here(ws.root, "query", "select input_tokens, output_tokens from runs where model_id = 'm2' and "
                                      "case_id = 'alpha'", "--format", "json")
    [tokens] = json.loads(done.stdout)
    assert tokens["input_tokens"] > 100 and tokens["output_tokens"] > 50, tokens
    priced = (tokens["input_tokens"] * PRICES["input"] + tokens["output_tokens"] * PRICES["output"]) / 1e6
    assert m2["cost_source"] == "priced" and m2["cost_usd"] == pytest.approx(priced), m2


def test_a_judgement_whose_first_attempt_timed_out_costs_at_least_its_answer(
        ws: Workspace, standin: StandIn) -> None:  # noqa: F811
    """The same for a judge (client retries 1): its timed-out attempt made the judgement's cost `?` with no known
    part; its answer's reported cost (j1) and its tokens at the declared prices (j2) are kept now. And a judge
    reply that counted tokens and no cost (invalid, asked again) beside one that reported its cost: the judgement's
    cost was the second's alone, exact."""
    from tests.support.judging import JUDGE, eval_profile, judge_reply

    ws.edit("suites/main.yaml", lambda d: d.update(models=d["models"][:1]))
    judge = {"judge_id": "j1", "type": "llm_probe", "model": JUDGE, "retries": 1, "timeout_seconds": 1}
    eval_profile(ws, repetitions=1, judges=[judge, {**judge, "judge_id": "j2", "model": "judge/j2",
                                                    "pricing": PRICES}],
                 judge_runs=[{"judge_run_id": "a", "judge_id": "j1", "repetitions": 1},
                             {"judge_run_id": "b", "judge_id": "j2", "repetitions": 1}])
    standin.script(JUDGE, hang(3), judge_reply(7.0), match="2 + 2")
    standin.script("judge/j2", hang(3), {**judge_reply(7.0), "usage": {"cost": None}}, match="2 + 2")
    standin.script(JUDGE, {"content": "not JSON", "usage": {"cost": None}}, judge_reply(7.0), match="colour")
    standin.script("judge/j2", {**judge_reply(7.0), "usage": {"cost": None}}, match="colour")
    built = run_claw(ws.root, "build", *CAMPAIGN, "--evaluation-profile", "ev")
    assert built.code == 0 and "Traceback" not in built.stderr, built
    done = run_here(ws.root, "query", "select case_id, judge_id, cost_usd, cost_source, cost_known_usd, input_tokens "
                                      "from judgements", "--format", "json")
    rows = {(r["case_id"], r["judge_id"]): r for r in json.loads(done.stdout)}
    for timed_out in (("alpha", "j1"), ("alpha", "j2")):
        row = rows[timed_out]
        assert row["cost_usd"] is None and row["cost_source"] == "unknown", row
        assert isinstance(row["cost_known_usd"], float) and row["cost_known_usd"] > 0, row
    mixed = rows[("beta", "j1")]  # (no price declared: unknown, `≥` the valid reply's reported cost)
    assert mixed["cost_usd"] is None and mixed["cost_source"] == "unknown", mixed
    assert isinstance(mixed["cost_known_usd"], float) and mixed["cost_known_usd"] > 0, mixed
