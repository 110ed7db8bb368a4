"""A saved remote pushed to by its name, then by its directory (or URL and endpoint) spelled out: one place, one
tracking ref. Before session 77 a remote given by URL was tracked under `remotes/url-<hash>/` even when claw.yaml
names it, apart from `remotes/<name>/`: the push by the other spelling found a head it had never seen and stopped
with "changed by another push" (docs/remote.md, step 1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawstore.remote.config import resolve_remote
from clawstore.remote.sync import where
from clawstore.store.store import Store
from clawstore.testing.standin import StandIn
from tests.support.prepared import run_here
from tests.support.workspace import standard

CAMPAIGN = ("--suite", "main", "--run-profile", "rp")


@pytest.mark.parametrize("remote_url", ["dir", "s3"], indirect=True)
def test_a_push_by_name_then_by_url_is_one_remote(tmp_path: Path, provider: StandIn, remote_url: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAW_STORE", str(tmp_path / "store"))
    ws = standard(tmp_path / "ws")
    assert run_here(ws.root, "remote", "add", "team", remote_url).code == 0
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0
    first = run_here(ws.root, "push", "team", "--progress", "none")
    assert first.code == 0 and "1 ref(s) moved" in first.stdout, first
    ws.case("alpha", "What is 3 + 3?")  # an edit: a new head to push
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0
    spelled = (f"file://{remote_url}" if remote_url.startswith("/") else remote_url)
    second = run_here(ws.root, "push", spelled, "--progress", "none")
    assert second.code == 0 and "1 ref(s) moved" in second.stdout, second
    ws.case("alpha", "What is 4 + 4?")
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0
    third = run_here(ws.root, "push", "team", "--progress", "none")
    assert third.code == 0 and "1 ref(s) moved" in third.stdout, third
    refs = run_here(ws.root, "refs")
    assert "remotes/url-" not in refs.stdout, refs.stdout


def _push(ws_root: Path, name: str) -> None:
    pushed = run_here(ws_root, "push", name, "--progress", "none")
    assert pushed.code == 0 and "1 ref(s) moved" in pushed.stdout, (name, pushed)


def test_two_saved_names_for_one_place_share_its_tracking_refs(tmp_path: Path, provider: StandIn,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """`team` and `backup` in claw.yaml for one directory: before session 77 each kept remotes/<name>/ of its own,
    so pushing by each in turn stopped with "changed by another push" (exit 1)."""
    monkeypatch.setenv("CLAW_STORE", str(tmp_path / "store"))
    ws, share = standard(tmp_path / "ws"), str(tmp_path / "share")
    assert run_here(ws.root, "remote", "add", "team", share).code == 0
    added = run_here(ws.root, "remote", "add", "backup", "file://" + share)
    assert added.code == 0 and "the same place as remote team" in added.stdout, added
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0
    _push(ws.root, "team")
    for step, name in enumerate(("backup", "team", "backup"), start=3):
        ws.case("alpha", f"What is {step} + {step}?")  # a new head to push
        assert run_here(ws.root, "build", *CAMPAIGN).code == 0
        _push(ws.root, name)
    assert "remotes/backup/" not in run_here(ws.root, "refs").stdout


def test_tracking_refs_an_earlier_claw_kept_under_the_second_name_still_count(
        tmp_path: Path, provider: StandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store whose last push was by `backup` (its tracking ref under remotes/backup/, as claw before session 77 kept
    it; remotes/team/ an older head): the next push by either name is no conflict."""
    monkeypatch.setenv("CLAW_STORE", str(tmp_path / "store"))
    ws, share = standard(tmp_path / "ws"), str(tmp_path / "share")
    assert run_here(ws.root, "remote", "add", "team", share).code == 0
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0
    _push(ws.root, "team")
    older = Store(tmp_path / "store", create=False).list_refs("remotes/team/")
    ws.case("alpha", "What is 3 + 3?")
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0
    _push(ws.root, "team")
    store = Store(tmp_path / "store", create=False)
    for name, value in store.list_refs("remotes/team/").items():  # the last push as an earlier claw by backup kept it
        store.set_ref("remotes/backup/" + name.removeprefix("remotes/team/"), value)
        store.set_ref(name, older[name])
    cache = store.layout.remotes  # (and the value its last swap set out to put, noted in that name's cache)
    (cache / "backup").mkdir()
    (cache / "team" / "swapping").rename(cache / "backup" / "swapping")
    (ws.root / "claw.yaml").write_text(f"remotes:\n  team: {{url: {share}}}\n  backup: {{url: {share}}}\n")
    ws.case("alpha", "What is 4 + 4?")
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0
    _push(ws.root, "backup")


def test_every_name_and_spelling_of_a_place_is_one_remote_to_its_cache_notes(tmp_path: Path) -> None:
    """The notes in a remote's cache folder (a push's `swapping`: the value its swap set out to put, which spares the
    next push a false conflict after a kill) name the place by its URL: `team` saved as /x and `backup` as file:///x
    (or /x given to push) must resolve to one name and one URL, or a note one wrote the other ignored."""
    share = tmp_path / "share"
    (tmp_path / "claw.yaml").write_text(f"remotes:\n  team: {{url: {share}}}\n  backup: {{url: 'file://{share}'}}\n")
    found = {spelled: resolve_remote(tmp_path, spelled) for spelled in ("team", "backup", f"file://{share}")}
    assert {(remote.name, where(remote)) for remote in found.values()} == {("team", f"url {share} -")}, found
