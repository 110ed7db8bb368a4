"""Two records for one key meet in a pull or an archive import (a run that failed on one machine and
succeeded on another, or failed then succeeded within one long build): the reusable one is kept,
wherever each came from, so a colleague's result is never paid for twice and a failure elsewhere never
replaces a result here."""

from __future__ import annotations

from pathlib import Path

from clawstore.remote import pull, push
from clawstore.remote.config import Remote
from clawstore.store import Store
from clawstore.store.services.archive import write_archive
from clawstore.store.services.archive_import import import_archive


def _failed(store: Store, key: str, status: str = "provider_error") -> str:
    return store.put_action(key, {"kind": "run", "key": key, "status": status, "cacheable": False, "outputs": {}})


def _succeeded(store: Store, key: str) -> str:
    answer = store.put_json({"answer": "fine"})
    return store.put_action(key, {"kind": "run", "key": key, "status": "success", "cacheable": True,
                                  "outputs": {"a": answer}})


def test_a_pull_takes_a_colleagues_result_for_a_run_that_failed_here(tmp_path: Path) -> None:
    remote = Remote("team", str(tmp_path / "remote"))
    a, b = Store(tmp_path / "a"), Store(tmp_path / "b")
    key = a.put_json({"input": "flaky"})
    assert b.put_json({"input": "flaky"}) == key
    _failed(a, key)
    good = _succeeded(b, key)
    push.push(b, remote)
    pull.pull(a, remote)
    assert a.get_action_record_id(key) == good  # A's next build reuses it instead of paying again

    # The other way round: a result here is kept, a failure elsewhere never replaces it.
    c = Store(tmp_path / "c")
    assert c.put_json({"input": "flaky"}) == key
    _failed(c, key, "timed_out")
    other = Remote("other", str(tmp_path / "other"))
    push.push(c, other)
    pull.pull(b, other)
    assert b.get_action_record_id(key) == good


def test_of_two_listings_for_one_key_the_pull_keeps_the_result(tmp_path: Path) -> None:
    # One machine pushed the failure, then (after its next build ran the key again) the result: both
    # listings stay on the remote, and the pull must not take whichever it happens to read first.
    for trial in range(4):  # listings are read in the order of their names: content decides which first
        source = Store(tmp_path / f"a{trial}")
        key = source.put_json({"input": "flaky", "trial": trial})
        remote = Remote("team", str(tmp_path / f"remote{trial}"))
        _failed(source, key)
        push.push(source, remote)
        good = _succeeded(source, key)
        push.push(source, remote)
        assert len(list((tmp_path / f"remote{trial}" / "packs").glob("*.ids"))) >= 2
        target = Store(tmp_path / f"b{trial}")
        pull.pull(target, remote)
        assert target.get_action_record_id(key) == good, trial


def test_an_archive_import_takes_a_result_for_a_run_that_failed_here(tmp_path: Path) -> None:
    a, b = Store(tmp_path / "a"), Store(tmp_path / "b")
    key = a.put_json({"input": "flaky"})
    assert b.put_json({"input": "flaky"}) == key
    _failed(a, key)
    good = _succeeded(b, key)
    archive = tmp_path / "b.claw"
    write_archive(b, archive, {"actions": {key: good}}, list(b.iter_objects()))
    report = import_archive(a, archive)
    assert a.get_action_record_id(key) == good and report.actions_written == 1

    c = Store(tmp_path / "c")  # and a failure in an archive never replaces a result
    assert c.put_json({"input": "flaky"}) == key
    failed = _failed(c, key, "timed_out")
    write_archive(c, tmp_path / "c.claw", {"actions": {key: failed}}, list(c.iter_objects()))
    assert import_archive(a, tmp_path / "c.claw").actions_kept == 1
    assert a.get_action_record_id(key) == good
