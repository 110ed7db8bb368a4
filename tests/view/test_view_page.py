"""The page's data without a browser: a comparison of two campaigns, hostile text in a transcript, the
run details in shards beside the page (bounded page, stale shards removed, odd paths), and bad input (one line,
exit 2, nothing written)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from clawstore.host.durable import process_identity
from clawstore.testing.standin import StandIn, text
from tests.support.claw import Claw
from tests.support.once import copied, made_once
from tests.support.workspace import SECRET, Workspace, standard

HOSTILE = "</script><script>alert(1)</script><!-- é 😀"


def summary_of(html: str) -> dict[str, Any]:
    summary = re.search(r'<script type="application/json" id="claw-summary">(.*?)</script>', html, re.S)
    assert summary
    return json.loads(summary.group(1))


def shards(page: Path) -> dict[str, str]:
    """{file name: text} of the page's detail folder."""
    return {f.name: f.read_text(encoding="ascii") for f in sorted(page.with_name(page.name + ".d").glob("details-*"))}


def details(page: Path) -> list[dict[str, Any]]:
    """Every run detail of the page, in index order, each shard checked to hand its own number and the page's token."""
    token = summary_of(page.read_text(encoding="utf-8"))["details"]["token"]
    found: list[dict[str, Any]] = []
    for number, (name, script) in enumerate(shards(page).items()):
        assert name == f"details-{number:05d}.js"
        call = re.fullmatch(r'clawDetails\("([0-9a-f]+)",(\d+),(\[.*\])\);\n', script, re.S)
        assert call and call.group(1) == token and int(call.group(2)) == number, script[:200]
        found += json.loads(call.group(3))
    return found


def _make_two_campaigns(made: Path) -> None:
    with StandIn() as standin, pytest.MonkeyPatch.context() as mp:
        for key, value in {"OPENROUTER_API_KEY": SECRET, "OPENROUTER_BASE_URL": standin.base_url,
                           "CLAW_STORE": str(made / "store")}.items():
            mp.setenv(key, value)
        ws: Workspace = standard(made / "ws")
        ws.run_profile("rp2", concurrency=2, defaults={"temperature": 0.5})
        mp.chdir(ws.root)
        standin.set_default(text(f"answer {HOSTILE}"))
        claw = Claw(ws.root)
        assert claw.build()[0] == 0
        assert claw.build(profile="rp2")[0] == 0


@pytest.fixture
def two_campaigns(tmp_path: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch,
                  tmp_path_factory: pytest.TempPathFactory) -> Claw:
    """main x rp and main x rp2 built against a stand-in answering HOSTILE: made once in the run
    (tests/support/once.py), the workspace and the store (where `env` points) copied for each test."""
    copied(made_once(tmp_path_factory, "view-page-two-campaigns", _make_two_campaigns), tmp_path, "ws", "store")
    monkeypatch.chdir(tmp_path / "ws")
    return Claw(tmp_path / "ws")


def test_comparison_page_and_hostile_text(two_campaigns: Claw, tmp_path: Path) -> None:
    out = tmp_path / "compare.html"
    code, _, err = two_campaigns("view", "--suite", "main", "--run-profile", "rp", "--against", "main__rp2__none",
                                 "--out", str(out))
    assert code == 0, err
    html = out.read_text(encoding="utf-8")
    assert html.count("</script>") == 2 and "<script>alert" not in html
    summary = summary_of(html)
    assert HOSTILE not in html  # the answers are in the shards, not the page
    assert [c["id"] for c in summary["campaigns"]] == ["main__rp__none", "main__rp2__none"]
    assert sorted((m["campaign"], m["model_id"]) for m in summary["models"]) == [
        (0, "m1"), (0, "m2"), (1, "m1"), (1, "m2")]
    runs = details(out)  # (each shard ASCII: every non-ASCII character escaped)
    assert summary["details"]["runs"] == len(runs) == 8
    assert sorted(i for row in summary["rows"] for i in row["runs"]) == list(range(8))
    for row in summary["rows"]:  # each row points at its own runs
        (detail,) = (runs[i] for i in row["runs"])
        assert (detail["campaign"], detail["model_id"], detail["case_id"]) == (
            row["campaign"], row["model_id"], summary["cases"][row["case"]])
        assert detail["conversation"][-1] == {"type": "final", "content": f"answer {HOSTILE}"}
    assert {d["campaign"] for d in runs} == {0, 1}


