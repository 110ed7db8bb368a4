"""An archive rebuilds elsewhere as the campaign would here: a campaign with judgements, a run whose cost is unknown,
a failed run and what a SIGKILLed build finished (a real `claw build` process, the stand-in server counting
requests), exported, imported into another store and workspace, then `claw status`, `report` and `query` compared
and a build run in both places: the same requests.

The killed campaign (a build, a build SIGKILLed: most of a test's set-up) is made once a module and worker
(`killed_template`, also tests/gc/test_pull_beyond_head.py's); each test copies its workspace and store (`_from`). The
module serves one stand-in, so the copies' builds reuse the template's runs as the original store's would."""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from clawstore.spend.killed import KilledBuild
from clawstore.store.store import Store
from clawstore.testing.standin import StandIn, error, last_prompt, text
from tests.gc.test_writers_beside_gc import held, release
from tests.hostile.attack import run_claw
from tests.support.claw import Claw
from tests.support.judging import JUDGE, eval_profile, judge_reply
from tests.support.killing import build_killed_when
from tests.support.prepared import run_here
from tests.support.workspace import SECRET, Workspace, standard

CAMPAIGN = ("--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")
QUERY = "select model_id, case_id, status, cost_usd, attempts, record_id from runs order by model_id, case_id"


def _ok(claw: Claw, *args: str) -> str:
    code, out, err = claw(*args)
    assert code == 0, out + err
    return out


def _script(standin: StandIn) -> None:
    standin.script(JUDGE, judge_reply(6))
    standin.script("vendor/m2", text("blue", usage={"cost": None}), match="colour")  # (its cost unknown)
    standin.script("vendor/m1", error(500, "upstream broke", usage={"prompt_tokens": 4, "cost": 0.001}),
                   match="colour")  # (a failed run that spent money)


def _killed_build(ws: Workspace, standin: StandIn) -> None:
    """A build of a new case, SIGKILLed once m1's run of it is recorded (its action-cache entry written; its journal
    line may come seconds later, store/buildlogs.py unadopted_windows) while m2's still waits for its answer: on that
    condition (tests/support/killing.py), not 1 s after both were asked, which load 10 can outlast."""
    ws.case("gamma", "Slow one?")
    standin.script("vendor/m2", text("slow", latency=60), match="Slow one")
    m1_gamma = {"model_id": "m1", "case_id": "gamma", "repetition": 0}
    with Store(Path(os.environ["CLAW_STORE"]), create=False) as store:
        before = {key for key, _ in store.iter_actions()}

        def recorded(logged: KilledBuild | None) -> bool:
            if logged is None or ("vendor/m2", "Slow one?") not in _asked(standin, 0):
                return False
            records = [store.get_json(record) for key, record in store.iter_actions() if key not in before and record]
            return any(r.get("kind") == "run" and r.get("address") == m1_gamma and r.get("error") is None
                       for r in records)

        build_killed_when(ws.root, list(CAMPAIGN), recorded, lambda: _asked(standin, 0))


def _asked(standin: StandIn, since: int) -> Counter[tuple[str, str]]:
    return Counter((r["model"], last_prompt(r["messages"])) for r in standin.requests[since:])


def _exported(ws: Workspace, claw: Claw, standin: StandIn, monkeypatch: pytest.MonkeyPatch, killed: Template,
              archive: Path) -> Path:
    """The campaign, its failed run and what a SIGKILLed build of a new case finished, exported to `archive`; the
    stand-in's counts reset."""
    _from(killed, ws, standin, monkeypatch)
    _ok(claw, "archive", "export", *CAMPAIGN, "-o", str(archive))
    return archive


def _killed_campaign(ws: Workspace, claw: Claw, standin: StandIn, before_reset: Callable[[], object] = lambda: None
                     ) -> None:
    """The campaign built (its failed run), then a build of a new case SIGKILLed once m1's run of gamma is recorded;
    `before_reset()`, then the stand-in's counts reset and its script set again."""
    eval_profile(ws, repetitions=1)
    _script(standin)
    assert claw("build", *CAMPAIGN)[0] == 1  # (its failed run)
    _killed_build(ws, standin)
    before_reset()
    standin.reset()
    _script(standin)


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    """One stand-in for the module: its address is in the runs' keys, so the copies' builds reuse the template's."""
    with StandIn() as server:
        yield server


