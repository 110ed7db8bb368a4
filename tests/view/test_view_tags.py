"""`claw view`'s tag filter reads each case file's case_id and tags alone (config/workspace.py case_tags): the same
tags as loading the workspace in full, and the same fields as the loader wherever the parse events can say them."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

from clawstore.cli.view_cmd import _TagsLater
from clawstore.config.workspace import case_tags, id_and_tags, load_workspace
from clawstore.config.yamlio import YamlProblem, parse_yaml_text
from clawstore.testing.standin import StandIn
from tests.support.claw import Claw
from tests.support.workspace import standard
from tests.view.test_view_page import summary_of

# Case files as people write them, and as they break: each read by the events, or left to the loader (None).
TEXTS = [
    "case_id: a\ntags: [x, ' y ', x, '']\n",
    "tags:\n  - b\n  - a\ncase_id: 'quoted'\nother: {nested: [1, 2, {deep: *x}]}\n",
    "case_id: a\ntags:\n",
    "case_id: a\ntags: null\n",
    "case_id: a\ntags: []\n",
    "case_id: 12\ntags: [a]\n",
    "case_id: a\ntags: [1, yes, null, '1']\n",
    "case_id: a\ntags: {a: b}\n",
    "case_id: a\ntags: [[a], b]\n",
    "case_id: a\ntags: a\n",
    "case_id: a\nx: &anchor [1]\ny: *anchor\ntags: [t]\n",
    "case_id: &i a\ntags: [t]\n",
    "case_id: a\ntags: *t\n",
    "case_id: a\ntags: [!!str 1]\n",
    "case_id: !!str 5\n",
    "<<: {case_id: a}\ntags: [t]\n",
    "case_id: a\ncase_id: b\n",
    "[a, b]\n",
    "just text\n",
    "",
    "case_id: a\n---\ncase_id: b\n",
    "case_id: a\ntags: [unclosed\n",
    "? [complex, key]\n: 1\ncase_id: a\n",
    "input:\n  messages:\n    - role: user\n      content: \"Hello! *bold* & done\"\ncase_id: c\ntags: [\"\\u00e9\"]\n",
]


def _loaded(text: str) -> tuple[object, object] | str:
    try:
        data = parse_yaml_text(text)
    except YamlProblem:
        return "refused"
    if data is None:
        data = {}  # (an empty file: load_mapping's {})
    if not isinstance(data, dict):
        return "refused"
    return data.get("case_id"), data.get("tags")


@pytest.mark.parametrize("text", TEXTS)
def test_the_events_read_what_the_loader_reads_or_leave_it_to_the_loader(text: str) -> None:
    found = id_and_tags(text)
    if found is None:
        return  # the loader reads it (case_tags falls back)
    loaded = _loaded(text)
    assert loaded != "refused", text
    case_id, tags = loaded  # type: ignore[misc]
    assert found[0] == (case_id if isinstance(case_id, str | None) else 0)
    if isinstance(tags, list):
        assert found[1] == [t if isinstance(t, str | None) else 0 for t in tags] or (
            any(isinstance(t, list | dict) for t in tags) and found[1] == 0)
    else:
        assert found[1] == (tags if isinstance(tags, str | None) else 0)


def test_the_events_read_a_usual_case_file_themselves() -> None:
    text = ("schema_version: 1\ncase_id: c1\ninput:\n  messages:\n  - role: user\n    content: 'Q: {a: [1]}'\n"
            "deterministic_checks:\n- check_id: p\n  declarative: {kind: present, args: [[1, 2], {x: y}]}\n"
            "tags:\n- b\n- a\nafter: {z: [1]}\n")
    assert id_and_tags(text) == ("c1", ["b", "a"])  # (not None: not left to the loader)


def test_the_tags_alone_are_the_tags_of_the_loaded_workspace(tmp_path: Path) -> None:
    ws = standard(tmp_path / "ws")
    cases = ws.root / "configs" / "cases"
    alpha = (cases / "alpha" / "test.yaml").read_text()
    (cases / "tagged").mkdir()
    (cases / "tagged" / "test.yaml").write_text(
        alpha.replace("case_id: alpha", "case_id: tagged").replace("- smoke\n", "- ' b'\n- a\n- a\n"))
    (cases / "group" / "nested").mkdir(parents=True)
    (cases / "group" / "nested" / "test.yaml").write_text(
        alpha.replace("case_id: alpha", "case_id: nested").replace("- smoke\n", "- n\n"))
    (cases / "broken").mkdir()
    (cases / "broken" / "test.yaml").write_text("case_id: broken\ntags: [x\n")
    full = load_workspace(ws.root).case_tags()
    assert full["tagged"] == ("a", "b") and full["nested"] == ("n",)
    assert case_tags(ws.root) == full


def test_a_case_folder_leading_out_of_the_workspace_gives_no_tags(tmp_path: Path) -> None:
    ws = standard(tmp_path / "ws")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "test.yaml").write_text("case_id: escaped\ntags: [secret]\n")
    (ws.root / "configs" / "cases" / "escaped").symlink_to(outside)
    assert "escaped" not in case_tags(ws.root)
    assert "escaped" not in load_workspace(ws.root).case_tags()


def test_a_case_file_or_cases_folder_leading_out_of_the_workspace_gives_no_tags(tmp_path: Path) -> None:
    ws = standard(tmp_path / "ws")
    cases = ws.root / "configs" / "cases"
    outside = tmp_path / "outside"
    (outside / "group" / "escaped").mkdir(parents=True)
    (outside / "escaped.yaml").write_text("case_id: escaped\ntags: [secret]\n")
    (outside / "group" / "escaped" / "test.yaml").write_text("case_id: nested_escaped\ntags: [secret]\n")
    (cases / "file_link").mkdir()
    (cases / "file_link" / "test.yaml").symlink_to(outside / "escaped.yaml")
    (cases / "group").mkdir()
    (cases / "group" / "escaped").symlink_to(outside / "group" / "escaped")
    (cases / "inside").mkdir()
    (cases / "inside" / "test.yaml").symlink_to(cases / "alpha" / "test.yaml")  # (a link that stays inside: read)
    tags = case_tags(ws.root)
    assert "escaped" not in tags and "nested_escaped" not in tags and "alpha" in tags
    assert tags == load_workspace(ws.root).case_tags()
    # The whole cases folder a link out of the workspace: none of its cases.
    moved = tmp_path / "moved_cases"
    cases.rename(moved)
    cases.symlink_to(moved)
    assert case_tags(ws.root) == {}


def test_the_page_has_the_tags_a_forked_reader_found(tmp_path: Path, env: dict[str, str], standin: StandIn,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """`claw view` reads the tags in a process forked beside it (cli/view_cmd.py): the page holds case_tags."""
    ws = standard(tmp_path / "ws")
    monkeypatch.chdir(ws.root)
    claw = Claw(ws.root)
    assert claw.build()[0] == 0
    out = tmp_path / "page.html"
    code, _, err = claw("view", "--suite", "main", "--run-profile", "rp", "--out", str(out))
    assert code == 0, err
    expected = {case: list(tags) for case, tags in case_tags(ws.root).items()}
    assert expected and summary_of(out.read_text(encoding="utf-8"))["tags"] == expected


@pytest.mark.parametrize("sent", [b"", pickle.dumps({"alpha": ("other",)})[:-3]], ids=["nothing", "cut short"])
def test_tags_whose_reader_died_are_read_here(tmp_path: Path, sent: bytes) -> None:
    ws = standard(tmp_path / "ws")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # (a reader killed, or out of memory, before or while it sends)
        os.write(write_end, sent)
        os._exit(9)
    os.close(write_end)
    tags = _TagsLater(pid, read_end, ws.root)
    assert dict(tags) == case_tags(ws.root) and tags["alpha"] == ("smoke",)
    assert not Path(f"/proc/{pid}").exists()  # (reaped, its pipe closed)
