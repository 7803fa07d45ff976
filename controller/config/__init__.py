"""config layer (see DESIGN.md section 9): the run spec, its value units, and the ``crucible init`` template.

Process-wide settings live apart, in ``controller.config.settings``.
"""

from controller.config.spec import (
    AgentSpec,
    BudgetSpec,
    ComponentSpec,
    FeedbackSpec,
    GuardSpec,
    KnobSpec,
    MetricSpec,
    PublishSpec,
    SandboxSpec,
    Spec,
    ValidationSpec,
    WorkspaceSpec,
    load_spec,
    parse_spec,
)
from controller.config.template import render_template
from controller.config.units import Tolerance, parse_duration, parse_size, parse_tolerance

__all__ = [
    "AgentSpec",
    "BudgetSpec",
    "ComponentSpec",
    "FeedbackSpec",
    "GuardSpec",
    "KnobSpec",
    "MetricSpec",
    "PublishSpec",
    "SandboxSpec",
    "Spec",
    "Tolerance",
    "ValidationSpec",
    "WorkspaceSpec",
    "load_spec",
    "parse_duration",
    "parse_size",
    "parse_spec",
    "parse_tolerance",
    "render_template",
]