@dataclass(frozen=True)
class Template:
    """A killed campaign's workspace and store, made once; `other`: the build id of another campaign's killed build
    beside it (empty when none)."""
    ws: Path
    store: Path
    other: str = ""


def _template_env(root: Path, standin: StandIn, patch: pytest.MonkeyPatch) -> None:
    for name, value in {"XDG_CONFIG_HOME": str(root / "xdg-config"), "OPENROUTER_API_KEY": SECRET,
                        "OPENROUTER_BASE_URL": standin.base_url, "CLAW_STORE": str(root / "store")}.items():
        patch.setenv(name, value)
    patch.chdir(root / "ws")


def killed_template(tmp_path_factory: pytest.TempPathFactory, standin: StandIn) -> Template:
    """The campaign, its failed run and what a SIGKILLed build of a new case finished (m1's run of gamma): made once
    a module (its `killed` fixture, over a module-scoped `standin`), copied by each test (`_from`)."""
    root = tmp_path_factory.mktemp("killed_campaign")
    ws = standard(root / "ws")
    with pytest.MonkeyPatch.context() as patch:
        _template_env(root, standin, patch)
        _killed_campaign(ws, Claw(ws.root), standin)
    return Template(ws.root, root / "store")


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory, standin: StandIn) -> Template:
    return killed_template(tmp_path_factory, standin)


