"""Campaign expansion: references, merge order, model resolution, messages, agents, and what blocks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from clawstore.config import find_workspace_root, load_workspace, resolve_campaign
from clawstore.config.models import JudgeConfig, ModelConfig
from clawstore.config.resolution import openclaw_model_ref, resolve_judge_model, resolve_model
from clawstore.errors import ConfigError, UsageError
from tests.config.workspace_builder import build_base, edit_yaml, llm_case, write_yaml


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return build_base(tmp_path / "ws")


# The note on a campaign that runs nothing: a build leaves its head (tests/builder/test_empty_campaign_head.py).
KEPT = " (its head is left as it was: its results stay, and gc keeps them)"


def test_items_settings_and_models(ws: Path) -> None:
    campaign = resolve_campaign(ws, "main", "standard", "judge")
    assert campaign.campaign_id == "main__standard__judge"
    assert [(i.model_id, i.case_id) for i in campaign.items] == [
        ("m1", "alpha"), ("m1", "beta"), ("m2", "alpha"), ("m2", "beta")]
    by = {(i.model_id, i.case_id): i for i in campaign.items}
    # runner_defaults <- model_overrides[model] <- case runner keys (the case wins)
    assert by["m1", "alpha"].settings == {"temperature": 0.2, "max_tokens": 256}
    assert by["m2", "alpha"].settings == {"temperature": 0.2, "max_tokens": 512}
    assert by["m2", "beta"].settings == {"temperature": 1.0, "max_tokens": 512}
    assert by["m1", "beta"].resolved_model == "openai/gpt-4o-mini"
    assert by["m2", "beta"].resolved_model == "acme/tiny"
    assert all(i.agent_id is None and i.runner_type == "llm_probe" for i in campaign.items)
    # per-case work is shared across models, not redone
    assert by["m1", "alpha"].attachments is by["m2", "alpha"].attachments
    assert campaign.judge_system_prompt == "Grade the run.\nReturn JSON."
    assert campaign.judge_system_prompt_source == "path:prompts/judge.md"


def test_sources_expanded_and_attachment_injected_after_leading_system(ws: Path) -> None:
    item = resolve_campaign(ws, "main", "standard", cases=["alpha"]).items[0]
    assert [(m.role, m.content) for m in item.messages] == [
        ("system", "Be brief."),
        ("user", "Attached context file: data.txt\n\n--- BEGIN ATTACHMENT data.txt ---\n"
                 "numbers: 1 2 3\n\n--- END ATTACHMENT data.txt ---"),
        ("user", "Summarise the attachment."),
    ]
    assert item.messages[1].metadata == {"attachment": {"name": "data.txt", "byte_size": 15}}
    assert item.attachments[0].data == b"numbers: 1 2 3\n" and item.attachments[0].name == "data.txt"


@pytest.mark.parametrize(("file_name", "body", "fmt", "expected"), [
    ("m.txt", "just text\n", None, [("user", "just text", "who", {})]),  # unknown suffix: YAML
    ("m.yaml", "content: hello\ntool_call_id: t1\n", None, [("user", "hello", "who", {"tool_call_id": "t1"})]),
    ("m.json", json.dumps([{"role": "assistant", "content": "a"}, {"content": "b", "name": "n2"}]), None,
     [("assistant", "a", "who", {}), ("user", "b", "n2", {})]),
    ("m.data", json.dumps({"role": "system", "content": "s"}), "json", [("system", "s", "who", {})]),
])
def test_message_source_file_shapes(ws: Path, file_name: str, body: str, fmt: str | None,
                                    expected: list[tuple[str, str, str, dict]]) -> None:
    beta = ws / "configs/cases/group/beta"
    (beta / file_name).write_text(body, encoding="utf-8")
    source = {"path": file_name, **({"format": fmt} if fmt else {})}
    write_yaml(beta / "test.yaml", llm_case("beta", input={"messages": [
        {"role": "user", "name": "who", "source": source}]}))
    item = resolve_campaign(ws, "main", "standard", cases=["beta"]).items[0]
    assert [(m.role, m.content, m.name, m.metadata) for m in item.messages] == expected


def test_openclaw_items_agent_turns_and_no_settings(ws: Path) -> None:
    campaign = resolve_campaign(ws, "claw", "standard")
    (item,) = campaign.items
    assert item.runner_type == "openclaw" and item.agent_id == "helper" and item.settings == {}
    assert [t.content for t in item.turns] == ["Write a.md", "Write b.md"]
    assert [m.role for m in item.messages] == ["system"]
    assert list(campaign.agents) == ["helper"]
    assert campaign.agents["helper"].workspace_dir.is_dir()
    assert openclaw_model_ref(item.resolved_model) == "openrouter/openai/gpt-4o-mini"


def test_openclaw_case_uses_profile_agent_when_no_assignment_matches(ws: Path) -> None:
    shutil.copytree(ws / "configs/agents/helper", ws / "configs/agents/other")
    edit_yaml(ws / "configs/agents/other/agent.yaml", lambda d: d.update(agent_id="other"))
    edit_yaml(ws / "configs/suites/claw.yaml",
              lambda d: d["openclaw"]["agent_assignments"][0].update(agent_id="other"))
    assert resolve_campaign(ws, "claw", "standard").items[0].agent_id == "other"
    edit_yaml(ws / "configs/suites/claw.yaml", lambda d: d["openclaw"].update(agent_assignments=[]))
    assert resolve_campaign(ws, "claw", "standard").items[0].agent_id == "helper"


def test_an_agent_assignment_selecting_no_case_is_said_before_anything_runs(ws: Path) -> None:
    """A misspelt tag in an assignment (s60-qa2): claw validate said OK and the case ran with the run profile's agent,
    paid for with the wrong agent, without a word."""
    shutil.copytree(ws / "configs/agents/helper", ws / "configs/agents/other")
    edit_yaml(ws / "configs/agents/other/agent.yaml", lambda d: d.update(agent_id="other"))
    edit_yaml(ws / "configs/suites/claw.yaml", lambda d: d["openclaw"].update(agent_assignments=[
        {"agent_id": "other", "case_selection": {"include_tags": ["clwa"]}}]))
    campaign = resolve_campaign(ws, "claw", "standard")
    assert campaign.items[0].agent_id == "helper"
    suite_says = [w for w in campaign.warnings if w.startswith("configs/suites/")]  # (the profile's runner_defaults
    assert suite_says == [  # are said too: test_openclaw_runner_keys.py)
        "configs/suites/claw.yaml: openclaw.agent_assignments[0]: selects none of the campaign's 1 openclaw "
        "case(s): agent 'other' runs nothing, and a case matched by no assignment runs the run profile's agent "
        "'helper'"]
    assert not [w for w in resolve_campaign(ws, "claw", "standard", cases=["claw_one"]).warnings
                if w.startswith("configs/suites/")]  # --case: not said


def test_openclaw_cases_need_a_profile_openclaw_block(ws: Path) -> None:
    write_yaml(ws / "configs/run_profiles/plain.yaml",
               {"schema_version": 1, "run_profile_id": "plain", "title": "Plain"})
    with pytest.raises(ConfigError) as info:
        resolve_campaign(ws, "claw", "plain")
    assert str(info.value).startswith(
        "configs/run_profiles/plain.yaml: openclaw: suite 'claw' selects openclaw cases (claw_one)")
    assert info.value.exit_code == 2
    assert resolve_campaign(ws, "main", "plain").items  # llm_probe-only suites are fine


def test_ambiguous_assignment_fails_before_anything_runs(ws: Path) -> None:
    edit_yaml(ws / "configs/suites/claw.yaml", lambda d: d["openclaw"]["agent_assignments"].append(
        {"agent_id": "helper", "case_selection": {"include_case_ids": ["claw_one"]}}))
    with pytest.raises(ConfigError, match=r"case 'claw_one' matches 2 assignments"):
        resolve_campaign(ws, "claw", "standard")


def test_filters(ws: Path) -> None:
    campaign = resolve_campaign(ws, "main", "standard", cases=["beta"], models=["m2"])
    assert [(i.model_id, i.case_id) for i in campaign.items] == [("m2", "beta")]
    with pytest.raises(UsageError, match=r"--case claw_one: not selected by suite 'main'"):
        resolve_campaign(ws, "main", "standard", cases=["claw_one"])
    with pytest.raises(UsageError, match=r"--model m9: not in suite 'main' \(models: m1, m2\)"):
        resolve_campaign(ws, "main", "standard", models=["m9"])


@pytest.mark.parametrize("selection", [{"include_tags": ["smok"]},
                                       {"include_tags": ["smoke"], "exclude_tags": ["data", "smoke"]}])
def test_a_suite_selecting_no_case_is_said_before_anything_runs(ws: Path, selection: dict[str, list[str]]) -> None:
    """A misspelt tag selected nothing without a word: `claw build` said "0 executed, 0 reused", exit 0, and moved the
    campaign's head to an empty state (s60-qa). Still a campaign (nothing to run is no error), with a warning that
    build, plan, status and explain print on stderr, naming the suite file and its field."""
    edit_yaml(ws / "configs" / "suites" / "main.yaml", lambda doc: doc.update(case_selection=selection))
    campaign = resolve_campaign(ws, "main", "standard")
    assert list(campaign.items) == []
    assert campaign.warnings == ["configs/suites/main.yaml: case_selection: selects no case of the 3 in the "
                                 "workspace: this campaign runs nothing" + KEPT]


def test_a_suite_with_no_model_is_said_before_anything_runs(ws: Path) -> None:
    edit_yaml(ws / "configs" / "suites" / "main.yaml", lambda doc: doc.update(models=[]))
    campaign = resolve_campaign(ws, "main", "standard")
    assert list(campaign.items) == []
    assert campaign.warnings == ["configs/suites/main.yaml: models: none listed: this campaign runs nothing" + KEPT]
    assert resolve_campaign(ws, "main", "standard", cases=["alpha"]).warnings == [
        "configs/suites/main.yaml: models: none listed: this campaign runs nothing" + KEPT]
    edit_yaml(ws / "configs" / "suites" / "main.yaml",
              lambda doc: doc.update(models=[{"model_id": "m1", "requested_model": "openai/gpt-4o-mini"}]))
    assert resolve_campaign(ws, "main", "standard").warnings == []


def test_references_by_id_path_and_id_field(ws: Path, tmp_path: Path) -> None:
    shutil.move(ws / "configs/suites/main.yaml", ws / "configs/suites/main.yml")
    shutil.move(ws / "configs/run_profiles/standard.yaml", ws / "configs/run_profiles/std_file.yaml")
    campaign = resolve_campaign(ws / "configs" / "cases", "main", "standard")  # id field, found from a subdir
    assert campaign.run_profile_path.name == "std_file.yaml" and campaign.suite_path.name == "main.yml"
    by_path = resolve_campaign(ws, "configs/suites/main.yml", "./configs/run_profiles/std_file.yaml")
    assert by_path.suite.suite_id == "main"
    # a suite file outside the workspace is checked against the workspace of the cwd
    outside = tmp_path / "elsewhere" / "adhoc.yaml"
    write_yaml(outside, {"schema_version": 1, "suite_id": "adhoc", "title": "Ad hoc",
                         "models": [{"model_id": "m1"}], "case_selection": {"include_case_ids": ["beta"]}})
    adhoc = resolve_campaign(ws, str(outside), "standard")
    assert [(i.resolved_model, i.case_id) for i in adhoc.items] == [("m1", "beta")]
    write_yaml(outside, {"schema_version": 1, "suite_id": "adhoc", "title": "Ad hoc",
                         "case_selection": {"include_case_ids": ["ghost"]}})
    with pytest.raises(ConfigError, match=r"adhoc.yaml: case_selection.include_case_ids: unknown case ids: ghost"):
        resolve_campaign(ws, str(outside), "standard")
    shutil.copy(ws / "configs/suites/main.yml", ws / "configs/suites/main.yaml")
    with pytest.raises(UsageError, match=r"ambiguous suite 'main'"):
        resolve_campaign(ws, "main", "standard")
    with pytest.raises(UsageError, match=r"could not resolve run profile 'nope' .*available: standard"):
        resolve_campaign(ws, "claw", "nope")
    with pytest.raises(UsageError, match=r"suite file not found: missing.yaml"):
        resolve_campaign(ws, "missing.yaml", "standard")


def test_workspace_root_discovery(ws: Path, tmp_path: Path) -> None:
    assert find_workspace_root(ws / "configs" / "cases" / "alpha") == ws
    assert find_workspace_root(ws / "configs" / "cases" / "alpha" / "test.yaml") == ws
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UsageError, match="no workspace found: claw looks for a configs/ directory in"):
        find_workspace_root(empty)


def test_unrelated_broken_files_do_not_block_but_selected_ones_do(ws: Path) -> None:
    write_yaml(ws / "configs/suites/broken.yaml", {"schema_version": 1, "suite_id": "broken"})
    write_yaml(ws / "configs/cases/zeta/test.yaml", llm_case("zeta", ["other"], title=""))
    assert load_workspace(ws).issues  # validate would complain...
    assert resolve_campaign(ws, "main", "standard").items  # ...but this campaign uses none of them
    write_yaml(ws / "configs/cases/zeta/test.yaml", llm_case("zeta", ["smoke"], title=""))
    with pytest.raises(ConfigError, match=r"configs/cases/zeta/test.yaml: title: must not be empty"):
        resolve_campaign(ws, "main", "standard")
    (ws / "configs/cases/zeta/test.yaml").write_text("case_id: [", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"zeta/test.yaml: invalid YAML"):  # unknown id: could be selected
        resolve_campaign(ws, "main", "standard")


def test_several_problems_are_summarised(ws: Path) -> None:
    edit_yaml(ws / "configs/suites/main.yaml", lambda d: d.update(title="", colour=1))
    with pytest.raises(ConfigError) as info:
        resolve_campaign(ws, "main", "standard")
    assert str(info.value) == ("configs/suites/main.yaml: title: must not be empty "
                               "(and 1 more problem; run 'claw validate')")


def test_judge_prompt_resolution_variants(ws: Path) -> None:
    profile = ws / "configs/evaluation_profiles/judge.yaml"
    (ws / "configs/evaluation_profiles/prompts/judge.txt").write_text("  line one\n\n line two \n")
    edit_yaml(profile, lambda d: d.update(judge_system_prompt_path="prompts/judge.txt"))
    campaign = resolve_campaign(ws, "main", "standard", "judge")
    assert (campaign.judge_system_prompt, campaign.judge_system_prompt_source) == (
        "line one line two", "path:prompts/judge.txt")
    edit_yaml(profile, lambda d: (d.pop("judge_system_prompt_path"), d.update(judge_system_prompt="a\n  b\n")))
    campaign = resolve_campaign(ws, "main", "standard", "judge")
    assert (campaign.judge_system_prompt, campaign.judge_system_prompt_source) == ("a b", "inline")
    edit_yaml(profile, lambda d: d.pop("judge_system_prompt"))
    (ws / "configs/evaluation_profiles/prompts/judge_system_default.md").write_text("\nDefault.\r\n\r\nRules.\n")
    campaign = resolve_campaign(ws, "main", "standard", "judge")
    assert campaign.judge_system_prompt == "Default.\n\nRules."
    assert campaign.judge_system_prompt_source == "default:prompts/judge_system_default.md"
    edit_yaml(profile, lambda d: d.update(judge_runs=[]))
    with pytest.raises(ConfigError, match=r"judge.yaml: judge_runs: no judge_runs"):
        resolve_campaign(ws, "main", "standard", "judge")


def test_model_and_judge_model_resolution_order() -> None:
    def model(**kw: str) -> ModelConfig:
        return ModelConfig.model_validate({"model_id": "mid", **kw})

    assert resolve_model(model(requested_model="a/b", openrouter_model="c/d", model_name="e")) == "a/b"
    assert resolve_model(model(requested_model=" ", openrouter_model="c/d")) == "c/d"
    assert resolve_model(model(provider="p", model_name="n")) == "p/n"
    assert resolve_model(model(provider="p", model_name="x/n")) == "x/n"
    assert resolve_model(model(model_name="n")) == "n"
    assert resolve_model(model(requested_model="")) == "mid"
    assert openclaw_model_ref("openrouter/a/b") == "openrouter/a/b"

    def judge(**kw: str) -> JudgeConfig:
        return JudgeConfig.model_validate({"judge_id": "jid", "type": "llm_probe", **kw})

    assert resolve_judge_model(judge(model="m", judge_model="j")) == "m"
    assert resolve_judge_model(judge(judge_model="j", model_id="i")) == "j"
    assert resolve_judge_model(judge(model_id="i")) == "i"
    assert resolve_judge_model(judge()) == "jid"


def test_campaign_as_plain_data(ws: Path) -> None:
    data = resolve_campaign(ws, "claw", "standard", "judge").as_dict()
    json.dumps(data)  # JSON-ready
    assert data["campaign_id"] == "claw__standard__judge"
    assert data["evaluation_profile"]["judge_system_prompt_source"] == "path:prompts/judge.md"
    (item,) = data["items"]
    assert item["agent_id"] == "helper" and item["settings"] == {} and len(item["turns"]) == 2
    plain = resolve_campaign(ws, "main", "standard", cases=["alpha"], models=["m1"]).as_dict()
    assert plain["items"][0]["attachments"] == [{"name": "data.txt", "byte_size": 15}]
    assert plain["evaluation_profile"] is None
