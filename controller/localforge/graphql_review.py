"""The part of GitHub's GraphQL schema that the ``gh`` CLI's review commands ask for.

``gh pr list``, ``view``, ``checks``, ``checkout``, ``comment`` and ``review`` speak GraphQL only
(``gh pr diff`` and ``ready`` were already served); their queries were read off ``gh`` 2.23 with
``GH_DEBUG=api`` against this forge. The SDL below extends ``graphql_nodes.SDL`` with exactly the
types and fields those documents name, under GitHub's names and types, so a field gh does not ask
for still gets GitHub's ``undefinedField`` error. Values come from the same services the REST
answers use (triage, checks, reviews, comments), so both APIs tell the same story.

What has no counterpart here answers as GitHub does for a repository without it: no projects
(``projectCards`` empty), no milestone, no reactions (every group counts 0), no required checks
(``isRequired`` false), no workflow runs (``checkSuite.workflowRun`` null).
"""

from __future__ import annotations

import functools
import json
from typing import Any

from graphql import GraphQLError, GraphQLSchema, build_schema

from controller.localforge import gitops, triage_view
from controller.localforge.errors import ForgeError, NotFound
from controller.localforge.graphql_nodes import SDL, Graph, Obj, connection, not_found
from controller.localforge.media import to_text
from controller.localforge.models import (
    Account,
    AccountType,
    CheckRun,
    CommitStatus,
    IssueComment,
    Pull,
    Repo,
    Review,
    Team,
)
from controller.localforge.render import node_id

