"""A workspace as loaded (config/workspace.py loads it): its configs by id, each with the file it came
from, and every problem found, as ConfigIssues."""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar

from pydantic import BaseModel

from clawstore.config.containment import real_root
from clawstore.config.issues import ConfigIssue
from clawstore.config.messages import ResolvedMessage, assemble, case_path
from clawstore.config.models import Agent, EvaluationProfile, RunProfile, Suite, TestCase
from clawstore.errors import ConfigError, one_line

if TYPE_CHECKING:
    from clawstore.config.parsed import ParsedCases

T = TypeVar("T", bound=BaseModel)


@dataclass(frozen=True)
class Loaded(Generic[T]):
    config: T
    path: Path

    @property
    def id(self) -> str:
        return _config_id(self.config)


@dataclass(frozen=True)
class LoadedCase:
    case: TestCase
    path: Path  # the test.yaml
    dir: Path
    attachment_paths: tuple[Path, ...] = ()
    # what the `source:` files of input.messages / input.turns hold, parsed once at load time
    sourced_messages: dict[int, list[ResolvedMessage]] = field(default_factory=dict, repr=False)
    sourced_turns: dict[int, list[ResolvedMessage]] = field(default_factory=dict, repr=False)

    @property
    def case_id(self) -> str:
        return self.case.case_id

    @cached_property
    def messages(self) -> tuple[ResolvedMessage, ...]:
        """input.messages with `source:` files expanded (attachments not injected)."""
        return tuple(assemble(self.case.input.messages, self.sourced_messages))

    @cached_property
    def turns(self) -> tuple[ResolvedMessage, ...]:
        return tuple(assemble(self.case.input.turns, self.sourced_turns))

    def resolve_path(self, value: str) -> Path:
        """A path written in this case (check paths, hook paths), made absolute."""
        return case_path(self.dir, value)


@dataclass(frozen=True, slots=True)  # (slots: the workspace holds one per case)
class CaseEntry:
    """A validated case as the workspace holds it: its id, tags and runner type, and what it was validated from,
    pickled (~0.4 KB; the models were ~5 KB a case). `load()` validates that again into its `LoadedCase`, as a
    build does a window of cases at a time (~20-70 µs a case): the same input to the same models, so the same case
    (docs/scale/building.md, Scale: the loaded campaign)."""

    case_id: str
    tags: tuple[str, ...]
    runner_type: str
    file: str  # the test.yaml
    validated_from: bytes  # its YAML's top-level mapping, pickled
    attachment_paths: tuple[str, ...] = ()
    sourced_messages: dict[int, list[ResolvedMessage]] | None = None  # (None: none; see LoadedCase)
    sourced_turns: dict[int, list[ResolvedMessage]] | None = None

    @classmethod
    def of(cls, loaded: LoadedCase, raw: dict[str, object]) -> CaseEntry:
        """`loaded`, validated from `raw`, kept compactly."""
        case = loaded.case
        return cls(case.case_id, tuple(case.tags), case.runner.type, str(loaded.path),
                   pickle.dumps(raw, pickle.HIGHEST_PROTOCOL), tuple(map(str, loaded.attachment_paths)),
                   loaded.sourced_messages or None, loaded.sourced_turns or None)

    @property
    def path(self) -> Path:
        return Path(self.file)

    @property
    def case(self) -> TestCase:
        """The case's model, validated again at each call (`load()` once where it is read more than once)."""
        try:
            return TestCase.model_validate(pickle.loads(self.validated_from))
        except ValueError as exc:  # (validated once already: the same input cannot fail; said plainly if it did)
            raise ConfigError(f"the case no longer validates: {one_line(str(exc), 300)}", self.file) from None

    def load(self) -> LoadedCase:
        path = self.path
        return LoadedCase(self.case, path, path.parent, tuple(map(Path, self.attachment_paths)),
                          self.sourced_messages or {}, self.sourced_turns or {})


@dataclass(frozen=True)
class LoadedAgent:
    agent: Agent
    path: Path  # agent.yaml
    dir: Path

    @property
    def workspace_dir(self) -> Path:
        return self.dir / "workspace"


@dataclass(frozen=True)
class CaseStub:
    """What we could read from a case file that failed validation (to know which campaigns it blocks)."""

    path: Path
    case_id: str | None
    tags: tuple[str, ...] | None


@dataclass
class Workspace:
    root: Path
    configs_dir: Path
    cases: dict[str, CaseEntry] = field(default_factory=dict)  # (each made whole by its `load()`)
    suites: dict[str, Loaded[Suite]] = field(default_factory=dict)
    run_profiles: dict[str, Loaded[RunProfile]] = field(default_factory=dict)
    evaluation_profiles: dict[str, Loaded[EvaluationProfile]] = field(default_factory=dict)
    agents: dict[str, LoadedAgent] = field(default_factory=dict)
    issues: list[ConfigIssue] = field(default_factory=list)
    warnings: list[ConfigIssue] = field(default_factory=list)  # valid, but likely not what was meant
    broken_cases: list[CaseStub] = field(default_factory=list)
    agent_dirs: set[str] = field(default_factory=set)  # directory names under configs/agents
    files_checked: int = 0
    parsed: ParsedCases | None = field(default=None, repr=False, compare=False)  # config/parsed.py

    @property
    def ok(self) -> bool:
        return not self.issues

    @cached_property
    def root_real(self) -> Path:
        """The workspace root with symlinks resolved: every path a config names must lead inside it."""
        return real_root(self.root)

    def rel(self, path: Path) -> str:
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return path.as_posix()

    def add_issue(self, path: Path, field_path: str, message: str) -> None:
        # (names and values in them come from files written by others: each part one bounded line)
        self.issues.append(ConfigIssue(one_line(self.rel(path), 500), one_line(field_path, 300),
                                       one_line(message, 1000), file=path))

    def issues_in(self, files: set[Path]) -> list[ConfigIssue]:
        return [issue for issue in self.issues if issue.file in files]

    def add_warning(self, path: Path, field_path: str, message: str) -> None:
        self.warnings.append(ConfigIssue(one_line(self.rel(path), 500), one_line(field_path, 300),
                                         one_line(message, 1000), file=path))

    def warnings_in(self, files: set[Path]) -> list[str]:
        return [str(warning) for warning in self.warnings if warning.file in files]

    def counts(self) -> dict[str, int]:
        return {
            "cases": len(self.cases),
            "suites": len(self.suites),
            "run_profiles": len(self.run_profiles),
            "evaluation_profiles": len(self.evaluation_profiles),
            "agents": len(self.agents),
            "files": self.files_checked,
            "errors": len(self.issues),
        }

    def case_tags(self) -> dict[str, tuple[str, ...]]:
        return {case_id: entry.tags for case_id, entry in self.cases.items()}


def _config_id(config: BaseModel) -> str:
    for name in ("case_id", "suite_id", "run_profile_id", "evaluation_profile_id", "agent_id"):
        value = getattr(config, name, None)
        if value is not None:
            return str(value)
    raise TypeError(f"{type(config).__name__} has no id field")
