"""The committed contract matches the code: ``docs/openapi.json`` pins every route and every field of
the typed views (the golden file), ``docs/api.md`` is generated from it. Regenerate both with
``python -m controller.api.docs`` when a change is meant."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from controller.api import docs
from controller.services.views import schemas


def test_the_committed_openapi_document_and_api_md_are_current() -> None:
    for path, text in docs.rendered().items():
        assert path.exists(), f"{path} is missing: run python -m controller.api.docs"
        assert path.read_text() == text, f"{path} is stale: run python -m controller.api.docs"


def test_the_document_declares_the_views_of_design_section_6() -> None:
    committed = json.loads((docs.DOCS / "openapi.json").read_text())["components"]["schemas"]
    for model in (
        schemas.Run,
        schemas.Turn,
        schemas.Component,
        schemas.PullRequest,
        schemas.FeedbackItem,
        schemas.Round,
        schemas.Reply,
    ):
        assert model.__name__ in committed
        assert set(committed[model.__name__]["properties"]) == set(model.model_fields)
    run = committed["Run"]["properties"]
    assert {
        "run_id",
        "status",
        "stop_reason",
        "baseline",
        "best",
        "turns",
        "components",
        "pull_requests",
    } <= set(run)


def test_check_mode_notices_a_stale_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(docs, "DOCS", tmp_path)
    assert docs.main(["--check"]) == 1  # nothing there yet
    assert docs.main([]) == 0
    assert docs.main(["--check"]) == 0
    (tmp_path / "api.md").write_text("edited by hand\n")
    assert docs.main(["--check"]) == 1
