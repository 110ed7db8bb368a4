"""A full pull starts its biggest pack's download as soon as that pack's own listing is read and checked, while the
other listings are read (remote/pull.py `_Pull._start_biggest`): never for a pack whose listing an untrusted key
signed or whose size differs from its listing's, and a pull refused meanwhile waits for that download and leaves
nothing."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from clawstore.errors import UsageError
from clawstore.remote import pull
from clawstore.remote.backends import DirectoryBackend, Moved
from clawstore.remote.config import Remote
from clawstore.store import Store
from clawstore.store.services.fsck import fsck
from tests.remote.test_packs import _pushed_in_packs


def _pushed(tmp_path: Path, counts: tuple[int, ...]) -> tuple[Store, Remote, Path]:
    """A store with a sealed pack of each count of objects, pushed to a directory remote; its biggest pack's path."""
    source, remote = _pushed_in_packs(tmp_path, counts)
    biggest = max((tmp_path / "remote" / "packs").glob("*.pack"), key=lambda path: path.stat().st_size)
    return source, remote, biggest


def _spied(monkeypatch: pytest.MonkeyPatch, biggest: Path, wait: bool = True) -> list[str]:
    """The names the pull downloads, in the order they start. The other listings wait (if `wait`; 5 s at most) for
    the biggest pack's download to start."""
    started: list[str] = []
    big_started = threading.Event()
    real = DirectoryBackend.download

    def spy(self: DirectoryBackend, name: str, target: Path, size: int | None = None, moved: Moved = None,
            parts: int = 1) -> None:
        if name == f"packs/{biggest.name}":
            started.append(name)
            big_started.set()
        elif wait and name.endswith(".ids") and name != f"packs/{biggest.stem}.ids":
            big_started.wait(5)
            started.append(name)
        else:
            started.append(name)
        real(self, name, target, size, moved)

    monkeypatch.setattr(DirectoryBackend, "download", spy)
    return started


def test_the_biggest_pack_downloads_while_the_other_listings_are_read(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    source, remote, biggest = _pushed(tmp_path, (5, 40, 1, 12))
    started = _spied(monkeypatch, biggest)
    target = Store(tmp_path / "b")
    assert pull.pull(target, remote).packs == 4
    others = [name for name in started if name.endswith(".ids") and biggest.stem not in name]
    assert started.index(f"packs/{biggest.stem}.ids") < started.index(f"packs/{biggest.name}")
    assert others and started.index(f"packs/{biggest.name}") < min(map(started.index, others))
    assert started.count(f"packs/{biggest.name}") == 1  # (taken over by the fetch, not downloaded again)
    assert set(target.iter_objects()) == set(source.iter_objects())
    assert dict(target.iter_actions()) == dict(source.iter_actions())
    assert not list((target.root / "tmp").iterdir())


def test_a_pack_an_untrusted_key_signed_is_not_downloaded_early(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    _, remote, biggest = _pushed(tmp_path, (5, 40))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "another-user"))  # a puller who trusts nobody here
    started = _spied(monkeypatch, biggest, wait=False)
    target = Store(tmp_path / "b")
    with pytest.raises(UsageError, match="a key you do not trust"):
        pull.pull(target, remote)
    assert not [name for name in started if name.endswith(".pack")]
    assert list(target.iter_objects()) == []


def test_a_pull_refused_while_the_early_download_runs_stops_it_and_leaves_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A listing read after the biggest pack's download started is refused: the pull stops that download (a slow
    link: it moves on until told to stop) and waits for it before it reports, leaving no file and no thread."""
    _, remote, biggest = _pushed(tmp_path, (5, 40, 12))
    other = next(path for path in (tmp_path / "remote" / "packs").glob("*.ids") if path.stem != biggest.stem)
    other.write_bytes(b"not a listing")
    ended: list[float] = []
    real = DirectoryBackend.download

    def slow(self: DirectoryBackend, name: str, target: Path, size: int | None = None, moved: Moved = None,
            parts: int = 1) -> None:
        if name != f"packs/{biggest.name}":
            return real(self, name, target, size, moved)
        try:
            for _ in range(1000):  # (5 s at most)
                assert moved is not None
                moved(0)  # (TransferStopped once the pull stops it)
                threading.Event().wait(0.005)
        finally:
            ended.append(time.monotonic())

    monkeypatch.setattr(DirectoryBackend, "download", slow)
    target = Store(tmp_path / "b")
    threads = threading.active_count()
    with pytest.raises(UsageError, match=f"listing of pack {other.stem}"):
        pull.pull(target, remote)
    returned = time.monotonic()
    assert ended and ended[0] <= returned  # (stopped, and waited for)
    assert threading.active_count() == threads
    assert list(target.iter_objects()) == [] and dict(target.iter_actions()) == {}
    assert not list((target.root / "tmp").iterdir())
    assert fsck(target).clean
