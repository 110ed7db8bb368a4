"""Named remotes in the workspace file `claw.yaml` (beside `configs/`), so nobody retypes a URL.

    remotes:
      team: {url: s3://bench-results/team, endpoint_url: http://minio.local:9000}
      share: {url: /mnt/nfs/claw}

A remote entry holds a location only: credentials come from the AWS chain and are refused here.
"""

from __future__ import annotations

import fcntl
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clawstore.errors import ConfigError, UsageError, utf8_argument
from clawstore.host.durable import write_file_atomic
from clawstore.remote.backends import check_endpoint, check_location, endpoint_problem, normal_url, url_problem
from clawstore.values.urls import credential_in_url, shown_url

WORKSPACE_FILE = "claw.yaml"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class Remote:
    name: str  # its tracking refs' (remotes/<name>/): the first name claw.yaml gives its place
    url: str
    endpoint_url: str | None = None
    # other names this place was tracked under by claw before session 77 (a second saved name, a URL spelled out):
    # a value found in their tracking refs is one this store saw there too
    also: tuple[str, ...] = ()


def _check_utf8(value: str, where: str) -> None:
    """claw.yaml, tracking refs and reports hold UTF-8 only: a Latin-1 URL saved made claw.yaml unreadable,
    one pushed to ended in a traceback."""
    utf8_argument(value, where, "; claw takes remote URLs and directories in UTF-8 only")


def _check_url(url: str, where: str) -> str:
    _check_utf8(url, where)
    credential = credential_in_url(url) if "://" in url else None  # (a plain directory's name may hold '?' or '@')
    if credential is not None:
        raise UsageError(f"{where}: a remote URL must not carry credentials ({credential}; use the AWS credential "
                         "chain)")
    if not url.strip():
        raise UsageError(f"{where}: empty remote URL")
    problem = url_problem(url)
    if problem is not None:
        raise UsageError(f"{where}: {shown_url(url)}: {problem}")
    return url


def _read(path: Path) -> dict[str, Any]:
    """The workspace file, read with the guards of every config (it comes with the workspace)."""
    if not path.exists():
        return {}  # (no YAML read, nor its reader imported: ~15 ms of a push's or pull's start)
    from clawstore.config.yamlio import YamlProblem, load_mapping

    try:
        return load_mapping(path)
    except YamlProblem as exc:
        raise ConfigError(str(exc), path=str(path)) from None


def load_remotes(workspace: Path) -> dict[str, Remote]:
    path = workspace / WORKSPACE_FILE
    entries = _read(path).get("remotes") or {}
    if not isinstance(entries, dict):
        raise ConfigError("expected a mapping of name: {url, endpoint_url}", path=str(path), field="remotes")
    remotes = {}
    for name, entry in entries.items():
        field = f"remotes.{name}"
        if not isinstance(name, str) or not _NAME.match(name):
            raise ConfigError("a remote name is letters, digits, '_.-' (at most 64)", path=str(path), field=field)
        if isinstance(entry, str):
            entry = {"url": entry}
        if not isinstance(entry, dict) or not isinstance(entry.get("url"), str):
            raise ConfigError("expected {url: ..., endpoint_url: ...}", path=str(path), field=field)
        endpoint = entry.get("endpoint_url")
        if endpoint is not None:
            why = endpoint_problem(endpoint) if isinstance(endpoint, str) else "expected a URL string"
            if why is not None:
                raise ConfigError(why, path=str(path), field=field + ".endpoint_url")
        # (a directory written relative is the workspace's, wherever claw runs: it was the current directory's)
        remotes[name] = Remote(name, normal_url(_check_url(entry["url"], f"{path}: {field}.url"), workspace), endpoint)
    return remotes


@contextmanager
def _workspace_locked(workspace: Path) -> Iterator[None]:
    """The workspace directory flock'ed (no lock file left in it): one read-modify-write of claw.yaml
    at a time, so `remote add`s run at once keep every entry."""
    fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the flock


def save_remote(workspace: Path, remote: Remote | None, name: str) -> tuple[str | None, str | None]:
    """Add or replace (remote given) or remove (None) one entry, keeping the rest of the file; the URL saved (a
    directory's absolute, from the current directory: normal_url), and the URL it replaced (None: a new name, or the
    same URL), which `remote add` says."""
    with _workspace_locked(workspace):
        return _save_remote(workspace / WORKSPACE_FILE, remote, name)


