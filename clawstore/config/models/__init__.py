"""Pydantic models of the five config types (cases, suites, run profiles, evaluation profiles, agents)."""

from clawstore.config.ids import DIMENSIONS
from clawstore.config.models.agent import Agent, AgentOpenClawConfig, ModelDefaults
from clawstore.config.models.case import (
    Expectation,
    Expectations,
    Message,
    MessageSource,
    Rubric,
    RubricCriterion,
    RubricScale,
    RunnerConfig,
    TestCase,
    TestInput,
)
from clawstore.config.models.checks import DeclarativeCheck, DeterministicCheck, PythonHook
from clawstore.config.models.evaluation import (
    AggregationConfig,
    AnchorReference,
    AnchorsConfig,
    EvaluationProfile,
    JudgeConfig,
    JudgeRunConfig,
    SecurityPolicy,
)
from clawstore.config.models.run_profile import ExecutionPolicy, OpenClawRunProfile, RunProfile
from clawstore.config.models.suite import AgentAssignment, CaseSelection, ModelConfig, Suite, SuiteOpenClawConfig

__all__ = [
    "DIMENSIONS", "Agent", "AgentAssignment", "AgentOpenClawConfig", "AggregationConfig", "AnchorReference",
    "AnchorsConfig", "CaseSelection", "DeclarativeCheck", "DeterministicCheck", "EvaluationProfile",
    "ExecutionPolicy", "Expectation", "Expectations", "JudgeConfig", "JudgeRunConfig", "Message",
    "MessageSource", "ModelConfig", "ModelDefaults", "OpenClawRunProfile", "PythonHook", "Rubric",
    "RubricCriterion", "RubricScale", "RunProfile", "RunnerConfig", "SecurityPolicy", "Suite",
    "SuiteOpenClawConfig", "TestCase", "TestInput",
]
