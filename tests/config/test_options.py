"""RunOptions: what a run was asked to do, validated with the field named, stored as plain JSON."""

from __future__ import annotations

import json
from typing import Any

import pytest

from controller.config.options import RunOptions
from controller.domain.errors import SpecError


def test_options_round_trip_through_the_stored_json() -> None:
    options = RunOptions(
        turns=4, publish_prs=True, watch_feedback=True, listen="127.0.0.1:8321", live_steer=True
    )
    stored = json.loads(json.dumps(options.to_json()))
    assert RunOptions.stored(stored) == options


def test_runs_stored_before_options_were_typed_still_parse() -> None:
    assert RunOptions.stored({"publish_prs": True}) == RunOptions(publish_prs=True)
    assert RunOptions.stored({}) == RunOptions()


@pytest.mark.parametrize(
    ("data", "field", "words"),
    [
        ({"turns": -1}, "options.turns", "greater than or equal to 0"),
        ({"watch_feedback": True}, "options", "needs publish_prs"),
        (
            {"publish_prs": True, "listen": "127.0.0.1:8000"},
            "options",
            "only makes sense with watch_feedback",
        ),
        ({"publish_prs": True, "watch_feedback": True, "listen": "nohost"}, "options.listen", "HOST:PORT"),
        ({"publish_prs": True, "watch_feedback": True, "listen": "h:99999"}, "options.listen", "HOST:PORT"),
        ({"publish": True}, "options.publish", "Extra inputs"),
    ],
)
def test_bad_options_name_the_field(data: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(SpecError) as err:
        RunOptions.parse(data)
    assert err.value.key == field
    assert words in err.value.message
