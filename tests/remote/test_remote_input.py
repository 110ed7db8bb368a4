"""What a user types or a workspace file says about a remote: a bad endpoint, credentials where they do
not belong, a directory that is not there. One line and exit 2, nothing written, no secret repeated."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.config.workspace_builder import claw
from tests.support.prepared import claw_here, ok_here
from tests.support.workspace import Workspace, one_case

SECRET = "wJalrXUtnFEMI-not-a-real-secret"


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return one_case(tmp_path / "ws")


def refused(done: subprocess.CompletedProcess[str], expected: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().splitlines() == [f"claw: error: {expected}"]
    assert "Traceback" not in done.stderr and SECRET not in done.stderr + done.stdout


def _here(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`claw ARGS` in this process (tests/support/prepared.py `claw_here`), as `claw` returns a child's outcome."""
    return subprocess.CompletedProcess(list(args), *claw_here(*args, cwd=cwd))


@pytest.mark.parametrize("command", ["push", "pull"])
@pytest.mark.parametrize("endpoint,why", [
    ("notaurl", "expected http(s)://HOST[:PORT]"),
    ("ftp://minio.local:9000", "expected http(s)://HOST[:PORT]"),
    (f"http://admin:{SECRET}@minio.local:9000",
     "must not carry credentials (a user:password part; use the AWS credential chain)"),
    (f"http://minio.local:9000/?X-Amz-Signature={SECRET}",
     "must not carry credentials (the query parameter 'X-Amz-Signature'; use the AWS credential chain)"),
])
def test_a_bad_endpoint_flag_is_one_line(ws: Workspace, command: str, endpoint: str, why: str) -> None:
    done = claw(command, "s3://bucket/team", "--endpoint-url", endpoint, cwd=ws.root)
    shown = endpoint.replace(f"admin:{SECRET}", "***").replace(SECRET, "***")  # (a user name may be a token too)
    refused(done, f"--endpoint-url {shown}: {why}")
    assert not (ws.root / "store").exists()


def test_a_bad_endpoint_in_the_environment_names_the_variable(ws: Workspace,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "minio.local:9000")
    refused(claw("pull", "s3://bucket/team", cwd=ws.root),
            "$AWS_ENDPOINT_URL minio.local:9000: expected http(s)://HOST[:PORT]")


def test_remote_add_refuses_credentials_in_the_endpoint_and_writes_nothing(ws: Workspace) -> None:
    done = claw("remote", "add", "team", "s3://bucket/team", "--endpoint-url",
                f"https://key:{SECRET}@minio.local", cwd=ws.root)
    refused(done, "--endpoint-url https://***@minio.local: must not carry credentials "
                  "(a user:password part; use the AWS credential chain)")
    assert not (ws.root / "claw.yaml").exists()


def test_a_remote_path_that_is_not_utf8_is_refused_and_the_workspace_file_kept(ws: Workspace,
                                                                               tmp_path: Path) -> None:
    # Added, it was written as an escape claw.yaml's reader refuses (every command of the workspace failed
    # after); pushed to or pulled from, a traceback.
    ok_here("remote", "add", "team", str(tmp_path / "team"), cwd=ws.root)  # (prepares: in this process)
    before = (ws.root / "claw.yaml").read_bytes()
    latin1 = os.fsdecode(bytes(tmp_path) + b"/caf\xe9")
    why = (f"not UTF-8 text (an undecodable byte at character {len(str(tmp_path)) + 5}); claw takes remote "
           "URLs and directories in UTF-8 only")
    refused(claw("remote", "add", "other", latin1, cwd=ws.root), f"remote other: {why}")
    assert (ws.root / "claw.yaml").read_bytes() == before
    for command in ("push", "pull"):
        refused(claw(command, latin1, cwd=ws.root), f"remote: {why}")
    refused(claw("push", "team", "--endpoint-url", "http://caf\udce9:9000", cwd=ws.root),
            "--endpoint-url: not UTF-8 text (an undecodable byte at character 11); claw takes remote URLs and "
            "directories in UTF-8 only")
    assert "team" in ok_here("remote", "list", cwd=ws.root)  # (reads back what is kept: in this process)
    assert not (ws.root / "store").exists() and not os.path.exists(os.fsencode(latin1))


