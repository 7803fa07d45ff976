"""The spec's ``[publish]`` table: where pull requests go and how they fit a team's review process.

Teams let bots open pull requests in their repositories when the bot follows their process: the
labels their boards filter on, the reviewers and assignees who must see it, a title and commit
convention (Conventional Commits), a DCO ``Signed-off-by:`` trailer, a named commit author, and the
result reported on the PR itself. Every such setting is checked here, at load and so at
``crucible loop --dry-run``, against what GitHub itself accepts (a label of at most 50 characters,
a login GitHub could have issued, a template whose placeholders exist), so a typo is an error naming
the key, never a failed call at the first publish hours into a run.

Templates use ``{name}`` placeholders (``{{`` and ``}}`` for literal braces) and nothing else: no
attribute or index access and no format specs, so a template can only ever insert the text crucible
hands it.
"""

from __future__ import annotations

import difflib
import json
import re
import string
from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, Field, model_validator

from controller.config.model import _KeyedError, _Model

MAX_LABEL_CHARS = 50  # GitHub refuses longer label names (422 "name is too long")
MAX_ASSIGNEES = 10  # GitHub keeps at most 10 assignees on an issue or pull request
MAX_TEMPLATE_CHARS = 4096
MAX_TITLE_CHARS = 256  # GitHub's limit on a pull request title

# What each template may say; the values are filled in when the PR is opened or the commit made.
TITLE_PLACEHOLDERS = {
    "objective": "the run's objective",
    "component": "the component's name",
    "metric": "the metric's name",
    "baseline": "the baseline's median",
    "value": "the published candidate's median",
    "improvement": 'the change against the baseline, e.g. "−73.5%"',
    "run_id": "the run's id",
}
COMMIT_PLACEHOLDERS = {
    **TITLE_PLACEHOLDERS,
    "value": "the kept candidate's median",
    "hypothesis": 'the agent\'s HYPOTHESIS line (or "turn N")',
    "turn": "the turn's number",
}
DEFAULT_TITLE = "crucible: {objective} ({metric} {baseline} → {value}) [{component}]"
DEFAULT_CONVENTIONAL_TITLE = "{objective} ({metric} {baseline} → {value})"
DEFAULT_COMMIT_MESSAGE = "crucible: {hypothesis}\n\nrun {run_id}, turn {turn}: {metric}={value}"
DEFAULT_CONVENTIONAL_COMMIT_MESSAGE = "{hypothesis}\n\nrun {run_id}, turn {turn}: {metric}={value}"

# GitHub logins: letters, digits and hyphens, at most 39, no hyphen first or last (accounts made long
# ago may hold two hyphens in a row, so that is allowed).
_LOGIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,37}[A-Za-z0-9])?")
# A team's slug as the requested-reviewers API takes it (the name GitHub derives for the team's URL).
_TEAM_SLUG = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
_EMAIL = re.compile(r"[^\s<>@,]+@[^\s<>@,]+")


def _login(value: str) -> str:
    if value.startswith("@") and _LOGIN.fullmatch(value[1:]):
        raise ValueError(f"must be a GitHub login without the '@', got {json.dumps(value)}")
    if not _LOGIN.fullmatch(value):
        raise ValueError(
            "must be a GitHub login (letters, digits and hyphens, at most 39 characters, not starting or "
            f"ending with a hyphen), got {json.dumps(value)}"
        )
    return value


def _team(value: str) -> str:
    if "/" in value:
        raise ValueError(f"must be the team's slug without its organization, got {json.dumps(value)}")
    if not _TEAM_SLUG.fullmatch(value):
        raise ValueError(f"must be a team slug (letters, digits, '-', '_', '.'), got {json.dumps(value)}")
    return value


