"""The interim pushes of a `build --remote`: after the first, each sends what was committed since the
last one, in one pack, without listing the remote or reading the store's whole index again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from clawstore.remote import pull, push
from clawstore.remote.backends import Backend
from clawstore.remote.config import Remote
from clawstore.store import Store


def _fill(store: Store, start: int, count: int) -> None:
    with store.batch():
        for i in range(start, start + count):
            output = store.put_json({"answer": i})
            key = store.put_json({"input": i})
            store.put_action(key, {"kind": "run", "key": key, "status": "success", "outputs": {"answer": output}})


class _Counting:
    """A backend that counts the calls made to it (and passes them on)."""

    def __init__(self, inner: Backend, calls: list[str]):
        self._inner, self._calls = inner, calls

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._inner, name)
        if callable(attribute):
            def counted(*args: Any, **kwargs: Any) -> Any:
                self._calls.append(name)
                return attribute(*args, **kwargs)
            return counted
        return attribute


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    made: list[str] = []
    for module in (push, pull):
        monkeypatch.setattr(module, "open_backend", lambda *a, opened=module.open_backend: _Counting(opened(*a), made))
    return made


def test_each_interim_push_sends_only_what_was_committed_since_in_one_pack(
        tmp_path: Path, remote_url: str, calls: list[str]) -> None:
    source = Store(tmp_path / "a")
    _fill(source, 0, 30)
    remote = Remote("team", remote_url)
    known = push.RemoteKnowledge()
    first = push.push(source, remote, move_refs=False, knowledge=known)
    assert first.objects == 90 and "list" in calls
    assert len(known.objects) == 90 + 1 and len(known.actions) == 30  # (and the entries' document)

    _fill(source, 30, 5)  # a build commits two windows between pushes
    _fill(source, 35, 5)
    calls.clear()
    second = push.push_new(source, remote, known)
    assert (second.packs, second.objects) == (1, 30)  # the new objects, the entries' document beside them
    assert "list" not in calls and calls.count("upload") == 1 and calls.count("create") == 1
    assert len(known.actions) == 40

    calls.clear()
    assert push.push_new(source, remote, known).packs == 0  # nothing new: nothing sent, one look at nothing
    assert calls == []

    target = Store(tmp_path / "b")
    pulled = pull.pull(target, remote)
    assert set(target.iter_objects()) >= set(source.iter_objects())
    assert dict(target.iter_actions()) == dict(source.iter_actions())
    assert pulled.objects == 120


def test_an_interim_push_after_an_entry_changed_sends_the_new_record(tmp_path: Path) -> None:
    # A run that failed and was run again within one build points its key at a new record.
    source = Store(tmp_path / "a")
    key = source.put_json({"input": "retried"})
    source.put_action(key, {"kind": "run", "key": key, "status": "timed_out", "cacheable": False, "outputs": {}})
    remote = Remote("team", str(tmp_path / "remote"))
    known = push.RemoteKnowledge()
    push.push(source, remote, move_refs=False, knowledge=known)
    answer = source.put_json({"answer": "fine"})
    record = source.put_action(key, {"kind": "run", "key": key, "status": "success", "cacheable": True,
                                     "outputs": {"a": answer}})
    assert push.push_new(source, remote, known).objects == 2
    target = Store(tmp_path / "b")
    pull.pull(target, remote)
    assert target.get_json(target.get_action_record_id(key))["status"] == "success"  # type: ignore[arg-type]
    assert dict(target.iter_actions())[key] == record


def test_a_failed_interim_push_is_sent_again_by_the_next(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = Store(tmp_path / "a")
    _fill(source, 0, 3)
    remote = Remote("team", str(tmp_path / "remote"))
    known = push.RemoteKnowledge()
    push.push(source, remote, move_refs=False, knowledge=known)
    _fill(source, 3, 4)

    def broken(*args: Any) -> tuple[str, int]:
        raise OSError("the network went away")

    with monkeypatch.context() as patched:
        patched.setattr(push, "_upload", broken)
        with pytest.raises(OSError):
            push.push_new(source, remote, known)
    assert len(known.actions) == 3  # not counted as sent
    assert push.push_new(source, remote, known).objects == 12
    target = Store(tmp_path / "b")
    pull.pull(target, remote)
    assert dict(target.iter_actions()) == dict(source.iter_actions())



def test_a_remote_out_of_reach_is_said_once_and_again_when_it_works(tmp_path: Path) -> None:
    from clawstore.remote.live import InterimPushes

    source = Store(tmp_path / "a")
    _fill(source, 0, 2)
    blocked = tmp_path / "share"
    blocked.write_text("not a directory: the share is not mounted")
    said: list[str] = []
    pushes = InterimPushes(source, Remote("team", str(blocked / "remote")), said.append)
    for i in range(5):  # five intervals with the remote out of reach, the build committing meanwhile
        _fill(source, 100 + i, 1)
        pushes.push()
    assert len(said) == 1 and "interim push to team failed" in said[0]
    blocked.unlink()
    blocked.mkdir()
    pushes.push()
    assert said[1:] == ["claw: interim push to team works again"]
    _fill(source, 2, 3)
    pushes.push()  # (the first push that worked was a full one: this one sends only what is new)
    assert len(said) == 2
    target = Store(tmp_path / "b")
    pull.pull(target, Remote("team", str(blocked / "remote")))
    assert dict(target.iter_actions()) == dict(source.iter_actions())
