"""Turn config objects (pydantic models from clawstore.config, or plain dicts) into plain dicts.

Evaluation code reads only plain data, so it works the same whether the caller holds the config
layer's models or dicts built in a test.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

from clawstore.evaluate.evidence import DIMENSIONS

JSON_ATOMS = frozenset({str, int, float, bool, type(None)})  # JSON's scalars, by exact type


def plain(value: Any) -> Any:
    """Recursively convert models / paths / tuples into JSON-like Python values."""
    kind = type(value)  # JSON's own types first (most values are read from the store): exact types, no lookups
    if kind in JSON_ATOMS:
        return value
    if kind is dict:
        return {k if type(k) is str else str(k): plain(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [plain(v) for v in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")  # already plain: pydantic converts paths, enums and tuples itself
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    return value


def check_spec(check: Any) -> dict[str, Any]:
    """A deterministic check as `{check_id, description, dimensions, declarative|python_hook}`."""
    spec = plain(check)
    if not isinstance(spec, dict):
        raise TypeError(f"a deterministic check must be a mapping, got {type(spec).__name__}")
    out: dict[str, Any] = {
        "check_id": str(spec.get("check_id") or ""),
        "description": spec.get("description"),
        "dimensions": sorted({d for d in spec.get("dimensions") or [] if d in DIMENSIONS}),
        "declarative": None,
        "python_hook": None,
    }
    if spec.get("declarative") is not None:
        out["declarative"] = {k: v for k, v in spec["declarative"].items() if v is not None}
    if spec.get("python_hook") is not None:
        out["python_hook"] = {k: v for k, v in spec["python_hook"].items() if v is not None}
    return out


def security_policy(policy: Any) -> dict[str, Any]:
    """Security policy with the schema defaults filled in."""
    raw = plain(policy) if policy is not None else {}
    return {
        "allow_local_python_hooks": bool(raw.get("allow_local_python_hooks", False)),
        "network_access": str(raw.get("network_access") or "deny"),
        "redact_secrets": bool(raw.get("redact_secrets", True)),
    }


def case_path_name(path: str) -> str:
    """How keys and check results name a check/hook path: as the case wrote it (`~` expanded, normalised), a relative
    one still relative to the case directory, never joined to where the workspace sits, so that a moved or cloned
    workspace keeps its keys. Details: docs/evaluation.md (Details by module)."""
    return os.path.normpath(os.path.expanduser(str(path)))


def resolve_case_path(path: str, case_dir: str | os.PathLike[str] | None) -> str:
    """A check/hook path as the host path it names: `~` expanded, relative to the case directory."""
    name = case_path_name(path)
    if os.path.isabs(name) or case_dir is None:
        return name
    return os.path.normpath(os.path.join(os.fspath(case_dir), name))


def host_root(case_dir: str | os.PathLike[str] | None) -> str | None:
    """The workspace a case directory belongs to (`<root>/configs/cases/...`), else the case directory."""
    if case_dir is None:
        return None
    here = os.path.abspath(os.fspath(case_dir))
    probe = here
    while True:
        parent = os.path.dirname(probe)
        if os.path.basename(probe) == "cases" and os.path.basename(parent) == "configs":
            return os.path.dirname(parent)
        if parent == probe:
            return here
        probe = parent


def host_readable(path: str, case_dir: str | os.PathLike[str] | None) -> bool:
    """Whether a check may look at this host path: only inside the case's workspace, symlinks followed
    (a hostile case must not learn host files bit by bit through check outcomes)."""
    root = host_root(case_dir)
    if root is None:  # library use without a case: nothing to confine to
        return True
    real, real_root = os.path.realpath(path), os.path.realpath(root)
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)
