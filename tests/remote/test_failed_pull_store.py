"""A pull that fails into a store that did not exist leaves no store behind (it left an empty store directory): an
unreachable remote, a listing the pull refuses, on a real S3 server. A store that was there stays, empty or not."""

from __future__ import annotations

import secrets
from pathlib import Path

import boto3

from tests.config.workspace_builder import claw
from tests.support.s3server import _client_args, make_bucket
from tests.support.sockets import closed_port


def _fails(tmp_path: Path, *args: str) -> str:
    done = claw("pull", *args, "--store", str(tmp_path / "store"), cwd=tmp_path)
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    return done.stderr


PACK = "ab" * 32


def _refused(aws_env: str) -> str:
    """A remote on the S3 server holding a pack whose listing the pull refuses (after the store is made)."""
    bucket = "team-" + secrets.token_hex(4)
    make_bucket(aws_env, bucket)
    client = boto3.client("s3", endpoint_url=aws_env, **_client_args())
    client.put_object(Bucket=bucket, Key=f"bench/packs/{PACK}.ids", Body=b"not a listing")
    client.put_object(Bucket=bucket, Key=f"bench/packs/{PACK}.pack", Body=b"not a pack")
    return f"s3://{bucket}/bench"


def test_a_failed_pull_leaves_no_store_it_made_and_keeps_one_that_was_there(aws_env: str, tmp_path: Path) -> None:
    assert "cannot connect" in _fails(tmp_path, "s3://nowhere/x", "--endpoint-url", f"http://127.0.0.1:{closed_port()}")
    assert not (tmp_path / "store").exists()

    bucket = _refused(aws_env)
    assert f"listing of pack {PACK} is not JSON" in _fails(tmp_path, bucket)
    assert not (tmp_path / "store").exists()

    (tmp_path / "store").mkdir()  # (there before the pull: not the pull's to remove, empty as it is)
    _fails(tmp_path, bucket)
    assert (tmp_path / "store").is_dir()


def test_a_failed_pull_removes_the_parents_it_made_for_its_store_and_no_more(aws_env: str, tmp_path: Path) -> None:
    # (the refused listing: the store and its parents are made before the remote is first asked, whether it answers or
    # not; an unreachable endpoint took ~20 s of boto3's retries a pull before session 67)
    remote = _refused(aws_env)
    (tmp_path / "kept").mkdir()
    where = tmp_path / "kept" / "made" / "deeper" / "store"
    done = claw("pull", remote, "--store", str(where), cwd=tmp_path)
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert (tmp_path / "kept").is_dir() and list((tmp_path / "kept").iterdir()) == []

    relative = Path("rel") / "store"  # a relative --store: its parents are the working directory's
    done = claw("pull", remote, "--store", str(relative), cwd=tmp_path / "kept")
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert list((tmp_path / "kept").iterdir()) == []
