"""Load a whole workspace: every config file, validated, with every problem collected as a ConfigIssue.

Nothing here raises for a bad config: a broken file becomes issues and is left out of the catalog,
so `claw validate` can print all problems at once and a campaign can tell which ones concern it.
"""

from __future__ import annotations

import atexit
import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from clawstore.config.catalog import CaseEntry, CaseStub, Loaded, LoadedAgent, LoadedCase, Workspace
from clawstore.config.containment import escapes, not_a_file, outside_message, real_root
from clawstore.config.error_text import describe_all
from clawstore.config.judge_warnings import judge_option_warnings
from clawstore.config.limits import MAX_ATTACHMENT_BYTES
from clawstore.config.messages import case_path, expand_sources
from clawstore.config.models import Agent, EvaluationProfile, RunProfile, Suite, TestCase
from clawstore.config.references import split_root
from clawstore.config.resolution import PromptProblem, resolve_judge_prompt
from clawstore.config.yamlio import YamlProblem, load_mapping, read_text
from clawstore.errors import ConfigError, UsageError
from clawstore.host.run_limits import workspace_problem
from clawstore.values.costs import missing_prices
from clawstore.values.workspace_paths import workspace_path_problem

if TYPE_CHECKING:
    from clawstore.config.parsed import ParsedCases

T = TypeVar("T", bound=BaseModel)


# ---------------------------------------------------------------------------------------------- discovery

def _unreadable(directory: Path | str, exc: OSError) -> ConfigError:
    return ConfigError(f"cannot list directory: {exc.strerror or exc}", str(directory))


