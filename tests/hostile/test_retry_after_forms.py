"""A provider's `Retry-After` is input: each odd form (not a number, not finite, negative, an HTTP date long past or
centuries ahead) waits a bounded time and the build finishes (real `claw` processes, the stand-in server)."""

from __future__ import annotations

import subprocess
import time

import pytest

from clawstore.providers.client import parse_retry_after
from clawstore.testing.standin import StandIn, error, text
from tests.hostile.attack import run_claw
from tests.support.claw import env, ws  # noqa: F401 - fixtures
from tests.support.workspace import Workspace

BUILD = ("build", "--suite", "main", "--run-profile", "rp", "--progress", "plain")

# Retry-After as sent -> what the client takes from it (None: not a usable wait, the client's own backoff)
FORMS: dict[str, float | None] = {
    "nan": None, "NaN": None, "inf": None, "-inf": None, "1e400": None, "Infinity": None,
    "-3": 0.0, " 2 ": 2.0, "0.5": 0.5, "0x10": None, "1_000": None, "soon": None, "\u0663": None,
    "Thu, 01 Jan 1970 00:00:00 GMT": 0.0,
}


def test_each_retry_after_form_is_a_finite_wait_or_none() -> None:
    for sent, expected in FORMS.items():
        assert parse_retry_after(sent) == expected, sent
    centuries = parse_retry_after("Fri, 31 Dec 9999 23:59:59 GMT")
    assert centuries is not None and centuries > 1e10  # finite: the client caps it (retry_after_cap)


def test_a_build_told_to_wait_nan_seconds_finishes(ws: Workspace, standin: StandIn,  # noqa: F811
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # A NaN wait compared false with every deadline: the run's slot waited for a moment that never came,
    # and the build hung until interrupted. (A bad Retry-After falls back to the backoff: made short here.)
    form = "nan"
    monkeypatch.setenv("CLAW_BACKOFF_BASE", "0.01")
    ws.suite("main", ["m1"], case_selection={"include_case_ids": ["alpha"]})
    standin.script("vendor/m1", error(429, "slow down", retry_after=form), text("4"))
    began = time.monotonic()
    try:
        done = run_claw(ws.root, *BUILD, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"a build told Retry-After: {form} did not finish in 30 s")
    assert done.code == 0 and "Traceback" not in done.stderr, done
    assert "nan" not in done.stderr and "inf" not in done.stderr, done.stderr
    assert [r["model"] for r in standin.requests] == ["vendor/m1"] * 2
    assert time.monotonic() - began < 30
