"""Host files a check set reads: they are inputs of the checks node, so their digests enter its key.

Nothing here executes user code: `import_path` hooks are located on `sys.path` by file lookup, not
imported (importing would run the hook package outside its sandbox).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

import blake3

from clawstore.evaluate.declarative import HOST_PATH_KINDS
from clawstore.evaluate.specs import case_path_name, check_spec, host_readable, resolve_case_path

IMPORT_KEY_PREFIX = "python:"


def _digest_path(path: str) -> str | None:
    """blake3 hex of a file's bytes; `dir` for a directory; None when absent or unreadable."""
    if os.path.isdir(path):
        return "dir"
    try:
        hasher = blake3.blake3()
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                hasher.update(chunk)
        return hasher.hexdigest()
    except OSError:
        return None


def _find_module_file(dotted: str, search_path: Sequence[str]) -> str | None:
    parts = dotted.split(".")
    for entry in search_path:
        base = os.path.join(entry or os.getcwd(), *parts)
        for candidate in (base + ".py", os.path.join(base, "__init__.py")):
            if os.path.isfile(candidate):
                return candidate
    return None


def _path_key(path: str) -> str:
    """A host path's key: its name, `./`-prefixed when it would read as an import hook's key (a
    normalised relative path never starts with `./`, so no two inputs share a key)."""
    name = case_path_name(path)
    return "./" + name if name.startswith(IMPORT_KEY_PREFIX) else name


def _case_directory(case_dir: str) -> dict[str, str | None]:
    """Every entry of the case directory a python hook may read (docs/evaluation.md, What a hook may read), by its
    name relative to it as a check path is named: a regular file by its digest, a symlink by where it points (never
    followed: one leading out of the directory is absent in the hook's sandbox), anything else (a pipe, a socket) by
    its kind, never opened. `__pycache__` folders are left out (a hook never reads its own bytecode there: it runs
    with PYTHONDONTWRITEBYTECODE from a read-only view)."""
    found: dict[str, str | None] = {}
    folders = [""]
    while folders:
        folder = folders.pop()
        try:
            with os.scandir(os.path.join(case_dir, folder) if folder else case_dir) as listing:
                entries = list(listing)
        except OSError:
            continue
        for entry in entries:
            name = os.path.join(folder, entry.name) if folder else entry.name
            try:
                if entry.is_symlink():
                    found[name] = "link:" + os.readlink(entry.path)
                elif entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        folders.append(name)
                elif entry.is_file(follow_symlinks=False):
                    found[name] = _digest_path(entry.path)
                else:
                    found[name] = "special"
            except OSError:
                found[name] = None
    return found


def check_inputs(
    checks: Sequence[Any], case_dir: str | os.PathLike[str] | None, search_path: Sequence[str] | None = None
) -> dict[str, str | None]:
    """Map every host file the checks read to its content digest (None when absent): check targets and `path` hooks as
    the case names them (case_path_name), `python:<module>` for `import_path` hooks, and with any python hook every
    file of the case directory, which the hook may read (`_case_directory`). Files the sandbox may hold are listed
    too: listing more only costs a re-check."""
    base = os.fspath(case_dir) if case_dir is not None else None
    found: dict[str, str | None] = {}
    for raw in checks:
        spec = check_spec(raw)
        decl = spec["declarative"]
        if decl and decl.get("kind") in HOST_PATH_KINDS and isinstance(decl.get("path"), str):
            path = resolve_case_path(decl["path"], base)
            found[_path_key(decl["path"])] = _digest_path(path) if host_readable(path, base) else None
        hook = spec["python_hook"]
        if hook and hook.get("path"):
            found[_path_key(str(hook["path"]))] = _digest_path(resolve_case_path(str(hook["path"]), base))
        elif hook and hook.get("import_path"):
            dotted = str(hook["import_path"])
            # the hook child runs in the case directory, so that directory comes first on its path
            where = [*([base] if base else []), *(sys.path if search_path is None else search_path)]
            module_file = _find_module_file(dotted, where)
            found[IMPORT_KEY_PREFIX + dotted] = _digest_path(module_file) if module_file else None
    if base is not None and any(check_spec(raw)["python_hook"] for raw in checks):
        for name, digest in _case_directory(base).items():
            found.setdefault(_path_key(name), digest)
    return dict(sorted(found.items()))
