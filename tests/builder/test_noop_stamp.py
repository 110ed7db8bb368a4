"""A no-op rebuild answered from the stamp: as fast as stat, and never when anything changed.

Real `claw build` processes on a real workspace and the stand-in provider. To tell which path a build
took, the test marks the stamp's copy of a printed row: the marker shows only when the stamp answered.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clawstore.builder import stamp as stamps
from clawstore.builder.stamp import STAMPS_DIR
from clawstore.cli.build_view import print_built
from clawstore.project.front import Built
from clawstore.store.documents import STAMP_FORMAT
from clawstore.testing.standin import StandIn
from tests.config.workspace_builder import claw
from tests.support.fresh import measured_in_fresh_process
from tests.support.judging import judge_reply
from tests.support.prepared import ok_here
from tests.support.stamps import MARK, answered_by_stamp, mark_stamp, wait_out_racy_window
from tests.support.workspace import SECRET, Workspace, standard, write_yaml

BUILD = ("build", "--suite", "main", "--run-profile", "rp", "--output", "json")


@pytest.fixture(scope="module")
def module_standin() -> Iterator[StandIn]:
    """One stand-in for the module: a run's key holds the provider's URL, so the workspace built once below is
    reused only against this same server."""
    with StandIn() as server:
        yield server


@pytest.fixture
def standin(module_standin: StandIn) -> StandIn:
    """The module's stand-in, as a new one would be: no scripted reply, no request counted."""
    module_standin.reset()
    return module_standin


