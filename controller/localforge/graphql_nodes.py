"""The slice of GitHub's GraphQL schema the local forge serves, and the objects behind it.

Clients reach GraphQL for what REST cannot do: PyGithub and others change a PR's draft state with
``convertPullRequestToDraft`` / ``markPullRequestReadyForReview``, and review tools read
``repository { pullRequest(number) { reviewThreads { … } } }``. The schema below uses GitHub's
names and types for exactly those; anything else is not in it, so the validator refuses it with
GitHub's ``undefinedField`` error instead of a misleading answer.

Objects are plain dicts with ``__typename``; a field that needs work (a connection, a lookup) is
a callable that graphql-core's default resolver calls with the field's arguments.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from graphql import GraphQLError

from controller.localforge.errors import ForgeError, NotFound
from controller.localforge.httpkit import Services
from controller.localforge.media import to_html, to_text
from controller.localforge.models import Account, AccountType, Pull, Repo, ReviewComment
from controller.localforge.render import node_id, parse_node_id
from controller.localforge.service import Ctx

Obj = dict[str, Any]

SDL = """
scalar DateTime
scalar URI
scalar HTML
scalar GitObjectID

interface Node { id: ID! }
interface Actor { login: String! url: URI! avatarUrl: URI! }

type User implements Node & Actor { id: ID! databaseId: Int login: String! url: URI! avatarUrl: URI! }
type Bot implements Node & Actor { id: ID! databaseId: Int login: String! url: URI! avatarUrl: URI! }

type PageInfo { hasNextPage: Boolean! hasPreviousPage: Boolean! startCursor: String endCursor: String }

type Repository implements Node {
  id: ID! databaseId: Int name: String! nameWithOwner: String! url: URI! isPrivate: Boolean!
  owner: Actor! pullRequest(number: Int!): PullRequest
}

enum PullRequestState { OPEN CLOSED MERGED }
enum DiffSide { LEFT RIGHT }

type PullRequest implements Node {
  id: ID! databaseId: Int number: Int! title: String! body: String! bodyText: String! bodyHTML: HTML!
  isDraft: Boolean! state: PullRequestState! closed: Boolean! merged: Boolean! url: URI!
  createdAt: DateTime! updatedAt: DateTime! author: Actor repository: Repository!
  headRefName: String! headRefOid: GitObjectID! baseRefName: String! baseRefOid: GitObjectID!
  reviewThreads(first: Int, after: String, last: Int, before: String): PullRequestReviewThreadConnection!
}

type PullRequestReviewThreadConnection {
  nodes: [PullRequestReviewThread] edges: [PullRequestReviewThreadEdge] pageInfo: PageInfo! totalCount: Int!
}
type PullRequestReviewThreadEdge { cursor: String! node: PullRequestReviewThread }

type PullRequestReviewThread implements Node {
  id: ID! path: String! line: Int originalLine: Int startLine: Int diffSide: DiffSide! startDiffSide: DiffSide
  isResolved: Boolean! isOutdated: Boolean! isCollapsed: Boolean! resolvedBy: User
  pullRequest: PullRequest! repository: Repository!
  comments(first: Int, after: String, last: Int, before: String): PullRequestReviewCommentConnection!
}

type PullRequestReviewCommentConnection {
  nodes: [PullRequestReviewComment] edges: [PullRequestReviewCommentEdge] pageInfo: PageInfo! totalCount: Int!
}
type PullRequestReviewCommentEdge { cursor: String! node: PullRequestReviewComment }

type PullRequestReviewComment implements Node {
  id: ID! databaseId: Int fullDatabaseId: String body: String! bodyText: String! bodyHTML: HTML!
  author: Actor createdAt: DateTime! updatedAt: DateTime! path: String! line: Int originalLine: Int
  startLine: Int position: Int diffHunk: String! url: URI! outdated: Boolean!
  replyTo: PullRequestReviewComment pullRequest: PullRequest!
}

type Query {
  node(id: ID!): Node
  nodes(ids: [ID!]!): [Node]!
  repository(owner: String!, name: String!): Repository
  viewer: User!
}

input ConvertPullRequestToDraftInput { pullRequestId: ID! clientMutationId: String }
type ConvertPullRequestToDraftPayload { clientMutationId: String pullRequest: PullRequest }
input MarkPullRequestReadyForReviewInput { pullRequestId: ID! clientMutationId: String }
type MarkPullRequestReadyForReviewPayload { clientMutationId: String pullRequest: PullRequest }

type Mutation {
  convertPullRequestToDraft(input: ConvertPullRequestToDraftInput!): ConvertPullRequestToDraftPayload
  markPullRequestReadyForReview(
    input: MarkPullRequestReadyForReviewInput!
  ): MarkPullRequestReadyForReviewPayload
}
"""


def not_found(message: str) -> GraphQLError:
    """GitHub's resolution error: the field is null and the error says ``type: NOT_FOUND``."""
    return GraphQLError(message, extensions={"type": "NOT_FOUND"})


