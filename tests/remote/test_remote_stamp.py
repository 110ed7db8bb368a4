"""A `claw build --remote` that would change nothing is answered from its stamp, as a plain rebuild is:
the remote is listed (one request) and this campaign's head read there, and when neither the remote,
the configs nor the store changed since the last such build, the build prints its table without
planning, pulling or pushing (it took 7 s at 60,000 nodes). Any change takes the full path.

The build each test is about is a real `claw` process; the builds that only prepare it (the stamped pair, a
colleague's) run in the test's own process (tests/support/prepared.py). Which path a build took is told by marking
the stamp (tests/support/stamps.py).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from clawstore.remote.backends import open_backend
from clawstore.testing.standin import StandIn
from tests.config.workspace_builder import claw
from tests.support.prepared import ok_here
from tests.support.stamps import answered_by_stamp, mark_stamp, wait_out_racy_window
from tests.support.workspace import SECRET, Workspace, standard

HEAD = "refs/campaigns/main__rp__none"
pytestmark = pytest.mark.parametrize("remote_url", ["s3"], indirect=True)  # (the directory backend: conftest.py)


BUILD = ("build", "--suite", "main", "--run-profile", "rp", "--output", "json", "--remote")


def _build(ws: Workspace, remote: str) -> tuple[dict, str]:
    """The build a test is about: a real `claw` process."""
    done = claw(*BUILD, remote, cwd=ws.root)
    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stdout + done.stderr
    return json.loads(done.stdout), done.stderr


def _prepare(ws: Workspace, remote: str) -> dict:
    """A build that only prepares what a test is about, in this process."""
    return json.loads(ok_here(*BUILD, remote, cwd=ws.root))


def _stamped(ws: Workspace, remote: str) -> None:
    """A build that pushes, then (its files older than the mtime granularity window) one that leaves the
    stamp; the stamp's first row marked."""
    _prepare(ws, remote)
    wait_out_racy_window(ws.root)
    _prepare(ws, remote)
    mark_stamp(ws.root / "store")


@pytest.fixture
def a(provider: StandIn, tmp_path: Path) -> Workspace:
    return standard(tmp_path / "a")


def test_an_unchanged_build_with_a_remote_is_answered_from_its_stamp(a: Workspace, remote_url: str,
                                                                     provider: StandIn) -> None:
    _stamped(a, remote_url)
    sent = len(provider.requests)
    backend = open_backend(remote_url)
    before = backend.list("")
    result, err = _build(a, remote_url)
    assert answered_by_stamp(result) and len(provider.requests) == sent
    assert result["counts"] == {"executed": 0, "reused": 4, "failed": 0, "skipped": 0}
    assert "unchanged since the last build" in err and "pulled" not in err and "pushed" not in err
    assert backend.list("") == before


def test_a_colleagues_push_takes_the_full_path_and_is_pulled(a: Workspace, remote_url: str, provider: StandIn,
                                                             tmp_path: Path) -> None:
    _stamped(a, remote_url)
    b = Workspace(tmp_path / "b")
    shutil.copytree(a.configs, b.configs)
    _prepare(b, remote_url)  # pulls A's results (0 requests), pushes nothing new
    b.edit("cases/alpha/test.yaml", lambda d: d["input"]["messages"][-1].update(content="What is 3 + 3?"))
    sent = len(provider.requests)
    _prepare(b, remote_url)  # two new runs, pushed with B's head
    assert len(provider.requests) == sent + 2
    result, err = _build(a, remote_url)
    assert not answered_by_stamp(result) and "pulled" in err
    assert len(provider.requests) == sent + 2  # A's own configs: nothing to run
    remote_head = open_backend(remote_url).read_ref(HEAD)
    assert remote_head is not None and (a.root / "store").exists()
    assert claw("cat", remote_head.value, cwd=a.root).returncode == 0, "B's head came with the pull"


def _drop_remote_head(remote_url: str) -> None:
    import boto3

    bucket, _, prefix = remote_url[len("s3://"):].partition("/")
    boto3.client("s3").delete_object(Bucket=bucket, Key=f"{prefix}/{HEAD}")


def test_a_remote_head_that_changed_alone_takes_the_full_path(a: Workspace, remote_url: str) -> None:
    _stamped(a, remote_url)
    backend = open_backend(remote_url)
    before = backend.read_ref(HEAD)
    _drop_remote_head(remote_url)  # no listing changes: only the head does
    result, err = _build(a, remote_url)
    assert not answered_by_stamp(result) and "1 ref(s) moved" in err
    after = backend.read_ref(HEAD)
    assert before is not None and after is not None and after.value == before.value


def test_a_config_edit_takes_the_full_path(a: Workspace, remote_url: str, provider: StandIn) -> None:
    _stamped(a, remote_url)
    sent = len(provider.requests)
    a.case("gamma", "Name a planet.")
    result, _ = _build(a, remote_url)
    assert not answered_by_stamp(result) and len(provider.requests) == sent + 2
