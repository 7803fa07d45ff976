"""``services.views.json_forms``: each TypedDict the CLI prints from names exactly the fields of its view
model, and what the views dump validates against it (a field added to a view fails here until it is
added to its JSON form)."""

from __future__ import annotations

import types
from typing import Union, get_args, get_origin, get_type_hints, is_typeddict

import pytest
from pydantic import BaseModel

from controller.services.views import json_forms, schemas

PAIRS: list[tuple[type, type[BaseModel]]] = [
    (json_forms.BaselineJson, schemas.Baseline),
    (json_forms.BestJson, schemas.Best),
    (json_forms.MetricJson, schemas.Metric),
    (json_forms.HypothesisJson, schemas.Hypothesis),
    (json_forms.TurnJson, schemas.Turn),
    (json_forms.ComponentJson, schemas.Component),
    (json_forms.PullRequestJson, schemas.PullRequest),
    (json_forms.FeedbackItemJson, schemas.FeedbackItem),
    (json_forms.RoundJson, schemas.Round),
    (json_forms.ReplyJson, schemas.Reply),
    (json_forms.FeedbackJson, schemas.Feedback),
    (json_forms.RunJson, schemas.Run),
    (json_forms.RunSummaryJson, schemas.RunSummary),
]


def _conforms(value: object, hint: object) -> bool:
    """Whether JSON ``value`` has type ``hint`` exactly (no coercion: an int is not a str). pydantic's
    TypeAdapter would do this, but on Python 3.11 it refuses ``typing.TypedDict``, and the forms stay
    stdlib-only so the runs list does not import ``typing_extensions`` for them."""
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, float | int) and not isinstance(value, bool)
    if hint in (str, int, bool):
        return type(value) is hint
    if is_typeddict(hint):
        hints = get_type_hints(hint)
        return (
            isinstance(value, dict)
            and set(value) == set(hints)
            and all(_conforms(value[key], sub) for key, sub in hints.items())
        )
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        return any(_conforms(value, arg) for arg in args)
    if origin is list:
        return isinstance(value, list) and all(_conforms(item, args[0]) for item in value)
    if origin is dict:
        return isinstance(value, dict) and all(
            isinstance(k, str) and _conforms(v, args[1]) for k, v in value.items()
        )
    raise AssertionError(f"no check for {hint!r}")


@pytest.mark.parametrize(("form", "model"), PAIRS, ids=[model.__name__ for _, model in PAIRS])
def test_a_json_form_names_its_models_fields(form: type, model: type[BaseModel]) -> None:
    assert list(get_type_hints(form)) == list(model.model_fields)


def test_a_dumped_view_validates_strictly_against_its_json_form() -> None:
    """Types, not only names: a run with a turn of two hypotheses, a PR, feedback, a round and a reply,
    dumped as ``--json`` does, is accepted by its TypedDict in strict mode (no coercion)."""
    hypothesis = {
        "index": 0,
        "outcome": "accepted",
        "reason": "improved",
        "value": 1.0,
        "samples": [1.0],
        "reference_samples": [2.0],
        "p_value": 0.01,
        "changed_paths": ["a.py"],
        "hypothesis": "h",
        "commit": {"app": "abc"},
        "cost_usd": 0.0,
        "duration_s": 1.5,
        "detail": "",
    }
    turn = {
        **{k: v for k, v in hypothesis.items() if k != "index"},
        "turn": 1,
        "round": 0,
        "pairs": 4,
        "sequential_stop": "kept early",
        "hypotheses": [hypothesis, {**hypothesis, "index": 1, "reason": "superseded", "commit": None}],
    }
    item = {
        "id": 1,
        "component": "app",
        "pr_number": 3,
        "source": "review_comment",
        "author": "octo",
        "association": "OWNER",
        "path": "a.py",
        "line": 2,
        "action": None,
        "body": "b",
        "trusted": True,
        "verdict": "steer",
        "reason": None,
        "round": 1,
    }
    round_ = {"round": 1, "component": "app", "feedback": [1], "kept": True, "head": "abc", "detail": ""}
    reply = {"feedback": 1, "author": "octo", "reply": "thanks"}
    run = schemas.Run.model_validate(
        {
            "run_id": "r",
            "status": "completed",
            "stop_reason": "max_turns",
            "message": None,
            "objective": "o",
            "metric": {"name": "m", "direction": "minimize"},
            "baseline": {"value": 2.0, "samples": [2.0]},
            "best": {"value": 1.0, "turn": 1},
            "cost_usd": 0.0,
            "tokens": 0,
            "turns": [turn],
            "components": [{"name": "app", "base_sha": "a", "head_sha": "b", "diff": None}],
            "pull_requests": [
                {
                    "component": "app",
                    "url": "u",
                    "number": 3,
                    "branch": "crucible/r",
                    "draft": True,
                    "head_sha": "b",
                    "state": "open",
                    "paused": False,
                    "published_value": 1.0,
                }
            ],
            "created_at": "2026-12-04T00:00:00Z",
            "finished_at": None,
            "feedback": [item],
            "rounds": [round_],
            "replies": [reply],
        }
    )
    assert _conforms(schemas.dump(run), json_forms.RunJson)
    feedback = schemas.Feedback(run_id="r", feedback=run.feedback, rounds=run.rounds, replies=run.replies)
    assert _conforms(schemas.dump(feedback), json_forms.FeedbackJson)
    summary = schemas.RunSummary(
        run_id="r",
        status=run.status,
        stop_reason=None,
        objective="o",
        baseline=None,
        best=1.0,
        created_at=run.created_at,
    )
    assert _conforms(schemas.dump(summary), json_forms.RunSummaryJson)
    assert not _conforms({**schemas.dump(summary), "best": "1.0"}, json_forms.RunSummaryJson)  # it can fail