def test_unknown_campaign_is_one_line_and_writes_nothing(two_campaigns: Claw, tmp_path: Path) -> None:
    out = tmp_path / "nope.html"
    code, stdout, err = two_campaigns("view", "--suite", "main", "--run-profile", "rp", "--against", "other__x__none",
                                      "--out", str(out))
    assert code == 2, (stdout, err)
    assert len(err.strip().splitlines()) == 1 and "other__x__none" in err and "Traceback" not in err
    assert not out.exists()
    code, _, err = two_campaigns("view", "--suite", "main", "--run-profile", "rp", "--out", "/no/such/dir/p.html")
    assert code == 2 and "does not exist" in err and len(err.strip().splitlines()) == 1


def test_the_page_stays_small_as_the_campaign_and_its_answers_grow(tmp_path: Path, env: dict[str, str],
                                                                   standin: StandIn,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    ws: Workspace = standard(tmp_path / "ws")
    monkeypatch.chdir(ws.root)
    answer = "long answer " * 800  # ~10 KB per run: kept whole in the shards (under MAX_TEXT), never in the page
    standin.set_default(text(answer))
    claw = Claw(ws.root)
    sizes = []
    for cases in (2, 12):
        for i in range(2, cases):
            ws.case(f"more{i:02d}", f"Question {i}?")
        assert claw.build()[0] == 0
        page = tmp_path / f"view-{cases}.html"
        code, _, err = claw("view", "--suite", "main", "--run-profile", "rp", "--out", str(page))
        assert code == 0, err
        assert answer not in page.read_text(encoding="utf-8")
        assert [d["conversation"][-1]["content"] for d in details(page)] == [answer] * 2 * cases
        sizes.append((page.stat().st_size, sum(len(t) for t in shards(page).values())))
    (page_2, shards_2), (page_12, shards_12) = sizes
    added_runs = 2 * 10
    assert shards_12 - shards_2 > added_runs * len(answer)  # the details grow with what the runs said...
    assert page_12 - page_2 < added_runs * 1000  # ...the page by its summary rows alone (under 1 KB a run)


def test_a_smaller_view_at_the_same_path_removes_the_stale_shards(two_campaigns: Claw, tmp_path: Path) -> None:
    out = tmp_path / "page.html"
    folder = tmp_path / "page.html.d"
    folder.mkdir()
    pid, ticks = process_identity()
    dead = f"{2**22 + 7}-1-{'0' * 16}.tmp"  # a temp whose writer is gone (pids stay below 2**22)
    alive = f"{pid}-{ticks}-{'1' * 16}.tmp"  # one a running writer is still filling
    for name in ("details-00001.js", "details-00007.js", dead, alive):
        (folder / name).write_text("clawDetails('old', 1, []);")
    (folder / "notes.txt").write_text("mine")  # not claw's: left alone
    code, _, err = two_campaigns("view", "--suite", "main", "--run-profile", "rp", "--out", str(out))
    assert code == 0, err
    assert re.search(rf"wrote {re.escape(str(out))} \(\d+ KB, 4 runs; their details in "
                     rf"{re.escape(str(folder))}/, \d+ KB\)", err), err
    assert sorted(p.name for p in folder.iterdir()) == sorted(["details-00000.js", "notes.txt", alive])
    assert [d["case_id"] for d in details(out)] == ["alpha", "alpha", "beta", "beta"]


@pytest.mark.parametrize("name", ["a page#1?.html", "100%.html", "<b>é.html", "-page"])
def test_an_odd_out_path_names_its_folder_and_the_page_finds_it(two_campaigns: Claw, tmp_path: Path,
                                                                name: str) -> None:
    out = tmp_path / name
    code, _, err = two_campaigns("view", "--suite", "main", "--run-profile", "rp", "--out", str(out))
    assert code == 0, err
    summary = summary_of(out.read_text(encoding="utf-8"))
    assert summary["details"]["dir"] == name + ".d"  # the page encodes it (encodeURIComponent) to load a shard
    assert len(details(out)) == 4


def test_something_in_the_way_of_the_details_folder_is_one_line(two_campaigns: Claw, tmp_path: Path) -> None:
    out = tmp_path / "page.html"
    (tmp_path / "page.html.d").write_text("a file, not a folder")
    code, _, err = two_campaigns("view", "--suite", "main", "--run-profile", "rp", "--out", str(out))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "is in the way" in err, err
    assert not out.exists()
    (tmp_path / "page.html.d").unlink()
    (tmp_path / "page.html.d").symlink_to(tmp_path)
    code, _, err = two_campaigns("view", "--suite", "main", "--run-profile", "rp", "--out", str(out))
    assert code == 2 and "is in the way" in err and not out.exists(), err
