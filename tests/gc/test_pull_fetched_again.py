"""A pull whose pack must be fetched again, what it brought having been deleted by a `claw gc` meanwhile, says so in
its summary instead of counting the pack twice as if the remote had sent two (real `claw` processes: the pull
stopped before it leases the heads it brought, `claw gc --grace 0` run to its end)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from clawstore.store.store import Store
from clawstore.testing.standin import StandIn
from tests.gc.test_writers_beside_gc import CAMPAIGN, beside_gc
from tests.hostile.attack import run_claw
from tests.support.claw import env  # noqa: F401 - fixture
from tests.support.prepared import run_here
from tests.support.storefiles import age_packs
from tests.support.workspace import many_cases


def test_a_pack_fetched_again_after_a_gc_is_counted_once_and_the_second_crossing_said(
        tmp_path: Path, standin: StandIn, env: dict[str, str]) -> None:  # noqa: F811
    """This store built the campaign, pushed it to `team` and retired it (`claw refs --delete`, an hour ago); a
    colleague pulled it, changed one case, built, and pushed to `other`, a remote of their own this store never pushed
    to: one pack holding the head's parts this store has (unrooted, old) and those it lacks. The pull from `other`
    fetches that pack, leaving out what is here; gc deletes what is here; the pull fetches the pack again for it.
    Before session 78 the summary counted it twice: 3 packs (2 distinct), its objects and bytes again."""
    ws = many_cases(tmp_path / "ws", 60)  # (a head of several parts: those the colleague's build left as they were)
    head = "campaigns/main__rp__none"
    team, other, here = str(tmp_path / "team"), str(tmp_path / "other"), os.environ["CLAW_STORE"]
    assert run_here(ws.root, "remote", "add", "team", team).code == 0
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0
    assert run_here(ws.root, "push", "team").code == 0
    assert run_here(ws.root, "refs", "--delete", head, "--delete", f"remotes/team/{head}").code == 0
    with Store(Path(here)) as store:
        age_packs(store, 3600)
    os.environ["CLAW_STORE"] = str(tmp_path / "colleague")  # (restored by the env fixture's monkeypatch)
    assert run_here(ws.root, "remote", "add", "team", team).code == 0
    assert run_here(ws.root, "pull", "team").code == 0
    ws.case("c000", "Question 1000?")
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0
    assert run_here(ws.root, "remote", "add", "other", other).code == 0
    assert run_here(ws.root, "push", "other").code == 0
    sent = sorted(path.name for path in (Path(other) / "packs").glob("*.pack"))
    os.environ["CLAW_STORE"] = here
    assert run_here(ws.root, "remote", "add", "other", other).code == 0
    pulled = beside_gc(ws.root, "clawstore.remote.pull:_Pull.add_entries", "pull", "other")
    assert pulled.returncode == 0, pulled.stderr
    summary = re.search(r"pulled from \S+: (\d+) pack\(s\), (\d+) object\(s\), (\d+) bytes.*", pulled.stdout)
    assert summary is not None, pulled.stdout
    assert int(summary[1]) == len(sent), (summary[0], sent)  # (a pack counted once however often it came)
    again = re.search(r"; 1 pack\(s\) fetched again \((\d+) bytes more\): a gc here meanwhile deleted", summary[0])
    assert again is not None, summary[0]
    assert int(again[1]) in {path.stat().st_size for path in (Path(other) / "packs").glob("*.pack")}, summary[0]
    assert run_claw(ws.root, "fsck").code == 0
