"""What CI and bots report on commits: commit statuses and check runs.

Statuses (``POST /statuses/{sha}``) take write access; the latest status of each ``context``
makes the combined status. Check runs belong to GitHub Apps: on GitHub only an App's token may
create one (anyone else gets 403 ``You must authenticate via a GitHub App.``), so here only a
``[bot]`` account with write access may, acting as the App of that name, and only that App may
update its runs. ``status`` and ``check_run`` (``created``, ``completed``) webhooks are sent as
GitHub sends them to repository hooks.
"""

from __future__ import annotations

import json
from typing import Any

from controller.localforge import gitops, render, render_checks, render_issues
from controller.localforge.errors import Conflict, Forbidden, Invalid, NotFound, invalid_custom, invalid_field
from controller.localforge.models import (
    Account,
    AccountType,
    CheckConclusion,
    CheckRun,
    CheckStatus,
    CommitStatus,
    Repo,
    Role,
    StatusState,
)
from controller.localforge.pulls import Pulls
from controller.localforge.service import Ctx, Forge

Json = dict[str, Any]

MAX_DESCRIPTION = 140
MAX_PER_CONTEXT = 1000  # GitHub's limit of statuses per sha and context
APP_ONLY = "You must authenticate via a GitHub App."
DOCS_CHECKS = "https://docs.github.com/rest/checks/runs#create-a-check-run"