def test_a_workspace_file_naming_a_bad_endpoint_names_file_and_field(ws: Workspace) -> None:
    (ws.root / "claw.yaml").write_text(
        f"remotes:\n  team: {{url: s3://bucket/team, endpoint_url: 'http://k:{SECRET}@minio:9000'}}\n")
    done = claw("pull", "team", cwd=ws.root)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "claw.yaml" in done.stderr and "remotes.team.endpoint_url" in done.stderr
    assert "must not carry credentials" in done.stderr and SECRET not in done.stderr


def test_a_pull_from_a_directory_that_is_not_there_says_so(ws: Workspace, tmp_path: Path) -> None:
    # A typo in a path pulled nothing and said "0 pack(s)", as if the team had pushed nothing.
    missing = tmp_path / "no-such-share"
    refused(claw("pull", str(missing), cwd=ws.root), f"remote {missing}: no such directory")
    assert not (ws.root / "store").exists()
    ok_here("remote", "add", "share", f"file://{missing}", cwd=ws.root)  # (prepares: in this process)
    refused(claw("pull", "share", cwd=ws.root), f"remote {missing}: no such directory")



def test_a_remote_that_is_a_file_says_so_before_any_work(ws: Workspace, tmp_path: Path) -> None:
    # A push said "cannot read ref refs/campaigns/…: Not a directory", exit 3, after listing its packs; a pull
    # "no such directory" of a path that is there.
    notes = tmp_path / "notes.txt"
    notes.write_text("not a remote\n")
    said = {str(notes): f"remote {notes}: not a directory (a file)",
            f"file://{notes}/team": f"remote {notes}/team: {notes} is a file, not a directory"}
    # (each command and each spelling by a real process once; the other two in this process)
    for command, remote, real in (("push", str(notes), True), ("push", f"file://{notes}/team", False),
                                  ("pull", str(notes), False), ("pull", f"file://{notes}/team", True)):
        done = claw(command, remote, cwd=ws.root) if real else _here(command, remote, cwd=ws.root)
        refused(done, said[remote])
    assert not (ws.root / "store").exists() and notes.read_text() == "not a remote\n"


def test_a_pull_from_a_remote_nobody_pushed_to_says_so(ws: Workspace, remote_url: str) -> None:
    # An S3 prefix with a typo (or an empty directory) pulled nothing and said "0 pack(s)", exit 0.
    if not remote_url.startswith("s3://"):
        Path(remote_url).mkdir()
    refused(claw("pull", remote_url, cwd=ws.root),
            f"remote {remote_url}: nothing was ever pushed there (no ref, no pack); check the URL")
    assert not (ws.root / "store").exists()  # (no store made for it)


HOSTILE_WORKSPACE_FILES = {  # (ids, not the contents: a test's id reaches the environment of what it runs)
    "not-utf8": (b"remotes:\n  team: {url: /tmp/x}\n\xff\xfe", "not UTF-8 text"),
    "nested": (b"remotes: " + b"[" * 20_000 + b"]" * 20_000 + b"\n", "invalid YAML"),
    "duplicate-key": (b"remotes: {}\nremotes: {}\n", "duplicate key 'remotes'"),
    "5-MB": (b"# padding\n" * 500_000, "larger than"),
}


