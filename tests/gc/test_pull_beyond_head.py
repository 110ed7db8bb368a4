"""What a killed build finished travels by `claw push` (a whole store's push sends every entry the remote lacks) and
`claw pull` writes it into the colleague's store, where no head names it, and keeps it there from gc as the owner's
journal does here: a real `claw build` SIGKILLed, a real push to a directory remote, a real pull into a fresh store,
`claw gc --grace 0` there, then a build counted by the stand-in.

The killed campaign (a build, a build SIGKILLed: most of a test's set-up) is made once a module and worker, and once
more with another campaign's build killed beside it; each test copies its workspace and store (`_from`). The module
serves one stand-in, so the copies' builds reuse the template's runs as the original store's would."""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from clawstore.spend.killed import KilledBuild
from clawstore.store.buildlogs import unadopted_entries
from clawstore.store.core.ids import PREFIX
from clawstore.store.store import Store
from clawstore.testing.standin import StandIn, text
from tests.gc.test_archive_elsewhere import CAMPAIGN, Template, _asked, _from, _ok, _template_env, killed_template
from tests.support.claw import Claw
from tests.support.killing import build_killed_when
from tests.support.oldclaw import old_claw, old_clawstore
from tests.support.workspace import Workspace

KILLED_RUN = ("vendor/m1", "Slow one?")  # what the killed build paid for (tests/gc/test_archive_elsewhere.py)
BEFORE_THE_MARK = "010ff97"  # main when session 77's push began to mark listings `unadopted`


def _pulled(claw: Claw, ws: Workspace, remote: Path, place: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A colleague's fresh store and workspace at `place` (the same configs, as from version control), pulled from
    `remote`; claw runs there from now on. What the pull said."""
    shutil.copytree(ws.configs, place / "configs")
    monkeypatch.chdir(place)
    monkeypatch.setenv("CLAW_STORE", str(place / "store"))
    return _ok(claw, "pull", str(remote))


def _kept_by(claw: Claw) -> list[str]:
    return [name for name in json.loads(_ok(claw, "refs", "--json")) if name.startswith("imports/")]


def _kept_through_gc(claw: Claw, standin: StandIn, said: str) -> None:
    """The pull (which `said` so) kept what the killed build finished by one `imports/` ref: after a gc past the grace
    period and a clean fsck, the colleague's build pays nothing for it."""
    [kept] = _kept_by(claw)
    assert f"kept from gc by ref {kept}" in said, said
    _ok(claw, "gc", "--grace", "0")
    assert claw("fsck")[0] == 0
    paid_there = _built(claw, standin)
    assert paid_there[KILLED_RUN] == 0, paid_there


def _built(claw: Claw, standin: StandIn) -> Counter[tuple[str, str]]:
    before = len(standin.requests)
    claw("build", *CAMPAIGN)
    return _asked(standin, before)


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    """One stand-in for the module: its address is in the runs' keys, so the copies' builds reuse the template's."""
    with StandIn() as server:
        yield server


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory, standin: StandIn) -> Template:
    return killed_template(tmp_path_factory, standin)


@pytest.fixture(scope="module")
def killed_beside_other(tmp_path_factory: pytest.TempPathFactory, standin: StandIn, killed: Template) -> Template:
    """`killed`, then a build of campaign OTHER SIGKILLed right after it (within its 60 s window)."""
    root = tmp_path_factory.mktemp("pull_beyond_head_other")
    shutil.copytree(killed.ws, root / "ws", symlinks=True)
    shutil.copytree(killed.store, root / "store", symlinks=True)
    with pytest.MonkeyPatch.context() as patch:
        _template_env(root, standin, patch)
        other = _other_killed(Workspace(root / "ws"), standin)
    return Template(root / "ws", root / "store", other)


def _pushed(ws: Workspace, claw: Claw, standin: StandIn, monkeypatch: pytest.MonkeyPatch, template: Template,
            remote: Path, *narrowed: str, pinned: bool = False) -> None:
    """The campaign, its failed run and what a SIGKILLed build of a new case finished (m1's run of gamma), copied from
    `template`, its head pinned `frozen` if `pinned`, pushed whole (or `narrowed`: `claw push` options) to the
    directory `remote`; the stand-in's counts reset."""
    _from(template, ws, standin, monkeypatch)
    if pinned:
        _ok(claw, "pin", "frozen", *CAMPAIGN)
    assert "ref(s) moved" in _ok(claw, "push", str(remote), *narrowed)


def test_a_whole_push_and_pull_carry_what_a_killed_build_finished_and_the_colleague_reuses_it(
        ws: Workspace, claw: Claw, standin: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        killed: Template) -> None:
    """A whole store's push sends every entry the remote lacks, a killed build's too, and a full pull writes them: the
    colleague's build pays for what the owner's build would, not for what the killed build finished."""
    remote = tmp_path / "team"
    _pushed(ws, claw, standin, monkeypatch, killed, remote)
    paid_here = _built(claw, standin)  # (the owner's own build, for comparison; it pushes nothing more)
    assert KILLED_RUN not in paid_here, paid_here
    _pulled(claw, ws, remote, tmp_path / "colleague", monkeypatch)
    assert "campaigns/main__rp__ev" in json.loads(_ok(claw, "refs", "--json"))
    assert _built(claw, standin) == paid_here


