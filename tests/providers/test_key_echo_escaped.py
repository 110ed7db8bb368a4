"""A key the provider echoes is scrubbed from what claw keeps and prints (providers/client.py `_scrub`), also when the
provider's JSON escapes some of its characters: PHP's json_encode writes `/` as `\\/`, .NET's System.Text.Json writes
`+` as `\\u002B`. The scrub looked for the key as written in the raw body alone, and the JSON decoded the escapes back:
a key holding `/` or `+` (base64-style gateway keys) echoed in a 401 was in the build's output, `claw report`, `claw
query` and the store before session 73."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clawstore.providers import Endpoint, ProviderClient, ProviderError
from clawstore.testing.standin import StandIn, malformed
from tests.support.claw import Claw, claw, env, ws  # noqa: F401  (fixtures)
from tests.support.storefiles import places_holding
from tests.support.workspace import Workspace

KEY = "Zx9/Qw8+Er7=Ty6/Ui5pL0"
BODY = {"model": "m1", "messages": [{"role": "user", "content": "hello there"}]}
ESCAPED = {
    "php": KEY.replace("/", "\\/"),
    "dotnet": KEY.replace("+", "\\u002B"),
    "every": "".join(c if c.isalnum() else f"\\u{ord(c):04x}" for c in KEY),
}


def _refusal(echoed: str) -> dict[str, object]:
    return malformed('{"error": {"message": "Incorrect API key provided: ' + echoed + '", "type": "auth"}}', 401)


@pytest.mark.parametrize("form", list(ESCAPED))
def test_an_escaped_echo_of_the_key_is_scrubbed(standin: StandIn, monkeypatch: pytest.MonkeyPatch, form: str) -> None:
    monkeypatch.setenv("CLAW_TEST_GATEWAY_KEY", KEY)
    endpoint = Endpoint(standin.base_url, "CLAW_TEST_GATEWAY_KEY")
    reply = '{"choices": [{"message": {"role": "assistant", "content": "echo ' + ESCAPED[form] + '"}}]}'
    standin.script("m1", _refusal(ESCAPED[form]), malformed(reply, 200))
    with ProviderClient() as client:
        with pytest.raises(ProviderError) as caught:
            client.chat(endpoint, BODY, timeout=5, retries=0)
        exc = caught.value
        kept = json.dumps([str(exc), exc.message, exc.metadata])
        assert KEY not in kept
        assert ESCAPED[form] not in json.loads(kept)[2]["body_excerpt"], exc.metadata  # (it decodes to the key)
        assert "[redacted]" in exc.message
        result = client.chat(endpoint, BODY, timeout=5, retries=0)
        assert result.message["content"] == "echo [redacted]"


def test_a_build_keeps_and_prints_no_escaped_echo_of_the_key(ws: Workspace, claw: Claw,  # noqa: F811
                                                             standin: StandIn, env: dict[str, str],  # noqa: F811
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAW_TEST_GATEWAY_KEY", KEY)
    ws.edit("suites/main.yaml", lambda d: [m.update(api_key_env="CLAW_TEST_GATEWAY_KEY", base_url=standin.base_url)
                                           for m in d["models"]])
    standin.set_default(_refusal(ESCAPED["php"]))
    code, out, err = claw.build("--progress", "json", "--output", "json")
    assert code == 1 and "Incorrect API key provided: [redacted]" in out, out + err
    said = out + err
    for command in (("report", "--suite", "main", "--run-profile", "rp"), ("query", "SELECT * FROM runs")):
        said += "".join(claw(*command)[1:])
    assert KEY not in said and ESCAPED["php"] not in said
    assert places_holding(Path(env["CLAW_STORE"]), KEY) == []
