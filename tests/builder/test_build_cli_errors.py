"""Bad input to build/status/explain: one line, exit 2, nothing sent, nothing written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from clawstore.graph import plan as graph_plan
from clawstore.testing.standin import StandIn, key_fingerprint
from tests.support.claw import Claw
from tests.support.judging import JUDGE, eval_profile, judge_reply
from tests.support.workspace import Workspace


@pytest.mark.parametrize("args, needle", [
    (("build", "--suite", "nope", "--run-profile", "rp"), "nope"),
    (("build", "--suite", "main", "--run-profile", "missing"), "missing"),
    (("status", "--suite", "main", "--run-profile", "rp", "--case", "no_such_case"), "no_such_case"),
    (("explain", "--suite", "main", "--run-profile", "rp", "--model", "no_such_model"), "no_such_model"),
    (("build", "--suite", "main", "--run-profile", "rp", "--max-concurrency", "0"), "max-concurrency"),
])
def test_bad_references_are_one_line_exit_2(ws: Workspace, claw: Claw, standin: StandIn, args, needle) -> None:
    proc = claw.popen(*args)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, (out, err)
    assert needle in err and "Traceback" not in err
    assert standin.requests == []


def test_missing_api_key_fails_before_any_request(ws: Workspace, claw: Claw, standin: StandIn,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenRouter (the default endpoint) needs its key: a clear error before anything is sent."""
    monkeypatch.delenv("OPENROUTER_API_KEY")
    monkeypatch.delenv("OPENROUTER_BASE_URL")
    proc = claw.popen("build", "--suite", "main", "--run-profile", "rp")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert err.strip().splitlines() == [
        "claw: error: environment variable OPENROUTER_API_KEY is not set (API key for https://openrouter.ai/api/v1)"]
    assert not list((Path(os.environ["CLAW_STORE"]) / "builds").glob("*.json"))


