"""A remote URL carrying a secret (`s3://AKIA…:SECRET@host/bucket`, `https://user:TOKEN@host/path`, a signature or
token in its query or fragment), given to `claw remote add`, `push`, `pull`, `build --remote`, `plan --remote` or
written into claw.yaml by hand: refused with one line, exit 2, before anything is written; the secret in no output,
no file claw writes (claw.yaml, the store: tracking refs, build logs) and no error.

Each URL's refusals: one of them by a real `claw` process (the exit code and the stderr a user sees, through the
program's own entry), each command in turn, so that every command and every URL is refused so at least once; the
others in the test's process (tests/support/prepared.py `claw_here`: the same commands through the same front, an
exception raised rather than printed), ~0.3 s of CPU less each."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.prepared import claw_real_or_here
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
IN_FILE = [URLS["s3-userinfo"], URLS["https-user-token"], URLS["s3-signature"]]


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return one_case(tmp_path / "ws")


def _files(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def _refused(command: tuple[str, ...], cwd: Path, real: bool) -> str:
    """`claw COMMAND` in `cwd`, by a real process if `real`, else in this one: refused in one line, exit 2, the secret
    not in its output; its stderr."""
    code, out, err = claw_real_or_here(*command, cwd=cwd, real=real)
    assert code == 2, out + err
    assert len(err.strip().splitlines()) == 1 and err.startswith("claw: error: "), err
    assert SECRET not in out + err and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("url", URLS.values(), ids=URLS.keys())
def test_a_remote_url_with_a_secret_is_refused_before_anything_is_written(ws: Workspace, url: str) -> None:
    before = _files(ws.root)
    campaign = ("--suite", "main", "--run-profile", "rp")
    commands = (("remote", "add", "team", url), ("push", url), ("pull", url), ("build", *campaign, "--remote", url),
                ("plan", *campaign, "--remote", url))
    real = list(URLS.values()).index(url) % len(commands)  # (9 URLs: each command by a real process once or twice)
    for at, command in enumerate(commands):
        err = _refused(command, ws.root, real=at == real)
        if "://" in url:  # (a secret in a URL: said to be one, by what it is, not what it says)
            assert "must not carry credentials" in err or "no remote named" in err, err
    assert _files(ws.root) == before  # (no claw.yaml, no store: no tracking ref, no build log)
    assert not (ws.root / "store").exists()


@pytest.mark.parametrize("url", IN_FILE)
def test_a_workspace_file_with_a_secret_in_a_remote_url_names_file_and_field_never_the_secret(
        ws: Workspace, url: str) -> None:
    (ws.root / "claw.yaml").write_text(f"remotes:\n  team: {{url: '{url}'}}\n")
    before = _files(ws.root)
    commands = (("remote", "list"), ("push", "team"), ("pull", "team"))
    real = IN_FILE.index(url)  # (each command by a real process once)
    for at, command in enumerate(commands):
        err = _refused(command, ws.root, real=at == real)
        assert "claw.yaml" in err and "remotes.team.url" in err, err
        assert "must not carry credentials" in err, err
    assert _files(ws.root) == before