def _from(template: Template, ws: Workspace, standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    """The test's workspace and store (CLAW_STORE) copied from `template` (copy2: the killed builds' journals keep
    their mtimes, which place their windows); the stand-in's counts reset and its script set again."""
    shutil.rmtree(ws.root)
    shutil.copytree(template.ws, ws.root, symlinks=True)
    monkeypatch.chdir(ws.root)  # (the directory made again)
    shutil.copytree(template.store, os.environ["CLAW_STORE"], symlinks=True)
    standin.reset()
    _script(standin)


def test_a_campaign_with_a_killed_builds_work_rebuilds_elsewhere_as_it_would_here(
        ws: Workspace, claw: Claw, standin: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        killed: Template) -> None:
    archive = _exported(ws, claw, standin, monkeypatch, killed, tmp_path / "campaign.claw")
    here = {"status": _ok(claw, "status", *CAMPAIGN), "query": _ok(claw, "query", QUERY, "--format", "json"),
            "report": json.loads(_ok(claw, "report", *CAMPAIGN, "--output", "json", "--no-chart"))}
    source = ws.root
    elsewhere = tmp_path / "elsewhere"
    _ok(claw, "archive", "import", str(archive), "--store", str(elsewhere / "store"), "--configs-to", str(elsewhere))

    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("CLAW_STORE")
    assert claw("fsck")[0] == 0
    there = {"status": _ok(claw, "status", *CAMPAIGN), "query": _ok(claw, "query", QUERY, "--format", "json"),
             "report": json.loads(_ok(claw, "report", *CAMPAIGN, "--output", "json", "--no-chart"))}
    here["report"].pop("killed_builds")  # (the killed build was here: its spending is this store's to say)
    assert there["report"].pop("killed_builds") == []
    assert there == here  # costs, unknown costs, attempts, failures, states: the same numbers

    before = len(standin.requests)
    claw("build", *CAMPAIGN)
    paid_there = _asked(standin, before)
    monkeypatch.chdir(source)
    monkeypatch.setenv("CLAW_STORE", str(tmp_path / "store"))
    # Here a gc past its grace period before the build keeps what the killed build finished though no head names it
    # and its log's last write came before it (m1's answer 1 s before the kill): gc keeps the entries written since
    # an untold killed build began (session 76; before, the build paid for m1's run again)
    assert claw("gc", "--grace", "0")[0] == 0
    before = len(standin.requests)
    claw("build", *CAMPAIGN)
    paid_here = _asked(standin, before)
    # What the killed build paid for (m1's run of gamma) is not paid for again there, as it is not here.
    assert ("vendor/m1", "Slow one?") not in paid_here
    assert paid_there == paid_here


def _import_gc_build(claw: Claw, standin: StandIn, archive: Path, place: Path, monkeypatch: pytest.MonkeyPatch,
                     delete_kept: bool = False) -> tuple[list[str], list[str], Counter[tuple[str, str]]]:
    """Import into a fresh store and workspace at `place` (twice), `claw gc --grace 0` there (with `delete_kept`: after
    deleting the refs the imports said they kept their results by), then build there: (the refs each import said,
    the store's imports/ refs, what the build paid for)."""
    lines = [_ok(claw, "archive", "import", str(archive), "--store", str(place / "store"), "--configs-to", str(place))]
    monkeypatch.chdir(place)
    monkeypatch.setenv("CLAW_STORE", str(place / "store"))
    lines.append(_ok(claw, "archive", "import", str(archive)))  # (again)
    said = [line.split()[5] for out in lines for line in out.splitlines() if line.startswith("kept from gc by ref ")]
    refs = [name for name in json.loads(_ok(claw, "refs", "--json")) if name.startswith("imports/")]
    if delete_kept:
        _ok(claw, "refs", "--delete", *refs)
    _ok(claw, "gc", "--grace", "0")
    assert claw("fsck")[0] == 0
    before = len(standin.requests)
    claw("build", *CAMPAIGN)
    return said, refs, _asked(standin, before)


def test_a_gc_past_its_grace_period_in_the_importing_store_keeps_what_the_killed_build_finished(
        ws: Workspace, claw: Claw, standin: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        killed: Template) -> None:
    """In the exporting store a killed build's journal keeps what it finished from gc (session 76); the importing store
    has none, and before session 77 a `claw gc --grace 0` there between the import and the build deleted what the
    archive carried beyond the head: the build paid for m1's run of gamma again. The import keeps them by a ref of its
    own, `imports/archive-<id>`, until deleted; importing again names the same ref."""
    archive = _exported(ws, claw, standin, monkeypatch, killed, tmp_path / "campaign.claw")
    said, refs, paid = _import_gc_build(claw, standin, archive, tmp_path / "kept", monkeypatch)
    assert ("vendor/m1", "Slow one?") not in paid, paid  # what the killed build paid for is not paid again
    assert len(said) == 2 and said[0] == said[1] and refs == said[:1] and said[0].startswith("imports/archive-")
    # The ref is what kept it: deleted, gc reclaims what no head names, and the build pays for it again.
    _, _, paid_unkept = _import_gc_build(claw, standin, archive, tmp_path / "unkept", monkeypatch, delete_kept=True)
    assert paid_unkept[("vendor/m1", "Slow one?")] == 1 and paid < paid_unkept, (paid, paid_unkept)


def test_an_untrusted_import_trusted_later_keeps_what_the_killed_build_finished_past_a_gc(
        ws: Workspace, claw: Claw, standin: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        killed: Template) -> None:
    """Imported --untrusted, the archive's entries are kept apart (a ref untrusted/…, a gc root); once its signer is
    trusted the next build moves them in (store/untrusted.py promote_trusted), and before session 77 nothing kept what
    the archive carried beyond its head after that: a build that moved them in without adopting them (here one of
    another case), then a `claw gc --grace 0`, and the build of the campaign paid for m1's run of gamma again. The
    promotion keeps them as the trusted import does, by `imports/archive-<id>`: the same ref."""
    archive = _exported(ws, claw, standin, monkeypatch, killed, tmp_path / "campaign.claw")
    signer = _ok(claw, "key", "show").strip()
    trusted = tmp_path / "trusted"
    _ok(claw, "archive", "import", str(archive), "--store", str(trusted / "store"), "--configs-to", str(trusted))
    kept_by = json.loads(_ok(claw, "refs", "--json", "--store", str(trusted / "store")))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "another-user"))  # (a key of its own, trusting nobody)
    place = tmp_path / "untrusted"
    imported = claw("archive", "import", str(archive), "--untrusted", "--store", str(place / "store"),
                    "--configs-to", str(place))
    assert imported[0] == 0 and "kept apart" in imported[2], imported
    monkeypatch.chdir(place)
    monkeypatch.setenv("CLAW_STORE", str(place / "store"))
    assert not [name for name in json.loads(_ok(claw, "refs", "--json")) if name.startswith("imports/")]
    _ok(claw, "trust", "add", signer)
    before = len(standin.requests)
    _ok(claw, "build", *CAMPAIGN, "--case", "alpha")  # (moves the entries in; its head names none of gamma's)
    assert len(standin.requests) == before
    refs = json.loads(_ok(claw, "refs", "--json"))
    assert {name: refs.get(name) for name in kept_by if name.startswith("imports/archive-")} == {
        name: target for name, target in kept_by.items() if name.startswith("imports/archive-")} != {}
    _ok(claw, "gc", "--grace", "0")
    assert claw("fsck")[0] == 0
    claw("build", *CAMPAIGN)
    assert ("vendor/m1", "Slow one?") not in _asked(standin, before)  # what the killed build paid for, not again


