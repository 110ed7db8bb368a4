"""Two `claw archive import --configs-to DIR` of different campaigns' archives into the same DIR, the second started
while the first is between its check of DIR and the configs it writes there (real `claw` processes, the first stopped
at keeping.write_configs). Before session 78 the second imported its campaign into DIR/store and wrote its configs,
and the first then failed to move its own into place: exit 3 ("Directory not empty"), after it had imported too."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawstore.store import Store
from clawstore.testing.standin import StandIn
from tests.faults.test_hostile_archives import snapshot
from tests.gc.test_writers_beside_gc import held, release
from tests.hostile.attack import run_claw
from tests.support.claw import Claw
from tests.support.workspace import Workspace


def _archive(ws: Workspace, claw: Claw, path: Path, suite: str) -> Path:
    ws.suite(suite, ["m1"])
    assert claw("build", "--suite", suite, "--run-profile", "rp")[0] == 0
    code, _, err = claw("archive", "export", "--suite", suite, "--run-profile", "rp", "-o", str(path))
    assert code == 0, err
    return path


@pytest.mark.parametrize("fresh", ["absent", "only its store"])
def test_an_import_into_a_dir_another_import_is_filling_is_a_usage_error_that_writes_nothing(
        ws: Workspace, claw: Claw, standin: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        fresh: str) -> None:
    first = _archive(ws, claw, tmp_path / "first.claw", "main")
    ws.case("gamma", "Name a shape.")
    second = _archive(ws, claw, tmp_path / "second.claw", "other")
    monkeypatch.delenv("CLAW_STORE")
    target = tmp_path / "elsewhere"
    if fresh == "only its store":
        Store(target / "store").close()
    writer = held(tmp_path, "clawstore.project.keeping:write_configs", "archive", "import", str(first),
                  "--configs-to", str(target))
    try:
        before = snapshot(target / "store") if (target / "store").exists() else None
        late = run_claw(tmp_path, "archive", "import", str(second), "--configs-to", str(target))
        after = snapshot(target / "store") if (target / "store").exists() else None
    finally:
        done = release(writer)
    assert late.code == 2, late
    assert late.stderr.count("\n") == 1 and f"--configs-to {target}: another `claw archive import`" in late.stderr
    assert after == before  # the refused import changed no store
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in target.iterdir()) == ["configs", "store"]
    assert sorted(p.name for p in (target / "configs" / "suites").iterdir()) == ["main.yaml"]
    with Store(target / "store", create=False) as store:
        assert sorted(store.list_refs("campaigns/")) == ["campaigns/main__rp__none"]
