"""Labels: a repository's label set and the labels on each issue (pull request).

GitHub's rules: names are unique per repository ignoring case and at most 50 characters, colors
six hex digits (a leading ``#`` is dropped), descriptions at most 100 characters. Creating or
editing labels takes write access; putting them on an issue takes triage, and a name that is
not a label yet is created on the way (color ``ededed``), as GitHub does. Every label that goes
on or comes off a pull request fires ``pull_request`` ``labeled``/``unlabeled`` with the label.
"""

from __future__ import annotations

import re
from typing import Any

from controller.localforge import render_issues
from controller.localforge.errors import Invalid, NotFound, invalid_custom, invalid_field
from controller.localforge.models import Label, Pull, Repo, Role
from controller.localforge.pulls import Pulls
from controller.localforge.service import Ctx, Forge

Json = dict[str, Any]

MAX_NAME = 50
MAX_DESCRIPTION = 100
DEFAULT_COLOR = "ededed"
_COLOR = re.compile(r"[0-9a-fA-F]{6}")


def label_names(payload: Any) -> list[str]:
    """The names in a labels body: ``["a"]``, ``{"labels": ["a"]}`` or ``{"labels": [{"name": "a"}]}``."""
    items = payload.get("labels") if isinstance(payload, dict) else payload
    if items is None:
        return []
    if not isinstance(items, list):
        raise invalid_field("Label", "labels")
    names = []
    for item in items:
        name = item.get("name") if isinstance(item, dict) else item
        if not isinstance(name, str) or not name.strip():
            raise invalid_field("Label", "name")
        if len(name) > MAX_NAME:
            raise Invalid([{"value": name, "resource": "Label", "field": "name", "code": "invalid"}])
        names.append(name.strip())
    return names


def _color(value: Any, default: str | None) -> str | None:
    if value is None:
        return default
    color = value.removeprefix("#") if isinstance(value, str) else ""
    if not _COLOR.fullmatch(color):
        raise invalid_field("Label", "color")
    return color.lower()