def test_two_imports_into_one_new_store_at_once_each_keep_what_their_archive_carries(
        ws: Workspace, claw: Claw, standin: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        killed: Template) -> None:
    """Two `claw archive import`s of different archives into the same new `--store` at once (real processes): each
    builds the store in a staging directory of its own and renames it into place; the one that finds the place taken
    imports again into the store there. Before session 77 the loser imported there without what its import does next
    (the staged store's, deleted): nothing kept what its archive carried beyond its head (`imports/archive-…`), nor
    gave the head a build log, and after a `claw gc --grace 0` the campaign's build there paid again for what the
    killed build had finished (m1's run of gamma). Its configs (`--configs-to`) are written once all the same."""
    archive = _exported(ws, claw, standin, monkeypatch, killed, tmp_path / "campaign.claw")
    elsewhere = standard(tmp_path / "elsewhere")  # (alpha and beta, no gamma: another campaign, main__rp__none)
    other = ("--suite", "main", "--run-profile", "rp")
    assert run_here(elsewhere.root, "build", *other).code == 1  # (m1's run of beta failed again)
    assert run_here(elsewhere.root, "archive", "export", *other, "-o", str(tmp_path / "other.claw")).code == 0
    place = tmp_path / "new" / "store"
    loser = held(tmp_path, "clawstore.store.services.archive_import:_take_place",
                 "archive", "import", str(archive), "--store", str(place), "--configs-to", str(tmp_path / "mine"))
    try:
        won = run_claw(tmp_path, "archive", "import", str(tmp_path / "other.claw"), "--store", str(place))
        assert won.code == 0, won
    finally:
        lost = release(loser)
    assert lost.returncode == 0, lost.stdout + lost.stderr
    assert (tmp_path / "mine" / "configs" / "cases" / "gamma").is_dir()  # (written once, before the place was taken)
    said = [line.split()[5] for line in lost.stdout.splitlines() if line.startswith("kept from gc by ref ")]
    monkeypatch.setenv("CLAW_STORE", str(place))
    refs = json.loads(_ok(claw, "refs", "--json"))
    assert said and said[0] in refs, (lost.stdout, refs)
    builds = _ok(claw, "query", "select campaign_id from builds order by campaign_id", "--format", "json")
    assert [row["campaign_id"] for row in json.loads(builds)] == ["main__rp__ev", "main__rp__none"], builds
    _ok(claw, "gc", "--grace", "0")
    assert claw("fsck")[0] == 0
    before = len(standin.requests)
    claw("build", *CAMPAIGN)  # (this workspace's configs: the archive's)
    assert ("vendor/m1", "Slow one?") not in _asked(standin, before)  # what the killed build paid for, not again
