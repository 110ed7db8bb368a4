"""What `claw fsck` tells a user to do about what it found: --repair for what it mends, and for the refs it leaves
alone (a pin, a remote's tracking ref) the command that does mend them.

Before session 60 a damaged pack listed its problems and "fsck: 14 problem(s)", naming no way out; after --repair, a
tracking ref `remotes/team/…` whose run outputs were quarantined stayed "is missing", exit 1, at every fsck, with no
word that `claw pull team` fetches them again (s60-qa)."""

from __future__ import annotations

from pathlib import Path

from clawstore.store import Store
from clawstore.testing.standin import StandIn
from tests.faults.helpers import head_nodes
from tests.support.claw import Claw
from tests.support.storefiles import flip_in_frame
from tests.support.workspace import Workspace

CAMPAIGN = ("--suite", "main", "--run-profile", "rp")
CID = "main__rp__none"


def _damage_a_run(env: dict[str, str]) -> None:
    store = Store(env["CLAW_STORE"], create=False)
    run = next(node for node in head_nodes(store, CID) if node["kind"] == "run")
    flip_in_frame(store, store.get_json(run["record"])["outputs"]["artifact"], -5)


def test_fsck_names_repair_and_after_it_the_pull_that_mends_a_tracking_ref(
        ws: Workspace, claw: Claw, standin: StandIn, env: dict[str, str], tmp_path: Path) -> None:
    assert claw("build", *CAMPAIGN)[0] == 0
    assert claw("remote", "add", "team", str(tmp_path / "share"))[0] == 0
    assert claw("push", "team")[0] == 0
    _damage_a_run(env)

    code, out, err = claw("fsck")
    assert code == 1 and "ref remotes/team/campaigns/" in out, out
    assert "claw fsck --repair" in err, err  # what mends most of it

    code, out, err = claw("fsck", "--repair")
    assert code == 1 and "repaired: ref campaigns/" in out, out + err
    ways_out = [line for line in err.splitlines() if "remotes/team/" in line]
    assert len(ways_out) == 1 and "claw pull team" in ways_out[0], err

    requests = len(standin.requests)
    assert claw("pull", "team")[0] == 0
    code, out, err = claw("fsck")
    assert code == 0 and "problem" not in out + err, out + err
    assert len(standin.requests) == requests


def test_after_repair_a_pin_naming_what_is_lost_names_unpin(ws: Workspace, claw: Claw, env: dict[str, str]) -> None:
    assert claw("build", *CAMPAIGN)[0] == 0
    assert claw("pin", "v1", *CAMPAIGN)[0] == 0
    _damage_a_run(env)
    code, out, err = claw("fsck", "--repair")
    assert code == 1 and "ref pins/v1:" in out, out + err
    assert "claw unpin v1" in err, err
