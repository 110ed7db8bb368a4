"""Which S3 client claw uses: boto3, obstore and s3fs move the same files to and from a loopback S3
server (moto) in one run, and each is asked for the two conditional writes refs depend on.

    python bench/s3client_bench.py [--files 5] [--mib 16] [--threads 8]

Each client uploads the files with `--threads` transfers at once, then downloads them, every byte
checked. A client that is not installed is named and skipped (`pip install obstore s3fs` to compare:
claw itself needs only boto3; see docs/remote.md for why). Printed per client: upload and download
time, throughput as a ratio of boto3's (above 1: faster), the client's own CPU time (the server is
another process), and whether the server saw it create only if absent (`If-None-Match: *`) and replace
only if unchanged (`If-Match: <ETag>`): a push's compare-and-swap of a campaign head.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.s3server import FAKE_CREDENTIALS, make_bucket, s3_server  # noqa: E402


@dataclass
class Client:
    """One S3 client's ways to move a file and to write conditionally (each returns True if refused)."""

    upload: Callable[[Path, str], None]
    download: Callable[[str, Path], None]
    create: Callable[[str, bytes], bool]  # put only if absent; True: refused because it exists
    replace: Callable[[str, bytes, str], bool]  # put only if the ETag matches; True: refused
    etag: Callable[[str], str]


def boto3_client(endpoint: str, bucket: str) -> Client:
    import boto3
    from botocore.exceptions import ClientError

    s3 = boto3.client("s3", endpoint_url=endpoint)

    def refused(call: Callable[[], Any]) -> bool:
        try:
            call()
        except ClientError as exc:
            return exc.response.get("Error", {}).get("Code") in ("PreconditionFailed", "412")
        return False

    return Client(
        upload=lambda path, key: s3.upload_file(str(path), bucket, key),
        download=lambda key, path: s3.download_file(bucket, key, str(path)),
        create=lambda key, data: refused(lambda: s3.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")),
        replace=lambda key, data, etag: refused(lambda: s3.put_object(Bucket=bucket, Key=key, Body=data,
                                                                       IfMatch=etag)),
        etag=lambda key: s3.head_object(Bucket=bucket, Key=key)["ETag"],
    )


def obstore_client(endpoint: str, bucket: str) -> Client:
    import obstore
    from obstore.store import S3Store

    store = S3Store(bucket, endpoint=endpoint, region=FAKE_CREDENTIALS["AWS_DEFAULT_REGION"],
                    access_key_id=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
                    secret_access_key=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"], client_options={"allow_http": True})

    def download(key: str, path: Path) -> None:
        with open(path, "wb") as fh:
            for chunk in obstore.get(store, key).stream():
                fh.write(chunk)

    def refused(call: Callable[[], Any]) -> bool:
        try:
            call()
        except Exception as exc:  # noqa: BLE001 - obstore names its errors by class: AlreadyExists, Precondition
            return type(exc).__name__ in ("AlreadyExistsError", "PreconditionError")
        return False

    return Client(
        upload=lambda path, key: obstore.put(store, key, path),
        download=download,
        create=lambda key, data: refused(lambda: obstore.put(store, key, data, mode="create")),
        replace=lambda key, data, etag: refused(lambda: obstore.put(store, key, data,
                                                                    mode={"e_tag": etag})),
        etag=lambda key: str(obstore.head(store, key)["e_tag"]),
    )


def s3fs_client(endpoint: str, bucket: str) -> Client:
    import s3fs

    fs = s3fs.S3FileSystem(key=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"], secret=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
                           endpoint_url=endpoint)

    def refused(call: Callable[[], Any]) -> bool:
        try:
            call()
        except OSError as exc:  # FileExistsError for a create, EINVAL naming the pre-condition for a replace
            return isinstance(exc, FileExistsError) or "pre-condition" in str(exc).lower()
        return False

    return Client(
        upload=lambda path, key: fs.put_file(str(path), f"{bucket}/{key}"),
        download=lambda key, path: fs.get_file(f"{bucket}/{key}", str(path)),
        create=lambda key, data: refused(lambda: fs.pipe_file(f"{bucket}/{key}", data, mode="create")),
        replace=lambda key, data, etag: refused(lambda: fs.pipe_file(f"{bucket}/{key}", data, IfMatch=etag)),
        etag=lambda key: fs.info(f"{bucket}/{key}")["ETag"],
    )


CLIENTS = {"boto3": boto3_client, "obstore": obstore_client, "s3fs": s3fs_client}


def transfer(work: Callable[[Any], None], items: list[Any], threads: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process: the client's own, the server runs apart)."""
    started, cpu = time.perf_counter(), time.process_time()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(work, items))
    return time.perf_counter() - started, time.process_time() - cpu


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def conditional_writes(client: Client) -> tuple[bool, bool]:
    """(create-if-absent works, replace-if-unchanged works), as the server enforced them."""
    key = "refs/head"
    first_refused = client.create(key, b"one")
    creates = not first_refused and client.create(key, b"two")  # the second create must be refused
    etag = client.etag(key)
    replaces = not client.replace(key, b"three", etag) and client.replace(key, b"four", etag)  # now stale
    return creates, replaces


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=5)
    parser.add_argument("--mib", type=float, default=16.0, help="size of each file")
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()
    os.environ.update(FAKE_CREDENTIALS)
    with tempfile.TemporaryDirectory(prefix="claw-s3client-bench-") as tmp, s3_server() as endpoint:
        os.environ["AWS_ENDPOINT_URL"] = endpoint
        root = Path(tmp)
        files = []
        for i in range(args.files):  # incompressible, like zstd-compressed packs
            files.append(root / f"pack-{i}.pack")
            files[-1].write_bytes(os.urandom(int(args.mib * (1 << 20))))
        sums = {f.name: digest(f) for f in files}
        mib = sum(f.stat().st_size for f in files) / (1 << 20)
        print(f"{args.files} files, {mib:.1f} MiB, {args.threads} transfers at once, moto S3 on 127.0.0.1")
        base: tuple[float, float] | None = None
        for name, make in CLIENTS.items():
            try:
                client = make(endpoint, f"bench-{name}")
            except ImportError:
                print(f"{name:8} not installed (pip install {name})")
                continue
            make_bucket(endpoint, f"bench-{name}")
            up, up_cpu = transfer(lambda f, c=client: c.upload(f, f"packs/{f.name}"), files, args.threads)
            down_dir = root / f"down-{name}"
            down_dir.mkdir()
            down, down_cpu = transfer(lambda f, c=client, d=down_dir: c.download(f"packs/{f.name}", d / f.name),
                                      files, args.threads)
            assert {f.name: digest(down_dir / f.name) for f in files} == sums, f"{name}: downloaded other bytes"
            creates, replaces = conditional_writes(client)
            base = base or (up, down)
            print(f"{name:8} upload {up:.2f} s ({base[0] / up:.2f}x boto3's throughput, client CPU {up_cpu:.2f} s)  "
                  f"download {down:.2f} s ({base[1] / down:.2f}x, CPU {down_cpu:.2f} s)  "
                  f"create if absent: {'yes' if creates else 'NO'}  replace if unchanged: "
                  f"{'yes' if replaces else 'NO'}")


if __name__ == "__main__":
    main()