@pytest.fixture
def provider(standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> StandIn:
    monkeypatch.setenv("OPENROUTER_BASE_URL", standin.base_url)
    monkeypatch.setenv("OPENROUTER_API_KEY", SECRET)
    return standin


@pytest.fixture(scope="module")
def cold_built(module_standin: StandIn, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The standard workspace and its store after a cold build (every test of the module starts from it: a copy, in
    `ws`), without a stamp: a stamp vouches for its workspace by path and stat data, which no copy keeps."""
    root = tmp_path_factory.mktemp("cold-built") / "ws"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg-config")))  # (as own_config_dir's tests)
        patch.setenv("OPENROUTER_BASE_URL", module_standin.base_url)
        patch.setenv("OPENROUTER_API_KEY", SECRET)
        cold = _build(standard(root))
    assert cold["counts"]["executed"] == 4
    # A cold build that took longer than the window (a loaded machine) left a stamp itself: dropped, so that a no-op
    # plans in full as it does on a quick machine, and what the tests compare is the same either way.
    for left in (root / "store" / STAMPS_DIR).glob("*"):
        left.unlink()
    return root


class _AgedCopies:
    """Copies of the cold-built workspace made a test ahead: each test takes the one copied while the test before it
    ran, so most of the stamp's window (RACY_NS, 2 s) has passed when it calls wait_out_racy_window, which sleeps
    only what is left of it (copied by each test itself, every test waited out the whole window: about 20 s of the
    file's 83, session 70)."""

    def __init__(self, source: Path, spares: Path) -> None:
        self.source, self.spares, self.made = source, spares, 0
        self.ahead = self._copy()

    def _copy(self) -> Path:
        self.made += 1
        target = self.spares / str(self.made)
        shutil.copytree(self.source, target, symlinks=True)
        return target

    def take(self, to: Path) -> None:
        self.ahead.rename(to)  # (one file system: every file keeps its times; only `to` itself is new)
        self.ahead = self._copy()


@pytest.fixture(scope="module")
def aged_copies(cold_built: Path, tmp_path_factory: pytest.TempPathFactory) -> _AgedCopies:
    return _AgedCopies(cold_built, tmp_path_factory.mktemp("aged-copies"))


@pytest.fixture
def ws(tmp_path: Path, provider: StandIn, aged_copies: _AgedCopies) -> Workspace:
    """A copy of the cold-built workspace (its files and store, copied a test ahead: within the stamp's window or
    past it, no build left a stamp of them; the tests' first stamp is left after wait_out_racy_window)."""
    aged_copies.take(tmp_path / "ws")
    return Workspace(tmp_path / "ws")


def _build(ws: Workspace, *extra: str) -> dict:
    done = claw(*BUILD, *extra, cwd=ws.root)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _build_here(ws: Workspace, *extra: str) -> dict:
    """`_build` in the test's own process (tests/support/prepared.py), for a build that only prepares what a test is
    about: the same front and the same stamp (the same environment, cwd, flags and code), without a child's start."""
    return json.loads(ok_here(*BUILD, *extra, cwd=ws.root))


def _stamped(ws: Workspace) -> dict:
    """Once the configs are older than the mtime granularity window, a planned no-op of the cold-built workspace,
    which leaves the stamp (built in this process: what a test is about is the build after it); returns the planned
    no-op's result."""
    wait_out_racy_window(ws.root)
    planned = _build_here(ws)
    assert planned["counts"]["executed"] == 0
    return planned



def test_an_unchanged_rebuild_is_answered_from_the_stamp_as_a_planned_noop_would_be(
        ws: Workspace, standin: StandIn) -> None:
    planned = _stamped(ws)
    mark_stamp(ws.root / "store")
    sent = len(standin.requests)
    fast = _build(ws)
    assert answered_by_stamp(fast) and len(standin.requests) == sent
    assert fast["counts"] == planned["counts"] == {"executed": 0, "reused": 4, "failed": 0, "skipped": 0}
    assert [{**r, "status": None} for r in fast["rows"][1:]] == [{**r, "status": None} for r in planned["rows"][1:]]
    assert len(list((ws.root / "store" / "builds").glob("*.json"))) == 3  # a no-op build is still recorded
    written = ws.root / "store" / "builds" / f"{fast['build_id']}.json"
    log = json.loads(written.read_text())
    assert log["state"] == "complete" and log["nodes"] == [] and log["head"] and len(written.read_bytes()) < 4096
    assert ok_here("query", "select count(*) as n from builds", "--format", "csv", cwd=ws.root).split() == ["n", "3"]


@pytest.mark.parametrize("change", ["edit in place, same size, old mtime", "new case", "removed case",
                                    "environment", "store written", "forced"])
def test_any_change_takes_the_full_path(ws: Workspace, standin: StandIn, change: str,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    _stamped(ws)
    mark_stamp(ws.root / "store")
    extra: tuple[str, ...] = ()
    case = ws.configs / "cases" / "alpha" / "test.yaml"
    if change == "edit in place, same size, old mtime":
        before = case.stat()
        text = case.read_text()
        case.write_text(text.replace("2 + 2", "3 + 3"))
        os.utime(case, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert case.stat().st_size == before.st_size and case.stat().st_mtime_ns == before.st_mtime_ns
    elif change == "new case":
        ws.case("gamma", "Name a planet.")
    elif change == "removed case":
        (ws.configs / "cases" / "beta" / "test.yaml").unlink()
        (ws.configs / "cases" / "beta").rmdir()
    elif change == "environment":
        monkeypatch.setenv("CLAW_TEST_UNRELATED_SETTING", "1")  # any variable: the stamp does not guess
    elif change == "store written":
        ws.run_profile("other")
        ok_here("build", "--suite", "main", "--run-profile", "other", cwd=ws.root)
    elif change == "forced":
        extra = ("--force",)
    result = _build(ws, *extra)
    assert not answered_by_stamp(result), change
    expected = {"edit in place, same size, old mtime": 2, "new case": 2, "forced": 4}.get(change, 0)
    assert result["counts"]["executed"] == expected, (change, result["counts"])


def test_no_stamp_for_configs_written_within_the_granularity_window(tmp_path: Path, provider: StandIn) -> None:
    ws = standard(tmp_path / "ws")  # written just now: a change in the same tick could go unseen
    # Still "just now" when the stamp would be written, however long a loaded machine takes to build:
    ahead = time.time_ns() + 60 * 10**9
    os.utime(ws.configs / "cases" / "alpha" / "test.yaml", ns=(ahead, ahead))
    _build(ws)
    assert not list((ws.root / "store" / STAMPS_DIR).glob("*.json"))


def test_a_cold_build_that_makes_the_store_leaves_its_stamp(tmp_path: Path, provider: StandIn) -> None:
    """The store's staging directory (read while the build made it, renamed into place by the end) was taken for a
    file changed while the build ran: a cold build into a new store left no stamp, and the next no-op planned the
    whole campaign (side_by_side 500 4 at session 74's end: no-op CPU 0.22x the reference system's, was 0.03x)."""
    ws = standard(tmp_path / "ws")
    wait_out_racy_window(ws.root)  # (past the granularity window: only the staging directory can stop it)
    assert not (ws.root / "store").exists()
    _build(ws)
    assert list((ws.root / "store" / STAMPS_DIR).glob("*.json"))


def test_a_damaged_stamp_is_ignored_not_printed(ws: Workspace) -> None:
    _stamped(ws)
    stamp = next((ws.root / "store" / STAMPS_DIR).glob("*.json"))
    doc = json.loads(stamp.read_text())
    doc["rows"] = [{"model_id": "m1"}]  # keeps the format and every digest: only the rows are wrong
    stamp.write_text(json.dumps(doc))
    result = _build(ws)
    assert len(result["rows"]) == 4 and result["counts"]["reused"] == 4


@pytest.mark.parametrize("damage", ["missing", "same size", "truncated", "older stamp"])
def test_a_stamp_whose_rows_file_is_missing_or_not_its_own_plans_as_usual(ws: Workspace, damage: str) -> None:
    _stamped(ws)
    mark_stamp(ws.root / "store")
    assert answered_by_stamp(_build(ws))  # (the marked stamp and rows file answer, and are kept)
    stamp = next((ws.root / "store" / STAMPS_DIR).glob("*.json"))
    rows_file = stamp.with_suffix(".rows")
    text = rows_file.read_bytes()
    if damage == "missing":
        rows_file.unlink()
    elif damage == "same size":  # another build's rows (or bit rot): only its digest tells
        rows_file.write_bytes(text.replace(MARK.encode(), MARK.upper().encode()))
    elif damage == "truncated":
        rows_file.write_bytes(text[:-10])
    else:  # a stamp with its rows inside, as claw wrote them before the rows file
        doc = json.loads(stamp.read_text())
        stamp.write_text(json.dumps({**doc, "format": 1, "rows": [json.loads(line) for line in text.splitlines()]}))
    result = _build(ws)
    assert not answered_by_stamp(result)  # planned: the same rows, read from the store
    assert len(result["rows"]) == 4 and result["counts"]["reused"] == 4
    assert json.loads(stamp.read_text())["format"] == STAMP_FORMAT  # the planned build left a new stamp
    mark_stamp(ws.root / "store")
    assert answered_by_stamp(_build(ws))


CAMPAIGN = ("--suite", "main", "--run-profile", "rp")
INSPECT = {"status": ("status", *CAMPAIGN, "--output", "json"), "explain": ("explain", *CAMPAIGN),
           "dry-run": ("build", *CAMPAIGN, "--dry-run")}


def _inspect(ws: Workspace, *extra: str, only: tuple[str, ...] = tuple(INSPECT), here: bool = False) -> dict[str, str]:
    """Each of INSPECT's commands' stdout: real `claw` processes (`here`: in this process, for the full plan's answer
    a test compares the stamp's with)."""
    found = {}
    for name, args in INSPECT.items():
        if name not in only:
            continue
        if here:
            found[name] = ok_here(*args, *extra, cwd=ws.root)
            continue
        done = claw(*args, *extra, cwd=ws.root)
        assert done.returncode == 0, done.stderr
        found[name] = done.stdout
    return found


def test_status_explain_and_dry_run_of_an_unchanged_campaign_are_answered_from_the_stamp(
        ws: Workspace, standin: StandIn) -> None:
    planned = _inspect(ws, here=True)  # no stamp yet (the configs are too new): every node planned
    assert planned["explain"] == "everything is fresh (main__rp__none)\n"
    assert planned["dry-run"] == "0 node(s) would execute (nothing), 4 fresh (main__rp__none)\n"
    wait_out_racy_window(ws.root)
    _build_here(ws)  # leaves the stamp
    mark_stamp(ws.root / "store")
    sent, builds = len(standin.requests), len(list((ws.root / "store" / "builds").glob("*.json")))
    fast = _inspect(ws)
    status = json.loads(fast["status"])
    assert status["models"].pop(MARK)["fresh"] == 1  # the stamp's marked layer: it answered
    assert status == json.loads(planned["status"])
    assert fast["dry-run"] == "0 node(s) would execute (nothing), 5 fresh (main__rp__none)\n"  # 4 + the mark
    assert fast["explain"] == planned["explain"]
    assert len(standin.requests) == sent  # nothing sent, nothing written
    assert len(list((ws.root / "store" / "builds").glob("*.json"))) == builds


def test_files_written_beside_the_configs_keep_the_stamp(ws: Workspace) -> None:
    """`claw report` writes its chart under outputs/ and `claw view --out` a page into the workspace
    root: no build reads either, so the stamp still answers (it did not: the root's own mtime was
    recorded, as the parent of configs/)."""
    _stamped(ws)
    mark_stamp(ws.root / "store")
    (ws.root / "outputs" / "charts").mkdir(parents=True)
    (ws.root / "view.html").write_text("<html></html>\n")
    assert MARK in json.loads(_inspect(ws, only=("status",))["status"])["models"]
    assert answered_by_stamp(_build(ws))


def test_status_explain_and_dry_run_plan_in_full_when_the_stamp_cannot_answer(ws: Workspace) -> None:
    _stamped(ws)
    mark_stamp(ws.root / "store")
    stamp = next((ws.root / "store" / STAMPS_DIR).glob("*.json"))
    marked = stamp.read_text()
    fresh = "everything is fresh (main__rp__none)\n"

    def answered_by_stamp() -> bool:  # (a check between the claims: in this process)
        return MARK in json.loads(ok_here(*INSPECT["status"], cwd=ws.root))["models"]

    def planned(*extra: str, stale: int, explain: str, dry_run: str) -> None:
        found = _inspect(ws, *extra)
        status = json.loads(found["status"])
        assert MARK not in status["models"]  # not answered from the marked stamp
        assert sum(model["stale"] for model in status["models"].values()) == stale
        assert found["explain"].endswith(explain)
        assert found["dry-run"].endswith(f"{dry_run} (main__rp__none)\n")

    planned("--model", "m1", stale=0, explain=fresh, dry_run="0 node(s) would execute (nothing), 2 fresh")
    assert answered_by_stamp()  # (the stamp still holds: what made the difference was the filter)
    doc = json.loads(marked)
    doc["layers"] = [["m1", {"run": "many"}]]  # damaged, or written by a claw that kept none
    stamp.write_text(json.dumps(doc))
    planned(stale=0, explain=fresh, dry_run="0 node(s) would execute (nothing), 4 fresh")
    stamp.write_text(marked)
    assert answered_by_stamp()
    case = ws.configs / "cases" / "alpha" / "test.yaml"
    case.write_text(case.read_text().replace("2 + 2", "3 + 3"))
    planned(stale=2, explain="  input.messages[1].content 'What is 2 + 2?' -> 'What is 3 + 3?'\n",
            dry_run="2 node(s) would execute (2 runs), 2 fresh")


def test_plan_of_an_unchanged_campaign_is_answered_from_the_stamp_as_the_full_plan_would_be(
        ws: Workspace, standin: StandIn) -> None:
    """Two judges (one judged twice per run, one priced by batch): the stamp's answer (nothing to send,
    every node reused) is byte for byte the planned one, in every output; the stamp's layers doubled show
    it answered."""
    write_yaml(ws.configs / "evaluation_profiles" / "ev.yaml", {
        "schema_version": 1, "evaluation_profile_id": "ev", "title": "Eval",
        "judge_system_prompt": "You are a strict judge. Answer in JSON.",
        "judges": [{"judge_id": "j1", "type": "llm_probe", "model": "judge/j1", "retries": 0},
                   {"judge_id": "j2", "type": "llm_probe", "model": "judge/j2", "retries": 0, "batch": True,
                    "pricing": {"input": 1.0, "output": 2.0, "batch": 0.5}}],
        "judge_runs": [{"judge_run_id": "twice", "judge_id": "j1", "repetitions": 2},
                       {"judge_run_id": "once", "judge_id": "j2", "repetitions": 1}]})
    for judge in ("judge/j1", "judge/j2"):
        standin.script(judge, judge_reply(7))
    campaign = (*CAMPAIGN, "--evaluation-profile", "ev")
    ok_here("build", *campaign, cwd=ws.root)  # (both builds in this process: the plans are what the test is about)
    wait_out_racy_window(ws.root)
    ok_here("build", *campaign, cwd=ws.root)  # leaves the stamp
    outputs = {"text": (), "json": ("--output", "json"), "batch": ("--batch", "--output", "json"),
               "concurrency": ("--max-concurrency", "7")}

    def plans(*only: str, here: bool = False) -> dict[str, str]:
        found = {}
        for name, extra in outputs.items():
            if only and name not in only:
                continue
            if here:  # (the full plan the stamp's answer is compared with: in this process)
                found[name] = ok_here("plan", *campaign, *extra, cwd=ws.root)
                continue
            done = claw("plan", *campaign, *extra, cwd=ws.root)
            assert done.returncode == 0, done.stderr
            found[name] = done.stdout
        return found

    stamp = next((ws.root / "store" / STAMPS_DIR).glob("*.json"))
    kept = stamp.read_text()
    doc = json.loads(kept)
    doc["layers"] = [[model, {kind: 2 * n for kind, n in kinds.items()}] for model, kinds in doc["layers"]]
    stamp.write_text(json.dumps(doc))
    doubled = json.loads(plans("json")["json"])
    stamp.write_text(kept)
    sent = len(standin.requests)
    fast = plans()
    stamp.unlink()
    planned = plans(here=True)
    assert fast == planned and len(standin.requests) == sent
    out = json.loads(planned["json"])
    assert [(line["name"], line["reused"], line["requests"]) for line in out["lines"]] == [
        ("m1", 2, 0), ("m2", 2, 0), ("j1", 8, 0), ("j2", 4, 0)]
    assert json.loads(planned["batch"])["lines"][3]["batch_factor"] == 0.5
    assert [line["reused"] for line in doubled["lines"]] == [4, 4, 16, 8]  # answered from the (doubled) stamp
    assert doubled["layers"]["judge"] == {"execute": 0, "reuse": 24, "unplanned": 0}


def test_the_recorder_skips_store_files_but_not_a_path_that_only_starts_in_the_store() -> None:
    from clawstore.builder.stamp import Recorder

    recorder = Recorder("/w", "/w/store")
    for raw in ("/w/store/index/a.seg", "/w/store", b"/w/store/packs/p", "/elsewhere/x", 3):
        recorder.add(raw)
    recorder.add("/w/store/../cases/a/test.yaml")  # read from the workspace, by a path through the store
    recorder.add("/w/store/./../suites/s.yaml")
    recorder.add("/w/cases/b/test.yaml")
    assert recorder.paths == {"/w/cases/a/test.yaml", "/w/suites/s.yaml", "/w/cases/b/test.yaml"}


def _printed_rows(count: int) -> Iterator[dict[str, Any]]:
    for n in range(count):
        yield {"model_id": f"m{n % 5}", "case_id": f"case_{n:06d}", "repetition": 0, "run": "exec", "status": "success",
               "latency_s": 0.25, "cost_usd": "0.000017", "cost_source": "reported", "eval": "exec", "score": 1.0,
               "detail": "x" * 1500}  # (about the 1.7 KB a run of a real campaign's stamp holds)


def noop_peak_alone(store_root: str, stamp_file: str, rows: str) -> int:
    """Peak Python allocations of a no-op answered from a stamp of `rows` rows: the stamp matched, its rows file checked
    and printed (JSON and table) to /dev/null. Called in a new interpreter (measured_in_fresh_process): in a test
    worker, what earlier tests left (their threads, their garbage's finalizers) would be counted too."""
    root, stamp_path, count = Path(store_root), Path(stamp_file), int(rows)
    doc = json.loads(stamp_path.read_text())
    recorder = stamps.Recorder(str(root.parent), str(root))
    assert stamps.write(root, stamp_path.stem, recorder, doc["campaign"], _printed_rows(count), {"run": count},
                       doc["layers"])
    with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
        tracemalloc.start()
        try:
            found = stamps.match(root, stamp_path.stem)
            assert found is not None and stamps.layers_of(found) is not None
            printed = stamps.rows_of(root, stamp_path.stem, found)
            assert printed is not None
            for output in ("json", "text"):
                print_built(Built(found.campaign_id, "b", printed, found.counts, {}), output)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert sum(1 for _ in printed) == count
    printed.file.close()
    return peak


def test_a_noop_from_a_stamp_holds_a_bounded_window_of_its_rows_not_all_of_them(ws: Workspace) -> None:
    _stamped(ws)
    store_root = ws.root / "store"
    stamp_file = next((store_root / STAMPS_DIR).glob("*.json"))
    small = int(measured_in_fresh_process(noop_peak_alone, store_root, stamp_file, 2_000))
    # ~16 MB of rows: held whole (every rows block), they peaked 1.7 KB a row above 2,000's (39.1 vs 8.6 MB at 20,000
    # rows, commit 80f99815's check): ~14 MB more here, past both bounds (20,000 rows until session 70).
    large = int(measured_in_fresh_process(noop_peak_alone, store_root, stamp_file, 10_000))
    assert stamp_file.with_suffix(".rows").stat().st_size > 15 * 2**20
    assert large < small + 2**20, (small, large)  # (the rows held whole: ~50 MB as Python objects)
    assert large < 16 * 2**20, large  # a thousand rows at a time, as the table's and the JSON's writes take them


def test_a_hook_module_found_outside_the_workspace_is_not_vouched_for_by_a_stamp(
        ws: Workspace, standin: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A check's `import_path` hook may be found on the search path outside the workspace (the stamp sees only
    what the build reads inside it): its module's content is in the check's key, so editing it must re-run the
    check, never be answered from a stamp as all fresh."""
    from tests.support.judging import JUDGE, eval_profile, judge_reply

    site = tmp_path / "site"
    (site / "outsidehooks").mkdir(parents=True)
    (site / "outsidehooks" / "__init__.py").write_text("")
    module = site / "outsidehooks" / "checks.py"
    module.write_text("def check(artifact):\n    return True\n")
    monkeypatch.setenv("PYTHONPATH", str(site))
    ws.edit("cases/alpha/test.yaml", lambda d: d.update(deterministic_checks=[
        {"check_id": "hook", "python_hook": {"import_path": "outsidehooks.checks", "callable_name": "check"}}]))
    eval_profile(ws, repetitions=1, security_policy={"allow_local_python_hooks": True})
    standin.script(JUDGE, judge_reply(5))
    judged = ("--evaluation-profile", "ev")
    cold = _build(ws, *judged)
    assert cold["counts"]["failed"] == 0, cold["counts"]
    wait_out_racy_window(ws.root)
    assert _build(ws, *judged)["counts"]["executed"] == 0  # planned: everything fresh
    module.write_text("def check(artifact):\n    return False  # edited outside the workspace\n")
    after = _build(ws, *judged)
    assert after["counts"]["executed"] > 0, after["counts"]  # alpha's checks (and what they feed) ran again
