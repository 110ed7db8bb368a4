"""A remote ref file holding garbage, or a directory (an S3 key ending in '/') where a ref should be, was skipped
without a word: now one line on stderr names each and why, the pull going on (its exit code as before); a ref asked
for by name that is one of them refuses the pull, saying why. On the loopback S3 server."""

from __future__ import annotations

import secrets
from pathlib import Path

import boto3

from clawstore.remote import push
from clawstore.remote.config import Remote
from clawstore.store import Store
from tests.config.workspace_builder import claw
from tests.support.s3server import _client_args, make_bucket


def test_a_ref_that_is_no_ref_is_named_on_stderr_and_the_pull_goes_on(aws_env: str, tmp_path: Path) -> None:
    bucket = "team-" + secrets.token_hex(4)
    make_bucket(aws_env, bucket)
    url = f"s3://{bucket}/bench"
    source = Store(tmp_path / "a")
    source.set_ref("pins/good", source.put_json({"answer": 42}))
    push.push(source, Remote("team", url))
    client = boto3.client("s3", endpoint_url=aws_env, **_client_args())
    client.put_object(Bucket=bucket, Key="bench/refs/pins/junk", Body=b"not an id\n")
    client.put_object(Bucket=bucket, Key="bench/refs/campaigns/gone/", Body=b"")

    done = claw("pull", url, "--store", str(tmp_path / "b"), cwd=tmp_path)
    assert done.returncode == 0 and "1 ref(s) moved" in done.stdout, done.stderr
    assert done.stderr.splitlines() == ["claw: remote ref campaigns/gone skipped: is a directory, not a ref",
                                        "claw: remote ref pins/junk skipped: holds no object id"]
    assert Store(tmp_path / "b", create=False).get_ref("pins/good") == source.get_ref("pins/good")

    asked = claw("pull", url, "--pin", "junk", "--store", str(tmp_path / "b"), cwd=tmp_path)
    assert asked.returncode == 2 and asked.stderr.splitlines() == [
        "claw: error: remote ref pins/junk holds no object id"], asked.stderr
