"""An S3 server whose answers break off: a proxy in front of the loopback S3 server (real HTTP, real boto3 in a real
`claw pull`) sends half of each pack's body, with the whole body's Content-Length, and closes the connection. The
error botocore raised for it carries `response = None`, and naming it raised AttributeError: the pull ended in a
traceback (exit 1). It is one line naming the remote and the pack now (exit 3), and nothing of it lands.

Or it stalls: half the body, then nothing, the connection left open. botocore waited 60 s for each read (its default
`read_timeout`); claw's S3 client waits `$CLAW_S3_READ_TIMEOUT` (20 s by default), then the pull fails in one line."""

from __future__ import annotations

import secrets
import time
from pathlib import Path

import pytest

from clawstore.remote.backends import RemoteError, S3Backend
from clawstore.store import Store
from clawstore.testing.standin import StandIn
from tests.config.workspace_builder import claw
from tests.support.claw import Claw
from tests.support.s3proxy import Call, S3Proxy
from tests.support.s3server import make_bucket
from tests.support.workspace import standard


class HostileS3(S3Proxy):
    """A proxy in front of the S3 server that misbehaves on the packs' GETs as `mode` says: "truncate" (half the
    body, then the connection closed), "stall" (half the body, then nothing until the proxy closes), "mute" (not even
    the headers); anything else is forwarded as it is."""

    def __init__(self, target: str, mode: str):
        self.mode, self.hits = mode, 0
        self.asked: dict[str, int] = {}  # the packs' GETs, by path
        super().__init__(target)

    def answer(self, call: Call) -> None:
        hostile = call.command == "GET" and ".pack" in call.path
        if hostile:
            self.asked[call.path] = self.asked.get(call.path, 0) + 1
        if hostile and self.mode == "mute":
            self.hits += 1
            call.hold()
            return
        reply = call.forward()
        if hostile:
            self.hits += 1
        if hostile and self.mode in ("truncate", "stall") and len(reply.content) > 2:
            call.reply(reply, part=len(reply.content) // 2)
            if self.mode == "stall":
                call.hold()
            call.cut()
            return
        call.reply(reply)


def test_a_pack_whose_body_ends_early_fails_the_pull_in_one_line_and_lands_nothing(
        provider: StandIn, aws_env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bucket = "team-" + secrets.token_hex(4)
    make_bucket(aws_env, bucket)
    a = standard(tmp_path / "a")
    assert claw("build", "--suite", "main", "--run-profile", "rp", cwd=a.root).returncode == 0
    assert claw("push", f"s3://{bucket}/bench", cwd=a.root).returncode == 0
    hostile = HostileS3(aws_env, "truncate")
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL", hostile.url)
        b = standard(tmp_path / "b")
        done = claw("pull", f"s3://{bucket}/bench", cwd=b.root)
    finally:
        hostile.close()
    assert hostile.hits >= 1
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 3 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert lines[0].startswith(f"claw: error: remote s3://{bucket}/bench: downloading packs/"), lines
    assert not (b.root / "store").exists() or claw("fsck", cwd=b.root).returncode == 0


@pytest.mark.timeout(60)  # (botocore's own read timeout, 60 s, fails it)
def test_a_pack_whose_body_stalls_fails_the_pull_in_bounded_time_and_a_retry_completes(
        provider: StandIn, aws_env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Half a pack's body, then silence: the download fails after one read timeout (a body is not sent again), the
    pull in one line (exit 3), nothing of it landed; once the server answers again the same pull completes."""
    bucket = "team-" + secrets.token_hex(4)
    make_bucket(aws_env, bucket)
    a = standard(tmp_path / "a")
    monkeypatch.chdir(a.root)
    monkeypatch.setenv("CLAW_STORE", str(a.root / "store"))
    assert Claw(a.root).build()[0] == 0
    assert Claw(a.root)("push", f"s3://{bucket}/bench")[0] == 0
    hostile = HostileS3(aws_env, "stall")
    try:
        b = standard(tmp_path / "b")
        monkeypatch.chdir(b.root)
        monkeypatch.setenv("CLAW_STORE", str(b.root / "store"))
        monkeypatch.setenv("AWS_ENDPOINT_URL", hostile.url)
        monkeypatch.setenv("CLAW_S3_READ_TIMEOUT", "0.5")
        pull = Claw(b.root)
        started = time.monotonic()
        code, _, err = pull("pull", f"s3://{bucket}/bench")
        took = time.monotonic() - started
        assert hostile.hits >= 1 and max(hostile.asked.values()) == 1, hostile.asked
        lines = err.strip().splitlines()
        assert code == 3 and len(lines) == 1 and "Traceback" not in err, err[-3000:]
        assert lines[0].startswith(f"claw: error: remote s3://{bucket}/bench: downloading packs/"), lines
        assert "ReadTimeoutError" in lines[0] and "CLAW_S3_READ_TIMEOUT" in lines[0], lines
        assert took < 15, took  # half a second's silence (botocore's own read timeout: 60 s; margin for a loaded CI)
        # nothing of it landed: no ref (the campaign's, the remote's tracking one)
        if (b.root / "store").exists():
            assert Store(b.root / "store", create=False).list_refs() == {}
        hostile.mode = "forward"  # the server recovered: the same pull completes
        code, out, err = pull("pull", f"s3://{bucket}/bench")
        assert code == 0, out + err
    finally:
        hostile.close()
    assert pull("fsck")[0] == 0
    code, out, err = pull.build("--dry-run")
    assert code == 0 and "0 node(s) would execute" in out, out + err


@pytest.mark.timeout(30)  # (botocore's own: 5 times 60 s)
def test_an_answer_that_never_begins_is_asked_twice_not_five_times(aws_env: str, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """No headers at all: botocore sends the request again on a read timeout, as on its other retries, up to 5
    times (each 60 s by default: 5 minutes a pack); claw's client, twice."""
    bucket = "team-" + secrets.token_hex(4)
    make_bucket(aws_env, bucket)
    source = tmp_path / "pack"
    source.write_bytes(secrets.token_bytes(5000))
    hostile = HostileS3(aws_env, "mute")
    monkeypatch.setenv("CLAW_S3_READ_TIMEOUT", "0.5")
    try:
        backend = S3Backend(bucket, "bench", hostile.url)
        backend.upload(source, "packs/a.pack")
        started = time.monotonic()
        with pytest.raises(RemoteError, match="ReadTimeoutError"):
            backend.download("packs/a.pack", tmp_path / "got", size=5000)
        took = time.monotonic() - started
    finally:
        hostile.close()
    assert list(hostile.asked.values()) == [2], hostile.asked
    assert took < 15, took  # (two half seconds; botocore's own: 5 times 60 s. The margin is for a loaded CI)