def _description(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise invalid_field("Label", "description")
    if len(value) > MAX_DESCRIPTION:
        raise invalid_custom(
            "Label", f"description is too long (maximum is {MAX_DESCRIPTION} characters)", "description"
        )
    return value


def _name(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise invalid_field("Label", "name", "missing_field")
    if len(value) > MAX_NAME:
        raise invalid_custom("Label", f"name is too long (maximum is {MAX_NAME} characters)", "name")
    return value.strip()


class Labels:
    """Label operations of one forge."""

    def __init__(self, forge: Forge, pulls: Pulls) -> None:
        self.forge = forge
        self.pulls = pulls

    def json(self, ctx: Ctx, repo: Repo, label: Label) -> Json:
        return render_issues.label(ctx.urls, repo, label)

    # -- the repository's labels -----------------------------------------------------------------

    def listing(self, repo: Repo) -> list[Label]:
        return self.forge.store.labels(repo.id)

    def get(self, repo: Repo, name: str) -> Label:
        label = self.forge.store.label_by_name(repo.id, name)
        if label is None:
            raise NotFound()
        return label

    def create(self, ctx: Ctx, repo: Repo, payload: Json) -> Label:
        self.forge.require(ctx, repo, Role.PUSH)
        name = _name(payload.get("name"))
        color = _color(payload.get("color"), DEFAULT_COLOR)
        description = _description(payload.get("description"))
        if self.forge.store.label_by_name(repo.id, name) is not None:
            raise Invalid([{"resource": "Label", "code": "already_exists", "field": "name"}])
        assert color is not None
        return self.forge.store.add_label(repo.id, name, color, description)

    def update(self, ctx: Ctx, repo: Repo, name: str, payload: Json) -> Label:
        self.forge.require(ctx, repo, Role.PUSH)
        label = self.get(repo, name)
        values: Json = {}
        if "new_name" in payload or ("name" in payload and payload["name"] != label.name):
            new = _name(payload.get("new_name", payload.get("name")))
            other = self.forge.store.label_by_name(repo.id, new)
            if other is not None and other.id != label.id:
                raise Invalid([{"resource": "Label", "code": "already_exists", "field": "name"}])
            values["name"] = new
        if "color" in payload:
            values["color"] = _color(payload["color"], label.color)
        if "description" in payload:
            values["description"] = _description(payload["description"])
        return self.forge.store.update_label(label.id, **values) if values else label

    def delete(self, ctx: Ctx, repo: Repo, name: str) -> None:
        self.forge.require(ctx, repo, Role.PUSH)
        self.forge.store.delete_label(self.get(repo, name).id)

    # -- labels on an issue ----------------------------------------------------------------------

    def on_issue(self, repo: Repo, number: int) -> list[Label]:
        self.pulls.get(repo, number)
        return self.forge.store.issue_labels(repo.id, number)

    def _ensure(self, repo: Repo, names: list[str]) -> list[Label]:
        labels = []
        for name in dict.fromkeys(names):
            found = self.forge.store.label_by_name(repo.id, name)
            labels.append(found or self.forge.store.add_label(repo.id, name, DEFAULT_COLOR, None))
        return labels

    def add(self, ctx: Ctx, repo: Repo, number: int, payload: Any) -> list[Label]:
        """``POST /issues/{n}/labels``: add to the labels already there; all labels after."""
        self.forge.require(ctx, repo, Role.TRIAGE)
        pull = self.pulls.get(repo, number)
        labels = self._ensure(repo, label_names(payload))
        added = self.forge.store.add_issue_labels(repo.id, number, [label.id for label in labels])
        self._emit(ctx, repo, pull, [lb for lb in labels if lb.id in added], "labeled")
        return self.forge.store.issue_labels(repo.id, number)

    def replace(self, ctx: Ctx, repo: Repo, number: int, payload: Any) -> list[Label]:
        """``PUT /issues/{n}/labels`` (and ``PATCH /issues/{n}`` with ``labels``): exactly these."""
        self.forge.require(ctx, repo, Role.TRIAGE)
        pull = self.pulls.get(repo, number)
        wanted = self._ensure(repo, label_names(payload))
        keep = {label.id for label in wanted}
        before = self.forge.store.issue_labels(repo.id, number)
        gone = [label for label in before if label.id not in keep]
        self.forge.store.remove_issue_labels(repo.id, number, [label.id for label in gone])
        added = self.forge.store.add_issue_labels(repo.id, number, [label.id for label in wanted])
        self._emit(ctx, repo, pull, gone, "unlabeled")
        self._emit(ctx, repo, pull, [lb for lb in wanted if lb.id in added], "labeled")
        return self.forge.store.issue_labels(repo.id, number)

    def remove(self, ctx: Ctx, repo: Repo, number: int, name: str | None) -> list[Label]:
        """``DELETE /issues/{n}/labels/{name}`` (404 when it is not on the issue), or all (None)."""
        self.forge.require(ctx, repo, Role.TRIAGE)
        pull = self.pulls.get(repo, number)
        before = self.forge.store.issue_labels(repo.id, number)
        gone = before if name is None else [lb for lb in before if lb.name.lower() == name.lower()]
        if name is not None and not gone:
            raise NotFound("Label does not exist")
        self.forge.store.remove_issue_labels(repo.id, number, [label.id for label in gone])
        self._emit(ctx, repo, pull, gone, "unlabeled")
        return self.forge.store.issue_labels(repo.id, number)

    def _emit(self, ctx: Ctx, repo: Repo, pull: Pull, labels: list[Label], action: str) -> None:
        fresh = self.pulls.get(repo, pull.number)
        for label in labels:
            self.pulls.emit(ctx, repo, fresh, action, label=self.json(ctx, repo, label))
