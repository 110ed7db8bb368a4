"""The explain diff: changed paths of input documents, readable and exact."""

from __future__ import annotations

from clawstore.graph.docdiff import diff_documents
from clawstore.graph.keys import document_key


def test_scalars_lists_and_added_removed_keys() -> None:
    old = {"runner": {"temperature": 0, "seed": 1}, "input": {"messages": [{"content": "a"}]}}
    new = {"runner": {"temperature": 0.2, "top_p": 0.9}, "input": {"messages": [{"content": "b"}, {"content": "c"}]}}
    assert diff_documents(old, new) == [
        "input.messages: 1 -> 2 items",
        "input.messages[0].content 'a' -> 'b'",
        "runner.seed removed",
        "runner.temperature 0 -> 0.2",
        "runner.top_p added (0.9)",
    ]


def test_long_text_is_reported_as_changed_and_attachments_by_id() -> None:
    old = {"input": {"messages": [{"content": "x" * 100}]},
           "attachments": {"data.csv": {"object": "blake3:" + "a" * 64, "size": 3}}}
    new = {"input": {"messages": [{"content": "y" * 100}]},
           "attachments": {"data.csv": {"object": "blake3:" + "b" * 64, "size": 3}, "more.txt": {}}}
    assert diff_documents(old, new) == [
        "attachment data.csv: blake3:aaaaaaaaaaaa… -> blake3:bbbbbbbbbbbb…",
        "attachment more.txt added",
        "input.messages[0].content changed",
    ]


def test_identical_documents_have_no_changes_and_equal_keys() -> None:
    doc = {"b": [1, 2.5, "é"], "a": {"z": None}}
    assert diff_documents(doc, dict(reversed(list(doc.items())))) == []
    assert document_key(doc) == document_key(dict(reversed(list(doc.items()))))


def test_sub_documents_named_by_id_are_expanded() -> None:
    targets = {"blake3:old": {"rubric": {"criteria": ["correct"]}}, "blake3:new": {"rubric": {"criteria": ["short"]}}}
    old, new = {"target": "blake3:old", "repetition": 0}, {"target": "blake3:new", "repetition": 0}
    assert diff_documents(old, new, resolve=targets.__getitem__, expand=frozenset({"target"})) == [
        "target.rubric.criteria[0] 'correct' -> 'short'"]
    assert diff_documents(old, new) == ["target blake3:old… -> blake3:new…"]


def test_names_from_files_and_configs_are_printed_on_one_line() -> None:
    # an attachment's name is a file's, a key a config's: a line break in one forged a line of explain's output
    # ("run m9 … (stale):"), an escape reached the terminal
    forged = "x\nrun m9 forged rep 0 (stale):\x1b[2J"
    old = {"attachments": {forged: {"object": "blake3:" + "a" * 64}}, "runner": {"extra": {forged: 1}}}
    new = {"attachments": {forged: {"object": "blake3:" + "b" * 64}, f"{forged}2": {}},
           "runner": {"extra": {forged: 2, "k\r": 3}}}
    changes = diff_documents(old, new)
    assert all("\n" not in line and "\r" not in line and "\x1b" not in line for line in changes), changes
    assert changes == [
        "attachment x\\x0arun m9 forged rep 0 (stale):\\x1b[2J: blake3:aaaaaaaaaaaa… -> blake3:bbbbbbbbbbbb…",
        "attachment x\\x0arun m9 forged rep 0 (stale):\\x1b[2J2 added",
        "runner.extra.k\\x0d added (3)",
        "runner.extra.x\\x0arun m9 forged rep 0 (stale):\\x1b[2J 1 -> 2",
    ]
