"""A pull narrowed to one campaign downloads only the packs holding what that campaign's head reaches."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from clawstore.testing.standin import StandIn
from tests.config.workspace_builder import claw
from tests.support.prepared import claw_here, ok_here
from tests.support.workspace import SECRET, standard

MAIN = ("--suite", "main", "--run-profile", "rp")
OTHER = ("--suite", "other", "--run-profile", "rp")


def ok(*args: str, cwd: Path) -> str:
    done = claw(*args, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_narrowed_pull_fetches_only_that_campaigns_packs(tmp_path: Path, standin: StandIn,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", SECRET)
    monkeypatch.setenv("OPENROUTER_BASE_URL", standin.base_url)
    a = standard(tmp_path / "a")
    a.suite("other", ["m3", "m4"])
    remote = str(tmp_path / "remote")
    ok_here("build", *MAIN, cwd=a.root)
    ok_here("build", *OTHER, cwd=a.root)
    ok_here("push", remote, *OTHER, cwd=a.root)  # pack(s) holding everything the "other" campaign reaches
    ok_here("push", remote, *MAIN, cwd=a.root)  # what the remote lacks of "main" (shared objects are sent once)
    every = len(list(Path(remote).rglob("*.pack")))
    assert every >= 2

    b = standard(tmp_path / "b")
    b.suite("other", ["m3", "m4"])
    pulled = ok("pull", remote, *OTHER, cwd=b.root)
    fetched = int(re.search(r"(\d+) pack\(s\)", pulled).group(1))  # type: ignore[union-attr]
    assert 1 <= fetched < every, pulled
    sent = len(standin.requests)
    assert "0 executed" in ok_here("build", *OTHER, cwd=b.root)  # everything that campaign needs arrived
    assert len(standin.requests) == sent
    assert "would execute" in ok_here("build", *MAIN, "--dry-run", cwd=b.root)  # the other one did not
    assert claw_here("fsck", cwd=b.root)[0] == 0

    # the whole remote, for comparison: the rest arrives, and the first campaign needs nothing either
    shutil.rmtree(b.root / "store")
    ok("pull", remote, cwd=b.root)
    ok_here("build", *MAIN, cwd=b.root)
    assert len(standin.requests) == sent
