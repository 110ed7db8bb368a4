"""A store whose records already hold a URL with a password (a `base_url` claw took before session 62) is the user's:
claw does not rewrite it, and nothing it prints shows the password: query's `endpoint` column, report, view, explain,
batch listings and error messages show the URL with its userinfo and credential parameters masked."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawstore.config.models import base
from clawstore.providers import endpoint
from clawstore.testing.standin import StandIn, error
from tests.support.claw import Claw
from tests.support.workspace import Workspace

PASSWORD = "pw9X"  # short: a base_url under 40 characters is printed by explain, not summarised


def _built_before_session_62(claw: Claw, monkeypatch: pytest.MonkeyPatch, url: str, code_expected: int = 0) -> None:
    """A build by a claw that took the URL as it was written (the check of session 62 taken out)."""
    with monkeypatch.context() as patched:
        patched.setattr(base, "credential_in_url", lambda _: None)
        patched.setattr(endpoint, "credential_in_url", lambda _: None)
        patched.setenv("OPENROUTER_BASE_URL", url)
        code, out, err = claw.build()
        assert code == code_expected, (out, err)


def test_nothing_claw_prints_shows_a_stored_password(ws: Workspace, claw: Claw, standin: StandIn, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    with_password = standin.base_url.replace("http://", f"http://u:{PASSWORD}@")
    _built_before_session_62(claw, monkeypatch, with_password)
    assert standin.requests  # (the build ran: its records hold the URL)

    code, out, err = claw("query", "select distinct endpoint from runs", "--format", "csv")
    assert code == 0, err
    assert out.split() == ["endpoint", standin.base_url.replace("http://", "http://***@")]
    code, out, err = claw("report", "--suite", "main", "--run-profile", "rp")
    assert code == 0 and PASSWORD not in out + err
    code, out, err = claw("view", "--suite", "main", "--run-profile", "rp", "-o", str(tmp_path / "view.html"))
    assert code == 0, err
    shown = "".join(p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file())
    assert PASSWORD not in out + err + shown

    monkeypatch.setenv("OPENROUTER_BASE_URL", standin.base_url)
    code, out, err = claw("explain", "--suite", "main", "--run-profile", "rp")
    assert "model.endpoint.base_url" in out, (out, err)
    assert PASSWORD not in out + err


def test_an_error_naming_an_endpoint_masks_its_password() -> None:
    from clawstore.providers.errors import MissingApiKeyError

    error = MissingApiKeyError("KEY", f"https://u:{PASSWORD}@host/v1?sig={PASSWORD}")
    assert PASSWORD not in str(error) and "https://***@host/v1?sig=***" in str(error)


def test_a_failed_requests_error_naming_a_stored_password_is_shown_masked(ws: Workspace, claw: Claw,
                                                                          standin: StandIn, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A failed request's error names the URL it called (`HTTP 400 from http://u:pw@host/v1/chat/completions`): the
    record keeps it, and query showed the password there beside the masked endpoint."""
    standin.set_default(error(400, "bad request"))
    _built_before_session_62(claw, monkeypatch, standin.base_url.replace("http://", f"http://u:{PASSWORD}@"), 1)
    code, out, err = claw("query", "select error_message, endpoint from runs", "--format", "json")
    assert code == 0, err
    assert PASSWORD not in out and "http://***@" in out and "bad request" in out, out
    code, out, err = claw("query", "select content from messages where kind = 'runner'", "--format", "json")
    assert code == 0 and "bad request" in out and PASSWORD not in out, (out, err)
    code, out, err = claw("report", "--suite", "main", "--run-profile", "rp")
    assert PASSWORD not in out + err
    page = tmp_path / "page"  # (the store, under tmp_path, holds the password as it was stored)
    page.mkdir()
    code, out, err = claw("view", "--suite", "main", "--run-profile", "rp", "-o", str(page / "view.html"))
    shown = "".join(p.read_text(errors="replace") for p in page.rglob("*") if p.is_file())
    assert code == 0 and "bad request" in shown and PASSWORD not in out + err + shown
