"""A remote URL carrying a secret (`s3://AKIA…:SECRET@host/bucket`, `https://user:TOKEN@host/path`, a signature or
token in its query or fragment), given to `claw remote add`, `push`, `pull`, `build --remote`, `plan --remote` or
written into claw.yaml by hand: refused with one line, exit 2, before anything is written; the secret in no output,
no file claw writes (claw.yaml, the store: tracking refs, build logs) and no error."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.config.workspace_builder import claw
from tests.support.workspace import Workspace, one_case

SECRET = "wJalrXUtnFEMI-K7MDENG-remote-url-secret"

URLS = {
    "s3-userinfo": f"s3://AKIAIOSFODNN7EXAMPLE:{SECRET}@minio.local/bucket",
    "s3-userinfo-escaped": f"s3://AKIAIOSFODNN7EXAMPLE%3A{SECRET}@bucket/team",
    "S3-upper": f"S3://AKIA:{SECRET}@bucket/team",
    "https-user-token": f"https://user:{SECRET}@host.example/path",
    "https-token": f"https://{SECRET}@host.example/path",
    "file-userinfo": f"file://u:{SECRET}@localhost/tmp/team",
    "s3-signature": f"s3://bucket/team?X-Amz-Signature={SECRET}",
    "s3-token-fragment": f"s3://bucket/team#token={SECRET}",
    "s3-no-slashes": f"s3:AKIA:{SECRET}@bucket/team",  # (no `//`: not a URL's userinfo, still masked when named)
}


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return one_case(tmp_path / "ws")


def _files(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def _refused(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and done.stderr.startswith("claw: error: "), done.stderr
    assert SECRET not in done.stdout + done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("url", URLS.values(), ids=URLS.keys())
def test_a_remote_url_with_a_secret_is_refused_before_anything_is_written(ws: Workspace, url: str) -> None:
    before = _files(ws.root)
    campaign = ("--suite", "main", "--run-profile", "rp")
    for command in (("remote", "add", "team", url), ("push", url), ("pull", url), ("build", *campaign, "--remote", url),
                    ("plan", *campaign, "--remote", url)):
        done = claw(*command, cwd=ws.root)
        _refused(done)
        if "://" in url:  # (a secret in a URL: said to be one, by what it is, not what it says)
            assert "must not carry credentials" in done.stderr or "no remote named" in done.stderr, done.stderr
    assert _files(ws.root) == before  # (no claw.yaml, no store: no tracking ref, no build log)
    assert not (ws.root / "store").exists()


@pytest.mark.parametrize("url", [URLS["s3-userinfo"], URLS["https-user-token"], URLS["s3-signature"]])
def test_a_workspace_file_with_a_secret_in_a_remote_url_names_file_and_field_never_the_secret(
        ws: Workspace, url: str) -> None:
    (ws.root / "claw.yaml").write_text(f"remotes:\n  team: {{url: '{url}'}}\n")
    before = _files(ws.root)
    for command in (("remote", "list"), ("push", "team"), ("pull", "team")):
        done = claw(*command, cwd=ws.root)
        _refused(done)
        assert "claw.yaml" in done.stderr and "remotes.team.url" in done.stderr, done.stderr
        assert "must not carry credentials" in done.stderr, done.stderr
    assert _files(ws.root) == before
