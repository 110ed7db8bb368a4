"""Secrets of the environment are redacted as the environment stands at each call: the values are
remembered between calls (reading the environment was ~5% of a cold build's CPU), never past a change."""

from __future__ import annotations

import os
import threading

import pytest

from clawstore.evaluate.redact import REDACTED, environment_secrets, redact_text, redact_value


def test_a_secret_set_replaced_or_removed_between_calls_is_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAW_TEST_API_KEY", "first-secret-value")
    assert redact_text("said first-secret-value") == f"said {REDACTED}"
    monkeypatch.setenv("CLAW_TEST_API_KEY", "second-secret-value")  # same name, same number of variables
    assert redact_text("said first-secret-value, second-secret-value") == \
        f"said first-secret-value, {REDACTED}"
    monkeypatch.setenv("OTHER_TOKEN", "a-third-secret-value")
    assert redact_value({"x": ["a-third-secret-value"]}) == {"x": [REDACTED]}
    monkeypatch.delenv("CLAW_TEST_API_KEY")
    assert "second-secret-value" not in environment_secrets()
    assert redact_text("said second-secret-value") == "said second-secret-value"


def test_a_change_made_below_os_environ_is_seen_too(monkeypatch: pytest.MonkeyPatch) -> None:
    # os.environ is the mapping every caller goes through; a value put there by another thread counts.
    monkeypatch.setenv("CLAW_TEST_SECRET", "before-the-change")
    assert environment_secrets().count("before-the-change") == 1
    changed = threading.Thread(target=lambda: os.environ.__setitem__("CLAW_TEST_SECRET", "after-the-change"))
    changed.start()
    changed.join()
    assert "after-the-change" in environment_secrets() and "before-the-change" not in environment_secrets()


def test_the_list_returned_is_the_caller_s_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAW_TEST_PASSWORD", "a-password-value")
    first = environment_secrets()
    first.clear()
    assert "a-password-value" in environment_secrets()