REVIEW_SDL = """
enum MergeableState { MERGEABLE CONFLICTING UNKNOWN }
enum CommentAuthorAssociation {
  COLLABORATOR CONTRIBUTOR FIRST_TIMER FIRST_TIME_CONTRIBUTOR MANNEQUIN MEMBER NONE OWNER
}
enum PullRequestReviewState { PENDING COMMENTED APPROVED CHANGES_REQUESTED DISMISSED }
enum PullRequestReviewEvent { COMMENT APPROVE REQUEST_CHANGES DISMISS }
enum StatusState { EXPECTED ERROR FAILURE PENDING SUCCESS }
enum CheckStatusState { REQUESTED QUEUED IN_PROGRESS COMPLETED WAITING PENDING }
enum CheckConclusionState {
  ACTION_REQUIRED TIMED_OUT CANCELLED FAILURE SUCCESS NEUTRAL SKIPPED STARTUP_FAILURE STALE
}
enum ReactionContent { THUMBS_UP THUMBS_DOWN LAUGH HOORAY CONFUSED HEART ROCKET EYES }
enum OrderDirection { ASC DESC }
enum IssueOrderField { CREATED_AT UPDATED_AT COMMENTS }
input IssueOrder { field: IssueOrderField! direction: OrderDirection! }

interface RepositoryOwner { id: ID! login: String! url: URI! avatarUrl: URI! }
extend type User implements RepositoryOwner { name: String }
extend type Bot { name: String }
type Organization implements Node & Actor & RepositoryOwner {
  id: ID! databaseId: Int login: String! url: URI! avatarUrl: URI! name: String
}
type Team implements Node { id: ID! databaseId: Int name: String! slug: String! organization: Organization! }
union RequestedReviewer = User | Bot | Team
type ReviewRequest implements Node { id: ID! requestedReviewer: RequestedReviewer }
type ReviewRequestConnection { nodes: [ReviewRequest] pageInfo: PageInfo! totalCount: Int! }
type Label implements Node { id: ID! name: String! description: String color: String! url: URI! }
type LabelConnection { nodes: [Label] pageInfo: PageInfo! totalCount: Int! }
type UserConnection { nodes: [User] pageInfo: PageInfo! totalCount: Int! }
type ReactingUserConnection { totalCount: Int! }
type ReactionGroup { content: ReactionContent! users: ReactingUserConnection! }
type Project { name: String! }
type ProjectColumn { name: String! }
type ProjectCard { project: Project! column: ProjectColumn }
type ProjectCardConnection { nodes: [ProjectCard] pageInfo: PageInfo! totalCount: Int! }
type Milestone { number: Int! title: String! description: String dueOn: DateTime }

type IssueComment implements Node {
  id: ID! databaseId: Int author: Actor authorAssociation: CommentAuthorAssociation! body: String!
  bodyText: String! createdAt: DateTime! updatedAt: DateTime! includesCreatedEdit: Boolean!
  isMinimized: Boolean! minimizedReason: String reactionGroups: [ReactionGroup!] url: URI!
  viewerDidAuthor: Boolean!
}
type IssueCommentEdge { cursor: String! node: IssueComment }
type IssueCommentConnection {
  nodes: [IssueComment] edges: [IssueCommentEdge] pageInfo: PageInfo! totalCount: Int!
}

type Commit implements Node {
  id: ID! oid: GitObjectID! abbreviatedOid: String! message: String! messageHeadline: String!
  committedDate: DateTime! authoredDate: DateTime! statusCheckRollup: StatusCheckRollup
}
type PullRequestCommit implements Node { id: ID! commit: Commit! url: URI! }
type PullRequestCommitConnection { nodes: [PullRequestCommit] pageInfo: PageInfo! totalCount: Int! }

type StatusContext implements Node {
  id: ID! context: String! state: StatusState! targetUrl: URI description: String createdAt: DateTime!
  isRequired(pullRequestId: ID, pullRequestNumber: Int): Boolean!
}
type Workflow { name: String! }
type WorkflowRun { workflow: Workflow! }
type CheckSuite { workflowRun: WorkflowRun }
type CheckRun implements Node {
  id: ID! databaseId: Int name: String! status: CheckStatusState! conclusion: CheckConclusionState
  startedAt: DateTime completedAt: DateTime detailsUrl: URI title: String summary: String
  checkSuite: CheckSuite! isRequired(pullRequestId: ID, pullRequestNumber: Int): Boolean!
}
union StatusCheckRollupContext = CheckRun | StatusContext
type StatusCheckRollupContextConnection {
  nodes: [StatusCheckRollupContext] pageInfo: PageInfo! totalCount: Int!
}
type StatusCheckRollup {
  state: StatusState!
  contexts(first: Int, after: String, last: Int, before: String): StatusCheckRollupContextConnection!
}

type PullRequestReview implements Node {
  id: ID! databaseId: Int author: Actor authorAssociation: CommentAuthorAssociation! body: String!
  state: PullRequestReviewState! submittedAt: DateTime commit: Commit reactionGroups: [ReactionGroup!]
  url: URI!
}
type PullRequestReviewConnection { nodes: [PullRequestReview] pageInfo: PageInfo! totalCount: Int! }

type PullRequestEdge { cursor: String! node: PullRequest }
type PullRequestConnection {
  nodes: [PullRequest] edges: [PullRequestEdge] pageInfo: PageInfo! totalCount: Int!
}

extend type PullRequest {
  maintainerCanModify: Boolean! mergeable: MergeableState! additions: Int! deletions: Int!
  changedFiles: Int! headRepositoryOwner: RepositoryOwner headRepository: Repository
  isCrossRepository: Boolean!
  authorAssociation: CommentAuthorAssociation! milestone: Milestone reactionGroups: [ReactionGroup!]
  commits(first: Int, after: String, last: Int, before: String): PullRequestCommitConnection!
  reviewRequests(first: Int, after: String, last: Int, before: String): ReviewRequestConnection
  reviews(
    first: Int, after: String, last: Int, before: String, states: [PullRequestReviewState!]
  ): PullRequestReviewConnection
  assignees(first: Int, after: String, last: Int, before: String): UserConnection!
  labels(first: Int, after: String, last: Int, before: String): LabelConnection
  projectCards(first: Int, after: String, last: Int, before: String): ProjectCardConnection!
  comments(first: Int, after: String, last: Int, before: String): IssueCommentConnection!
}

extend type Repository {
  pullRequests(
    states: [PullRequestState!], baseRefName: String, headRefName: String, labels: [String!],
    first: Int, after: String, last: Int, before: String, orderBy: IssueOrder
  ): PullRequestConnection!
}

input AddCommentInput { subjectId: ID! body: String! clientMutationId: String }
type AddCommentPayload { clientMutationId: String commentEdge: IssueCommentEdge subject: Node }
input DraftPullRequestReviewComment { path: String! position: Int! body: String! }
input AddPullRequestReviewInput {
  pullRequestId: ID! body: String event: PullRequestReviewEvent commitOID: GitObjectID
  comments: [DraftPullRequestReviewComment] clientMutationId: String
}
type AddPullRequestReviewPayload { clientMutationId: String pullRequestReview: PullRequestReview }

extend type Mutation {
  addComment(input: AddCommentInput!): AddCommentPayload
  addPullRequestReview(input: AddPullRequestReviewInput!): AddPullRequestReviewPayload
}
"""

_NO_REACTIONS = ("THUMBS_UP", "THUMBS_DOWN", "LAUGH", "HOORAY", "CONFUSED", "HEART", "ROCKET", "EYES")
_SORTS = {"CREATED_AT": "created_at", "UPDATED_AT": "updated_at"}