def test_another_base_url_needs_no_key(ws: Workspace, claw: Claw, standin: StandIn,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """`OPENROUTER_BASE_URL` at a local server (llama.cpp, vLLM, Ollama, LiteLLM): no key, no Authorization
    header; the key is sent when it is set; a model that asks for one (`api_key_env`) still needs it."""
    monkeypatch.delenv("OPENROUTER_API_KEY")
    ws.suite("main", ["m1"], case_selection={"include_case_ids": ["alpha"]})
    code, out, err = claw.build()
    assert code == 0, out + err
    assert [r["authorization"] for r in standin.requests] == [False]
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-local-proxy-key")
    ws.case("alpha", "What is 3 + 3?")
    assert claw.build()[0] == 0
    assert standin.requests[-1]["authorization"] is True
    assert standin.requests[-1]["key_fingerprint"] == key_fingerprint("sk-local-proxy-key")
    monkeypatch.delenv("OPENROUTER_API_KEY")
    ws.edit("suites/main.yaml", lambda d: d["models"][0].update(api_key_env="LOCAL_PROXY_KEY"))
    ws.case("alpha", "What is 4 + 4?")  # (a key is checked for what will run)
    sent = len(standin.requests)
    proc = claw.popen("build", "--suite", "main", "--run-profile", "rp")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert err.strip() == ("claw: error: environment variable LOCAL_PROXY_KEY is not set "
                           f"(API key for {standin.base_url})")
    assert len(standin.requests) == sent


def test_broken_case_of_the_campaign_is_a_config_error(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    ws.edit("cases/alpha/test.yaml", lambda d: d["runner"].update(type="gpt"))
    proc = claw.popen("build", "--suite", "main", "--run-profile", "rp")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "cases/alpha/test.yaml" in err and "runner.type" in err and "Traceback" not in err
    assert standin.requests == []


def test_a_model_on_its_own_endpoint(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    """A suite model may name another OpenAI-compatible server; no key needed; the URL is in the key."""
    ws.suite("main", ["m1"], case_selection={"include_case_ids": ["alpha"]})
    ws.edit("suites/main.yaml", lambda d: d["models"][0].update(base_url=standin.base_url + "/"))
    code, out, err = claw.build()
    assert code == 0, err
    request = standin.requests[0]
    assert request["authorization"] is False
    ws.edit("suites/main.yaml", lambda d: d["models"][0].update(base_url=standin.url + "/other/v1"))
    code, out, _ = claw("explain", "--suite", "main", "--run-profile", "rp")
    assert "model.endpoint.base_url" in out


@pytest.mark.parametrize("written", ["not-a-url", "127.0.0.1:8000/v1", "ftp://host/v1", "http://[::1:8000/v1",
                                     "http://127.0.0.1:abc/v1", "http://127.0.0.1:99999/v1", "http://:8000/v1"])
def test_a_base_url_that_is_no_url_is_refused_before_anything_is_sent(ws: Workspace, claw: Claw, standin: StandIn,
                                                                      monkeypatch: pytest.MonkeyPatch,
                                                                      written: str) -> None:
    # every run failed "Name or service not known" (exit 1), each with its cost unknown
    monkeypatch.setenv("OPENROUTER_BASE_URL", written)
    if written == "not-a-url":  # one refused by a real process (exit 2, one line); the other forms in this process
        proc = claw.popen("build", "--suite", "main", "--run-profile", "rp")
        _, err = proc.communicate(timeout=60)
        code = proc.returncode
    else:
        code, _, err = claw("build", "--suite", "main", "--run-profile", "rp")
    assert code == 2, err
    assert err.strip().splitlines() == [
        f"claw: error: $OPENROUTER_BASE_URL '{written}': must be an http(s) URL such as http://127.0.0.1:8000/v1"]
    assert not list((Path(os.environ["CLAW_STORE"]) / "builds").glob("*.json"))
    assert standin.requests == []


def test_a_base_url_naming_chat_completions_is_refused_with_the_part_to_give(ws: Workspace, claw: Claw,
                                                                              standin: StandIn,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The URL a server's docs print (`…/v1/chat/completions`), given where claw wants the part before it: every run
    failed `HTTP 404 from …/v1/chat/completions/chat/completions`, its cost unknown (`?`), which stops a
    `--max-cost` build (session 77's newcomer, following docs/runners.md to a local server)."""
    monkeypatch.setenv("OPENROUTER_BASE_URL", standin.base_url + "/chat/completions/")
    code, _, err = claw("build", "--suite", "main", "--run-profile", "rp")
    assert code == 2 and err.strip().splitlines() == [
        f"claw: error: $OPENROUTER_BASE_URL '{standin.base_url}/chat/completions/': give the part before "
        f"/chat/completions (claw adds it): {standin.base_url}"], err
    monkeypatch.delenv("OPENROUTER_BASE_URL")
    ws.edit("suites/main.yaml", lambda d: d["models"][0].update(base_url=standin.base_url + "/chat/completions"))
    for command in ("validate", "build"):
        args = (command,) if command == "validate" else ("build", "--suite", "main", "--run-profile", "rp")
        code, out, err = claw(*args)
        assert code == 2 and "configs/suites/main.yaml: models[0].base_url: give the part before /chat/completions " \
            f"(claw adds it): {standin.base_url}" in out + err, out + err
    assert standin.requests == []


@pytest.mark.parametrize("remote", ["nope", "a-file"])
def test_a_dry_run_refuses_the_remote_the_build_would_refuse(ws: Workspace, claw: Claw, remote: str) -> None:
    # --remote was not read by a dry run: a mistyped name, or a file where the remote's folder would be, said what
    # would execute (exit 0) where the build itself then stopped with exit 2 (session 72).
    (ws.root / "a-file").write_text("not a remote\n")
    dry = claw.build("--dry-run", "--remote", remote)
    built = claw.build("--remote", remote)
    assert dry[0] == built[0] == 2, (dry, built)
    assert dry[2] == built[2] and dry[2].count("\n") == 1 and remote in dry[2], (dry, built)


@pytest.mark.parametrize("environ", [{"OPENROUTER_BASE_URL": "not-a-url"}, {"OPENROUTER_BASE_URL": None,
                                                                           "OPENROUTER_API_KEY": None}])
def test_a_build_refused_in_a_store_leaves_no_killed_build(ws: Workspace, claw: Claw, standin: StandIn,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          environ: dict[str, str | None]) -> None:
    """With a store, a stale run's key and URL are checked as its window is planned, after the build's log is first
    written: the refusal left that log `running` with its journal, and `claw status` then named a build "killed before
    it finished" that "spent an unknown amount", though it had sent nothing (docs/building.md, "A killed build's
    spending"). Refused before any request, it writes nothing, as without a store."""
    eval_profile(ws, repetitions=1)  # (a build with one writes its log before it plans a window)
    standin.script(JUDGE, *[judge_reply(7.0)] * 20)
    assert claw.build("--evaluation-profile", "ev")[0] == 0
    ws.case("alpha", "What is 5 + 5?")  # (stale: its run is planned, so its endpoint is read)
    logs = sorted((Path(os.environ["CLAW_STORE"]) / "builds").iterdir())
    sent, before = len(standin.requests), {name: os.environ[name] for name in environ}
    for name, value in environ.items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    proc = claw.popen("build", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and len(err.strip().splitlines()) == 1, err
    assert len(standin.requests) == sent
    assert sorted((Path(os.environ["CLAW_STORE"]) / "builds").iterdir()) == logs
    for name, value in before.items():
        monkeypatch.setenv(name, value)
    code, _, err = claw("status", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")
    assert code == 0 and "killed" not in err, err


def test_a_build_refused_in_a_later_window_ends_its_log_refused(ws: Workspace, claw: Claw, standin: StandIn,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Refused planning its second window, after its first reused what it had: its log ends `refused` (sealed, no
    journal, the head advanced over what it reused), not `running`, which readers take for a killed build."""
    monkeypatch.setattr(graph_plan, "WINDOW_RUNS", 2)  # one case a window (two models)
    eval_profile(ws, repetitions=1)
    standin.script(JUDGE, *[judge_reply(7.0)] * 20)
    ws.edit("suites/main.yaml", lambda d: d["models"][1].update(api_key_env="LOCAL_KEY"))
    monkeypatch.setenv("LOCAL_KEY", "sk-local-proxy-key")
    assert claw.build("--evaluation-profile", "ev")[0] == 0
    ws.case("gamma", "Name a fruit.")  # (the last window: alpha's and beta's runs are fresh)
    monkeypatch.delenv("LOCAL_KEY")
    sent = len(standin.requests)
    code, _, err = claw.build("--evaluation-profile", "ev")
    assert code == 2 and "LOCAL_KEY is not set" in err, err
    assert len(standin.requests) == sent
    builds = Path(os.environ["CLAW_STORE"]) / "builds"
    assert not list(builds.glob("*.jsonl"))
    code, out, _ = claw("query", "select state, executed, reused, cost_usd from builds order by started_at",
                        "--format", "csv")
    first, refused = out.splitlines()[1:]
    assert first.startswith("complete,16,0,") and refused == "refused,0,12,0.0", out  # (alpha's 8 nodes, beta's runs
    # and checks: what its windows reused before gamma's was planned)
    code, _, err = claw("status", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")
    assert "killed" not in err, err