def _cursor(index: int) -> str:
    return base64.b64encode(f"cursor:v2:{index}".encode()).decode()


def _offset(cursor: str | None) -> int | None:
    if cursor is None:
        return None
    try:
        return int(base64.b64decode(cursor).decode().rsplit(":", 1)[1])
    except (ValueError, IndexError, UnicodeDecodeError) as exc:
        raise GraphQLError(f"`{cursor}` does not appear to be a valid cursor.") from exc


def connection(items: list[Obj], args: dict[str, Any]) -> Obj:
    """A Relay connection over ``items`` honouring ``first``/``after``/``last``/``before``."""
    after, before = _offset(args.get("after")), _offset(args.get("before"))
    indexed = list(enumerate(items))
    indexed = [(i, o) for i, o in indexed if (after is None or i > after) and (before is None or i < before)]
    window = indexed
    first, last = args.get("first"), args.get("last")
    for name, value in (("first", first), ("last", last)):
        if value is not None and not 0 <= value <= 100:
            raise GraphQLError(f"`{name}` must be between 0 and 100 (got {value}).")
    if first is not None:
        window = window[:first]
    if last is not None:
        window = window[max(len(window) - last, 0) :]
    page = {
        "hasNextPage": bool(window) and window[-1][0] < indexed[-1][0],
        "hasPreviousPage": bool(window) and window[0][0] > indexed[0][0],
        "startCursor": _cursor(window[0][0]) if window else None,
        "endCursor": _cursor(window[-1][0]) if window else None,
    }
    edges = [{"cursor": _cursor(i), "node": o} for i, o in window]
    return {"nodes": [o for _, o in window], "edges": edges, "pageInfo": page, "totalCount": len(items)}