@functools.cache
def schema() -> GraphQLSchema:
    """GitHub's slice served at ``/api/graphql``: ``graphql_nodes.SDL`` plus the review commands'."""
    return build_schema(SDL + REVIEW_SDL)


def _reactions() -> list[Obj]:
    return [{"content": c, "users": {"totalCount": 0}} for c in _NO_REACTIONS]


class ReviewGraph(Graph):
    """``Graph`` with the fields and mutations of gh's review commands."""

    def actor(self, account: Account) -> Obj:
        return {**super().actor(account), "name": None}

    def repository(self, repo: Repo) -> Obj:
        def pull_requests(_info: Any, **args: Any) -> Obj:
            states = {s.lower() for s in args.get("states") or ["OPEN", "CLOSED", "MERGED"]}
            pulls = [p for p in self.svc.forge.store.pulls(repo.id, {}, "id asc") if p.state in states]
            if args.get("baseRefName"):
                pulls = [p for p in pulls if p.base_ref == args["baseRefName"]]
            if args.get("headRefName"):
                pulls = [p for p in pulls if p.head_ref == args["headRefName"]]
            for wanted in args.get("labels") or []:
                pulls = [p for p in pulls if wanted in self._label_names(repo, p)]
            order = args.get("orderBy") or {"field": "CREATED_AT", "direction": "ASC"}
            column = _SORTS.get(order["field"], "created_at")
            pulls.sort(key=lambda p: (getattr(p, column), p.id), reverse=order["direction"] == "DESC")
            return connection([self.pull(p, repo) for p in pulls], args)

        return {**super().repository(repo), "pullRequests": pull_requests}

    def _label_names(self, repo: Repo, pull: Pull) -> set[str]:
        return {label.name for label in self.svc.forge.store.issue_labels(repo.id, pull.number)}

    def pull(self, pull: Pull, repo: Repo) -> Obj:
        forge = self.svc.forge
        head_repo = forge.store.repo_by_id(pull.head_repo_id) or repo

        def stats(key: str) -> Any:
            return lambda _info: self._stats(repo, pull)[key]

        def mergeable(_info: Any) -> str:
            clean = self._stats(repo, pull)["mergeable"]
            return {True: "MERGEABLE", False: "CONFLICTING", None: "UNKNOWN"}[clean]

        def head_owner(_info: Any) -> Obj:
            owner = forge.account(head_repo.owner_id)
            return self._organization(owner) if owner.type is AccountType.ORGANIZATION else self.actor(owner)

        return {
            **super().pull(pull, repo),
            "maintainerCanModify": False,
            "mergeable": mergeable,
            "additions": stats("additions"),
            "deletions": stats("deletions"),
            "changedFiles": stats("changed_files"),
            "headRepositoryOwner": head_owner,
            "headRepository": lambda _info: self.repository(head_repo),
            "isCrossRepository": head_repo.id != repo.id,
            "authorAssociation": lambda _info: forge.association(repo, forge.account(pull.user_id)),
            "milestone": None,
            "reactionGroups": _reactions(),
            "commits": lambda _info, **args: connection(self._commits(pull, repo), args),
            "reviewRequests": lambda _info, **args: connection(self._requests(pull), args),
            "reviews": lambda _info, **args: connection(self._reviews(pull, repo, args.get("states")), args),
            "assignees": lambda _info, **args: connection(self._assignees(repo, pull), args),
            "labels": lambda _info, **args: connection(self._labels(repo, pull), args),
            "projectCards": lambda _info, **args: connection([], args),
            "comments": lambda _info, **args: connection(self._comments(pull, repo), args),
        }

    def _stats(self, repo: Repo, pull: Pull) -> dict[str, Any]:
        """``Pulls.stats`` once per pull request and request: gh asks ``mergeable``, ``additions`` and
        ``deletions`` together, and each read is a trial merge plus a diff."""
        cache: dict[int, dict[str, Any]] = self.__dict__.setdefault("_stats_cache", {})
        if pull.id not in cache:
            cache[pull.id] = self.svc.pulls.stats(repo, pull)
        return cache[pull.id]

    # -- triage ---------------------------------------------------------------------------------

    def _labels(self, repo: Repo, pull: Pull) -> list[Obj]:
        return [self._label(repo, label) for label in self.svc.forge.store.issue_labels(repo.id, pull.number)]

    def _label(self, repo: Repo, label: Any) -> Obj:
        return {
            "__typename": "Label",
            "id": node_id("Label", label.id),
            "name": label.name,
            "description": label.description,
            "color": label.color,
            "url": f"{self.ctx.urls.web}/{repo.full_name}/labels/{label.name}",
        }

    def _assignees(self, repo: Repo, pull: Pull) -> list[Obj]:
        forge = self.svc.forge
        return [self.actor(forge.account(u)) for u in forge.store.assignees(repo.id, pull.number)]

    def _organization(self, org: Account) -> Obj:
        return {**self.actor(org), "__typename": "Organization", "id": node_id("Organization", org.id)}

    def _team(self, org: Account, team: Team) -> Obj:
        organization = self._organization(org)
        return {
            "__typename": "Team",
            "id": node_id("Team", team.id),
            "databaseId": team.id,
            "name": team.name,
            "slug": team.slug,
            "organization": organization,
        }

    def _requests(self, pull: Pull) -> list[Obj]:
        forge = self.svc.forge
        people = [self.actor(a) for a in triage_view.requested_users(forge, pull)]
        teams = [self._team(org, team) for org, team in triage_view.requested_teams(forge, pull)]
        return [
            {"__typename": "ReviewRequest", "id": node_id("ReviewRequest", i + 1), "requestedReviewer": who}
            for i, who in enumerate([*people, *teams])
        ]

    # -- conversation ---------------------------------------------------------------------------

    def _comments(self, pull: Pull, repo: Repo) -> list[Obj]:
        return [self._comment(c, pull, repo) for c in self.svc.comments.listing(repo, pull.number, {}, None)]

    def _comment(self, item: IssueComment, pull: Pull, repo: Repo) -> Obj:
        forge = self.svc.forge
        author = forge.account(item.user_id)
        return {
            "__typename": "IssueComment",
            "id": node_id("IssueComment", item.id),
            "databaseId": item.id,
            "author": self.actor(author),
            "authorAssociation": forge.association(repo, author),
            "body": item.body,
            "bodyText": lambda _info: to_text(item.body),
            "createdAt": item.created_at,
            "updatedAt": item.updated_at,
            "includesCreatedEdit": item.updated_at != item.created_at,
            "isMinimized": False,
            "minimizedReason": None,
            "reactionGroups": _reactions(),
            "url": f"{self.ctx.urls.pull_html(repo, pull.number)}#issuecomment-{item.id}",
            "viewerDidAuthor": self.ctx.actor is not None and self.ctx.actor.id == item.user_id,
        }

    def _reviews(self, pull: Pull, repo: Repo, states: list[str] | None) -> list[Obj]:
        shown = self.svc.reviews.visible_reviews(self.ctx, pull)
        if states:
            shown = [r for r in shown if r.state.value in states]
        return [self._review(r, pull, repo) for r in shown]

    def _review(self, review: Review, pull: Pull, repo: Repo) -> Obj:
        forge = self.svc.forge
        author = forge.account(review.user_id)
        path = forge.repo_path(repo)
        return {
            "__typename": "PullRequestReview",
            "id": node_id("PullRequestReview", review.id),
            "databaseId": review.id,
            "author": self.actor(author),
            "authorAssociation": forge.association(repo, author),
            "body": review.body,
            "state": review.state.value,
            "submittedAt": review.submitted_at,
            "commit": lambda _info: self._commit(gitops.commit_info(path, review.commit_id), repo),
            "reactionGroups": _reactions(),
            "url": f"{self.ctx.urls.pull_html(repo, pull.number)}#pullrequestreview-{review.id}",
        }

    # -- commits and checks ---------------------------------------------------------------------

    def _commits(self, pull: Pull, repo: Repo) -> list[Obj]:
        infos = self.svc.pulls.commits(repo, pull)
        return [
            {
                "__typename": "PullRequestCommit",
                "id": node_id("PullRequestCommit", int(info.sha[:12], 16)),
                "commit": self._commit(info, repo),
                "url": f"{self.ctx.urls.pull_html(repo, pull.number)}/commits/{info.sha}",
            }
            for info in infos
        ]

    def _commit(self, info: gitops.CommitInfo, repo: Repo) -> Obj:
        return {
            "__typename": "Commit",
            "id": node_id("Commit", int(info.sha[:12], 16)),
            "oid": info.sha,
            "abbreviatedOid": info.sha[:7],
            "message": info.message,
            "messageHeadline": info.message.split("\n", 1)[0],
            "committedDate": info.committer_date,
            "authoredDate": info.author_date,
            "statusCheckRollup": lambda _info: self._rollup(info.sha, repo),
        }

    def _rollup(self, sha: str, repo: Repo) -> Obj | None:
        """GitHub's rollup: the latest status per context and the latest run per App and name; null
        when the commit has neither."""
        latest: dict[str, CommitStatus] = {}
        for item in self.svc.forge.store.statuses(repo.id, sha):  # newest first
            latest.setdefault(item.context, item)
        runs = self.svc.checks.runs_for_ref(repo, sha, {})
        if not latest and not runs:
            return None
        contexts = [self._status(s) for s in sorted(latest.values(), key=lambda s: s.id)]
        contexts += [self._run(r) for r in sorted(runs, key=lambda r: r.id)]
        return {
            "state": _rollup_state(list(latest.values()), runs),
            "contexts": lambda _i, **a: connection(contexts, a),
        }

    def _status(self, item: CommitStatus) -> Obj:
        return {
            "__typename": "StatusContext",
            "id": node_id("StatusContext", item.id),
            "context": item.context,
            "state": item.state.value.upper(),
            "targetUrl": item.target_url,
            "description": item.description,
            "createdAt": item.created_at,
            "isRequired": lambda _info, **_args: False,
        }

    def _run(self, run: CheckRun) -> Obj:
        output = _output(run.output)
        return {
            "__typename": "CheckRun",
            "id": node_id("CheckRun", run.id),
            "databaseId": run.id,
            "name": run.name,
            "status": run.status.value.upper(),
            "conclusion": run.conclusion.value.upper() if run.conclusion else None,
            "startedAt": run.started_at,
            "completedAt": run.completed_at,
            "detailsUrl": run.details_url,
            "title": output.get("title"),
            "summary": output.get("summary"),
            "checkSuite": {"workflowRun": None},
            "isRequired": lambda _info, **_args: False,
        }

    # -- mutations ------------------------------------------------------------------------------

    def add_comment(self, subject: str, body: str, mutation_id: str | None) -> Obj:
        pull, repo = self._subject(subject)
        try:
            comment = self.svc.comments.create(self.ctx, repo, pull.number, {"body": body})
        except ForgeError as exc:
            raise refused(exc, subject) from exc
        shown = self._comment(comment, pull, repo)
        edge = {"cursor": "", "node": shown}
        return {"clientMutationId": mutation_id, "commentEdge": edge, "subject": self.pull(pull, repo)}

    def add_review(self, values: dict[str, Any]) -> Obj:
        ident = str(values["pullRequestId"])
        pull, repo = self._subject(ident)
        payload: dict[str, Any] = {"body": values.get("body") or ""}
        if values.get("event") and values["event"] != "DISMISS":
            payload["event"] = values["event"]
        if values.get("commitOID"):
            payload["commit_id"] = values["commitOID"]
        if values.get("comments"):
            payload["comments"] = [dict(c) for c in values["comments"]]
        try:
            review = self.svc.reviews.create(self.ctx, repo, pull, payload)
        except ForgeError as exc:
            raise refused(exc, ident) from exc
        fresh = self.svc.forge.store.pull_by_id(pull.id) or pull
        return {
            "clientMutationId": values.get("clientMutationId"),
            "pullRequestReview": self._review(review, fresh, repo),
        }

    def _subject(self, ident: str) -> tuple[Pull, Repo]:
        found = self.pull_by_node(ident)
        if found is None:
            raise not_found(f"Could not resolve to a node with the global id of '{ident}'.")
        return found


