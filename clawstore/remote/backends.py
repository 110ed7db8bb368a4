"""Where a remote keeps its files: a plain directory (an NFS share, `file://`) or an S3-compatible bucket; immutable
files written once, and refs moved by compare-and-swap so that concurrent pushes never drop each other's heads. Details:
docs/remote.md (Details by module)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import stat
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Protocol
from urllib.parse import urlparse

from clawstore.errors import ClawError, StoreError, UsageError
from clawstore.host.machine_settings import s3_read_timeout
from clawstore.values.urls import credential_in_url, shown_url


class RemoteError(StoreError):
    """The remote cannot be read or written (exit 3)."""


class RemoteDamage(UsageError):
    """A file on the remote is not one claw could have written there (a FIFO, a device, a symlink, a
    ref of megabytes): refused with its name (exit 2), never read into memory or waited on."""


class _Abandoned(Exception):
    """A range of a download given up because another range of it failed (S3Backend._get_parts)."""


# What the S3 errors a user can mend mean, in a failure's one line (the code stays: it is what to search).
S3_HINTS = {
    "NoSuchBucket": "no such bucket at this endpoint; create it, or check the URL and AWS_ENDPOINT_URL",
    "NoCredentialsError": "no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE",
    "InvalidAccessKeyId": "this endpoint does not know the access key",
    "SignatureDoesNotMatch": "the secret key does not match the access key",
    "AccessDenied": "the credentials may not do this; check them and the bucket's policy",
    "EndpointConnectionError": "cannot connect to the endpoint; check --endpoint-url or AWS_ENDPOINT_URL",
    "ConnectTimeoutError": "the endpoint did not complete a connection in time; check --endpoint-url or "
                           "AWS_ENDPOINT_URL, and what lies between (a firewall, a proxy)",
    "ReadTimeoutError": "the endpoint sent nothing for $CLAW_S3_READ_TIMEOUT seconds (20 by default): a stalled "
                        "server or link; run it again once it answers",
}
# seconds a connection may take to open (botocore's own 60, times its 6 attempts, kept a user whose packets a
# firewall drops waiting 6 minutes for the first line)
CONNECT_TIMEOUT_S = 15
READ_TIMEOUT_ATTEMPTS = 2  # sendings of a request whose answer went silent for $CLAW_S3_READ_TIMEOUT
REF_MAX = 1024  # bytes: a ref holds one object id (72); a bigger one is not read
ONE_GET_MAX = 8 << 20  # bytes: up to this a known-size file is fetched in one GET (boto3 splits bigger ones)
# bytes: up to this a file is sent in one PutObject of claw's own: boto3's upload_file makes a transfer manager (its
# threads, its futures) a call, which cost a small pack more wall than its request (loopback: 25 against 12 ms)
ONE_PUT_MAX = 1 << 20
Moved = Callable[[int], None] | None  # told of each chunk a download or upload moves (remote/progress.py)


def _not_a_file(description: str, name: str) -> RemoteDamage:
    return RemoteDamage(f"remote {description}: {name} is not a regular file (a symlink, FIFO, device or "
                        "socket; claw writes only regular files to a remote): remove it from the remote")


def _ref_text(description: str, name: str, size: int, read: Callable[[int], bytes]) -> str:
    """A ref's value from its declared `size` and `read(n)`; RemoteDamage, unread, for one too big to be a
    ref (checked again on what was read: a file may grow after its size was taken)."""
    data = b"" if size > REF_MAX else read(REF_MAX + 1)
    if size > REF_MAX or len(data) > REF_MAX:
        raise RemoteDamage(f"remote {description}: ref {name} is too big to be a ref ({max(size, len(data))} "
                           "bytes; a ref holds one object id): remove it from the remote")
    return data.decode("ascii", errors="replace").strip()


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
    # An upload whose `moved` callback raises ends there, leaving nothing behind (the directory's copy
    # loop). Not S3's: botocore goes on with the parts (an interrupted push ends without them instead).
    upload_stops_at_callback: bool

    def list(self, prefix: str) -> dict[str, int]:
        """{name: size} of every immutable file under `prefix`."""
        ...

    def download(self, name: str, target: Path, size: int | None = None, moved: Moved = None, parts: int = 1) -> None:
        """Copy one file to `target` (a path the caller owns). `size`: what a listing says it holds
        (a hint: the caller checks what arrives). `moved(n)`: n more bytes arrived (from any thread). `parts`: a
        file of known size may come in this many ranges at once (S3: one GET alone fills ~3/4 of a link)."""
        ...

    def upload(self, source: Path, name: str, moved: Moved = None) -> None:
        """Write one immutable file; it appears whole or not at all. `moved(n)`: n more bytes sent."""
        ...

    def create(self, source: Path, name: str) -> bool:
        """Write one file only if there is none of that name (False: there was; it is left as it was)."""
        ...

    def read_tail(self, name: str, length: int) -> bytes:
        """The last `length` bytes of one file (fewer if it is shorter: the caller checks)."""
        ...

    def read_ref(self, name: str) -> RefValue | None: ...

    def swap_ref(self, name: str, value: str, expected: RefValue | None) -> None:
        """Set ref `name` to `value` if it is still `expected` (None: if it does not exist), else raise
        RemoteRefConflict."""
        ...


def _copy_at_most(src: Any, dst: BinaryIO, size: int | None, what: str, moved: Moved = None,
                  listed: int | None = None) -> None:
    """Copy `src` to `dst`; with a `size`, a source holding more (a file growing on the remote, a server
    that does not stop) is refused once one byte too many has arrived. `listed`: the whole file's size, named in that
    refusal (`src` being the file's last range)."""
    left = None if size is None else size + 1
    while left is None or left > 0:
        chunk = src.read(1 << 20 if left is None else min(1 << 20, left))
        if not chunk:
            return
        dst.write(chunk)
        if moved is not None:
            moved(len(chunk))
        if left is not None:
            left -= len(chunk)
    raise RemoteDamage(f"{what} holds more than the {size if listed is None else listed} bytes listed")


def url_problem(url: str) -> str | None:
    """Why no backend can serve `url` (checked before anything is written), or None."""
    parsed = urlparse(url)
    if parsed.scheme == "s3" and not parsed.netloc:
        return "an S3 remote is s3://BUCKET[/PREFIX]"
    if parsed.scheme not in ("", "s3", "file"):
        return f"unknown scheme {parsed.scheme!r} (use s3://, file:// or a directory)"
    if parsed.scheme == "s3" and {".", ".."} & set(parsed.path.split("/")):
        # S3 takes a key literally: `a/../b` is a prefix of its own, not `b` (a directory's `..` is resolved instead)
        return "an S3 prefix with a '.' or '..' segment names keys holding it literally: write the prefix meant"
    return None


def normal_url(url: str, base: Path | None = None) -> str:
    """`url` as one spelling per place: a directory (plain or file://) absolute from `base` (the current one if None),
    its `.` and `..` segments resolved by name as a shell's `cd` does (`../team/./share/` and `/work/team/share` are
    one remote: one tracking ref, one cache); an S3 URL as it is (url_problem refuses its `..`)."""
    parsed = urlparse(url)
    if parsed.scheme == "s3":
        return url
    path = parsed.path if parsed.scheme == "file" else url
    full = os.path.normpath(os.path.join(base if base is not None else os.getcwd(), path))
    return f"file://{full}" if parsed.scheme == "file" else full


def endpoint_problem(endpoint: str) -> str | None:
    """Why `endpoint` cannot be an S3 endpoint URL, or None."""
    parsed = urlparse(endpoint)
    credential = credential_in_url(endpoint)
    if credential is not None:
        return f"must not carry credentials ({credential}; use the AWS credential chain)"
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        return "expected http(s)://HOST[:PORT]"
    return None


def check_endpoint(endpoint: str, named: str) -> None:
    """UsageError naming where the endpoint came from (`--endpoint-url`, `$AWS_ENDPOINT_URL`)."""
    problem = endpoint_problem(endpoint)
    if problem is not None:
        raise UsageError(f"{named} {shown_url(endpoint)}: {problem}")


def check_location(url: str, endpoint_url: str | None, must_exist: bool = False) -> None:
    """Refuse a remote no backend can open before anything is created; `must_exist`: a directory
    remote must be there (a pull from a mistyped path would otherwise report zero packs)."""
    problem = url_problem(url)
    if problem is not None:
        raise UsageError(f"remote {shown_url(url)}: {problem}")
    parsed = urlparse(url)
    if parsed.scheme == "s3":
        if endpoint_url is None and os.environ.get("AWS_ENDPOINT_URL"):
            check_endpoint(os.environ["AWS_ENDPOINT_URL"], "$AWS_ENDPOINT_URL")
    else:
        root = Path(parsed.path if parsed.scheme == "file" else url).absolute()
        # A file where the remote's folder (or one above it) should be: said so before any work, not "cannot read
        # ref …: Not a directory" (exit 3) once the push had listed its packs.
        below = next((p for p in (root, *root.parents) if os.path.lexists(p)), None)
        if below is not None and not below.is_dir():
            raise UsageError(f"remote {root}: " + ("not a directory (a file)" if below == root
                                                    else f"{below} is a file, not a directory"))
        if must_exist and not root.is_dir():
            raise UsageError(f"remote {root}: no such directory")


def open_backend(url: str, endpoint_url: str | None = None) -> Backend:
    """A backend for `s3://bucket/prefix`, `file:///path` or a plain directory path."""
    check_location(url, endpoint_url)
    parsed = urlparse(url)
    if parsed.scheme == "s3":
        return S3Backend(parsed.netloc, parsed.path.strip("/"), endpoint_url)
    if parsed.scheme == "file":
        return DirectoryBackend(Path(parsed.path))
    return DirectoryBackend(Path(url))


class DirectoryBackend:
    """A remote in a directory: files written by temp + fsync + rename; refs swapped under an flock."""

    upload_stops_at_callback = True

    def __init__(self, root: Path):
        self.root = Path(root).absolute()
        self.description = str(self.root)

    def _path(self, name: str) -> Path:
        return self.root / name

    def list(self, prefix: str) -> dict[str, int]:
        """Every regular file under `prefix` (symlinks are not followed); RemoteDamage for anything else
        there: silently skipping a planted FIFO or link would hide what the remote lacks."""
        base = self._path(prefix)
        if not base.is_dir():
            return {}
        found = {}
        for folder, subfolders, files in os.walk(base):
            for name in subfolders + files:
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, self.root).replace(os.sep, "/")
                try:
                    mode = os.lstat(path)
                except FileNotFoundError:
                    continue  # removed meanwhile (a push's temp file renamed into place)
                if stat.S_ISDIR(mode.st_mode) or ".tmp-" in name:
                    continue
                if not stat.S_ISREG(mode.st_mode):
                    raise _not_a_file(self.description, rel)
                found[rel] = mode.st_size
        return found

    def _open(self, name: str, flags: int = os.O_RDONLY) -> int:
        """A descriptor of the regular file `name`, opened without following a link or waiting on a FIFO."""
        try:
            fd = os.open(self._path(name), flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _not_a_file(self.description, name) from None
            raise
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise _not_a_file(self.description, name)
        return fd

    def _open_to_read(self, name: str) -> int:
        try:
            return self._open(name)
        except FileNotFoundError:
            raise RemoteError(f"remote {self.description}: {name} is missing") from None
        except OSError as exc:
            raise RemoteError(f"remote {self.description}: cannot read {name}: {exc.strerror}") from None

    def download(self, name: str, target: Path, size: int | None = None, moved: Moved = None, parts: int = 1) -> None:
        fd = self._open_to_read(name)  # (one copy whatever `parts`: no link to fill)
        with open(fd, "rb") as src, open(target, "wb") as dst:
            _copy_at_most(src, dst, size, f"remote {self.description}: {name}", moved)

    def read_tail(self, name: str, length: int) -> bytes:
        fd = self._open_to_read(name)
        try:
            size = os.fstat(fd).st_size
            return os.pread(fd, min(length, size), size - min(length, size))
        finally:
            os.close(fd)

    def _write(self, name: str, data_from: Path | bytes, replace: bool = True, moved: Moved = None) -> bool:
        final = self._path(name)
        final.parent.mkdir(parents=True, exist_ok=True)
        inside = os.path.normpath(os.path.join(os.path.realpath(self.root), os.path.dirname(name)))
        if os.path.realpath(final.parent) != inside:
            raise _not_a_file(self.description, os.path.dirname(name))  # a folder linked elsewhere
        tmp = final.with_name(f"{final.name}.tmp-{secrets.token_hex(6)}")
        try:
            with open(tmp, "wb") as dst:
                if isinstance(data_from, bytes):
                    dst.write(data_from)
                else:
                    with open(data_from, "rb") as src:
                        while chunk := src.read(1 << 20):
                            dst.write(chunk)
                            if moved is not None:
                                moved(len(chunk))
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

    def upload(self, source: Path, name: str, moved: Moved = None) -> None:
        self._put(source, name, replace=True, moved=moved)

    def create(self, source: Path, name: str) -> bool:
        return self._put(source, name, replace=False)

    def _put(self, source: Path, name: str, replace: bool, moved: Moved = None) -> bool:
        try:
            return self._write(name, source, replace, moved)
        except OSError as exc:
            raise RemoteError(f"remote {self.description}: cannot write {name}: {exc.strerror}") from None

    def read_ref(self, name: str) -> RefValue | None:
        try:
            fd = self._open(name)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise RemoteError(f"remote {self.description}: cannot read ref {name}: {exc.strerror}") from None
        with open(fd, "rb") as fh:
            text = _ref_text(self.description, name, os.fstat(fd).st_size, fh.read)
        return RefValue(text, text)

    @contextlib.contextmanager
    def _ref_lock(self) -> Iterator[None]:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd = self._open(".refs.lock", os.O_RDWR | os.O_CREAT)
        except OSError as exc:
            raise RemoteError(f"remote {self.description}: cannot lock its refs: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # (released when the descriptor closes)
            yield
        finally:
            os.close(fd)

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
    answer means another writer won, which is reported, never overwritten (unless the 412 answers botocore's retry of
    a PUT whose answer was lost and the ref holds this very value: that write was this one's).
    """

    upload_stops_at_callback = False

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
        # read_timeout: how long an answer may go silent, headers or body (botocore's own 60 s held a pull that long
        # on each stalled pack); a silence before the headers is retried once (`_unreachable_until_answered`), one in
        # a body ends the download (over ONE_GET_MAX, boto3's transfer manager asks again: its 5 attempts;
        # docs/remote.md, "A stalled server")
        config = Config(retries={"max_attempts": 5, "mode": "standard"}, max_pool_connections=32,
                        connect_timeout=CONNECT_TIMEOUT_S, read_timeout=s3_read_timeout())
        self.client: Any = boto3.client("s3", endpoint_url=endpoint, config=config)
        _unreachable_until_answered(self.client)

    def _key(self, name: str) -> str:
        return self.prefix + name

    def _fail(self, what: str, exc: Exception) -> RemoteError:
        # The message names the operation and the service's error code, never credentials.
        # (an error botocore raises for an answer cut off mid-body has `response` None: no code, its type names it)
        response = getattr(exc, "response", None)
        error = response.get("Error") if isinstance(response, dict) else None
        code = (error.get("Code") if isinstance(error, dict) else None) or type(exc).__name__
        hint = S3_HINTS.get(code)
        return RemoteError(f"remote {self.description}: {what} failed ({code}{': ' + hint if hint else ''})")

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

    def download(self, name: str, target: Path, size: int | None = None, moved: Moved = None, parts: int = 1) -> None:
        if size is not None and size <= ONE_GET_MAX and parts > 1 and size >= parts:
            self._get_parts(name, target, size, moved, parts)
            return
        if size is not None and size <= ONE_GET_MAX:
            self._get(name, target, size, moved)
            return
        try:
            self.client.download_file(self.bucket, self._key(name), str(target), Callback=moved)
        except Exception as exc:
            raise self._fail(f"downloading {name}", exc) from None

    def _get(self, name: str, target: Path, size: int, moved: Moved = None) -> None:
        """One GET for a small file (download_file asks for its size first, then gets it: two round
        trips, three times the time of one for a listing); never more than `size` bytes are kept."""
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=self._key(name))["Body"]
            with body, open(target, "wb") as dst:
                _copy_at_most(body, dst, size, f"remote {self.description}: {name}", moved)
        except RemoteDamage:
            raise
        except Exception as exc:
            raise self._fail(f"downloading {name}", exc) from None

    def _get_parts(self, name: str, target: Path, size: int, moved: Moved, parts: int) -> None:
        """`parts` ranged GETs at once, each written where its bytes go (the last asks to the end: a file that grew is
        refused as `_get` refuses it); never more than `size` bytes are kept (a range answered short leaves a hole of
        zeros: the caller's check of what arrived refuses it); an answer that is not the range asked (a 200: a server
        that ignores ranges) is refused before a byte of it is kept. One range failing abandons the others at their
        next chunk (a flaky link: the failure is told without waiting for the rest of the file)."""
        what = f"remote {self.description}: {name}"
        cuts = [size * part // parts for part in range(parts + 1)]
        failed = threading.Event()
        with open(target, "wb") as dst:
            dst.truncate(size)

        def counted(nbytes: int) -> None:
            if failed.is_set():
                raise _Abandoned
            if moved is not None:
                moved(nbytes)

        def one(start: int, end: int) -> None:
            last = end == size
            asked = f"bytes={start}-{'' if last else end - 1}"
            try:
                answer = self.client.get_object(Bucket=self.bucket, Key=self._key(name), Range=asked)
                body, got = answer["Body"], answer.get("ContentRange")
                if not str(got).startswith(f"bytes {start}-"):  # (206's Content-Range: where its bytes go)
                    body.close()
                    raise RemoteDamage(f"{what}: the server answered {asked} with "
                                       f"{'the whole file (it ignores ranges)' if got is None else got[:100]}")
                with body, open(target, "r+b") as dst:
                    dst.seek(start)
                    _copy_at_most(body, dst, end - start, what if last else f"{what} (bytes {start}-{end - 1})",
                                  counted, size if last else None)
            except _Abandoned:
                raise
            except RemoteDamage:
                failed.set()
                raise
            except Exception as exc:
                failed.set()
                raise self._fail(f"downloading {name}", exc) from None
            except BaseException:  # (KeyboardInterrupt in the caller's range: the others end too)
                failed.set()
                raise

        with ThreadPoolExecutor(max_workers=parts - 1) as pool:  # (the last range in this thread)
            others = [pool.submit(one, start, end) for start, end in zip(cuts[:-2], cuts[1:-1], strict=True)]
            with contextlib.suppress(_Abandoned):  # (another range failed: its failure is raised below)
                one(cuts[-2], cuts[-1])
        for problem in (other.exception() for other in others):
            if problem is not None and not isinstance(problem, _Abandoned):
                raise problem

    def read_tail(self, name: str, length: int) -> bytes:
        """One ranged GET (`bytes=-length`); never more than `length` bytes are kept."""
        if length == 0:
            return b""
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=self._key(name), Range=f"bytes=-{length}")["Body"]
            with contextlib.closing(body):
                return body.read(length)
        except Exception as exc:
            raise self._fail(f"downloading {name}", exc) from None

    def upload(self, source: Path, name: str, moved: Moved = None) -> None:
        try:
            size = source.stat().st_size
            if size > ONE_PUT_MAX:
                self.client.upload_file(str(source), self.bucket, self._key(name), Callback=moved)
                return
            with open(source, "rb") as body:  # (streamed: botocore reads it for its checksum, then sends it)
                self.client.put_object(Bucket=self.bucket, Key=self._key(name), Body=body)
            if moved is not None:
                moved(size)  # (at most ONE_PUT_MAX at once, as a listing's create)
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
        with contextlib.closing(reply["Body"]) as body:
            text = _ref_text(self.description, name, int(reply.get("ContentLength") or 0), body.read)
        return RefValue(text, reply["ETag"])

    def swap_ref(self, name: str, value: str, expected: RefValue | None) -> None:
        condition = {"IfMatch": expected.version} if expected else {"IfNoneMatch": "*"}
        try:
            self.client.put_object(Bucket=self.bucket, Key=self._key(name), Body=(value + "\n").encode("ascii"),
                                   **condition)
        except Exception as exc:
            if _status(exc) in (409, 412):
                # Refused on botocore's retry of a PUT whose answer was lost (the connection broke after the server
                # applied it): the retry met this very write. The ref holding `value` says so: this swap's success.
                if _retries(exc) > 0 and (now := self.read_ref(name)) is not None and now.value == value:
                    return
                raise RemoteRefConflict(name) from None
            raise self._fail(f"writing ref {name}", exc) from None


# The S3 endpoints that have answered this process (anything: an error is an answer too).
_ANSWERED: set[str] = set()


def _unreachable_until_answered(client: Any) -> None:
    """A refused connection, a host name that does not resolve (EndpointConnectionError) or a connection not completed
    in CONNECT_TIMEOUT_S (ConnectTimeoutError) is not retried until the endpoint has answered this process once; a
    request whose answer went silent for the read timeout (ReadTimeoutError) is sent READ_TIMEOUT_ATTEMPTS times.
    botocore retries them 5 times with backoff (~15 s a request, up to 31; 37 s a `build --remote` asking twice; a
    dropped SYN 6 connect timeouts): right for a server restarting mid-campaign, a long wait before "cannot connect"
    for a mistyped endpoint, a server not started or a firewall. Every other retry (throttling, 5xx, a dropped
    connection) is botocore's as ever; so are these once the endpoint answered, whichever backend (an interim push makes
    its own) asks it again."""
    from botocore.exceptions import ConnectTimeoutError, EndpointConnectionError, ReadTimeoutError

    endpoint = client.meta.endpoint_url

    def not_before_an_answer(response: Any, caught_exception: Exception | None, attempts: int = 1,
                             **_: Any) -> bool | None:
        if response is not None:
            _ANSWERED.add(endpoint)
        elif isinstance(caught_exception, EndpointConnectionError | ConnectTimeoutError) and endpoint not in _ANSWERED:
            # botocore follows the first handler's answer: no retry, no sleep (its own handler still runs, and takes
            # 5 of its 500 retry tokens from a client whose endpoint never answered)
            return False
        elif isinstance(caught_exception, ReadTimeoutError) and attempts >= READ_TIMEOUT_ATTEMPTS:
            return False  # a server silent for a read timeout twice: no third wait (botocore's 5 held a pull 5 times)
        return None

    client.meta.events.register_first("needs-retry.s3", not_before_an_answer)


def _retries(exc: Exception) -> int:
    """How many times botocore sent again the request whose answer `exc` is (0: the first sending's)."""
    response = getattr(exc, "response", None)
    metadata = response.get("ResponseMetadata") if isinstance(response, dict) else None
    return int(metadata.get("RetryAttempts") or 0) if isinstance(metadata, dict) else 0


def _status(exc: Exception) -> int | None:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return None
