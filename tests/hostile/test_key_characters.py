"""An API key that no HTTP header can carry (a newline, a control character pasted with it) is refused before
anything is sent or written, and never echoed: httpx's refusal of the header quoted it in every failed run's
error, escaped so that the scrubbing of the key missed it (`claw build` in-process, the stand-in server)."""

from __future__ import annotations

import pytest

from clawstore.testing.standin import StandIn
from tests.support.claw import Claw, claw, env, ws  # noqa: F401 - fixtures
from tests.support.workspace import Workspace

PART = "KEYPART-0123456789abcdef"


@pytest.mark.parametrize("key", [f"sk-or-v1-\n{PART}", f"sk-or-v1-\r{PART}", f"sk-or-v1-\t{PART}",
                                 f"sk-or-v1-{PART}\x7f", f"sk-or-v1-\x1b{PART}"])
def test_a_key_with_control_characters_is_refused_unsent(ws: Workspace, claw: Claw, standin: StandIn,  # noqa: F811
                                                         monkeypatch: pytest.MonkeyPatch, key: str) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", key)
    store = ws.root.parent / "store"
    code, out, err = claw.build()
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "OPENROUTER_API_KEY holds control characters" in err, err
    assert PART not in out + err
    assert standin.requests == [] and not store.exists()