def refused(exc: ForgeError, ident: str) -> GraphQLError:
    """A REST refusal as GitHub's GraphQL words it: the first error's own message (a string, or a
    ``custom`` error's ``message``) rather than the generic "Validation Failed"."""
    if isinstance(exc, NotFound):
        return not_found(f"Could not resolve to a node with the global id of '{ident}'.")
    first = exc.errors[0] if exc.errors else None
    if isinstance(first, dict) and isinstance(first.get("message"), str):
        first = first["message"]
    detail = first if isinstance(first, str) else exc.message
    kind = "FORBIDDEN" if exc.status in {401, 403} else "UNPROCESSABLE"
    return GraphQLError(detail, extensions={"type": kind})


def _output(text: str) -> dict[str, Any]:
    try:
        found = json.loads(text or "{}")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _rollup_state(statuses: list[CommitStatus], runs: list[CheckRun]) -> str:
    """Failure beats pending beats success, as GitHub rolls statuses and check runs up."""
    bad = {"error", "failure"}
    failing = {"failure", "timed_out", "cancelled", "action_required", "startup_failure", "stale"}
    if any(s.state.value in bad for s in statuses) or any(
        r.conclusion is not None and r.conclusion.value in failing for r in runs
    ):
        return "FAILURE"
    if any(s.state.value == "pending" for s in statuses) or any(r.conclusion is None for r in runs):
        return "PENDING"
    return "SUCCESS"
