"""bench/house_bench.py counts what it says it counts, read from a small package written here."""

from __future__ import annotations

from pathlib import Path

from bench.house_bench import measure


def _package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "clawstore" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "clawstore"


def test_counts_annotations_document_reads_and_store_internals(tmp_path: Path) -> None:
    package = _package(tmp_path, {
        "__init__.py": "",
        "store/__init__.py": "",
        "store/face.py": "X = 1\n",
        "store/objects.py": "W = 3\n",
        "store/core/index.py": "Y = 2\n",
        "cli/__init__.py": "",
        "cli/run_cmd.py": "print('fine here')\n",
        "builder/__init__.py": "",
        "builder/api.py": (
            "from typing import Any\n"
            "from clawstore.store.face import X\n"
            "from clawstore.store.objects import W\n"
            "from clawstore.store.core.index import Y, Y as Z\n"
            "def build(campaign: Any, item: Any, n: int, doc: dict[str, Any]) -> Any:\n"
            "    print(doc.get('a'), doc.get(n))\n"
            "    return isinstance(campaign, int)\n"),
    })
    counts = measure(package)
    assert (counts.any_in_signatures, counts.bare_any, counts.returns_any) == (4, 3, 1)
    assert (counts.campaign_any, counts.item_any, counts.most_parameters) == (1, 1, 4)
    assert (counts.get_calls, counts.get_string_keys, counts.isinstance_calls) == (2, 1, 1)
    assert counts.prints_outside_cli == 1
    assert (counts.store_internal_imports, counts.modules_importing_store_internals) == (3, 1)
    assert counts.circles == 0 and counts.packages == 3


def test_a_circle_of_imports_is_counted(tmp_path: Path) -> None:
    package = _package(tmp_path, {
        "__init__.py": "",
        "a.py": "from clawstore.b import B\nA = 1\n",
        "b.py": "from clawstore.a import A\nB = 2\n",
        "c.py": "from clawstore.a import A\n",
    })
    assert measure(package).circles == 2