@dataclass
class Graph:
    """Builds schema objects for one request's caller."""

    svc: Services
    ctx: Ctx

    def actor(self, account: Account) -> Obj:
        kind = "Bot" if account.type is AccountType.BOT else "User"
        return {
            "__typename": kind,
            "id": node_id(kind, account.id),
            "databaseId": account.id,
            "login": account.login,
            "url": f"{self.ctx.urls.web}/{account.login}",
            "avatarUrl": f"{self.ctx.urls.web}/avatars/{account.login}",
        }

    def repository(self, repo: Repo) -> Obj:
        def pull_request(_info: Any, number: int) -> Obj:
            found = self.svc.forge.store.pull_by_number(repo.id, number)
            if found is None:
                raise not_found(f"Could not resolve to a PullRequest with the number of {number}.")
            return self.pull(found, repo)

        return {
            "__typename": "Repository",
            "id": node_id("Repository", repo.id),
            "databaseId": repo.id,
            "name": repo.name,
            "nameWithOwner": repo.full_name,
            "url": f"{self.ctx.urls.web}/{repo.full_name}",
            "isPrivate": repo.private,
            "owner": lambda _info: self.actor(self.svc.forge.account(repo.owner_id)),
            "pullRequest": pull_request,
        }

    def pull(self, pull: Pull, repo: Repo) -> Obj:
        body = pull.body or ""
        return {
            "__typename": "PullRequest",
            "id": node_id("PullRequest", pull.id),
            "databaseId": pull.id,
            "number": pull.number,
            "title": pull.title,
            "body": body,
            "bodyText": lambda _info: to_text(body),
            "bodyHTML": lambda _info: to_html(body),
            "isDraft": pull.draft,
            "state": pull.state.upper(),
            "closed": pull.state == "closed",
            "merged": False,
            "url": self.ctx.urls.pull_html(repo, pull.number),
            "createdAt": pull.created_at,
            "updatedAt": pull.updated_at,
            "author": lambda _info: self.actor(self.svc.forge.account(pull.user_id)),
            "repository": lambda _info: self.repository(repo),
            "headRefName": pull.head_ref,
            "headRefOid": pull.head_sha,
            "baseRefName": pull.base_ref,
            "baseRefOid": pull.base_sha,
            "reviewThreads": lambda _info, **args: connection(self.threads(pull, repo), args),
        }

    def threads(self, pull: Pull, repo: Repo) -> list[Obj]:
        """One thread per top-level inline comment, with its replies, oldest first."""
        comments = self.svc.reviews.listing(self.ctx, repo, pull, {}, None)
        present = {c.id for c in comments}
        # a reply whose parent was deleted carries the thread on, as on GitHub
        roots = [c for c in comments if c.in_reply_to not in present]
        replies: dict[int, list[ReviewComment]] = {}
        for comment in comments:
            if comment.in_reply_to is not None and comment.in_reply_to in present:
                replies.setdefault(comment.in_reply_to, []).append(comment)
        return [self.thread(root, [root, *replies.get(root.id, [])], pull, repo) for root in roots]

    def thread(self, root: ReviewComment, items: list[ReviewComment], pull: Pull, repo: Repo) -> Obj:
        shown = [self.comment(c, pull, repo) for c in items]
        return {
            "__typename": "PullRequestReviewThread",
            "id": node_id("PullRequestReviewThread", root.id),
            "path": root.path,
            "line": root.line,
            "originalLine": root.line,
            "startLine": root.start_line,
            "diffSide": root.side,
            "startDiffSide": root.start_side,
            "isResolved": False,
            "isOutdated": False,
            "isCollapsed": False,
            "resolvedBy": None,
            "pullRequest": lambda _info: self.pull(pull, repo),
            "repository": lambda _info: self.repository(repo),
            "comments": lambda _info, **args: connection(shown, args),
        }

    def comment(self, item: ReviewComment, pull: Pull, repo: Repo) -> Obj:
        def reply_to(_info: Any) -> Obj | None:
            parent = self.svc.forge.store.review_comment_by_id(item.in_reply_to) if item.in_reply_to else None
            return self.comment(parent, pull, repo) if parent else None

        return {
            "__typename": "PullRequestReviewComment",
            "id": node_id("PullRequestReviewComment", item.id),
            "databaseId": item.id,
            "fullDatabaseId": str(item.id),
            "body": item.body,
            "bodyText": lambda _info: to_text(item.body),
            "bodyHTML": lambda _info: to_html(item.body),
            "author": lambda _info: self.actor(self.svc.forge.account(item.user_id)),
            "createdAt": item.created_at,
            "updatedAt": item.updated_at,
            "path": item.path,
            "line": item.line,
            "originalLine": item.line,
            "startLine": item.start_line,
            "position": item.position,
            "diffHunk": item.diff_hunk,
            "url": f"{self.ctx.urls.pull_html(repo, pull.number)}#discussion_r{item.id}",
            "outdated": False,
            "replyTo": reply_to,
            "pullRequest": lambda _info: self.pull(pull, repo),
        }

    # -- lookups -------------------------------------------------------------------------------

    def visible_repo(self, repo_id: int) -> Repo | None:
        repo = self.svc.forge.store.repo_by_id(repo_id)
        if repo is None or self.svc.forge.role(repo, self.ctx.actor) is None:
            return None
        return repo

    def node(self, ident: str) -> Obj | None:
        """The object behind a global id the caller may see (None otherwise)."""
        store = self.svc.forge.store
        lookups: dict[str, Callable[[int], Obj | None]] = {
            "PullRequest": self._pull_node,
            "Repository": lambda n: self.repository(r) if (r := self.visible_repo(n)) else None,
            "User": lambda n: self.actor(a) if (a := store.account_by_id(n)) else None,
            "Bot": lambda n: self.actor(a) if (a := store.account_by_id(n)) else None,
            "PullRequestReviewComment": self._comment_node,
            "PullRequestReviewThread": self._thread_node,
        }
        for kind, lookup in lookups.items():
            number = parse_node_id(ident, kind)
            if number is not None:
                return lookup(number)
        return None

    def pull_by_node(self, ident: str) -> tuple[Pull, Repo] | None:
        number = parse_node_id(ident, "PullRequest")
        pull = self.svc.forge.store.pull_by_id(number) if number is not None else None
        repo = self.visible_repo(pull.repo_id) if pull is not None else None
        return (pull, repo) if pull is not None and repo is not None else None

    def _pull_node(self, number: int) -> Obj | None:
        found = self.pull_by_node(node_id("PullRequest", number))
        return self.pull(*found) if found else None

    def _visible_comment(self, number: int) -> tuple[ReviewComment, Pull, Repo] | None:
        comment = self.svc.forge.store.review_comment_by_id(number)
        pull = self.svc.forge.store.pull_by_id(comment.pull_id) if comment else None
        repo = self.visible_repo(pull.repo_id) if pull else None
        if comment is None or pull is None or repo is None:
            return None
        try:
            self.svc.reviews.get_comment(self.ctx, repo, comment.id)  # hides others' pending comments
        except ForgeError:
            return None
        return comment, pull, repo

    def _comment_node(self, number: int) -> Obj | None:
        found = self._visible_comment(number)
        return self.comment(*found) if found else None

    def _thread_node(self, number: int) -> Obj | None:
        found = self._visible_comment(number)
        if found is None:
            return None
        _, pull, repo = found
        return next(
            (t for t in self.threads(pull, repo) if t["id"] == node_id("PullRequestReviewThread", number)),
            None,
        )

    def set_draft(self, ident: str, draft: bool, mutation_id: str | None) -> Obj:
        found = self.pull_by_node(ident)
        if found is None:
            raise not_found(f"Could not resolve to a node with the global id of '{ident}'.")
        pull, repo = found
        try:
            updated = self.svc.pulls.set_draft(self.ctx, pull, draft)
        except NotFound as exc:
            raise not_found(f"Could not resolve to a node with the global id of '{ident}'.") from exc
        except ForgeError as exc:
            raise GraphQLError(exc.message, extensions={"type": "FORBIDDEN"}) from exc
        return {"clientMutationId": mutation_id, "pullRequest": self.pull(updated, repo)}
