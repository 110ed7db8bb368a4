"""Both remote backends against real parts: a directory, and moto's S3 server on 127.0.0.1."""

from __future__ import annotations

import os
import secrets
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from clawstore.errors import UsageError
from clawstore.remote import backends, refsign
from clawstore.remote.backends import Backend, RemoteDamage, RemoteRefConflict, open_backend
from tests.support.s3server import make_bucket


@pytest.fixture(params=["dir", "s3"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "dir":
        return open_backend(str(tmp_path / "remote"))
    endpoint = request.getfixturevalue("aws_env")
    bucket = "claw-" + secrets.token_hex(4)
    make_bucket(endpoint, bucket)
    return open_backend(f"s3://{bucket}/team/bench")


def test_files_round_trip_and_list(backend: Backend, tmp_path: Path) -> None:
    source = tmp_path / "blob"
    source.write_bytes(b"x" * 300_000)
    backend.upload(source, "packs/ab.pack")
    assert backend.list("packs/") == {"packs/ab.pack": 300_000}
    assert backend.list("index/") == {}
    target = tmp_path / "back"
    backend.download("packs/ab.pack", target)
    assert target.read_bytes() == source.read_bytes()


@pytest.mark.parametrize("size", [300, 5000])
def test_a_file_either_side_of_one_put_round_trips_and_its_bytes_are_counted_once(
        backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int) -> None:
    """S3: a file up to ONE_PUT_MAX goes in one PutObject (boto3's transfer manager never made), a bigger one by
    upload_file; either way the bytes arrive whole and the progress is told each byte once."""
    monkeypatch.setattr(backends, "ONE_PUT_MAX", 1000)
    if isinstance(backend, backends.S3Backend) and size <= 1000:
        monkeypatch.setattr(backend.client, "upload_file", None)  # (called: a TypeError, the test fails)
    source = tmp_path / "pack"
    source.write_bytes(os.urandom(size))
    moved: list[int] = []
    backend.upload(source, "packs/ab.pack", moved.append)
    assert sum(moved) == size and backend.list("packs/") == {"packs/ab.pack": size}
    backend.download("packs/ab.pack", tmp_path / "back")
    assert (tmp_path / "back").read_bytes() == source.read_bytes()


def test_the_end_of_a_file_is_read_alone(backend: Backend, tmp_path: Path) -> None:
    """A pack's table, at its end, is read without the pack (listings of format 4): one ranged read."""
    source = tmp_path / "pack"
    source.write_bytes(os.urandom(200_000))
    backend.upload(source, "packs/ab.pack")
    assert backend.read_tail("packs/ab.pack", 4900) == source.read_bytes()[-4900:]
    assert backend.read_tail("packs/ab.pack", 0) == b""
    assert backend.read_tail("packs/ab.pack", 300_000) == source.read_bytes()  # (a shorter file: all of it)


def test_a_download_of_a_known_size_keeps_no_more_than_that(backend: Backend, tmp_path: Path) -> None:
    source = tmp_path / "listing"
    source.write_bytes(os.urandom(5000))
    backend.upload(source, "packs/ab.ids")
    target = tmp_path / "back"
    backend.download("packs/ab.ids", target, 5000)  # (S3: one GET instead of a HEAD and a GET)
    assert target.read_bytes() == source.read_bytes()
    # The remote holds more than its listing said (a file that grew since, a server that goes on):
    # refused by name once one byte too many arrived, whatever else follows.
    with pytest.raises(RemoteDamage, match="packs/ab.ids holds more than the 4000 bytes listed"):
        backend.download("packs/ab.ids", target, 4000)
    assert target.stat().st_size == 4001


def test_a_file_of_known_size_comes_in_ranges_at_once_and_no_more_than_that(
        backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A big pack alone on the link (pull.ALONE_BYTES) is asked in `parts` ranges at once (S3: one GET fills ~3/4 of a
    link): the bytes land whole, each counted once; the last range asks to the end, so a file that grew since it was
    listed is refused by name as a whole GET refuses it."""
    source = tmp_path / "pack"
    source.write_bytes(os.urandom(100_000))
    backend.upload(source, "packs/ab.pack")
    ranges: list[str] = []
    if isinstance(backend, backends.S3Backend):
        get = backend.client.get_object

        def ranged(**kwargs: object) -> object:
            ranges.append(str(kwargs.get("Range")))
            return get(**kwargs)

        monkeypatch.setattr(backend.client, "get_object", ranged)
    moved: list[int] = []
    target = tmp_path / "back"
    backend.download("packs/ab.pack", target, 100_000, moved.append, parts=2)
    assert target.read_bytes() == source.read_bytes() and sum(moved) == 100_000
    if isinstance(backend, backends.S3Backend):
        assert sorted(ranges) == ["bytes=0-49999", "bytes=50000-"]
    with pytest.raises(RemoteDamage, match="packs/ab.pack holds more than the 90000 bytes listed"):
        backend.download("packs/ab.pack", target, 90_000, parts=2)


@pytest.mark.parametrize("backend", ["s3"], indirect=True)
def test_a_server_that_ignores_ranges_is_refused_before_a_byte_is_taken(
        backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that ignores ranges answers each ranged GET with the whole file (200, not 206): refused by name for
    what it is, before a byte of it is written or counted (it was refused once half the file and a byte had arrived,
    as a file holding more than listed, which it does not)."""
    assert isinstance(backend, backends.S3Backend)
    source = tmp_path / "pack"
    source.write_bytes(os.urandom(100_000))
    backend.upload(source, "packs/ab.pack")
    get = backend.client.get_object
    monkeypatch.setattr(backend.client, "get_object",
                        lambda **kwargs: get(**{key: value for key, value in kwargs.items() if key != "Range"}))
    moved: list[int] = []
    with pytest.raises(RemoteDamage, match=r"^remote s3://\S+: packs/ab.pack: the server answered bytes=\d+- with "
                                            r"the whole file \(it ignores ranges\)$"):
        backend.download("packs/ab.pack", tmp_path / "back", 100_000, moved.append, parts=2)
    assert moved == []


class _Trickle:
    """A GET's body that waits until `go` is set, then gives 16 KiB a read, slowly, counting what it gave."""

    def __init__(self, body: Any, go: threading.Event):
        self.body, self.go, self.given = body, go, 0

    def read(self, size: int = -1) -> bytes:
        self.go.wait(5)
        time.sleep(0.01)
        chunk = self.body.read(min(size, 16 << 10))
        self.given += len(chunk)
        return bytes(chunk)

    def __enter__(self) -> _Trickle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.body.close()


@pytest.mark.parametrize("backend", ["s3"], indirect=True)
@pytest.mark.parametrize("failing", ["bytes=0-", "bytes=1048576-"])
def test_a_range_that_fails_stops_the_other(backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            failing: str) -> None:
    """A flaky link: one of a pack's ranges fails (the first, in a thread of its own, or the last, in the caller's)
    while the other still arrives: the other is abandoned at its next chunk, not read to its end before the failure
    is told (a stalled half kept the pull waiting that long)."""
    assert isinstance(backend, backends.S3Backend)
    source = tmp_path / "pack"
    source.write_bytes(os.urandom(2 << 20))
    backend.upload(source, "packs/ab.pack")
    get, failed, trickles = backend.client.get_object, threading.Event(), []

    def flaky(**kwargs: Any) -> Any:
        if str(kwargs["Range"]).startswith(failing):
            failed.set()
            raise ConnectionResetError("the link dropped")
        answer = get(**kwargs)
        trickles.append(_Trickle(answer["Body"], failed))
        return {**answer, "Body": trickles[-1]}

    monkeypatch.setattr(backend.client, "get_object", flaky)
    with pytest.raises(backends.RemoteError, match=r"downloading packs/ab.pack failed \(ConnectionResetError\)"):
        backend.download("packs/ab.pack", tmp_path / "back", 2 << 20, parts=2)
    assert len(trickles) == 1 and trickles[0].given < 1 << 20  # (not read to the end of its 1 MiB)


def test_a_ref_statement_that_grew_after_it_was_listed_is_not_read_whole(backend: Backend, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # Someone writing to the share between the pull's listing and its download: the statement listed
    # at 100 bytes holds 3,000 by then (it could hold gigabytes); no more than listed is kept.
    name, value = "campaigns/c", "blake3:" + "a" * 64
    where = refsign.statement_path(name, value)
    grown = tmp_path / "grown"
    grown.write_bytes(b" " * 3000)
    backend.upload(grown, where)
    listed = backend.list
    monkeypatch.setattr(backend, "list",
                        lambda prefix: {k: 100 if k == where else v for k, v in listed(prefix).items()})
    with pytest.raises(RemoteDamage, match=f"{where} holds more than the 100 bytes listed"):
        refsign.signers(backend, {name: value}, tmp_path)


def test_a_file_created_only_if_absent_is_never_replaced(backend: Backend, tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.write_bytes(b"listing signed by one user")
    second.write_bytes(b"listing signed by another")
    assert backend.create(first, "packs/ab.ids") is True
    assert backend.create(second, "packs/ab.ids") is False  # there already: left as it was
    back = tmp_path / "back"
    backend.download("packs/ab.ids", back)
    assert back.read_bytes() == first.read_bytes()
    assert backend.list("packs/") == {"packs/ab.ids": len(first.read_bytes())}


def test_refs_move_only_by_compare_and_swap(backend: Backend) -> None:
    assert backend.read_ref("refs/campaigns/c") is None
    backend.swap_ref("refs/campaigns/c", "blake3:" + "a" * 64, None)
    first = backend.read_ref("refs/campaigns/c")
    assert first is not None and first.value == "blake3:" + "a" * 64
    with pytest.raises(RemoteRefConflict):
        backend.swap_ref("refs/campaigns/c", "blake3:" + "b" * 64, None)  # exists already
    backend.swap_ref("refs/campaigns/c", "blake3:" + "b" * 64, first)
    with pytest.raises(RemoteRefConflict):
        backend.swap_ref("refs/campaigns/c", "blake3:" + "c" * 64, first)  # stale version
    latest = backend.read_ref("refs/campaigns/c")
    assert latest is not None and latest.value == "blake3:" + "b" * 64


def test_two_pushers_racing_on_one_ref_never_both_win(backend: Backend) -> None:
    backend.swap_ref("refs/campaigns/r", "blake3:" + "0" * 64, None)
    seen = backend.read_ref("refs/campaigns/r")
    outcomes: list[str] = []

    def push(value: str) -> None:
        try:
            backend.swap_ref("refs/campaigns/r", value, seen)
            outcomes.append("won")
        except RemoteRefConflict:
            outcomes.append("lost")

    threads = [threading.Thread(target=push, args=("blake3:" + str(i) * 64,)) for i in range(1, 5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["lost", "lost", "lost", "won"]


def test_unknown_scheme_is_one_line() -> None:
    with pytest.raises(UsageError, match="unknown scheme 'ftp'"):
        open_backend("ftp://host/x")


def test_a_ref_too_big_to_be_one_is_refused_unread(backend: Backend, tmp_path: Path) -> None:
    planted = tmp_path / "planted"
    # 64 KiB, 64 times a ref's limit (REF_MAX): before 53e7768e no size was refused, and a ref of gigabytes was read
    # whole (an 8 MiB one here cost S3's multipart upload seconds)
    planted.write_bytes(b"blake3:" + b"a" * (64 << 10))
    backend.upload(planted, "refs/campaigns/big")
    with pytest.raises(RemoteDamage, match="ref refs/campaigns/big is too big to be a ref"):
        backend.read_ref("refs/campaigns/big")


def test_a_directory_remote_is_not_written_through_a_folder_linked_elsewhere(tmp_path: Path) -> None:
    backend = open_backend(str(tmp_path / "remote"))
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "remote").mkdir()
    os.symlink(outside, tmp_path / "remote" / "packs")
    source = tmp_path / "blob"
    source.write_bytes(b"pack bytes")
    with pytest.raises(RemoteDamage, match="packs is not a regular file"):
        backend.upload(source, "packs/ab.pack")
    with pytest.raises(RemoteDamage, match="packs is not a regular file"):
        backend.list("")
    assert list(outside.iterdir()) == []
    backend.upload(source, "top-level")  # a name without a folder is written where it belongs
    assert (tmp_path / "remote" / "top-level").read_bytes() == b"pack bytes"
