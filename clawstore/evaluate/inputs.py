"""Host files a check set reads: they are inputs of the checks node, so their digests enter its key.

Nothing here executes user code: `import_path` hooks are located on `sys.path` by file lookup, not
imported (importing would run the hook package outside its sandbox).
"""

from __future__ import annotations

import importlib.machinery
import os
import stat
import sys
from collections.abc import MutableMapping, Sequence
from typing import Any

import blake3

from clawstore.evaluate.declarative import HOST_PATH_KINDS
from clawstore.evaluate.specs import case_path_name, check_spec, host_readable, resolve_case_path

IMPORT_KEY_PREFIX = "python:"
# An `import_path` hook's folder, by (folder, top package), or a `path` hook's outside its case (folder, file name):
# the inputs listed for it (`_import_folder`), computed once per build however many cases name a hook there
# (builder/eval_layer.py holds one per build).
FolderCache = MutableMapping[tuple[str, str], dict[str, str | None]]


def _digest_path(path: str) -> str | None:
    """blake3 hex of a file's bytes; `dir` for a directory; `special` for anything else (a named pipe, a device: opened
    without waiting, never read; before session 75 a check naming a pipe blocked `claw status` for ever); None when
    absent or unreadable."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return "dir" if os.path.isdir(path) else None  # (a directory claw may not list still exists)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            return "dir"
        if not stat.S_ISREG(mode):
            return "special"
        hasher = blake3.blake3()
        for chunk in iter(lambda: os.read(fd, 1 << 20), b""):
            hasher.update(chunk)
        return hasher.hexdigest()
    except OSError:
        return None
    finally:
        os.close(fd)


def _find_module_file(dotted: str, search_path: Sequence[str]) -> str | None:
    parts = dotted.split(".")
    for entry in search_path:
        base = os.path.join(entry or os.getcwd(), *parts)
        for candidate in (base + ".py", os.path.join(base, "__init__.py")):
            if os.path.isfile(candidate):
                return candidate
    return None


def import_root(dotted: str, where: Sequence[str]) -> str | None:
    """The folder of `where` (the case directory first, then the search path) that holds an `import_path` hook's top
    package or module: the one folder its sandbox may read besides the case directory (evaluate/hooks.py)."""
    top = dotted.split(".")[0]
    for entry in where:
        base = os.path.join(entry or os.getcwd(), top)
        if os.path.isfile(base + ".py") or os.path.isdir(base):
            return os.path.abspath(entry or os.getcwd())
    return None


def hook_folder(path: str, case_dir: str | os.PathLike[str] | None) -> str | None:
    """The real folder of a `path` hook's file when it lies outside its case directory (by `..` or a symlink: a hook
    shared by several cases, `../../shared/check.py`), else None: the one folder its sandbox may read besides the case
    directory (evaluate/hooks.py), and whose modules are inputs of the checks as an `import_path` hook's are
    (`_import_folder`)."""
    if case_dir is None:
        return None
    name = case_path_name(path)
    if not (os.path.isabs(name) or name == os.pardir or name.startswith(os.pardir + os.sep)):
        # inside unless through a symlink: an lstat per part, not a realpath of the whole (a case's keys, and the
        # stamp's split by case, ask this of every case: builder/casestamp.py)
        here = os.fspath(case_dir)
        for part in name.split(os.sep):
            here = os.path.join(here, part)
            if os.path.islink(here):
                break
        else:
            return None
    folder = os.path.dirname(os.path.realpath(resolve_case_path(path, case_dir)))
    inside = os.path.join(os.path.realpath(case_dir), "")
    return None if os.path.join(folder, "").startswith(inside) else folder


def _installation() -> tuple[str, ...]:
    """Where the Python claw runs on keeps its modules (the standard library, site-packages: a venv's, the user's), as
    folder paths ending in a separator."""
    import site
    import sysconfig

    paths = sysconfig.get_paths()
    places = {*(paths[name] for name in ("stdlib", "platstdlib", "purelib", "platlib") if name in paths),
              *site.getsitepackages(), site.getusersitepackages()}
    return tuple(os.path.join(os.path.realpath(place), "") for place in places if place)


def _import_folder(root: str, top: str) -> dict[str, str | None]:
    """What an `import_path` hook found in `root` (outside its case directory) may import there, by `python:./` and
    its path below `root`: every entry of its top package's tree (`_directory_tree`: its other modules, its
    `__init__.py`, a data file it reads beside them) and, unless `root` is in the Python installation (site-packages,
    the standard library: what a hook imports from there is no input), every module file and every package's tree (a
    folder with an `__init__.py`) directly in `root`: what it may import beside its own. Not listed: a namespace
    package (a folder without one), a file outside a package."""
    found: dict[str, str | None] = {}
    packages = [top] if os.path.isdir(os.path.join(root, top)) else []
    modules: list[os.DirEntry[str]] = []
    if not os.path.join(os.path.realpath(root), "").startswith(_installation()):
        suffixes = tuple(importlib.machinery.all_suffixes())
        try:
            with os.scandir(root) as listing:
                for entry in listing:
                    if entry.name.endswith(suffixes):
                        modules.append(entry)
                    elif (entry.name != top and entry.is_dir(follow_symlinks=False)
                          and os.path.isfile(os.path.join(entry.path, "__init__.py"))):
                        packages.append(entry.name)
        except OSError:
            pass
    for package in packages:
        for name, digest in _directory_tree(os.path.join(root, package)).items():
            found[f"{IMPORT_KEY_PREFIX}./{package}/{name}"] = digest
    for entry in modules:
        try:
            if entry.is_symlink():
                found[f"{IMPORT_KEY_PREFIX}./{entry.name}"] = "link:" + os.readlink(entry.path)
            elif entry.is_file(follow_symlinks=False):
                found[f"{IMPORT_KEY_PREFIX}./{entry.name}"] = _digest_path(entry.path)
        except OSError:
            found[f"{IMPORT_KEY_PREFIX}./{entry.name}"] = None
    return found


def _path_key(path: str) -> str:
    """A host path's key: its name, `./`-prefixed when it would read as an import hook's key (a
    normalised relative path never starts with `./`, so no two inputs share a key)."""
    name = case_path_name(path)
    return "./" + name if name.startswith(IMPORT_KEY_PREFIX) else name


def _directory_tree(top: str) -> dict[str, str | None]:
    """Every entry of a folder a python hook may read (its case directory, an `import_path` hook's package: docs/
    evaluation.md, What a hook may read), by its name relative to it as a check path is named: a regular file by its
    digest, a symlink by where it points (never followed: one leading out of the folder is absent in the hook's
    sandbox), anything else (a pipe, a socket) by its kind, never opened. `__pycache__` folders are left out (a hook
    never reads its own bytecode there: it runs with PYTHONDONTWRITEBYTECODE from a read-only view)."""
    found: dict[str, str | None] = {}
    folders = [""]
    while folders:
        folder = folders.pop()
        try:
            with os.scandir(os.path.join(top, folder) if folder else top) as listing:
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


def _add_folder(found: dict[str, str | None], root: str, top: str, folders: FolderCache | None) -> None:
    """What a hook may import in its folder outside the case directory (`_import_folder`), listed once per build."""
    listed = folders.get((root, top)) if folders is not None else None
    if listed is None:
        listed = _import_folder(root, top)
        if folders is not None:
            folders[(root, top)] = listed
    for name, digest in listed.items():
        # (two hooks' folders may each hold a file of that name: both digests)
        found[name] = digest if found.get(name, digest) == digest else f"{found[name]} {digest}"


def check_inputs(
    checks: Sequence[Any], case_dir: str | os.PathLike[str] | None, search_path: Sequence[str] | None = None,
    folders: FolderCache | None = None,
) -> dict[str, str | None]:
    """Map every host file the checks read to its content digest (None when absent): check targets and `path` hooks as
    the case names them (case_path_name), `python:<module>` for `import_path` hooks and, for one found outside the
    case directory or a `path` hook whose file is outside it (`hook_folder`), what it may import in its folder
    (`_import_folder`, cached in `folders`), and with any python hook every file of the case directory, which the
    hook may read (`_directory_tree`). Files the sandbox may hold
    are listed too: listing more only costs a re-check."""
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
            if (folder := hook_folder(str(hook["path"]), base)) is not None:
                # (no package of its own: its file's name, which names no folder, stands for one)
                _add_folder(found, folder, os.path.basename(resolve_case_path(str(hook["path"]), base)), folders)
        elif hook and hook.get("import_path"):
            dotted = str(hook["import_path"])
            # the hook child runs in the case directory, so that directory comes first on its path
            where = [*([base] if base else []), *(sys.path if search_path is None else search_path)]
            module_file = _find_module_file(dotted, where)
            found[IMPORT_KEY_PREFIX + dotted] = _digest_path(module_file) if module_file else None
            root = import_root(dotted, where)
            if root is not None and (base is None or os.path.realpath(root) != os.path.realpath(base)):
                _add_folder(found, root, dotted.split(".")[0], folders)
    if base is not None and any(check_spec(raw)["python_hook"] for raw in checks):
        for name, digest in _directory_tree(base).items():
            found.setdefault(_path_key(name), digest)
    return dict(sorted(found.items()))