class Checks:
    """Commit-status and check-run operations of one forge."""

    def __init__(self, forge: Forge, pulls: Pulls) -> None:
        self.forge = forge
        self.pulls = pulls

    def resolve(self, repo: Repo, ref: str) -> str:
        """The commit a sha, branch or tag names (409 for an empty repository, else 404)."""
        path = self.forge.repo_path(repo)
        if not self.forge.branches(repo):
            raise Conflict("Git Repository is empty.")
        sha = gitops.resolve(path, ref) if not ref.startswith("-") else None
        if sha is None:
            raise NotFound(f"No commit found for SHA: {ref}")
        return sha

    # -- statuses --------------------------------------------------------------------------------

    def status_json(self, ctx: Ctx, repo: Repo, item: CommitStatus) -> Json:
        return render_checks.status(ctx.urls, repo, item, self.forge.store.account_by_id(item.creator_id))

    def create_status(self, ctx: Ctx, repo: Repo, sha: str, payload: Json) -> CommitStatus:
        actor = self.forge.require(ctx, repo, Role.PUSH)
        path = self.forge.repo_path(repo)
        found = gitops.resolve(path, sha) if not sha.startswith("-") else None
        if found is None:
            raise Invalid(message=f"No commit found for SHA: {sha}")
        state = payload.get("state")
        if state not in {s.value for s in StatusState}:
            raise invalid_field("Status", "state", "missing_field" if state is None else "invalid")
        context = payload.get("context") or "default"
        description, target = payload.get("description"), payload.get("target_url")
        if (
            not isinstance(context, str)
            or not isinstance(description, str | None)
            or not isinstance(target, str | None)
        ):
            raise invalid_field("Status", "context")
        if description is not None and len(description) > MAX_DESCRIPTION:
            raise invalid_custom(
                "Status", f"description is too long (maximum is {MAX_DESCRIPTION} characters)", "description"
            )
        if self.forge.store.count_statuses(repo.id, found, context) >= MAX_PER_CONTEXT:
            raise invalid_custom("Status", "This SHA and context has reached the maximum number of statuses.")
        values = {"state": state, "context": context, "description": description, "target_url": target}
        status = self.forge.store.add_status(repo.id, found, actor.id, values)
        self._emit_status(ctx, repo, status)
        return status

    def statuses(self, repo: Repo, ref: str) -> list[CommitStatus]:
        return self.forge.store.statuses(repo.id, self.resolve(repo, ref))

    def combined(self, ctx: Ctx, repo: Repo, ref: str) -> Json:
        """``GET /commits/{ref}/status``: the latest status per context, oldest context first."""
        sha = self.resolve(repo, ref)
        latest: dict[str, CommitStatus] = {}
        for item in self.forge.store.statuses(repo.id, sha):  # newest first
            latest.setdefault(item.context, item)
        chosen = sorted(latest.values(), key=lambda s: s.id)
        shown = []
        for item in chosen:
            entry = self.status_json(ctx, repo, item)
            del entry["creator"]
            shown.append(entry)
        state = render_checks.combined_state(chosen)
        return render_checks.combined(ctx.urls, repo, sha, shown, self.forge.repo_json(ctx, repo), state)

    def _emit_status(self, ctx: Ctx, repo: Repo, item: CommitStatus) -> None:
        path = self.forge.repo_path(repo)
        shown = render.commit(ctx.urls, repo, gitops.commit_info(path, item.sha))
        branches = [
            render.branch_short(ctx.urls, repo, n, s) for n, s in gitops.branches_containing(path, item.sha)
        ]
        creator = self.forge.store.account_by_id(item.creator_id)
        payload = {
            "id": item.id,
            "sha": item.sha,
            "name": repo.full_name,
            "target_url": item.target_url,
            "avatar_url": f"{ctx.urls.web}/avatars/{creator.login}" if creator else None,
            "context": item.context,
            "description": item.description,
            "state": item.state.value,
            "commit": shown,
            "branches": branches,
            "created_at": item.created_at,
            "updated_at": item.updated_at,
        }
        self.forge.emit(ctx, repo, "status", payload)

    # -- check runs ------------------------------------------------------------------------------

    def _app(self, ctx: Ctx, repo: Repo) -> Account:
        actor = self.forge.require(ctx, repo, Role.PUSH)
        if actor.type is not AccountType.BOT:
            raise Forbidden(APP_ONLY, doc=DOCS_CHECKS)
        return actor

    def run_json(self, ctx: Ctx, repo: Repo, run: CheckRun) -> Json:
        app = render_issues.integration(ctx.urls, self.forge.account(run.app_id))
        pulls = []
        for pull in self.forge.store.pulls(repo.id, {"state": "open", "head_sha": run.head_sha}, "number"):
            head_repo = self.forge.store.repo_by_id(pull.head_repo_id) or repo
            pulls.append(render_checks.pull_minimal(ctx.urls, repo, head_repo, pull))
        return render_checks.check_run(ctx.urls, repo, run, app, pulls)

    def create_run(self, ctx: Ctx, repo: Repo, payload: Json) -> CheckRun:
        app = self._app(ctx, repo)
        name = payload.get("name")
        if not isinstance(name, str) or not name:
            raise invalid_field("CheckRun", "name", "missing_field")
        head = payload.get("head_sha")
        sha = gitops.resolve(self.forge.repo_path(repo), head) if isinstance(head, str) and head else None
        if sha is None or sha != head:
            raise invalid_field("CheckRun", "head_sha", "missing_field" if head is None else "invalid")
        values = self._run_values(payload, None)
        values.update(
            repo_id=repo.id,
            suite_id=self.forge.store.check_suite(repo.id, sha, app.id),
            head_sha=sha,
            name=name,
            app_id=app.id,
        )
        values.setdefault("started_at", self.forge.store.now())
        run = self.forge.store.add_check_run(values)
        self._emit_run(ctx, repo, run, "created")
        return run

    def get_run(self, repo: Repo, run_id: int) -> CheckRun:
        run = self.forge.store.check_run_by_id(run_id)
        if run is None or run.repo_id != repo.id:
            raise NotFound()
        return run

    def update_run(self, ctx: Ctx, repo: Repo, run_id: int, payload: Json) -> CheckRun:
        app = self._app(ctx, repo)
        run = self.get_run(repo, run_id)
        if run.app_id != app.id:
            raise Forbidden(
                f"Invalid app_id `{app.id}` - check run can only be modified by the GitHub App"
                " that created it."
            )
        values = self._run_values(payload, run)
        if isinstance(payload.get("name"), str) and payload["name"]:
            values["name"] = payload["name"]
        updated = self.forge.store.update_check_run(run.id, values)
        if updated.status is CheckStatus.COMPLETED and run.status is not CheckStatus.COMPLETED:
            self._emit_run(ctx, repo, updated, "completed")
        return updated

    def _run_values(self, payload: Json, run: CheckRun | None) -> Json:
        """Columns from a create or update body, with GitHub's rules for status and conclusion."""
        values: Json = {}
        for key in ("details_url", "external_id", "started_at", "completed_at"):
            if key in payload:
                if not isinstance(payload[key], str | None):
                    raise invalid_field("CheckRun", key)
                values[key] = payload[key]
        status = payload.get("status")
        if status is not None and status not in {s.value for s in CheckStatus}:
            raise invalid_field("CheckRun", "status")
        conclusion = payload.get("conclusion")
        if conclusion is not None and conclusion not in {c.value for c in CheckConclusion}:
            raise invalid_field("CheckRun", "conclusion")
        if conclusion is not None:  # a conclusion completes the run, whatever status says
            status = CheckStatus.COMPLETED.value
            values["conclusion"] = conclusion
            values.setdefault("completed_at", self.forge.store.now())
        elif (status == CheckStatus.COMPLETED.value or values.get("completed_at")) and (
            run is None or run.conclusion is None
        ):
            raise invalid_field("CheckRun", "conclusion", "missing_field")
        if status is not None:
            values["status"] = status
        elif run is None:
            values["status"] = CheckStatus.QUEUED.value
        if "output" in payload:
            values["output"] = self._output(payload["output"])
        elif run is None:
            values["output"] = "{}"
        return values

    def _output(self, output: Any) -> str:
        if not isinstance(output, dict):
            raise invalid_field("CheckRun", "output")
        title, summary = output.get("title"), output.get("summary")
        if not isinstance(title, str) or not title or not isinstance(summary, str) or not summary:
            raise invalid_field("CheckRun", "output", "missing_field")
        if len(summary) > 65535 or len(str(output.get("text") or "")) > 65535:
            raise invalid_custom(
                "CheckRun", "Only 65535 characters are allowed; the output was too long.", "output"
            )
        annotations = output.get("annotations") or []
        if not isinstance(annotations, list):
            raise invalid_field("CheckRun", "annotations")
        text = output.get("text")
        kept = {"title": title, "summary": summary, "text": text if isinstance(text, str) else None}
        return json.dumps({**kept, "annotations_count": len(annotations)})

    def runs_for_ref(self, repo: Repo, ref: str, params: dict[str, str]) -> list[CheckRun]:
        """``GET /commits/{ref}/check-runs`` with ``check_name``, ``status`` and ``filter``."""
        runs = self.forge.store.check_runs(repo.id, self.resolve(repo, ref))  # newest first
        if params.get("check_name"):
            runs = [r for r in runs if r.name == params["check_name"]]
        if params.get("status"):
            runs = [r for r in runs if r.status.value == params["status"]]
        if params.get("filter", "latest") == "latest":
            latest: dict[tuple[int, str], CheckRun] = {}
            for run in runs:
                latest.setdefault((run.app_id, run.name), run)
            runs = list(latest.values())
        return runs

    def _emit_run(self, ctx: Ctx, repo: Repo, run: CheckRun, action: str) -> None:
        shown = self.run_json(ctx, repo, run)
        branch = next((n for n, s in self.forge.branches(repo) if s == run.head_sha), None)
        suite_url = f"{ctx.urls.repo_api(repo)}/check-suites/{run.suite_id}"
        shown["check_suite"] = {
            "id": run.suite_id,
            "node_id": render.node_id("CheckSuite", run.suite_id),
            "head_branch": branch,
            "head_sha": run.head_sha,
            "status": run.status.value,
            "conclusion": run.conclusion.value if run.conclusion else None,
            "url": suite_url,
            "before": None,
            "after": run.head_sha,
            "pull_requests": shown["pull_requests"],
            "deployment": None,
            "app": shown["app"],
            "created_at": run.created_at,
            "updated_at": run.updated_at,
        }
        shown["deployment"] = None  # webhooks name it (a check run outside a deployment)
        self.forge.emit(ctx, repo, "check_run", {"action": action, "check_run": shown})
