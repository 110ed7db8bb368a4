"""An `import_path` hook whose package lives outside the case directory (a shared `hooks/` folder on the search path,
as `PYTHONPATH=hooks claw build` finds it: docs/configuration.md, python_hook): an edit of any module it may import
runs the checks again, asks the judge again only when their results differ, and never runs a model again.

Before session 75 only the hook's own module file was an input of the checks: an edit of a helper module, of the
package's `__init__.py`, of a data file in the package or of a module or package beside it left the checks fresh
(`claw explain`: everything is fresh) and the old outcome in the result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from clawstore.testing.standin import StandIn
from tests.support.judging import EV, Layers, Rebuild, eval_profile, judged_once
from tests.support.workspace import Workspace

EXPLAIN = ("explain", "--suite", "main", "--run-profile", "rp", *EV)

# The shared folder (`hooks/`, beside `configs/`) as a user lays it out: a package whose hook module imports a helper
# module of its package, a name from its `__init__.py`, a data file beside it, a module and a package beside it.
SHARED = {
    "sharedhooks/__init__.py": "PREFIX = 'wanted '\n",
    "sharedhooks/util.py": "EXPECTED = '4'\n",
    "sharedhooks/expected.txt": "four\n",
    "sharedhooks/check.py": (
        "import os\n"
        "from sharedcommon import SUFFIX\n"
        "from sharedhooks import PREFIX\n"
        "from sharedhooks.util import EXPECTED\n"
        "from sharedlib.words import LAST\n"
        "def check(artifact):\n"
        "    with open(os.path.join(os.path.dirname(__file__), 'expected.txt')) as fh:\n"
        "        word = fh.read().strip()\n"
        "    return {'passed': True, 'message': PREFIX + EXPECTED + ' ' + word + SUFFIX + LAST}\n"),
    "sharedcommon.py": "SUFFIX = '!'\n",
    "sharedlib/__init__.py": "",
    "sharedlib/words.py": "LAST = '.'\n",
    "README.md": "Hooks shared by the suites.\n",
}
ALPHA = {"alpha/m1", "alpha/m2"}
RECHECKED: Layers = {"checks": ALPHA, "judge": ALPHA, "result": ALPHA}


def _campaign(ws: Workspace) -> None:
    for name, text in SHARED.items():
        path = ws.root / "hooks" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    ws.edit("cases/alpha/test.yaml", lambda d: d.update(deterministic_checks=[
        {"check_id": "hook", "python_hook": {"import_path": "sharedhooks.check", "callable_name": "check"}}]))
    eval_profile(ws, repetitions=1, security_policy={"allow_local_python_hooks": True})


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StandIn, Path]]:
    with judged_once(tmp_path_factory, "hook-package", _campaign, syspath="hooks") as made:
        yield made


@pytest.fixture
def rebuild(built: tuple[StandIn, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Rebuild:
    return Rebuild.of(built, tmp_path, monkeypatch, syspath="hooks")


def _rewrite(name: str, change: Callable[[str], str]) -> Callable[[Workspace], None]:
    def edit(ws: Workspace) -> None:
        path = ws.root / "hooks" / name
        path.write_text(change(path.read_text()))
    return edit


# (what changes, the edit, the layers that execute, judge requests, the line explain prints, the hook's message after)
ROWS: list[tuple[str, Callable[[Workspace], None], Layers, int, str | None, str]] = [
    ("helper module", _rewrite("sharedhooks/util.py", lambda t: "EXPECTED = '5'\n"),
     RECHECKED, 2, "host_inputs.python:./sharedhooks/util.py changed", "wanted 5 four!."),
    ("helper module, same result", _rewrite("sharedhooks/util.py", lambda t: "# a comment\n" + t),
     RECHECKED, 0, "host_inputs.python:./sharedhooks/util.py changed", "wanted 4 four!."),
    ("package __init__", _rewrite("sharedhooks/__init__.py", lambda t: "PREFIX = 'expected '\n"),
     RECHECKED, 2, "host_inputs.python:./sharedhooks/__init__.py changed", "expected 4 four!."),
    ("hook module", _rewrite("sharedhooks/check.py", lambda t: t.replace("PREFIX +", "'hook: ' + PREFIX +")),
     RECHECKED, 2, "host_inputs.python:sharedhooks.check changed", "hook: wanted 4 four!."),
    ("data file in the package", _rewrite("sharedhooks/expected.txt", lambda t: "five\n"),
     RECHECKED, 2, "host_inputs.python:./sharedhooks/expected.txt changed", "wanted 4 five!."),
    ("module beside the package", _rewrite("sharedcommon.py", lambda t: "SUFFIX = '?'\n"),
     RECHECKED, 2, "host_inputs.python:./sharedcommon.py changed", "wanted 4 four?."),
    ("package beside the package", _rewrite("sharedlib/words.py", lambda t: "LAST = ';'\n"),
     RECHECKED, 2, "host_inputs.python:./sharedlib/words.py changed", "wanted 4 four!;"),
    ("no module beside it", _rewrite("README.md", lambda t: t + "More.\n"), {}, 0, None, "wanted 4 four!."),
]


@pytest.mark.parametrize(("edit", "executes", "judged", "explained", "message"), [row[1:] for row in ROWS],
                         ids=[row[0] for row in ROWS])
def test_an_edit_of_the_hook_package_runs_the_checks_again(
        rebuild: Rebuild, edit: Callable[[Workspace], None], executes: Layers, judged: int, explained: str | None,
        message: str) -> None:
    edit(rebuild.ws)
    assert rebuild.stale() == {kind: len(nodes) for kind, nodes in executes.items()}
    assert rebuild.executes() == executes
    code, out, err = rebuild.claw(*EXPLAIN)
    assert code == 0, out + err
    assert (explained or "everything is fresh") in out, out
    assert rebuild.build() == (0, judged)  # no model asked again, the judge only when the checks' results differ
    assert rebuild.executes() == {}
    assert message in rebuild.check_messages("hook")  # the outcome the hook gives now is the one kept