def _label(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    if value != value.strip():
        raise ValueError(f"must not start or end with spaces, got {json.dumps(value)}")
    if len(value) > MAX_LABEL_CHARS:
        raise ValueError(
            f"is {len(value)} characters long; GitHub allows at most {MAX_LABEL_CHARS}: {json.dumps(value)}"
        )
    return value


def _distinct(values: list[str]) -> list[str]:
    """A name twice (in any case: GitHub compares logins and labels case-insensitively) is a typo."""
    seen: set[str] = set()
    for value in values:
        if value.casefold() in seen:
            raise ValueError(f"{json.dumps(value)} is listed twice")
        seen.add(value.casefold())
    return values


def placeholders(template: str) -> list[str]:
    """The placeholder names of ``template`` in order; ValueError for anything but ``{name}``."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:  # a lone "{" or "}"
        raise ValueError(f"is not a valid template ({exc}); write {{{{ and }}}} for literal braces") from None
    names = []
    for _text, field, spec, conversion in parsed:
        if field is None:
            continue
        if not field.isidentifier():
            shown = "{" + field + "}"
            raise ValueError(f"placeholders are plain names like {{objective}}, got {shown}")
        if spec or conversion:
            raise ValueError(f"placeholders take no format spec or conversion, got {{{field}...}}")
        names.append(field)
    return names


def _template(known: dict[str, str]) -> AfterValidator:
    def check(template: str) -> str:
        if not template.strip():
            raise ValueError("must not be empty")
        if len(template) > MAX_TEMPLATE_CHARS:
            raise ValueError(f"must be at most {MAX_TEMPLATE_CHARS} characters")
        for name in placeholders(template):
            if name not in known:
                close = difflib.get_close_matches(name, list(known), n=1)
                hint = f" (did you mean {{{close[0]}}}?)" if close else ""
                listed = ", ".join("{" + k + "}" for k in known)
                raise ValueError(f"unknown placeholder {{{name}}}{hint}; known: {listed}")
        return template

    return AfterValidator(check)


def _forge_url(value: str) -> str:
    if not re.fullmatch(r"https?://\S+", value):
        raise ValueError(f"must be an http:// or https:// URL, got {json.dumps(value)}")
    return value


def _status_mode(value: object) -> object:
    """``status = false`` reads as ``"off"`` and ``true`` as ``"auto"``, as a person would write it."""
    if value is True:
        return "auto"
    if value is False:
        return "off"
    return value


def _one_line(what: str) -> AfterValidator:
    def check(value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        if any(c in value for c in "\n\r<>"):
            raise ValueError(f"{what} must be one line without '<' or '>', got {json.dumps(value)}")
        return value.strip()

    return AfterValidator(check)


Login = Annotated[str, AfterValidator(_login)]
TeamSlug = Annotated[str, AfterValidator(_team)]
Label = Annotated[str, AfterValidator(_label)]
TitleTemplate = Annotated[str, _template(TITLE_PLACEHOLDERS)]
CommitTemplate = Annotated[str, _template(COMMIT_PLACEHOLDERS)]
ForgeUrl = Annotated[str, AfterValidator(_forge_url)]


class AuthorSpec(_Model):
    """The name and email of crucible's commits (author and committer)."""

    name: Annotated[str, _one_line("a name")]
    email: Annotated[str, _one_line("an email")]

    @model_validator(mode="after")
    def _email_shape(self) -> AuthorSpec:
        if not _EMAIL.fullmatch(self.email):
            raise _KeyedError(("email",), f"must look like name@host, got {json.dumps(self.email)}")
        return self

    def identity(self) -> tuple[str, str]:
        return self.name, self.email


class PublishSpec(_Model):
    """Where PRs are opened (GitHub, GitHub Enterprise or a local forge, by API URL) and the team
    process they follow: labels, reviewers, assignees, title and commit conventions, sign-off, the
    commits' author, and the measured result as a commit status or check run."""

    forge: ForgeUrl
    labels: Annotated[list[Label], AfterValidator(_distinct)] = Field(default_factory=list)
    reviewers: Annotated[list[Login], AfterValidator(_distinct)] = Field(default_factory=list)
    team_reviewers: Annotated[list[TeamSlug], AfterValidator(_distinct)] = Field(default_factory=list)
    assignees: Annotated[list[Login], AfterValidator(_distinct), Field(max_length=MAX_ASSIGNEES)] = Field(
        default_factory=list
    )
    title: TitleTemplate | None = None
    commit_message: CommitTemplate | None = None
    conventional: bool = False
    signoff: bool = False
    author: AuthorSpec | None = None
    status: Annotated[Literal["auto", "commit-status", "check-run", "off"], BeforeValidator(_status_mode)] = (
        "auto"
    )

    @model_validator(mode="after")
    def _signoff_needs_author(self) -> PublishSpec:
        if self.signoff and self.author is None:
            raise _KeyedError(
                ("signoff",),
                "needs [publish.author] (name and email): a Signed-off-by trailer certifies the change "
                "for a person or organization, and must match the commits' author",
            )
        return self

    def title_template(self) -> str:
        if self.title is not None:
            return self.title
        return DEFAULT_CONVENTIONAL_TITLE if self.conventional else DEFAULT_TITLE

    def commit_template(self) -> str:
        if self.commit_message is not None:
            return self.commit_message
        return DEFAULT_CONVENTIONAL_COMMIT_MESSAGE if self.conventional else DEFAULT_COMMIT_MESSAGE


def render(template: str, values: Mapping[str, str]) -> str:
    """``template`` with each ``{name}`` replaced by ``values[name]`` (templates were checked at
    load, so every name is known; ``{{``/``}}`` become braces)."""
    out = []
    for text, field, _spec, _conversion in string.Formatter().parse(template):
        out.append(text)
        if field is not None:
            out.append(values[field])
    return "".join(out)
