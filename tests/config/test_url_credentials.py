"""A credential written into a URL (`https://user:pass@host/v1`, `?key=…`) is refused where the URL enters claw: a
suite model's or judge's `base_url`, `$OPENROUTER_BASE_URL`, a remote's URL or endpoint. The URL is stored (run
identities, records, batch documents) and pushed with them; the refusal names the file or variable and the field,
exit 2, and never repeats the secret."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from clawstore.testing.standin import StandIn
from clawstore.values.urls import credential_in_url, secrets_in_url, shown_url
from tests.support.claw import Claw
from tests.support.workspace import Workspace, write_yaml

PASSWORD = "hunter2-S3CRET"
CREDENTIAL_URLS = [
    f"https://user:{PASSWORD}@models.example/v1",
    f"https://{PASSWORD}@models.example/v1",
    f"https://models.example/v1?key={PASSWORD}",
    f"https://models.example/v1?api-version=2024-06-01&api_key={PASSWORD}",
    f"https://models.example/v1?sig={PASSWORD}",
    f"https://models.example/v1?Signature={PASSWORD}",
    f"https://models.example/v1?access_token={PASSWORD}",
    f"https://models.example/v1?auth={PASSWORD}",
    f"https://models.example/v1?token={PASSWORD}",
    f"https://models.example/v1?X-Amz-Signature={PASSWORD}",
    f"https://models.example/v1?subscription-key={PASSWORD}",
    f"https://models.example/v1#access_token={PASSWORD}",
    f"https://models.example/v1?API%5FKEY={PASSWORD}",  # (a server decodes the name: it is api_key there)
    f"https://models.example/v1?a=1;api_key={PASSWORD}",  # (`;` separates parameters for some servers)
    f"https://models.example/v1?passwd={PASSWORD}",
    f"https://models.example/v1?client_credentials={PASSWORD}",
    f"https:\\\\u:{PASSWORD}@models.example/v1",  # (backslashes: a browser's parser reads them as slashes)
    f"https:/u:{PASSWORD}@models.example/v1",
    f"ht\ttps://u:{PASSWORD}@models.example/v1",  # (urlsplit, and so is_http_url, drops tabs and newlines)
    f"https://models.example/v1?ke\ny={PASSWORD}",
]


@pytest.mark.parametrize("url", CREDENTIAL_URLS)
def test_a_credential_in_a_url_is_found_and_masked(url: str) -> None:
    assert credential_in_url(url) is not None
    assert PASSWORD not in (credential_in_url(url) or "")
    assert PASSWORD not in shown_url(url)
    assert "models.example" in shown_url(url)


@pytest.mark.parametrize("url", ["https://models.example/v1", "https://x.openai.azure.com/openai?api-version=2024-06-01",
                                 "http://127.0.0.1:8000/v1", "https://models.example/v1?region=eu&monkey=1",
                                 "https://models.example/token/v1", "https://models.example/v1?model=x",
                                 "https://models.example/v1@latest", "https://models.example/v1?who=a@b",
                                 "http://[::1]:8000/v1", "https://models.example:9443/v1?keyword=x"])
def test_harmless_urls_pass_and_show_as_written(url: str) -> None:
    assert credential_in_url(url) is None
    assert shown_url(url) == url


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def _the_error(out: str) -> str:
    """`claw validate`'s one line for the file (then its count of errors)."""
    lines = out.strip().splitlines()
    assert len(lines) == 2 and lines[1].startswith("1 error"), out
    return lines[0]


@pytest.mark.parametrize("url", [CREDENTIAL_URLS[0], CREDENTIAL_URLS[2], CREDENTIAL_URLS[9], CREDENTIAL_URLS[-2]])
def test_validate_refuses_a_suite_base_url_with_a_credential(ws: Workspace, claw: Claw, standin: StandIn,
                                                             url: str) -> None:
    ws.edit("suites/main.yaml", lambda d: d["models"][0].update(base_url=url))
    for args in (("validate",), ("build", "--suite", "main", "--run-profile", "rp")):
        proc = claw.popen(*args)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 2, (args, out, err)
        line = _one_line(err) if args[0] == "build" else _the_error(out)
        assert "main.yaml" in line and "base_url" in line and "api_key_env" in line, line
        assert PASSWORD not in out + err
    assert standin.requests == []
    assert not list((Path(os.environ["CLAW_STORE"]) / "builds").glob("*.json"))


