"""The page's data without a browser: a comparison of two campaigns, hostile text in a transcript,
lazy detail offsets, and bad input (one line, exit 2, nothing written)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from clawstore.testing.standin import StandIn, text
from tests.support.claw import Claw
from tests.support.workspace import Workspace, standard

HOSTILE = "</script><script>alert(1)</script><!-- é 😀"


def blocks(html: str) -> tuple[dict[str, Any], str]:
    summary = re.search(r'<script type="application/json" id="claw-summary">(.*?)</script>', html, re.S)
    details = re.search(r'<script type="application/x-ndjson" id="claw-details">(.*?)</script>', html, re.S)
    assert summary and details
    return json.loads(summary.group(1)), details.group(1)


@pytest.fixture
def two_campaigns(tmp_path: Path, env: dict[str, str], standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> Claw:
    ws: Workspace = standard(tmp_path / "ws")
    ws.run_profile("rp2", concurrency=2, defaults={"temperature": 0.5})
    monkeypatch.chdir(ws.root)
    standin.set_default(text(f"answer {HOSTILE}"))
    claw = Claw(ws.root)
    assert claw.build()[0] == 0
    assert claw.build(profile="rp2")[0] == 0
    return claw


def test_comparison_page_and_hostile_text(two_campaigns: Claw, tmp_path: Path) -> None:
    out = tmp_path / "compare.html"
    code, _, err = two_campaigns("view", "--suite", "main", "--run-profile", "rp", "--against", "main__rp2__none",
                                 "--out", str(out))
    assert code == 0, err
    html = out.read_text(encoding="utf-8")
    assert html.count("</script>") == 3 and "<script>alert" not in html
    summary, details = blocks(html)
    assert details.isascii()  # every non-ASCII character is escaped: offsets are exact
    assert [c["id"] for c in summary["campaigns"]] == ["main__rp__none", "main__rp2__none"]
    assert sorted((m["campaign"], m["model_id"]) for m in summary["models"]) == [
        (0, "m1"), (0, "m2"), (1, "m1"), (1, "m2")]
    assert len(summary["detail_index"]) == 8
    for offset, length in summary["detail_index"]:
        detail = json.loads(details[offset:offset + length])
        assert detail["conversation"][-1] == {"type": "final", "content": f"answer {HOSTILE}"}
    assert {json.loads(details[o:o + n])["campaign"] for o, n in summary["detail_index"]} == {0, 1}


def test_unknown_campaign_is_one_line_and_writes_nothing(two_campaigns: Claw, tmp_path: Path) -> None:
    out = tmp_path / "nope.html"
    code, stdout, err = two_campaigns("view", "--suite", "main", "--run-profile", "rp", "--against", "other__x__none",
                                      "--out", str(out))
    assert code == 2, (stdout, err)
    assert len(err.strip().splitlines()) == 1 and "other__x__none" in err and "Traceback" not in err
    assert not out.exists()
    code, _, err = two_campaigns("view", "--suite", "main", "--run-profile", "rp", "--out", "/no/such/dir/p.html")
    assert code == 2 and "does not exist" in err and len(err.strip().splitlines()) == 1
