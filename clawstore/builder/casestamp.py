"""The stamp per case: after an edit of some cases' files (edited, added, removed cases), `claw status`, `explain`,
`build --dry-run` (text) and `plan` plan those cases alone and take every other case's answer from the build's
stamp (builder/stamp.py): each of those is fresh, as the stamp proved, with a case's nodes per model and layer.

Sound because a campaign's nodes belong to one case each (a run is one model × case × repetition; its checks,
judgements and result are its own: builder/api.py `_eval_nodes`), and a case's nodes depend on the campaign's
configs (suite, profiles, prompts: reads outside `configs/cases/`, which take the full path when changed), the store,
the environment and the code (all checked as for the stamp itself) and on the files of that case alone: its
test.yaml, what its directory holds, and the files it names (sources, attachments, hooks, check targets), found by
their names in its YAML (a name the suite or a profile holds too: the full path). Every case the workspace's load
now gives is compared with the stamp's list by id and file.
docs/building.md ("After an edit of some cases: the stamp per case")."""

from __future__ import annotations

import importlib.machinery
import os
import pickle
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from clawstore.builder.stamp import Layers, valid_layers

if TYPE_CHECKING:
    from clawstore.config.campaign import Campaign
    from clawstore.config.catalog import CaseEntry
    from clawstore.store.documents import Stamp


def imports_hooks(entries: Sequence[CaseEntry]) -> bool:
    """Does a case import a check's hook module by name? It is found on a search path, maybe outside the workspace,
    where the stamp's reads do not look, so no stamp may vouch for it (its content is in the check's key)."""
    return any(b"import_path" in entry.validated_from for entry in entries)


