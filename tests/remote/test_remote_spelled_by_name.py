"""A saved remote pushed to by its name, then by its directory (or URL and endpoint) spelled out: one place, one
tracking ref. Before session 77 a remote given by URL was tracked under `remotes/url-<hash>/` even when claw.yaml
names it, apart from `remotes/<name>/`: the push by the other spelling found a head it had never seen and stopped
with "changed by another push" (docs/remote.md, step 1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawstore.testing.standin import StandIn
from tests.support.prepared import run_here
from tests.support.workspace import standard

CAMPAIGN = ("--suite", "main", "--run-profile", "rp")


@pytest.mark.parametrize("remote_url", ["dir", "s3"], indirect=True)
def test_a_push_by_name_then_by_url_is_one_remote(tmp_path: Path, provider: StandIn, remote_url: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAW_STORE", str(tmp_path / "store"))
    ws = standard(tmp_path / "ws")
    assert run_here(ws.root, "remote", "add", "team", remote_url).code == 0
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0
    first = run_here(ws.root, "push", "team", "--progress", "none")
    assert first.code == 0 and "1 ref(s) moved" in first.stdout, first
    ws.case("alpha", "What is 3 + 3?")  # an edit: a new head to push
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0
    spelled = (f"file://{remote_url}" if remote_url.startswith("/") else remote_url)
    second = run_here(ws.root, "push", spelled, "--progress", "none")
    assert second.code == 0 and "1 ref(s) moved" in second.stdout, second
    ws.case("alpha", "What is 4 + 4?")
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0
    third = run_here(ws.root, "push", "team", "--progress", "none")
    assert third.code == 0 and "1 ref(s) moved" in third.stdout, third
    refs = run_here(ws.root, "refs")
    assert "remotes/url-" not in refs.stdout, refs.stdout