def _save_remote(path: Path, remote: Remote | None, name: str) -> tuple[str | None, str | None]:
    data = _read(path)
    found = data.get("remotes") or {}
    if not isinstance(found, dict):  # (`remotes: 5` was a TypeError's traceback; a list's too)
        raise ConfigError("expected a mapping of name: {url, endpoint_url}", path=str(path), field="remotes")
    entries = dict(found)
    if remote is None:
        if name not in entries:
            raise UsageError(f"no remote named {name!r} in {path}")
        del entries[name]
    else:
        if not _NAME.match(name):
            raise UsageError(f"remote name {name!r}: letters, digits, '_.-' (at most 64)")
        _check_url(remote.url, f"remote {name}")
        if remote.endpoint_url is not None:
            _check_utf8(remote.endpoint_url, "--endpoint-url")
            check_endpoint(remote.endpoint_url, "--endpoint-url")
        url = normal_url(remote.url)
        before = entries.get(name)
        was = before.get("url") if isinstance(before, dict) else before  # (a bare `name: url` entry too)
        replaced = str(was) if was is not None and str(was) != url else None
        entries[name] = {"url": url, **({"endpoint_url": remote.endpoint_url} if remote.endpoint_url else {})}
    data["remotes"] = entries
    import yaml

    write_file_atomic(path, yaml.safe_dump(data, sort_keys=False).encode("utf-8"), path.parent)
    return (None, None) if remote is None else (url, replaced)


def resolve_remote(workspace: Path, name_or_url: str, endpoint_url: str | None = None,
                   must_exist: bool = False) -> Remote:
    """A saved remote by name, else the argument itself as a URL or directory: one a backend can open
    (backends.check_location; `must_exist`: a directory remote must be there), checked before the
    caller makes a store."""
    if endpoint_url is not None:
        _check_utf8(endpoint_url, "--endpoint-url")
        check_endpoint(endpoint_url, "--endpoint-url")
    saved = load_remotes(workspace)
    if name_or_url in saved:
        url, endpoint_url = saved[name_or_url].url, endpoint_url or saved[name_or_url].endpoint_url
        remote = _tracked(saved, Remote(_saved_name(saved, url, endpoint_url) or name_or_url, url, endpoint_url))
    elif "://" not in name_or_url and "/" not in name_or_url and not Path(name_or_url).exists():
        names = ", ".join(sorted(saved)) or "none saved"
        raise UsageError(f"no remote named {name_or_url!r} ({names}; add one with claw remote add NAME URL)")
    else:
        url = normal_url(_check_url(name_or_url, "remote"))
        remote = _tracked(saved, Remote(_saved_name(saved, url, endpoint_url) or _tracking_name(url), url,
                                        endpoint_url))
    check_location(remote.url, remote.endpoint_url, must_exist)
    return remote


def _saved_name(saved: dict[str, Remote], url: str, endpoint_url: str | None) -> str | None:
    """The first name claw.yaml gives the place a URL or directory names (a bucket's prefix at the same endpoint),
    so that every spelling and every name of it shares one tracking ref: apart, the push by one found the head the
    other had set unknown and stopped with "changed by another push" (session 77)."""
    return next(iter(_names_of(saved, url, endpoint_url)), None)


def _names_of(saved: dict[str, Remote], url: str, endpoint_url: str | None) -> list[str]:
    place = _place(url)
    return [name for name, remote in saved.items()
            if _place(remote.url) == place and ("://" not in place or remote.endpoint_url == endpoint_url)]


def _tracked(saved: dict[str, Remote], remote: Remote) -> Remote:
    """`remote` with the other names its place had tracking refs under (Remote.also), spelled as its tracking name
    is saved (`/x`, not `file:///x`): the notes in its cache folder (a push's `swapping`, `covered`) name the place by
    its URL, and a note one spelling wrote the other ignored."""
    names = [*_names_of(saved, remote.url, remote.endpoint_url), _tracking_name(remote.url)]
    url = saved[remote.name].url if remote.name in saved else remote.url
    return Remote(remote.name, url, remote.endpoint_url, tuple(n for n in names if n != remote.name))


def same_place(workspace: Path, name: str) -> str | None:
    """The saved name before `name` that claw.yaml gives the same place (`remote add` says it: both share its
    tracking refs), or None."""
    saved = load_remotes(workspace)
    first = _saved_name(saved, saved[name].url, saved[name].endpoint_url) if name in saved else None
    return first if first != name else None


def _place(url: str) -> str:
    """A directory remote's path whether spelled `file:///x` or `/x` (normal_url keeps the scheme it was given)."""
    return url.removeprefix("file://")


def _tracking_name(url: str) -> str:
    """A ref-safe name for an unnamed remote (its tracking refs live under remotes/<name>/)."""
    import blake3

    return "url-" + blake3.blake3(_place(url).encode()).hexdigest()[:16]
