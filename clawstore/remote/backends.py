"""Where a remote keeps its files: a plain directory (an NFS share, `file://`) or an S3-compatible bucket.

A remote holds immutable files (packs, index segments), written once under a name that never changes
meaning, and refs: small mutable files moved by compare-and-swap, so two people pushing at once never
silently drop each other's campaign heads. Both backends offer the same five operations; nothing
above this module knows which one it talks to.

Credentials for S3 come from the standard AWS chain (environment, shared config, instance roles) and
the endpoint from `--endpoint-url` or `AWS_ENDPOINT_URL`; claw never stores or prints them.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

from clawstore.errors import ClawError, StoreError, UsageError


class RemoteError(StoreError):
    """The remote cannot be read or written (exit 3)."""


class RemoteRefConflict(ClawError):
    """A ref on the remote moved since it was read: someone else pushed (exit 1: pull, then push)."""

    exit_code = 1

    def __init__(self, name: str):
        self.name = name
        super().__init__(f"remote ref {name} was changed by another push: run claw pull, then push again")


@dataclass(frozen=True)
class RefValue:
    value: str
    version: str  # opaque: what a compare-and-swap must name (an ETag, or the value itself)


class Backend(Protocol):
    """The operations a remote offers. Names are '/'-separated relative paths."""

    description: str

    def list(self, prefix: str) -> dict[str, int]:
        """{name: size} of every immutable file under `prefix`."""
        ...

    def download(self, name: str, target: Path) -> None:
        """Copy one file to `target` (a path the caller owns)."""
        ...

    def upload(self, source: Path, name: str) -> None:
        """Write one immutable file; it appears whole or not at all."""
        ...

    def create(self, source: Path, name: str) -> bool:
        """Write one file only if there is none of that name (False: there was; it is left as it was)."""
        ...

    def read_ref(self, name: str) -> RefValue | None: ...

    def swap_ref(self, name: str, value: str, expected: RefValue | None) -> None:
        """Set ref `name` to `value` if it is still `expected` (None: if it does not exist), else raise
        RemoteRefConflict."""
        ...


def open_backend(url: str, endpoint_url: str | None = None) -> Backend:
    """A backend for `s3://bucket/prefix`, `file:///path` or a plain directory path."""
    parsed = urlparse(url)
    if parsed.scheme == "s3":
        if not parsed.netloc:
            raise UsageError(f"remote {url}: an S3 remote is s3://BUCKET[/PREFIX]")
        return S3Backend(parsed.netloc, parsed.path.strip("/"), endpoint_url)
    if parsed.scheme == "file":
        return DirectoryBackend(Path(parsed.path))
    if parsed.scheme:
        raise UsageError(f"remote {url}: unknown scheme {parsed.scheme!r} (use s3://, file:// or a directory)")
    return DirectoryBackend(Path(url))


class DirectoryBackend:
    """A remote in a directory: files written by temp + fsync + rename; refs swapped under an flock."""

    def __init__(self, root: Path):
        self.root = Path(root).absolute()
        self.description = str(self.root)

    def _path(self, name: str) -> Path:
        return self.root / name

    def list(self, prefix: str) -> dict[str, int]:
        base = self._path(prefix)
        if not base.is_dir():
            return {}
        found = {}
        for path in base.rglob("*"):
            if path.is_file() and ".tmp-" not in path.name:
                found[str(path.relative_to(self.root))] = path.stat().st_size
        return found

    def download(self, name: str, target: Path) -> None:
        try:
            with open(self._path(name), "rb") as src, open(target, "wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
        except FileNotFoundError:
            raise RemoteError(f"remote {self.description}: {name} is missing") from None

    def _write(self, name: str, data_from: Path | bytes, replace: bool = True) -> bool:
        final = self._path(name)
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = final.with_name(f"{final.name}.tmp-{secrets.token_hex(6)}")
        try:
            with open(tmp, "wb") as dst:
                if isinstance(data_from, bytes):
                    dst.write(data_from)
                else:
                    with open(data_from, "rb") as src:
                        while chunk := src.read(1 << 20):
                            dst.write(chunk)
                dst.flush()
                os.fsync(dst.fileno())
            if replace:
                os.replace(tmp, final)
            else:
                try:
                    os.link(tmp, final)  # fails if the name exists: create-only
                except FileExistsError:
                    return False
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        fd = os.open(final.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        return True

    def upload(self, source: Path, name: str) -> None:
        self._put(source, name, replace=True)

    def create(self, source: Path, name: str) -> bool:
        return self._put(source, name, replace=False)

    def _put(self, source: Path, name: str, replace: bool) -> bool:
        try:
            return self._write(name, source, replace)
        except OSError as exc:
            raise RemoteError(f"remote {self.description}: cannot write {name}: {exc.strerror}") from None

    def read_ref(self, name: str) -> RefValue | None:
        try:
            value = self._path(name).read_text(encoding="ascii").strip()
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise RemoteError(f"remote {self.description}: cannot read ref {name}: {exc}") from None
        return RefValue(value, value)

    @contextlib.contextmanager
    def _ref_lock(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".refs.lock", "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def swap_ref(self, name: str, value: str, expected: RefValue | None) -> None:
        with self._ref_lock():
            current = self.read_ref(name)
            if (current.version if current else None) != (expected.version if expected else None):
                raise RemoteRefConflict(name)
            try:
                self._write(name, (value + "\n").encode("ascii"))
            except OSError as exc:
                raise RemoteError(f"remote {self.description}: cannot write ref {name}: {exc.strerror}") from None


class S3Backend:
    """A remote in an S3-compatible bucket (AWS S3, MinIO, R2, Ceph) through boto3.

    Refs use S3 conditional writes: `If-None-Match: *` creates, `If-Match: <etag>` replaces; a 412
    answer means another writer won, which is reported, never overwritten.
    """

    def __init__(self, bucket: str, prefix: str, endpoint_url: str | None = None):
        try:
            import boto3
            from botocore.config import Config
        except ImportError:
            raise UsageError("S3 remotes need boto3: pip install 'clawstore[s3]'") from None
        self.bucket = bucket
        self.prefix = prefix + "/" if prefix else ""
        self.description = f"s3://{bucket}/{prefix}".rstrip("/")
        endpoint = endpoint_url or os.environ.get("AWS_ENDPOINT_URL") or None
        config = Config(retries={"max_attempts": 5, "mode": "standard"}, max_pool_connections=32)
        self.client: Any = boto3.client("s3", endpoint_url=endpoint, config=config)

    def _key(self, name: str) -> str:
        return self.prefix + name

    def _fail(self, what: str, exc: Exception) -> RemoteError:
        # The message names the operation and the service's error code, never credentials.
        code = getattr(exc, "response", {}).get("Error", {}).get("Code") if hasattr(exc, "response") else None
        return RemoteError(f"remote {self.description}: {what} failed ({code or type(exc).__name__})")

    def list(self, prefix: str) -> dict[str, int]:
        found: dict[str, int] = {}
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket,
                                                                           Prefix=self._key(prefix))
            for page in pages:
                for item in page.get("Contents", []):
                    found[item["Key"][len(self.prefix):]] = int(item["Size"])
        except Exception as exc:  # botocore raises many types; each becomes one line
            raise self._fail(f"listing {prefix}", exc) from None
        return found

    def download(self, name: str, target: Path) -> None:
        try:
            self.client.download_file(self.bucket, self._key(name), str(target))
        except Exception as exc:
            raise self._fail(f"downloading {name}", exc) from None

    def upload(self, source: Path, name: str) -> None:
        try:
            self.client.upload_file(str(source), self.bucket, self._key(name))
        except Exception as exc:
            raise self._fail(f"uploading {name}", exc) from None

    def create(self, source: Path, name: str) -> bool:
        """A conditional write (If-None-Match: *): one request, so for files up to a listing's size."""
        try:
            self.client.put_object(Bucket=self.bucket, Key=self._key(name), Body=source.read_bytes(),
                                   IfNoneMatch="*")
        except Exception as exc:
            if _status(exc) in (409, 412):
                return False
            raise self._fail(f"uploading {name}", exc) from None
        return True

    def read_ref(self, name: str) -> RefValue | None:
        try:
            reply = self.client.get_object(Bucket=self.bucket, Key=self._key(name))
        except Exception as exc:
            if _status(exc) == 404:
                return None
            raise self._fail(f"reading ref {name}", exc) from None
        value = reply["Body"].read().decode("ascii", errors="replace").strip()
        return RefValue(value, reply["ETag"])

    def swap_ref(self, name: str, value: str, expected: RefValue | None) -> None:
        condition = {"IfMatch": expected.version} if expected else {"IfNoneMatch": "*"}
        try:
            self.client.put_object(Bucket=self.bucket, Key=self._key(name), Body=(value + "\n").encode("ascii"),
                                   **condition)
        except Exception as exc:
            if _status(exc) in (409, 412):
                raise RemoteRefConflict(name) from None
            raise self._fail(f"writing ref {name}", exc) from None


def _status(exc: Exception) -> int | None:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return None