def test_a_gc_past_its_grace_period_after_a_pull_keeps_what_a_colleagues_killed_build_finished(
        ws: Workspace, claw: Claw, standin: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        killed: Template) -> None:
    """In the owner's store the killed build's journal keeps what it finished from gc until a build adopts it (session
    76); the journal does not travel, and before session 77 nothing named those records in the colleague's store: a
    `claw gc --grace 0` between the pull and the build deleted them, and the build paid for m1's run of gamma again (1
    request). The push marks their entries (a listing `"unadopted": true`) and the pull keeps their records by a ref
    `imports/pull-<id>`, which it prints; deleted, gc reclaims them and the build pays again: the ref is what keeps
    them."""
    remote = tmp_path / "team"
    _pushed(ws, claw, standin, monkeypatch, killed, remote)
    _ok(claw, "gc", "--grace", "0")  # (here: kept by the journal, as the build after it shows)
    assert KILLED_RUN not in _built(claw, standin)

    said = _pulled(claw, ws, remote, tmp_path / "colleague", monkeypatch)
    [kept] = _kept_by(claw)
    assert kept.startswith("imports/pull-") and f"kept from gc by ref {kept}" in said, said
    _ok(claw, "gc", "--grace", "0")
    assert claw("fsck")[0] == 0
    paid_there = _built(claw, standin)
    assert KILLED_RUN not in paid_there, paid_there

    _pulled(claw, ws, remote, tmp_path / "unkept", monkeypatch)
    assert _kept_by(claw) == [kept]  # (the same records, the same ref)
    _ok(claw, "refs", "--delete", kept)
    _ok(claw, "gc", "--grace", "0")
    assert _built(claw, standin)[KILLED_RUN] == 1


def test_a_claw_before_the_mark_pulls_a_marked_listing_as_any_other(
        ws: Workspace, claw: Claw, standin: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        killed: Template) -> None:
    """The mark is one more field of a listing's signed line (`"unadopted": true`, and `"campaigns"` naming the killed
    builds' campaign): a claw from before it (main when session 77 began) pulls the remote, the marked entries with the
    rest, and a build there reuses them."""
    remote = tmp_path / "team"
    _pushed(ws, claw, standin, monkeypatch, killed, remote)
    lines = [json.loads(path.read_bytes().partition(b"\n")[0]) for path in (remote / "packs").glob("*.ids")]
    marked = {tuple(line.get("campaigns", ())): line["actions"] for line in lines if line.get("unadopted") is True}
    # (m1's run of gamma, the killed build's, in a listing naming its campaign; apart, naming none, what else was
    # written within 60 s of it: the campaign's first build)
    assert marked.get(("main__rp__ev",), 0) >= 1 and set(marked) <= {("main__rp__ev",), ()}, lines
    old = old_clawstore(tmp_path / "old", BEFORE_THE_MARK)
    place = tmp_path / "colleague"
    shutil.copytree(ws.configs, place / "configs")
    monkeypatch.chdir(place)
    monkeypatch.setenv("CLAW_STORE", str(place / "store"))
    pulled = old_claw(old, place, "pull", str(remote))
    assert pulled.returncode == 0, pulled.stderr
    assert "kept from gc" not in pulled.stdout and not _kept_by(claw)  # (it does not read the mark)
    assert KILLED_RUN not in _built(claw, standin)


OTHER = ("--suite", "other", "--run-profile", "rp")  # another campaign: m3's runs, which campaign main never makes


def _other_killed(ws: Workspace, standin: StandIn) -> str:
    """A build of campaign OTHER SIGKILLed once one of m3's runs is recorded while its run of gamma waits: right after
    main's killed build, so within its 60 s window (store/buildlogs.py unadopted_windows). Its build id."""
    ws.suite("other", ["m3"])
    standin.script("vendor/m3", text("slow", latency=60), match="Slow one")
    with Store(Path(os.environ["CLAW_STORE"]), create=False) as store:
        before = {key for key, _ in store.iter_actions()}

        def recorded(logged: KilledBuild | None) -> bool:
            if logged is None or ("vendor/m3", "Slow one?") not in _asked(standin, 0):
                return False
            records = [store.get_json(record) for key, record in store.iter_actions() if key not in before and record]
            return any(r.get("address", {}).get("model_id") == "m3" and r.get("error") is None for r in records)

        return build_killed_when(ws.root, list(OTHER), recorded, lambda: _asked(standin, 0)).stem


def _written_by(store_dir: Path, build_id: str) -> list[str]:
    """The records of the entries of the store at `store_dir` that build `build_id` wrote."""
    with Store(store_dir, create=False) as store:
        return [record for _, record in store.iter_actions()
                if record and store.get_json(record).get("build_id") == build_id]


