"""A config file's text is read whole whatever its size said when it was opened, and refused past the limit."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from clawstore.config import yamlio
from clawstore.config.limits import MAX_CONFIG_BYTES
from clawstore.config.yamlio import YamlProblem, read_text


def _sizes_lie(monkeypatch: pytest.MonkeyPatch, size: int) -> None:
    """fstat says `size`: the file grew after it was opened (or is a pipe, which says 0)."""
    real = os.fstat

    def fstat(fd: int) -> os.stat_result:
        found = real(fd)
        return os.stat_result((*found[:6], size, *found[7:]))

    monkeypatch.setattr(yamlio.os, "fstat", fstat)


def test_a_file_longer_than_its_size_said_is_read_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "case.yaml"
    text = "case_id: grown\n" + "# more\n" * 5000
    path.write_text(text)
    assert read_text(path) == text
    for said in (0, 10, len(text) - 1):
        _sizes_lie(monkeypatch, said)
        assert read_text(path) == text, said


def test_a_file_past_the_limit_is_refused_whatever_its_size_said(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "big.yaml"
    path.write_bytes(b"#" * (MAX_CONFIG_BYTES + 1))
    with pytest.raises(YamlProblem, match="larger than"):
        read_text(path)
    _sizes_lie(monkeypatch, 100)
    with pytest.raises(YamlProblem, match="larger than"):
        read_text(path)
