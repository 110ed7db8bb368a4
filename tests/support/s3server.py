"""A real S3-compatible HTTP server on 127.0.0.1 for the remote tests: moto's server mode, in a child process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

# moto accepts any credentials; these only keep boto3 from looking for real ones.
FAKE_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing-key-id", "AWS_SECRET_ACCESS_KEY": "testing-secret-value",
                    "AWS_DEFAULT_REGION": "us-east-1"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def s3_server() -> Iterator[str]:
    """Start moto's server (its conditional writes atomic, as S3's: moto_atomic.py) on a free loopback port; yields
    its endpoint URL."""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("moto_atomic.py")), "127.0.0.1", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, **FAKE_CREDENTIALS})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(url + "/moto-api/", timeout=1)
                break
            except httpx.HTTPError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the moto S3 server did not start") from None
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def make_bucket(endpoint: str, bucket: str) -> None:
    import boto3

    boto3.client("s3", endpoint_url=endpoint, **_client_args()).create_bucket(Bucket=bucket)


def _client_args() -> dict[str, str]:
    return {"aws_access_key_id": FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            "aws_secret_access_key": FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            "region_name": FAKE_CREDENTIALS["AWS_DEFAULT_REGION"]}
