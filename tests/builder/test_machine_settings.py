"""The machine's numeric settings ($CLAW_BACKOFF_BASE, $CLAW_STORE_RETRY_SECONDS,
$CLAW_REMOTE_PUSH_INTERVAL, $CLAW_CLAIM_TTL, $CLAW_S3_READ_TIMEOUT): a malformed one is refused with one line and exit 2
before anything is paid or written, never a traceback and never silently the default."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawstore.errors import UsageError
from clawstore.host.machine_settings import seconds_setting
from clawstore.testing.standin import StandIn
from tests.config.workspace_builder import claw
from tests.support.prepared import ok_here
from tests.support.workspace import SECRET, many_cases

BUILD = ("build", "--suite", "main", "--run-profile", "rp")
RANGES = {"CLAW_BACKOFF_BASE": "0 to 30", "CLAW_STORE_RETRY_SECONDS": "0 to 86400",
          "CLAW_REMOTE_PUSH_INTERVAL": "0.1 to 86400", "CLAW_CLAIM_TTL": "0.2 to 86400",
          "CLAW_S3_READ_TIMEOUT": "0.1 to 86400"}


@pytest.mark.parametrize("name,value", [
    ("CLAW_BACKOFF_BASE", "fast"), ("CLAW_BACKOFF_BASE", "nan"), ("CLAW_BACKOFF_BASE", "1e400"),
    ("CLAW_STORE_RETRY_SECONDS", "-1"), ("CLAW_STORE_RETRY_SECONDS", "inf"),
    ("CLAW_REMOTE_PUSH_INTERVAL", "5s"), ("CLAW_REMOTE_PUSH_INTERVAL", "0"), ("CLAW_CLAIM_TTL", "inf"),
    ("CLAW_S3_READ_TIMEOUT", "0"),
])
def test_a_malformed_setting_is_refused_before_any_request(standin: StandIn, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch, name: str,
                                                          value: str) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", SECRET)
    monkeypatch.setenv("OPENROUTER_BASE_URL", standin.base_url)
    ws = many_cases(tmp_path / "ws", cases=2)
    remote = tmp_path / "remote"
    ok_here("remote", "add", "team", str(remote), cwd=ws.root)  # (prepares: in this process)
    monkeypatch.setenv(name, value)
    done = claw(*BUILD, "--remote", "team", cwd=ws.root)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"claw: error: ${name}: expected a number of seconds from {RANGES[name]}; got {value!r}"]
    assert standin.requests == []
    assert not (ws.root / "store").exists() and not remote.exists()


def test_a_setting_in_range_is_used_and_an_empty_one_means_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAW_X", " 2.5 ")
    assert seconds_setting("CLAW_X", 5.0, low=0.1, high=10) == 2.5
    monkeypatch.setenv("CLAW_X", "")
    assert seconds_setting("CLAW_X", 5.0, low=0.1, high=10) == 5.0
    monkeypatch.delenv("CLAW_X")
    assert seconds_setting("CLAW_X", 5.0, low=0.1, high=10) == 5.0
    monkeypatch.setenv("CLAW_X", "10.5")
    with pytest.raises(UsageError, match=r"^\$CLAW_X: expected a number of seconds from 0.1 to 10; got '10.5'$"):
        seconds_setting("CLAW_X", 5.0, low=0.1, high=10)