@pytest.mark.parametrize("kind", HOSTILE_WORKSPACE_FILES)
def test_a_hostile_workspace_file_is_one_line_naming_it(ws: Workspace, kind: str) -> None:
    # claw.yaml comes with the workspace, like its configs: read with the same guards.
    content, why = HOSTILE_WORKSPACE_FILES[kind]
    (ws.root / "claw.yaml").write_bytes(content)
    done = claw("remote", "list", cwd=ws.root)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr[-2000:]
    assert done.stderr.startswith(f"claw: error: {ws.root / 'claw.yaml'}: ") and why in done.stderr


def test_a_hostile_suite_named_by_a_store_only_command_is_one_line(ws: Workspace) -> None:
    # `claw report`, `view` and narrowed pushes read only the id field of the file a flag names.
    deep = ws.configs / "suites" / "deep.yaml"
    deep.write_text("suite_id: deep\nextra: " + "[" * 20_000 + "]" * 20_000 + "\n")
    done = claw("report", "--suite", "deep", "--run-profile", "rp", cwd=ws.root)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr[-2000:]
    assert done.stderr.startswith(f"claw: error: {deep}: invalid YAML")


def test_remotes_added_at_once_by_several_processes_are_all_kept(ws: Workspace, tmp_path: Path) -> None:
    # Each `remote add` reads claw.yaml, adds its entry and writes the file: unserialised, they wrote one
    # temp file by turns (a torn claw.yaml) and the last rename dropped the others' entries.
    env = {k: v for k, v in os.environ.items() if k != "CLAW_STORE"}
    procs = [subprocess.Popen([sys.executable, "-m", "clawstore.cli", "remote", "add", f"r{i}", str(tmp_path / "d")],
                              cwd=ws.root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for i in range(8)]
    for proc in procs:
        assert proc.wait(timeout=120) == 0, proc.stderr.read() if proc.stderr else ""
    listed = claw("remote", "list", cwd=ws.root)
    assert listed.returncode == 0, listed.stderr
    assert sorted(line.split("\t")[0] for line in listed.stdout.splitlines()) == sorted(f"r{i}" for i in range(8))
    assert sorted(p.name for p in ws.root.iterdir() if p.name.startswith("claw.yaml")) == ["claw.yaml"]


@pytest.mark.parametrize("command", ["plan", "build"])
def test_a_bad_endpoint_in_the_environment_stops_a_remote_build_before_a_store_is_made(
        ws: Workspace, command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ok_here("remote", "add", "team", "s3://bucket/team", cwd=ws.root)  # (prepares: in this process)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "garbage")
    monkeypatch.setenv("OPENROUTER_API_KEY", "k-test")
    refused(claw(command, "--suite", "main", "--run-profile", "rp", "--remote", "team", cwd=ws.root),
            "$AWS_ENDPOINT_URL garbage: expected http(s)://HOST[:PORT]")
    assert not (ws.root / "store").exists()


def test_a_missing_bucket_or_missing_credentials_says_what_to_mend(ws: Workspace, aws_env: str, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    def failed(done: subprocess.CompletedProcess[str], mend: str) -> None:
        assert done.returncode == 3, done.stdout + done.stderr  # the remote cannot be read (a store error)
        assert done.stderr.strip().splitlines() == [f"claw: error: remote s3://no-such-bucket/team: {mend}"]

    failed(claw("pull", "s3://no-such-bucket/team", cwd=ws.root),
           "listing refs/ failed (NoSuchBucket: no such bucket at this endpoint; create it, or check the URL "
           "and AWS_ENDPOINT_URL)")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # (no instance role to ask for)
    failed(claw("pull", "s3://no-such-bucket/team", cwd=ws.root),
           "listing refs/ failed (NoCredentialsError: no credentials: set AWS_ACCESS_KEY_ID and "
           "AWS_SECRET_ACCESS_KEY, or AWS_PROFILE)")


def test_a_directory_remote_is_one_place_however_spelled(ws: Workspace, tmp_path: Path) -> None:
    # A relative directory saved in claw.yaml was the current directory's (run from a subfolder: another remote),
    # and `../x/./share` was shown so and tracked apart from `/abs/share` (a push by each spelling: "changed by
    # another push")
    sub = ws.root / "sub"
    sub.mkdir()
    added = claw("remote", "add", "share", "../x/../share/", cwd=ws.root)
    assert added.stdout == f"remote share = {tmp_path / 'share'}\n"
    assert f"url: {tmp_path / 'share'}\n" in (ws.root / "claw.yaml").read_text()
    (ws.root / "claw.yaml").write_text("remotes:\n  here: team-share\n")
    refused(claw("pull", "here", cwd=sub), f"remote {ws.root / 'team-share'}: no such directory")
    refused(claw("pull", "../x/./../gone", cwd=sub), f"remote {ws.root / 'gone'}: no such directory")


def test_remote_add_of_a_saved_name_says_what_it_replaced(ws: Workspace, tmp_path: Path) -> None:
    """`remote add` of a name claw.yaml has moves it (docs/remote.md: a team's move to a fresh prefix); it said only the
    new URL, so a name meant to be new (a second `team`) silently sent every later push elsewhere (session 77)."""
    assert claw("remote", "add", "team", str(tmp_path / "one"), cwd=ws.root).stdout == \
        f"remote team = {tmp_path / 'one'}\n"
    again = claw("remote", "add", "team", str(tmp_path / "two"), cwd=ws.root)
    assert again.returncode == 0 and again.stdout == \
        f"remote team = {tmp_path / 'two'} (was {tmp_path / 'one'})\n", again.stdout + again.stderr
    same = claw("remote", "add", "team", str(tmp_path / "two"), cwd=ws.root)
    assert same.stdout == f"remote team = {tmp_path / 'two'}\n", same.stdout


@pytest.mark.parametrize("url", ["s3://bench/team/../other", "s3://bench/./team"])
def test_an_s3_prefix_with_dot_segments_is_refused(ws: Workspace, url: str) -> None:
    # S3 keys are literal: `team/../other` was a prefix of its own, where nobody else's `other` is
    # (each URL by a real process once, each command by one in turn; the other command in this process)
    real = ["s3://bench/team/../other", "s3://bench/./team"].index(url)
    pulled = claw("pull", url, cwd=ws.root) if real == 0 else _here("pull", url, cwd=ws.root)
    refused(pulled, f"remote: {url}: an S3 prefix with a '.' or '..' segment names keys holding it literally: write "
                    "the prefix meant")
    args = ("remote", "add", "team", url)
    assert (claw(*args, cwd=ws.root) if real == 1 else _here(*args, cwd=ws.root)).returncode == 2
    assert not (ws.root / "claw.yaml").exists()


@pytest.mark.parametrize("remotes", ["5", "[a, b]", "text"])
@pytest.mark.parametrize("command", [("remote", "add", "r2", "/tmp/r2"), ("remote", "remove", "r1")])
def test_a_workspace_file_whose_remotes_are_no_mapping_is_one_line(ws: Workspace, remotes: str,
                                                                   command: tuple[str, ...]) -> None:
    # `remote add` and `remote remove` read it with dict(): a TypeError's (or ValueError's) traceback (session 72),
    # where `remote list` and `push` said the file and the field.
    (ws.root / "claw.yaml").write_text(f"remotes: {remotes}\n")
    expected = f"{ws.root / 'claw.yaml'}: remotes: expected a mapping of name: {{url, endpoint_url}}"
    # (a real process for each file once, each command in turn: "5" and "text" by remote add, "[a, b]" by remote
    # remove; the other command in this process, where a traceback is an exception raised)
    real = (["5", "[a, b]", "text"].index(remotes) + (command[1] == "remove")) % 2 == 0
    refused(claw(*command, cwd=ws.root) if real else _here(*command, cwd=ws.root), expected)
    assert (ws.root / "claw.yaml").read_text() == f"remotes: {remotes}\n"