def cases_of(entries: Sequence[CaseEntry], layers: Layers) -> dict[str, Any] | None:
    """What a stamp keeps of its campaign's cases: each case's id and test.yaml in campaign order, and one case's
    nodes per model and layer (every case has the same: every model, the same repetitions, each run the same
    evaluation nodes). None (no answer per case) when the layers do not split evenly. (A campaign whose cases
    import a hook module by name gets no stamp at all: `imports_hooks`, asked by project/stamping.py.)"""
    count = len(entries)
    if not count:
        return None
    per_case = []
    for model, kinds in layers:
        if any(n % count for n in kinds.values()):
            return None
        per_case.append([model, {kind: n // count for kind, n in kinds.items()}])
    return {"files": [[entry.case_id, entry.file] for entry in entries], "layers": per_case}


@dataclass(frozen=True)
class ByCase:
    """The campaign's cases to plan (alone in `campaign`), and how many others the stamp answers, fresh."""

    campaign: Campaign
    unchanged: int
    per_case: Layers  # one case's nodes per model and layer

    def fresh_layers(self) -> Layers:
        """The nodes the stamp answers for, per model and layer (all fresh)."""
        return [(model, {kind: n * self.unchanged for kind, n in kinds.items()}) for model, kinds in self.per_case]

    @property
    def fresh_nodes(self) -> int:
        return sum(n for _, kinds in self.fresh_layers() for n in kinds.values())


def split(doc: Stamp, changed: list[str], campaign: Campaign) -> ByCase | None:
    """The cases of `campaign` (loaded from the workspace as it is now) to plan when `changed` (the stamp's reads
    whose stat data differ) are all below `configs/cases/`; None when the stamp cannot answer for the others."""
    ws = campaign.workspace
    known = _cases(doc)
    if ws is None or known is None or not changed or campaign.campaign_id != doc.campaign_id:
        return None
    files, per_case = known
    root = str(ws.configs_dir / "cases")
    if any(not (path == root or path.startswith(root + os.sep)) for path in changed):
        return None  # a suite, a profile, a prompt, an agent: what every case depends on
    if [model for model, _ in per_case] != campaign.model_ids:
        return None
    entries = campaign.items.cases
    if not entries:
        return None
    dirty, needles = _dirty(changed, files, entries)
    configs = _configs_text(campaign)
    if configs is None or any(needle in text for needle in needles for text in configs):
        return None  # a file the suite or a profile names too (a judge prompt kept among the cases: every case's)
    planned = [entry for entry in entries if files.get(entry.case_id) != entry.file or entry.case_id in dirty]
    if any(entry.runner_type != "llm_probe" for entry in planned):
        return None  # (a stamp is never written with openclaw runs: those take their own path)
    return ByCase(replace(campaign, items=campaign.items.only(planned)), len(entries) - len(planned), per_case)


def _cases(doc: Stamp) -> tuple[dict[str, str], Layers] | None:
    """The stamp's cases (id -> test.yaml) and one case's layers, if it has them and they add up to its layers."""
    cases = doc.cases
    if not isinstance(cases, dict) or not isinstance(cases.get("files"), list):
        return None
    pairs = cases["files"]
    if not all(isinstance(p, list) and len(p) == 2 and all(isinstance(v, str) for v in p) for p in pairs):
        return None
    per_case, layers = valid_layers(cases.get("layers")), valid_layers(doc.layers)
    if per_case is None or layers is None or layers != [
            (model, {kind: n * len(pairs) for kind, n in kinds.items()}) for model, kinds in per_case]:
        return None
    return dict(pairs), per_case


def _configs_text(campaign: Campaign) -> list[bytes] | None:
    """The suite's and the profiles' files as written (what names a file there names it by its path); None if one
    cannot be read now."""
    try:
        return [path.read_bytes() for path in (campaign.suite_path, campaign.run_profile_path,
                                               campaign.evaluation_profile_path) if path is not None]
    except OSError:
        return None


def _dirty(changed: list[str], files: dict[str, str], entries: Sequence[CaseEntry]) -> tuple[set[str], list[bytes]]:
    """The cases a changed read may belong to: those whose directory holds it, and those whose YAML holds its name
    (a source, attachment, hook or check target elsewhere; a hook module's name too). More than needed at worst.
    And the names looked for."""
    dirs = {case_id: os.path.dirname(file) for case_id, file in files.items()}
    above = {os.path.dirname(d) for d in dirs.values()}
    above |= {os.path.dirname(d) for d in above}  # (cases/, and a group's directory: listings, no case's file)
    dirty = set()
    needles = []
    for path in changed:
        dirty.update(case_id for case_id, d in dirs.items() if path == d or path.startswith(d + os.sep))
        if path not in above:
            name = os.path.basename(path)
            needles += [name.encode(), *([name[:-3].encode()] if name.endswith(".py") else [])]
    for entry in entries:
        if any(needle in entry.validated_from for needle in needles):
            dirty.add(entry.case_id)
    # A `path` hook outside its case directory may import any module of its folder (evaluate/inputs.py), which no
    # test.yaml names: the case is planned when that folder holds a changed module or a file of a package. (Asked
    # only then: each case's hooks are looked at, 25–40 µs a case: docs/scale/building.md, s75-hookpath.)
    real = [os.path.join(os.path.realpath(path), "") for path in changed if _importable(path)]
    for entry in entries if real else ():
        if entry.case_id not in dirty and any(path.startswith(os.path.join(folder, ""))
                                              for folder in _hook_folders(entry) for path in real):
            dirty.add(entry.case_id)
    return dirty, needles


def _importable(path: str) -> bool:
    """A module's file, or a file in a package (a folder above it holds an `__init__.py`)?"""
    if path.endswith(tuple(importlib.machinery.all_suffixes())):
        return True
    folder = os.path.dirname(path)
    while folder != os.path.dirname(folder):
        if os.path.isfile(os.path.join(folder, "__init__.py")):
            return True
        folder = os.path.dirname(folder)
    return False


def _hook_folders(entry: CaseEntry) -> list[str]:
    """The folders of a case's `path` hooks outside its case directory (`inputs.hook_folder`)."""
    if b"python_hook" not in entry.validated_from:
        return []
    from clawstore.evaluate.inputs import hook_folder

    checks = pickle.loads(entry.validated_from).get("deterministic_checks")
    folders = []
    for check in checks if isinstance(checks, list) else []:
        hook = check.get("python_hook") if isinstance(check, dict) else None
        if isinstance(hook, dict) and isinstance(hook.get("path"), str):
            folder = hook_folder(hook["path"], os.path.dirname(entry.file))
            if folder is not None:
                folders.append(folder)
    return folders
