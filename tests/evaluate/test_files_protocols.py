"""as_sandbox / as_workspace: a protocol object passes as it is, a mapping is wrapped, anything else is refused by the
protocol as before — also once a class is remembered as satisfying it."""

import pytest

from clawstore.evaluate.evidence import DictSandboxFiles, DictWorkspaceFiles, as_sandbox, as_workspace


class _HalfSandbox:  # no is_dir: not a SandboxFiles
    def open(self, abs_path: str) -> None:
        return None

    def exists(self, abs_path: str) -> bool:
        return False

    def is_file(self, abs_path: str) -> bool:
        return False


class _Sandbox(_HalfSandbox):
    def is_dir(self, abs_path: str) -> bool:
        return False


class _Workspace:
    def paths(self) -> list[str]:
        return []

    def open(self, rel_path: str) -> None:
        return None


def test_protocol_objects_pass_as_they_are_every_time() -> None:
    for _ in range(3):  # the first call looks the methods up, the later ones find the class remembered
        sandbox, workspace = _Sandbox(), _Workspace()
        assert as_sandbox(sandbox) is sandbox
        assert as_workspace(workspace) is workspace
        assert as_sandbox(None) is None and as_workspace(None) is None


def test_mappings_are_wrapped_and_a_half_protocol_is_not_taken_for_one() -> None:
    assert isinstance(as_sandbox({"/work/a.txt": b"x"}), DictSandboxFiles)
    assert isinstance(as_workspace({"a.txt": "x"}), DictWorkspaceFiles)
    assert as_sandbox(_Sandbox()) is not None and as_workspace(_Workspace()) is not None
    # not a protocol object: wrapped as a mapping (which it is not either), each time, as isinstance decides
    for value in (_HalfSandbox(), _Workspace(), _HalfSandbox()):
        with pytest.raises(AttributeError, match="items"):
            as_sandbox(value)  # type: ignore[arg-type]


def test_an_instance_with_its_methods_as_attributes_passes_and_its_class_is_not_remembered() -> None:
    class Bare:
        pass

    for _ in range(2):
        bare = Bare()
        bare.paths = lambda: []  # type: ignore[attr-defined]
        bare.open = lambda rel_path: None  # type: ignore[attr-defined]
        assert as_workspace(bare) is bare  # type: ignore[arg-type]
    with pytest.raises(AttributeError, match="items"):
        as_workspace(Bare())  # type: ignore[arg-type]
