"""An S3 server whose answers break off: a proxy in front of the loopback S3 server (real HTTP, real boto3 in a real
`claw pull`) sends half of each pack's body, with the whole body's Content-Length, and closes the connection. The
error botocore raised for it carries `response = None`, and naming it raised AttributeError: the pull ended in a
traceback (exit 1). It is one line naming the remote and the pack now (exit 3), and nothing of it lands."""

from __future__ import annotations

import secrets
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from clawstore.testing.standin import StandIn
from tests.config.workspace_builder import claw
from tests.support.s3server import make_bucket
from tests.support.workspace import standard


class HostileS3:
    """An HTTP proxy in front of the S3 server that misbehaves on the packs' GETs as `mode` says: "truncate" (half the
    body, then the connection closed); anything else is forwarded as it is."""

    def __init__(self, target: str, mode: str):
        self.target, self.mode, self.hits = target, mode, 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
                reply = httpx.request(self.command, outer.target + self.path, headers=headers, content=body,
                                      timeout=30)
                data = reply.content
                hostile = self.command == "GET" and ".pack" in self.path
                if hostile:
                    outer.hits += 1
                self.send_response(reply.status_code)
                for k, v in reply.headers.items():
                    if k.lower() not in ("content-length", "transfer-encoding", "connection", "content-encoding"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if hostile and outer.mode == "truncate" and len(data) > 2:
                    self.wfile.write(data[: len(data) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.wfile.write(data)

            do_GET = do_PUT = do_HEAD = do_POST = do_DELETE = _forward  # noqa: N815

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


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