@pytest.mark.parametrize("narrowed", [CAMPAIGN, ("--pin", "frozen")], ids=["campaign", "pin"])
def test_a_push_narrowed_to_the_campaign_carries_what_its_killed_build_finished(
        ws: Workspace, claw: Claw, standin: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        narrowed: tuple[str, ...], killed: Template) -> None:
    """A push narrowed to the campaign (`--suite/--run-profile/--evaluation-profile`, or `--pin` of its head) sent its
    ref's closure alone: what its killed build finished, which no head names, stayed behind, and the colleague who
    pulled paid for m1's run of gamma again (1 request) with no gc at all. It sends those entries marked, their records
    and what they reach, as a whole push: the pull keeps them (a gc past its grace period between it and the build
    takes nothing)."""
    remote = tmp_path / "team"
    _pushed(ws, claw, standin, monkeypatch, killed, remote, *narrowed, pinned=True)
    said = _pulled(claw, ws, remote, tmp_path / "colleague", monkeypatch)
    _kept_through_gc(claw, standin, said)


def test_a_push_narrowed_to_a_campaign_sends_nothing_of_another_campaigns_killed_build(
        ws: Workspace, claw: Claw, standin: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        killed_beside_other: Template) -> None:
    """Another campaign's build killed beside it (within the 60 s either side of the campaign's killed build's last log
    write, whose entries a whole push marks) is not what a push narrowed to the campaign sends: none of its records
    reach the remote."""
    remote = tmp_path / "team"
    other = [killed_beside_other.other]
    _pushed(ws, claw, standin, monkeypatch, killed_beside_other, remote, *CAMPAIGN)
    owner = Path(os.environ["CLAW_STORE"])
    finished = _written_by(owner, other[0])
    assert finished, "the other campaign's killed build recorded nothing"
    with Store(owner, create=False) as store:  # (a whole push would mark them: its window or its journal names them)
        marked_whole = {PREFIX + record.hex() for record in unadopted_entries(store).values()}
    assert set(finished) <= marked_whole, (finished, marked_whole)

    _pulled(claw, ws, remote, tmp_path / "colleague", monkeypatch)
    assert _written_by(tmp_path / "colleague" / "store", other[0]) == []
    assert _kept_by(claw)  # (main's killed build's, sent)


def test_a_filtered_build_remote_carries_what_the_campaigns_killed_build_finished(
        ws: Workspace, claw: Claw, standin: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        killed: Template) -> None:
    """A `claw build --remote` filtered to one case leaves the campaign's killed build untold (its head adopts only the
    filter's records) and its last push is narrowed to the campaign's head: it sent nothing of what the killed build
    finished, and the colleague who pulled paid for m1's run of gamma again. It marks and sends them as `claw push`."""
    remote = tmp_path / "team"
    _from(killed, ws, standin, monkeypatch)
    code, out, err = claw("build", *CAMPAIGN, "--case", "alpha", "--remote", str(remote))
    assert code == 0 and "ref(s) moved" in out + err, out + err
    said = _pulled(claw, ws, remote, tmp_path / "colleague", monkeypatch)
    [kept] = _kept_by(claw)
    assert f"kept from gc by ref {kept}" in said, said
    _ok(claw, "gc", "--grace", "0")
    paid_there = _built(claw, standin)
    assert paid_there[KILLED_RUN] == 0, paid_there


@pytest.mark.parametrize(("narrowed", "pulled"), [((), CAMPAIGN), (CAMPAIGN, CAMPAIGN), ((), ("--pin", "frozen"))],
                         ids=["whole-push", "campaign-push", "pin-pull"])
def test_a_pull_narrowed_to_the_campaign_takes_what_its_killed_build_finished_and_no_other_campaigns(
        ws: Workspace, claw: Claw, standin: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        narrowed: tuple[str, ...], pulled: tuple[str, ...], killed_beside_other: Template) -> None:
    """A pull narrowed to the campaign (`claw pull REMOTE --suite/--run-profile/--evaluation-profile`) fetched its
    head's closure alone: what its killed build finished, which the push sent marked, stayed on the remote, and the
    colleague's build paid for m1's run of gamma again (1 request). The marked listings name their campaigns
    (`"campaigns"`): the narrowed pull takes those of its campaign, their records and what they reach, and keeps them
    as a whole pull does; another campaign's killed build's results, marked beside them by a whole push, stay there.
    A pull narrowed to a pin of the campaign's head (`--pin`) takes the same."""
    remote = tmp_path / "team"
    other = [killed_beside_other.other]
    _pushed(ws, claw, standin, monkeypatch, killed_beside_other, remote, *narrowed, pinned=True)
    place = tmp_path / "colleague"
    shutil.copytree(ws.configs, place / "configs")
    monkeypatch.chdir(place)
    monkeypatch.setenv("CLAW_STORE", str(place / "store"))
    said = _ok(claw, "pull", str(remote), *pulled)
    assert _written_by(place / "store", other[0]) == []
    _kept_through_gc(claw, standin, said)