def _subdirs(directory: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as entries:
            return sorted((e for e in entries if e.is_dir()), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        raise _unreadable(directory, exc) from None


def discover_cases(configs_dir: Path, passed_over: list[tuple[Path, str]] | None = None) -> list[Path]:
    """`cases/*/test.yaml` and `cases/*/*/test.yaml` (a case directory, or a group of them).

    A directory holding a test.yaml is a case; its subdirectories (messages/, hooks/, ...) belong to
    it and are not searched for more cases. One stat per case directory keeps discovery cheap.
    `passed_over` gets (path, why) for the case files out of that layout, where a case would be: a `test.yml`, or a
    test.yaml one folder deeper than a group's cases (a stat more per folder that is neither a case nor a group)."""
    found: list[Path] = []
    for entry in _subdirs(configs_dir / "cases"):
        direct = os.path.join(entry.path, "test.yaml")
        if os.path.lexists(direct):  # (a directory, pipe or dangling link too: its load says what it is)
            found.append(Path(direct))
            continue
        if passed_over is not None and os.path.lexists(yml := os.path.join(entry.path, "test.yml")):
            passed_over.append((Path(yml), "name it test.yaml"))
        for child in _subdirs(Path(entry.path)):
            nested = os.path.join(child.path, "test.yaml")
            if os.path.lexists(nested):
                found.append(Path(nested))
            elif passed_over is not None:
                if os.path.lexists(yml := os.path.join(child.path, "test.yml")):
                    passed_over.append((Path(yml), "name it test.yaml"))
                passed_over.extend((Path(deeper.path) / "test.yaml", "one folder too deep")
                                   for deeper in _subdirs(Path(child.path))
                                   if os.path.lexists(os.path.join(deeper.path, "test.yaml")))
    return found


def discover_yaml(directory: Path) -> list[Path]:
    try:
        with os.scandir(directory) as entries:
            return sorted(
                Path(e.path) for e in entries if e.name.lower().endswith((".yaml", ".yml"))  # (any kind: see read_text)
            )
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        raise _unreadable(directory, exc) from None


# ---------------------------------------------------------------------------------------------- loading

def parse_config(ws: Workspace, path: Path, model: type[T], parsed: ParsedCases | None = None
                 ) -> tuple[T | None, dict[str, Any] | None]:
    ws.files_checked += 1
    try:
        raw = load_mapping(path, parsed)
    except YamlProblem as exc:
        ws.add_issue(path, "", str(exc))
        return None, None
    try:
        return model.model_validate(raw), raw
    except ValidationError as exc:
        for field_path, message in describe_all(exc, model):
            ws.add_issue(path, field_path, message)
        return None, raw


def _stub(path: Path, raw: dict[str, Any] | None) -> CaseStub:
    raw = raw or {}
    case_id = raw.get("case_id") if isinstance(raw.get("case_id"), str) else None
    tags = raw.get("tags", [])
    ok_tags = tuple(t.strip() for t in tags if isinstance(t, str)) if isinstance(tags, list) else None
    return CaseStub(path, case_id, ok_tags)


def _attachment_problem(path: Path, written: str, root_real: Path) -> str | None:
    outside = escapes(path, root_real)
    if outside is not None:
        return outside_message(written, outside)
    if (why := not_a_file(path, written, "paths are relative to test.yaml")) is not None:
        return why
    try:
        size = os.stat(path).st_size
    except OSError:  # removed since: as if never there
        return f"file not found: {written} (paths are relative to test.yaml)"
    if size > MAX_ATTACHMENT_BYTES:
        return f"{written} is {size:,} bytes; an attachment may be at most {MAX_ATTACHMENT_BYTES:,} bytes"
    return None


def _file_problem(directory: Path, written: str, root_real: Path) -> str | None:
    """Why a file a case names (hook, check target) cannot be used, or None."""
    path = case_path(directory, written)
    outside = escapes(path, root_real)
    if outside is not None:
        return outside_message(written, outside)
    return not_a_file(path, written, "paths are relative to test.yaml")


def _check_path_problems(case: TestCase, directory: Path, root_real: Path) -> list[tuple[str, str]]:
    """Hook files, check targets relative to the case (absolute ones name the run's sandbox), and the workspace files
    OpenClaw checks name (`relative_path`: inside the run's workspace)."""
    problems = []
    for index, check in enumerate(case.deterministic_checks):
        hook, decl = check.python_hook, check.declarative
        if hook is not None and hook.path is not None:
            problem = _file_problem(directory, hook.path, root_real)
            if problem:
                problems.append((f"deterministic_checks[{index}].python_hook.path", problem))
        if decl is not None and decl.path and not os.path.isabs(os.path.expanduser(decl.path)):
            outside = escapes(case_path(directory, decl.path), root_real)
            if outside is not None:
                problems.append((f"deterministic_checks[{index}].declarative.path",
                                 outside_message(decl.path, outside)))
        # (a path in the run's workspace: `../../etc/passwd` matched any workspace file named passwd)
        if decl is not None and decl.relative_path and (why := workspace_path_problem(decl.relative_path)):
            problems.append((f"deterministic_checks[{index}].declarative.relative_path", why))
    return problems


def _load_case(ws: Workspace, path: Path, cases: str | None = None) -> CaseEntry | CaseStub:
    """`cases`: the cases' directory when it leads inside the workspace (a case below it with no symlink among its
    names leads inside too: two lstats, where a realpath was one a directory of the whole path)."""
    outside = None if cases is not None and _no_link_below(str(path), cases) else escapes(path, ws.root_real)
    if outside is not None:  # a symlinked case folder or test.yaml leading out of the workspace
        ws.add_issue(path, "", outside_message(ws.rel(path), outside))
        return CaseStub(path, None, None)
    case, raw = parse_config(ws, path, TestCase, ws.parsed)
    if case is None:
        return _stub(path, raw)
    directory = path.parent
    problems: list[tuple[str, str]] = []
    warnings: list[tuple[str, str]] = []
    sourced_messages, found = expand_sources(directory, case.input.messages, "input.messages", ws.root_real, warnings)
    problems += found
    sourced_turns, found = expand_sources(directory, case.input.turns, "input.turns", ws.root_real, warnings)
    problems += found
    sent = sum(1 for m in case.input.messages if m.source is None) + sum(map(len, sourced_messages.values()))
    if case.runner.type == "llm_probe" and not problems and not sent and not case.input.attachments:
        # (every run of it ended `invalid`, "the case has no input messages", after validation said OK)
        problems.append(("input.messages", "an llm_probe case has nothing to send: give it input.messages (or "
                                           "attachments)" + (" (input.turns are OpenClaw's)" if case.input.turns
                                                             else "")))
    if case.input.turns and case.runner.type == "llm_probe":  # (valid: the reference calls turns OpenClaw-only)
        warnings.append(("input.turns", "only the openclaw runner sends turns: llm_probe sends input.messages alone "
                                        "(the turns still count in each run's key)"))
    if case.runner.type == "openclaw":  # (valid: the schema takes any runner key; a run would be paid for without it)
        warnings += [(f"runner.{key}", OPENCLAW_READS_NO_SETTING) for key in case.runner.settings]
    for field_path, message in warnings:
        ws.add_warning(path, field_path, message)
    attachments = []
    for index, written in enumerate(case.input.attachments):
        attachment = case_path(directory, written)
        problem = _attachment_problem(attachment, written, ws.root_real)
        if problem:
            problems.append((f"input.attachments[{index}]", problem))
        attachments.append(attachment)
    problems += _check_path_problems(case, directory, ws.root_real)
    for field_path, message in problems:
        ws.add_issue(path, field_path, message)
    if problems:
        return CaseStub(path, case.case_id, tuple(case.tags))
    assert raw is not None
    return CaseEntry.of(LoadedCase(case, path, directory, tuple(attachments), sourced_messages, sourced_turns), raw)


def _load_cases(ws: Workspace) -> None:
    first_path: dict[str, Path] = {}
    cases = str(ws.configs_dir / "cases")
    inside = cases if escapes(Path(cases), ws.root_real) is None else None
    passed_over: list[tuple[Path, str]] = []
    for path in discover_cases(ws.configs_dir, passed_over):
        loaded = _load_case(ws, path, inside)
        case_id = loaded.case_id
        if case_id is None:
            ws.broken_cases.append(loaded)  # type: ignore[arg-type]
            continue
        if case_id in first_path:
            ws.add_issue(path, "case_id", f"duplicate case_id '{case_id}' (also defined in "
                                          f"{ws.rel(first_path[case_id])})")
            ws.broken_cases.append(CaseStub(path, case_id, loaded.tags))
            continue
        first_path[case_id] = path
        if isinstance(loaded, CaseEntry):
            ws.cases[case_id] = loaded
        else:
            ws.broken_cases.append(loaded)
    for path, why in passed_over:
        ws.add_warning(path, "", "not read: a case is configs/cases/<case>/test.yaml or "
                                 f"configs/cases/<group>/<case>/test.yaml ({why})")


def _load_kind(ws: Workspace, subdir: str, model: type[T], id_field: str) -> dict[str, Loaded[T]]:
    out: dict[str, Loaded[T]] = {}
    first_path: dict[str, Path] = {}
    for path in discover_yaml(ws.configs_dir / subdir):
        config, raw = parse_config(ws, path, model)
        raw_id = (raw or {}).get(id_field)
        if not isinstance(raw_id, str):
            continue
        if raw_id in first_path:
            ws.add_issue(path, id_field, f"duplicate {id_field} '{raw_id}' (also defined in "
                                         f"{ws.rel(first_path[raw_id])})")
            continue
        first_path[raw_id] = path
        if config is not None:
            out[raw_id] = Loaded(config, path)
    return out


# What a runner setting OpenClaw is given would do: nothing (config/resolution.py merges them for llm_probe alone).
OPENCLAW_READS_NO_SETTING = ("the openclaw runner does not read it: an OpenClaw run goes without it (OpenClaw's model "
                             "settings are the suite model's primary_params, its limits the run profile's openclaw "
                             "block)")


def _note_unread_settings(ws: Workspace) -> None:
    """A run profile for OpenClaw (an `openclaw` block) with llm_probe settings: each named in a warning (its
    llm_probe cases, if any, still read them; a build says it when the campaign runs openclaw cases)."""
    for loaded in ws.run_profiles.values():
        profile = loaded.config
        if profile.openclaw is None:
            continue
        unread = [f"runner_defaults.{key}" for key in profile.runner_defaults]
        unread += [f"model_overrides.{model_id}.{key}" for model_id, settings in profile.model_overrides.items()
                   for key in settings]
        for field_path in unread:
            ws.add_warning(loaded.path, field_path, "read by llm_probe cases alone; " + OPENCLAW_READS_NO_SETTING)


def _note_judge_options(ws: Workspace) -> None:
    """A judge's request options that leave no verdict in a paid reply (config/judge_warnings.py), each named in a
    warning: `claw validate` says them, and a build of a campaign judged by the profile, before it sends anything."""
    for loaded in ws.evaluation_profiles.values():
        for index, judge in enumerate(loaded.config.judges):
            fields = {**judge.extras, "request_options": judge.request_options}
            for field_path, why in judge_option_warnings(fields):
                ws.add_warning(loaded.path, f"judges[{index}].{field_path}", why)


def _note_partial_prices(ws: Workspace) -> None:
    """A suite model's or judge's `pricing` (or `cost`) without `input` or `output` prices nothing (values/costs.py
    `missing_prices`): valid, but every cost its provider does not report stays unknown, so it is said in a warning
    (`claw validate`, and a build of a campaign that uses the file, before it sends anything)."""
    places = [(loaded.path, f"models[{index}]", model.extras) for loaded in ws.suites.values()
              for index, model in enumerate(loaded.config.models)]
    places += [(loaded.path, f"judges[{index}]", judge.extras) for loaded in ws.evaluation_profiles.values()
               for index, judge in enumerate(loaded.config.judges)]
    for path, where, extras in places:
        partial = missing_prices(extras)
        if partial is not None:
            name, missing = partial
            ws.add_warning(path, f"{where}.{name}", f"no {' and no '.join(repr(key) for key in missing)} price: "
                           f"`{name}` prices nothing without both 'input' and 'output' (USD per 1M tokens; 0 for a "
                           "free one), so every cost its provider does not report stays unknown (?)")


def _check_prompts(ws: Workspace) -> None:
    for loaded in list(ws.evaluation_profiles.values()):
        try:
            resolve_judge_prompt(loaded.config, loaded.path, ws.root)
        except PromptProblem as exc:
            ws.add_issue(loaded.path, exc.field, str(exc))


# Setup state an older OpenClaw (`openclaw onboard` 2026.4.x) left in a workspace: OpenClaw 2026.9.6, the release claw
# is tested with (docs/openclaw.md), refuses every run of a workspace holding either file until `openclaw doctor` has
# migrated it, whatever it says.
LEGACY_SETUP_STATE = (".openclaw/workspace-state.json", "openclaw-workspace-state.json")
LEGACY_SETUP_REFUSAL = (
    "setup state an older OpenClaw wrote (`openclaw onboard` 2026.4.x): OpenClaw 2026.9.6, the release claw is tested "
    "with, refuses every run of this agent with \"Legacy workspace setup state requires migration\"; remove it from "
    "the template")


def _legacy_setup_state(template: Path) -> list[str]:
    return [name for name in LEGACY_SETUP_STATE if os.path.lexists(template / name)]


def _load_agents(ws: Workspace) -> None:
    for entry in _subdirs(ws.configs_dir / "agents"):
        ws.agent_dirs.add(entry.name)
        directory = Path(entry.path)
        path = directory / "agent.yaml"
        if not path.is_file():
            ws.add_issue(directory, "", "agent directory has no agent.yaml")
            continue
        agent, _ = parse_config(ws, path, Agent)
        if agent is None:
            continue
        problems = []
        outside = escapes(directory / "workspace", ws.root_real)
        if outside is not None:
            problems.append(("", outside_message(ws.rel(directory / "workspace"), outside)))
        if agent.agent_id != entry.name:
            problems.append(("agent_id", f"must equal the directory name '{entry.name}', got '{agent.agent_id}'"))
        if not (directory / "workspace").is_dir():
            problems.append(("", "missing workspace/ directory beside agent.yaml"))
        elif outside is None and (too_big := workspace_problem(directory / "workspace")) is not None:
            problems.append(("", f"workspace/ cannot be an agent's template: {too_big}"))
        for field_path, message in problems:
            ws.add_issue(path, field_path, message)
        if not problems:
            ws.agents[agent.agent_id] = LoadedAgent(agent, path, directory)
            for name in _legacy_setup_state(directory / "workspace"):
                ws.add_warning(path, f"workspace/{name}", LEGACY_SETUP_REFUSAL)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Keep the cyclic garbage collector off the catalog while (and after) it is built: collections wait until the load
    is done, then what exists is frozen. Re-scanning the growing catalog doubled load time on 2,000 cases. Details:
    docs/configuration.md (Details by module)."""
    if not gc.isenabled():  # nested (campaign -> workspace) or the caller manages the collector
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        _unfreeze_at_exit()
        gc.enable()


@cache
def _unfreeze_at_exit() -> None:
    # Let the final collection at shutdown see frozen objects again, so extension types (DuckDB's)
    # are finalised instead of reported as leaked.
    atexit.register(gc.unfreeze)


def load_workspace(root: Path, parsed: ParsedCases | None = None) -> Workspace:
    """Load and validate every config under `root` (a workspace root, or its `configs/` dir); `parsed`: case files
    parsed before, by their bytes (config/parsed.py)."""
    found = split_root(Path(os.path.normpath(Path(root).absolute())))
    if found is None:
        raise UsageError(f"{root} is not a workspace: it has no configs/ directory")
    with collector_paused():
        return _load(Workspace(root=found[0], configs_dir=found[1], parsed=parsed))


def load_profiles(root: Path) -> Workspace:
    """The suites and the run and evaluation profiles under the workspace `root`, without the cases or
    the cross-checks (`claw plan` of a campaign its stamp proves fresh: project/stamping.py)."""
    found = split_root(Path(os.path.normpath(Path(root).absolute())))
    if found is None:
        raise UsageError(f"{root} is not a workspace: it has no configs/ directory")
    ws = Workspace(root=found[0], configs_dir=found[1])
    ws.suites = _load_kind(ws, "suites", Suite, "suite_id")
    ws.run_profiles = _load_kind(ws, "run_profiles", RunProfile, "run_profile_id")
    ws.evaluation_profiles = _load_kind(ws, "evaluation_profiles", EvaluationProfile, "evaluation_profile_id")
    return ws


def case_tags(root: Path) -> dict[str, tuple[str, ...]]:
    """The tags of the cases under the workspace `root`, read from each test.yaml's `case_id` and `tags` alone and
    normalised as a loaded case's are: `claw view`'s tag filter, where loading every case in full cost 2.6 s at 10,000
    cases. What load_workspace gives (Workspace.case_tags) for cases that load; a file that does not parse, leads out
    of the workspace, or whose case_id is not a string or tags not a list of strings gives none, and a case_id written
    twice keeps its first file's, as there. A case that fails validation otherwise still gives its tags."""
    found = split_root(Path(os.path.normpath(Path(root).absolute())))
    if found is None:
        raise UsageError(f"{root} is not a workspace: it has no configs/ directory")
    root_real = real_root(found[0])
    cases = str(found[1] / "cases")
    cases_inside = escapes(Path(cases), root_real) is None
    out: dict[str, tuple[str, ...]] = {}
    seen: set[str] = set()
    for path in discover_cases(found[1]):
        try:
            if not (cases_inside and _no_link_below(str(path), cases)) and escapes(path, root_real) is not None:
                continue
            fields = id_and_tags(read_text(path))
            if fields is None:  # (the loader says what the events alone cannot)
                data = load_mapping(path)
                fields = data.get("case_id"), data.get("tags")
            case_id, tags = fields
        except YamlProblem:
            continue
        if not isinstance(case_id, str) or case_id in seen:
            continue
        seen.add(case_id)
        tags = [] if tags is None else tags
        if isinstance(tags, list) and all(isinstance(tag, str) for tag in tags):
            out[case_id] = tuple(sorted({tag.strip() for tag in tags if tag.strip()}))
    return out


def _no_link_below(path: str, top: str) -> bool:
    """Whether `path` is under `top` with no symlink among its names after `top`'s: then it leads where `top` leads,
    those names added (two lstats a case, where realpath made one a directory of the whole path: a fifth of
    case_tags' time at 10,000 cases)."""
    while len(path) > len(top):
        if os.path.islink(path):
            return False
        path = os.path.dirname(path)
    return path == top


_RESOLVER = yaml.resolver.Resolver()
_STR, _NULL = "tag:yaml.org,2002:str", "tag:yaml.org,2002:null"
_FIELDS = ("case_id", "tags")
_KEY = object()  # (a key comes next)


def id_and_tags(text: str) -> tuple[Any, Any] | None:
    """(case_id, tags) of a case file's top-level mapping from its parse events, no object built for the rest of the
    file (a fifth of the time): each None when absent, a list of tags, and a value that is not a string (a number, a
    mapping) as 0. None when the events alone cannot say what load_mapping reads there (an alias, an anchor or a tag on
    these or on a key, a key that is not a string or is written twice, not one mapping, a YAML error)."""
    found: dict[str, Any] = {}
    keys: set[str] = set()
    depth, key, tags, started = 0, _KEY, None, False
    try:
        events = yaml.parse(text, Loader=yaml.CSafeLoader)
        for event in events:
            if isinstance(event, yaml.StreamStartEvent | yaml.StreamEndEvent | yaml.DocumentStartEvent
                          | yaml.DocumentEndEvent):
                continue
            ours = depth == 0 or (depth == 1 and key is _KEY) or key in _FIELDS
            if isinstance(event, yaml.AliasEvent) or ours and (
                    getattr(event, "anchor", None) is not None or getattr(event, "tag", None) not in (None, "!")):
                return None  # (an alias anywhere: the loader says whether its anchor exists)
            if depth == 0:  # the top level: one mapping
                if started or not isinstance(event, yaml.MappingStartEvent):
                    return None
                started, depth = True, 1
            elif depth == 1 and key is _KEY:
                if isinstance(event, yaml.MappingEndEvent):
                    depth = 0
                    continue
                key = _scalar(event) if isinstance(event, yaml.ScalarEvent) else None
                if not isinstance(key, str) or key in keys:  # (a merge key `<<` is not a string)
                    return None
                keys.add(key)
            elif depth == 1:  # its value
                if isinstance(event, yaml.ScalarEvent):
                    found[key], key = _scalar(event), _KEY
                elif key == "tags" and isinstance(event, yaml.SequenceStartEvent):
                    tags, depth = [], 2
                elif key not in _FIELDS:  # another field's mapping or list: skipped to its end, aliases refused
                    found[key], key = 0, _KEY
                    if _skipped(events):
                        return None
                else:  # a mapping for one of ours: skipped, anchors and tags in it refused too
                    found[key], depth = 0, 2
            elif tags is not None:  # in the list of tags
                if isinstance(event, yaml.SequenceEndEvent):
                    found["tags"], tags, key, depth = tags, None, _KEY, 1
                elif isinstance(event, yaml.ScalarEvent):
                    tags.append(_scalar(event))
                else:
                    found["tags"], tags, depth = 0, None, depth + 1  # (not a list of strings)
            else:  # in a value skipped
                if isinstance(event, yaml.CollectionStartEvent | yaml.CollectionEndEvent):
                    depth += 1 if isinstance(event, yaml.CollectionStartEvent) else -1
                    key = _KEY if depth == 1 else key
    except yaml.YAMLError:
        return None
    return found.get("case_id"), found.get("tags")


_OPENS = frozenset({yaml.MappingStartEvent, yaml.SequenceStartEvent})
_CLOSES = frozenset({yaml.MappingEndEvent, yaml.SequenceEndEvent})


def _skipped(events: Iterator[yaml.Event]) -> bool:
    """The events of a mapping or list just opened consumed to its end (most of a case file's events: each looked at
    once, for its type); True when one is an alias (then the loader decides)."""
    level = 1
    for event in events:
        kind = type(event)
        if kind is yaml.AliasEvent:
            return True
        if kind in _OPENS:
            level += 1
        elif kind in _CLOSES:
            level -= 1
            if level == 0:
                return False
    return False  # (the text ended inside it: the parser raised before this)


def _scalar(event: yaml.ScalarEvent) -> Any:
    """A scalar as the safe loader reads it, if a string or null; any other as 0 (not a string, either way)."""
    tag = _RESOLVER.resolve(yaml.ScalarNode, event.value, event.implicit)
    return event.value if tag == _STR else None if tag == _NULL else 0

def _load(ws: Workspace) -> Workspace:
    _load_cases(ws)
    ws.suites = _load_kind(ws, "suites", Suite, "suite_id")
    ws.run_profiles = _load_kind(ws, "run_profiles", RunProfile, "run_profile_id")
    ws.evaluation_profiles = _load_kind(ws, "evaluation_profiles", EvaluationProfile, "evaluation_profile_id")
    _note_unread_settings(ws)
    _note_judge_options(ws)
    _note_partial_prices(ws)
    _check_prompts(ws)
    _load_agents(ws)
    from clawstore.config.crosscheck import check_references

    check_references(ws)
    return ws
