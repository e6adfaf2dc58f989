"""The agent loop: analyze, plan, template, test, search, record; rules and LLM planners.

``ktx optimize KERNEL_DIR`` runs :func:`ktx.agent.loop.optimize`. Each round a planner (the
deterministic :class:`~ktx.agent.rules.RulesPlanner` by default, or
:class:`~ktx.agent.llm.LLMPlanner` through any OpenAI-compatible endpoint) turns the analysis of
the best kernel so far into a plan: a pipeline of registered passes with options and knob ranges,
and why. The loop templates it, searches its knobs with verification against the original, and
logs the round; it stops after ``patience`` rounds without a gain beyond noise or when the
budget is spent. See ``docs/agent.md``.
"""

from ktx.agent.analysis import Analysis, Device, KernelFacts, NcuMetrics, ShapeAnalysis, analyze, kernel_facts
from ktx.agent.catalog import Catalog, KnobInfo, OptionInfo, PassInfo
from ktx.agent.plan import PassChoice, Plan, PlanError, plan_schema, restrict_knobs, validate_plan
from ktx.agent.planner import PlanContext, Planner, PlanOutcome, Probe, RoundSummary, Usage
from ktx.agent.rules import RulesPlanner

__all__ = [
    "Analysis",
    "Catalog",
    "Device",
    "KernelFacts",
    "KnobInfo",
    "NcuMetrics",
    "OptionInfo",
    "PassChoice",
    "PassInfo",
    "Plan",
    "PlanContext",
    "PlanError",
    "PlanOutcome",
    "Planner",
    "Probe",
    "RoundSummary",
    "RulesPlanner",
    "ShapeAnalysis",
    "Usage",
    "analyze",
    "kernel_facts",
    "plan_schema",
    "restrict_knobs",
    "validate_plan",
]