def test_validate_refuses_a_judge_base_url_with_a_credential(ws: Workspace, claw: Claw) -> None:
    write_yaml(ws.configs / "evaluation_profiles" / "ev.yaml", {
        "schema_version": 1, "evaluation_profile_id": "ev", "title": "Eval",
        "judges": [{"judge_id": "j1", "type": "llm_probe", "model": "vendor/judge",
                    "base_url": f"https://judge.example/v1?sig={PASSWORD}"}],
        "judge_runs": [{"judge_run_id": "r1", "judge_id": "j1"}]})
    proc = claw.popen("validate")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, (out, err)
    line = _the_error(out)
    assert "ev.yaml" in line and "base_url" in line and "'sig'" in line, line
    assert PASSWORD not in out + err


def test_an_azure_api_version_is_still_accepted(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    ws.edit("suites/main.yaml",
            lambda d: d["models"][0].update(base_url=standin.base_url + "?api-version=2024-06-01"))
    code, out, err = claw("validate")
    assert code == 0, (out, err)


@pytest.mark.parametrize("url", [CREDENTIAL_URLS[0], CREDENTIAL_URLS[2]])
def test_the_base_url_variable_with_a_credential_is_a_usage_error(ws: Workspace, claw: Claw, standin: StandIn,
                                                                  monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("OPENROUTER_BASE_URL", url)
    proc = claw.popen("build", "--suite", "main", "--run-profile", "rp")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, (out, err)
    line = _one_line(err)
    assert "$OPENROUTER_BASE_URL" in line and "OPENROUTER_API_KEY" in line, line
    assert PASSWORD not in out + err
    assert standin.requests == []


@pytest.mark.parametrize("url", [f"http://u:{PASSWORD}@[::1/v1", f"http:\\\\u:{PASSWORD}@models.example/v1"])
def test_a_malformed_url_with_a_password_is_not_echoed(ws: Workspace, claw: Claw,
                                                       monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("OPENROUTER_BASE_URL", url)
    proc = claw.popen("build", "--suite", "main", "--run-profile", "rp")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, (out, err)
    assert PASSWORD not in out + err


@pytest.mark.parametrize("args", [
    ("remote", "add", "team", f"s3://bucket/runs?X-Amz-Signature={PASSWORD}"),
    ("remote", "add", "team", f"file:///tmp/runs?token={PASSWORD}"),
    ("remote", "add", "team", "s3://bucket/runs", "--endpoint-url", f"http://minio.local:9000/?access_token={PASSWORD}"),
    ("pull", f"s3://bucket/runs?sig={PASSWORD}"),
])
def test_a_remote_url_with_a_credential_is_refused(ws: Workspace, claw: Claw, args: tuple[str, ...]) -> None:
    proc = claw.popen(*args)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, (out, err)
    _one_line(err)
    assert PASSWORD not in out + err
    assert not (ws.root / "claw.yaml").exists()


def _validate_refuses(claw: Claw, file: str, field: str) -> None:
    proc = claw.popen("validate")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, (out, err)
    line = _the_error(out)
    assert file in line and field in line and "credential" in line, line
    assert PASSWORD not in out + err


def test_a_url_with_a_credential_anywhere_in_a_models_extras_is_refused(ws: Workspace, claw: Claw) -> None:
    """Not only `base_url`: a model's every extra (`primary_params`, passed to OpenClaw) is stored with its runs."""
    ws.edit("suites/main.yaml", lambda d: d["models"][0].update(
        primary_params={"proxies": [f"https://proxy.example/?access_token={PASSWORD}"]}))
    _validate_refuses(claw, "main.yaml", "primary_params")


def _judged_by(ws: Workspace, **judge: Any) -> None:
    """An evaluation profile `ev` of one judge `j1` with these fields besides its id, type and model."""
    write_yaml(ws.configs / "evaluation_profiles" / "ev.yaml", {
        "schema_version": 1, "evaluation_profile_id": "ev", "title": "Eval",
        "judge_system_prompt": "Judge the answer.",
        "judges": [{"judge_id": "j1", "type": "llm_probe", "model": "vendor/judge", **judge}],
        "judge_runs": [{"judge_run_id": "r1", "judge_id": "j1"}]})


def test_a_url_with_a_credential_in_a_judges_request_options_is_refused(ws: Workspace, claw: Claw) -> None:
    _judged_by(ws, request_options={"extra_body": {"webhook": f"https://u:{PASSWORD}@hooks.example/j"}})
    _validate_refuses(claw, "ev.yaml", "webhook")


@pytest.mark.parametrize(("block", "field"), [
    ({"agents_defaults": {"search": {"endpoint": f"https://search.example/q?api_key={PASSWORD}"}}}, "endpoint"),
    ({"agent": {"hooks": [f"ht\ttps://u:{PASSWORD}@hooks.example/"]}}, "hooks[0]"),
])
def test_a_url_with_a_credential_in_an_agents_openclaw_block_is_refused(ws: Workspace, claw: Claw,
                                                                        block: dict[str, Any], field: str) -> None:
    agent = ws.configs / "agents" / "a1"
    (agent / "workspace").mkdir(parents=True)
    write_yaml(agent / "agent.yaml", {"schema_version": 1, "agent_id": "a1", "title": "Agent", "openclaw": block})
    _validate_refuses(claw, "agent.yaml", field)


def test_a_url_in_prose_or_without_a_credential_is_accepted(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    ws.edit("suites/main.yaml", lambda d: d["models"][0].update(
        primary_params={"docs": "https://docs.example/token/v1?model=x", "note": "ask me@host.example"}))
    code, out, err = claw("validate")
    assert code == 0, (out, err)


@pytest.mark.parametrize(("where", "field"), [
    ("model", "primary_params.api_key"),
    ("judge", "request_options.extra_headers.Authorization"),
    ("agent", "apiKey"),
])
def test_a_credential_named_key_nested_anywhere_is_refused(ws: Workspace, claw: Claw, where: str, field: str) -> None:
    """A key named as a credential was refused only at a model's, a judge's or its request options' top level:
    nested one level down (OpenAI's SDK habit of `extra_headers`, OpenClaw's own `tools.web.search.apiKey`) it was
    validated, hashed into every run's config and stored (and sent in the request body)."""
    if where == "model":
        ws.edit("suites/main.yaml", lambda d: d["models"][0].update(primary_params={"api_key": PASSWORD}))
    elif where == "judge":
        _judged_by(ws, request_options={"extra_headers": {"Authorization": f"Bearer {PASSWORD}"}})
    else:
        agent = ws.configs / "agents" / "a1"
        (agent / "workspace").mkdir(parents=True)
        write_yaml(agent / "agent.yaml", {"schema_version": 1, "agent_id": "a1", "title": "Agent", "openclaw": {
            "agents_defaults": {"tools": {"web": {"search": {"apiKey": PASSWORD}}}}}})
    _validate_refuses(claw, {"model": "main.yaml", "judge": "ev.yaml", "agent": "agent.yaml"}[where], field)


def test_a_credential_named_key_holding_a_schema_or_an_environment_reference_is_accepted(
        ws: Workspace, claw: Claw, standin: StandIn) -> None:
    """What such a key may hold that is no secret: a JSON schema's property (a mapping), `${NAME}` (OpenClaw reads
    the variable), nothing."""
    ws.edit("suites/main.yaml", lambda d: d["models"][0].update(primary_params={
        "response_format": {"type": "json_schema", "json_schema": {"name": "login", "schema": {
            "type": "object", "properties": {"password": {"type": "string"}, "token": {"type": "string"}}}}},
        "search": {"apiKey": "${BRAVE_API_KEY}", "token": ""}}))
    code, out, err = claw("validate")
    assert code == 0, (out, err)


@pytest.mark.parametrize(("value", "secrets"), [
    ("http://alice:Pr0xy%40pw@proxy.example:3128", ["alice:Pr0xy%40pw", "alice:Pr0xy@pw", "Pr0xy%40pw", "Pr0xy@pw"]),
    ("https://ghp_TOKEN123@github.example/org/repo.git", ["ghp_TOKEN123"]),
    ("https://search.example/q?x=1&api_key=abc12345", ["abc12345"]),
    ("mailto:alice@example.org", []),  # a mailbox, no password
    ("localhost,127.0.0.1,.internal", []),
    ("https://api.example/v1?api-version=2024-06-01", []),
])
def test_the_secrets_a_url_carries_are_what_an_openclaw_run_redacts(value: str, secrets: list[str]) -> None:
    assert secrets_in_url(value) == secrets


PASTED_KEY = "sk-or-v1-" + "0123456789abcdef" * 4


@pytest.mark.parametrize("where", ["model", "judge"])
def test_a_key_pasted_as_api_key_env_is_refused_and_never_shown(ws: Workspace, claw: Claw, standin: StandIn,
                                                               where: str) -> None:
    """The key pasted where its variable's name goes (`api_key_env: sk-or-v1-…`, the easy slip) validated: the build
    then printed it, in 'environment variable sk-or-v1-… is not set', to the terminal and the CI log, and the config
    holding it was the campaign's to store and archive. A name is letters, digits and `_`, not starting with a digit."""
    if where == "model":
        ws.edit("suites/main.yaml", lambda d: d["models"][0].update(api_key_env=PASTED_KEY))
        file, build = "main.yaml", ("build", "--suite", "main", "--run-profile", "rp")
    else:
        _judged_by(ws, api_key_env=PASTED_KEY)
        file, build = "ev.yaml", ("build", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")
    for args in (("validate",), build):
        proc = claw.popen(*args)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 2, (args, out, err)
        line = _one_line(err) if args[0] == "build" else _the_error(out)
        assert file in line and "api_key_env" in line and "name of an environment variable" in line, line
        assert PASTED_KEY[:16] not in out + err
    assert standin.requests == []


def test_a_key_pasted_as_a_base_url_is_refused_and_never_shown(ws: Workspace, claw: Claw, standin: StandIn,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A refusal quotes the value it refuses (`got '…'`): a key pasted into a base URL, or into
    $OPENROUTER_BASE_URL, was printed whole by `claw validate` and `claw build`. A value shaped like a key is quoted
    masked."""
    ws.edit("suites/main.yaml", lambda d: d["models"][0].update(base_url=PASTED_KEY))
    proc = claw.popen("validate")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "base_url" in _the_error(out) and PASTED_KEY[:16] not in out + err, (out, err)
    ws.edit("suites/main.yaml", lambda d: d["models"][0].pop("base_url"))
    monkeypatch.setenv("OPENROUTER_BASE_URL", PASTED_KEY)
    proc = claw.popen("build", "--suite", "main", "--run-profile", "rp")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "OPENROUTER_BASE_URL" in _one_line(err), (out, err)
    assert PASTED_KEY[:16] not in out + err
    assert standin.requests == []


@pytest.mark.parametrize("header", ["x-api-key", "X-Api-Key", "x-goog-api-key", "X-Auth-Token", "Proxy-Authorization",
                                    "Ocp-Apim-Subscription-Key", "api_token", "access_token"])
@pytest.mark.parametrize("where", ["model", "judge"])
def test_a_provider_key_under_a_header_name_is_refused(ws: Workspace, claw: Claw, where: str, header: str) -> None:
    """Only the names SECRET_KEYS lists were credentials: Anthropic's `x-api-key`, Google's `x-goog-api-key`, Azure
    APIM's `Ocp-Apim-Subscription-Key`, `X-Auth-Token`, `Proxy-Authorization` under `extra_headers` validated, and
    the key was hashed into every run's (or judgement's) config and stored with it (before session 73)."""
    headers = {"extra_headers": {header: PASSWORD}}
    if where == "model":
        ws.edit("suites/main.yaml", lambda d: d["models"][0].update(primary_params=headers))
    else:
        _judged_by(ws, request_options=headers)
    line = claw.one_config_error()
    assert header in line and "credential" in line and PASSWORD not in line, line


def test_names_that_only_end_like_a_credential_are_accepted(ws: Workspace, claw: Claw) -> None:
    """Request settings whose names hold `key` or `token` and no secret (OpenAI's `prompt_cache_key`, a tokenizer's
    `eos_token`, `max_tokens`), and headers that name no credential."""
    ws.edit("suites/main.yaml", lambda d: d["models"][0].update(primary_params={
        "prompt_cache_key": "case-7", "eos_token": "</s>", "max_tokens": 64,
        "extra_headers": {"X-Title": "bench", "HTTP-Referer": "https://bench.example", "x-request-key-id": "k1"}}))
    code, out, err = claw("validate")
    assert code == 0, (out, err)


NAME_LIKE_KEYS = ["c0ffee1234567890abcdef1234567890", "AIzaSyD4x7Qm2Lp9Zt6Wb3Nc8Rk1Hv5Jy0Fe2Ug"]


@pytest.mark.parametrize("key", NAME_LIKE_KEYS, ids=["azure-hex", "google"])
@pytest.mark.parametrize("where", ["model", "judge"])
def test_a_key_pasted_as_api_key_env_that_is_also_a_name_is_never_shown(ws: Workspace, claw: Claw,
                                                                         standin: StandIn, where: str,
                                                                         key: str) -> None:
    """A key made of letters and digits alone (Azure's 32 hex characters, a Google `AIza…` key) is also a variable's
    name: pasted as `api_key_env` it validates (the schema takes any name), and the build printed it whole in
    'environment variable c0ffee… is not set' to the terminal and the CI log (before session 73). The build still
    stops before any request; the name is not shown when it looks like a key."""
    if where == "model":
        ws.edit("suites/main.yaml", lambda d: d["models"][0].update(api_key_env=key))
        args: tuple[str, ...] = ()
    else:
        _judged_by(ws, api_key_env=key)
        args = ("--evaluation-profile", "ev")
    code, out, err = claw.build(*args)
    assert code == 2 and "api_key_env" in err and "looks like a key" in err, out + err
    assert key[:12] not in out + err
    assert [r for r in standin.requests if r["model"] == "vendor/judge"] == []
