"""The part of GitHub's GraphQL schema that ``gh pr create``, ``edit``, ``close`` and ``reopen`` ask for.

Both commands speak GraphQL only. ``create`` reads the repository (``RepositoryInfo``), looks
for an open pull request of the head branch, resolves label, user and team names to node ids
(``label(name:)``, ``user(login:)``, ``organization { team(slug:) }``), then runs
``createPullRequest``, ``updatePullRequest`` (labels and assignees) and ``requestReviews``
(``union: true``). ``edit`` reads the pull request, the repository's labels, assignable users
and the owner's teams, then runs ``updatePullRequest`` (title, body, base, assignees),
``addLabelsToLabelable`` / ``removeLabelsFromLabelable`` and ``requestReviews`` (``union:
false``: exactly these). The documents were read off ``gh`` 2.23 with ``GH_DEBUG=api``; the SDL
below adds exactly their types and fields under GitHub's names.

Every mutation goes through the services the REST routes use (``Pulls``, ``Labels``,
``Assignees``, ``ReviewRequests``), so permissions, GitHub's rules (no review request from the
author, assignees need write access) and webhooks are the same whichever API a client speaks.
There are no projects or milestones here: ``projectItems`` is empty, and ``projectIds`` or
``milestoneId`` in an input are refused rather than dropped silently.
"""

from __future__ import annotations

import functools
from typing import Any

from graphql import GraphQLError, GraphQLSchema, build_schema

from controller.localforge.errors import ForgeError
from controller.localforge.graphql_nodes import SDL, Obj, connection, not_found
from controller.localforge.graphql_review import REVIEW_SDL, ReviewGraph, refused
from controller.localforge.models import Account, AccountType, Pull, Repo, Role
from controller.localforge.render import node_id, parse_node_id

WRITE_SDL = """
enum RepositoryPermission { ADMIN MAINTAIN WRITE TRIAGE READ }
enum LabelOrderField { NAME CREATED_AT }
input LabelOrder { field: LabelOrderField! direction: OrderDirection! }
enum TeamOrderField { NAME }
input TeamOrder { field: TeamOrderField! direction: OrderDirection! }
interface Labelable {
  labels(first: Int, after: String, last: Int, before: String): LabelConnection
}
type Ref implements Node { id: ID! name: String! prefix: String! }
type ProjectV2 implements Node { id: ID! title: String! }
type ProjectV2Item implements Node { id: ID! project: ProjectV2! }
type ProjectV2ItemConnection { nodes: [ProjectV2Item] pageInfo: PageInfo! totalCount: Int! }
type TeamConnection { nodes: [Team] pageInfo: PageInfo! totalCount: Int! }

extend type Organization {
  team(slug: String!): Team
  teams(first: Int, after: String, last: Int, before: String, orderBy: TeamOrder): TeamConnection!
}
extend type Repository {
  description: String hasIssuesEnabled: Boolean! hasWikiEnabled: Boolean!
  viewerPermission: RepositoryPermission defaultBranchRef: Ref parent: Repository
  mergeCommitAllowed: Boolean! rebaseMergeAllowed: Boolean! squashMergeAllowed: Boolean!
  label(name: String!): Label
  labels(
    first: Int, after: String, last: Int, before: String, orderBy: LabelOrder, query: String
  ): LabelConnection
  assignableUsers(first: Int, after: String, last: Int, before: String, query: String): UserConnection!
}
extend type PullRequest implements Labelable {
  projectItems(first: Int, after: String, last: Int, before: String): ProjectV2ItemConnection!
}
extend type Query {
  user(login: String!): User
  organization(login: String!): Organization
}

input CreatePullRequestInput {
  repositoryId: ID! baseRefName: String! headRefName: String! title: String! body: String
  maintainerCanModify: Boolean draft: Boolean clientMutationId: String
}
type CreatePullRequestPayload { clientMutationId: String pullRequest: PullRequest }
enum PullRequestUpdateState { OPEN CLOSED }
input UpdatePullRequestInput {
  pullRequestId: ID! baseRefName: String title: String body: String state: PullRequestUpdateState
  maintainerCanModify: Boolean assigneeIds: [ID!] milestoneId: ID labelIds: [ID!] projectIds: [ID!]
  clientMutationId: String
}
type UpdatePullRequestPayload { clientMutationId: String actor: Actor pullRequest: PullRequest }
input RequestReviewsInput {
  pullRequestId: ID! userIds: [ID!] teamIds: [ID!] union: Boolean clientMutationId: String
}
type RequestReviewsPayload { clientMutationId: String actor: Actor pullRequest: PullRequest }
input AddLabelsToLabelableInput { labelableId: ID! labelIds: [ID!]! clientMutationId: String }
type AddLabelsToLabelablePayload { clientMutationId: String labelable: Labelable }
input RemoveLabelsFromLabelableInput { labelableId: ID! labelIds: [ID!]! clientMutationId: String }
type RemoveLabelsFromLabelablePayload { clientMutationId: String labelable: Labelable }
input ClosePullRequestInput { pullRequestId: ID! clientMutationId: String }
type ClosePullRequestPayload { clientMutationId: String pullRequest: PullRequest }
input ReopenPullRequestInput { pullRequestId: ID! clientMutationId: String }
type ReopenPullRequestPayload { clientMutationId: String pullRequest: PullRequest }

extend type Mutation {
  createPullRequest(input: CreatePullRequestInput!): CreatePullRequestPayload
  updatePullRequest(input: UpdatePullRequestInput!): UpdatePullRequestPayload
  requestReviews(input: RequestReviewsInput!): RequestReviewsPayload
  addLabelsToLabelable(input: AddLabelsToLabelableInput!): AddLabelsToLabelablePayload
  removeLabelsFromLabelable(input: RemoveLabelsFromLabelableInput!): RemoveLabelsFromLabelablePayload
  closePullRequest(input: ClosePullRequestInput!): ClosePullRequestPayload
  reopenPullRequest(input: ReopenPullRequestInput!): ReopenPullRequestPayload
}
"""

_PERMISSIONS = {
    Role.ADMIN: "ADMIN",
    Role.MAINTAIN: "MAINTAIN",
    Role.PUSH: "WRITE",
    Role.TRIAGE: "TRIAGE",
    Role.PULL: "READ",
}


@functools.cache
def schema() -> GraphQLSchema:
    """GitHub's slice served at ``/api/graphql``: the node, review and write commands' SDL."""
    return build_schema(SDL + REVIEW_SDL + WRITE_SDL)


def _unresolved(ident: str) -> GraphQLError:
    return not_found(f"Could not resolve to a node with the global id of '{ident}'.")


class WriteGraph(ReviewGraph):
    """``ReviewGraph`` with the fields and mutations of ``gh pr create`` and ``gh pr edit``."""

    # -- reads ----------------------------------------------------------------------------------

    def repository(self, repo: Repo) -> Obj:
        forge = self.svc.forge

        def label(_info: Any, name: str) -> Obj | None:
            found = forge.store.label_by_name(repo.id, name)
            return self._label(repo, found) if found is not None else None

        def labels(_info: Any, **args: Any) -> Obj:
            order = args.get("orderBy") or {"field": "CREATED_AT", "direction": "ASC"}
            by_name = order["field"] == "NAME"
            found = sorted(forge.store.labels(repo.id), key=lambda lb: lb.name.lower() if by_name else lb.id)
            if order["direction"] == "DESC":
                found.reverse()
            if args.get("query"):
                found = [lb for lb in found if args["query"].lower() in lb.name.lower()]
            return connection([self._label(repo, lb) for lb in found], args)

        def assignable(_info: Any, **args: Any) -> Obj:
            people = self.svc.assignees.listing(repo)
            if args.get("query"):
                people = [a for a in people if args["query"].lower() in a.login.lower()]
            return connection([self.actor(a) for a in people], args)

        def parent(_info: Any) -> Obj | None:
            found = self.visible_repo(repo.parent_id) if repo.parent_id is not None else None
            return self.repository(found) if found is not None else None

        role = forge.role(repo, self.ctx.actor)
        branch = repo.default_branch
        return {
            **super().repository(repo),
            "description": repo.description,
            "hasIssuesEnabled": False,  # the forge has no issues that are not pull requests
            "hasWikiEnabled": False,
            "viewerPermission": _PERMISSIONS[role] if role is not None else None,
            "defaultBranchRef": {"id": node_id("Ref", repo.id), "name": branch, "prefix": "refs/heads/"},
            "parent": parent,
            "mergeCommitAllowed": True,
            "rebaseMergeAllowed": True,
            "squashMergeAllowed": True,
            "label": label,
            "labels": labels,
            "assignableUsers": assignable,
        }

    def pull(self, pull: Pull, repo: Repo) -> Obj:
        return {**super().pull(pull, repo), "projectItems": lambda _info, **args: connection([], args)}

    def user(self, login: str) -> Obj:
        account = self.svc.forge.store.account_by_login(login)
        if account is None or account.type is AccountType.ORGANIZATION:
            raise not_found(f"Could not resolve to a User with the login of '{login}'.")
        return self.actor(account)

    def organization(self, login: str) -> Obj:
        org = self.svc.forge.store.account_by_login(login)
        if org is None or org.type is not AccountType.ORGANIZATION:
            raise not_found(f"Could not resolve to an Organization with the login of '{login}'.")
        store = self.svc.forge.store

        def team(_info: Any, slug: str) -> Obj | None:
            found = store.team_by_slug(org.id, slug)
            return self._team(org, found) if found is not None else None

        def teams(_info: Any, **args: Any) -> Obj:
            found = sorted(store.teams(org.id), key=lambda t: t.name.lower())
            if (args.get("orderBy") or {}).get("direction") == "DESC":
                found.reverse()
            return connection([self._team(org, t) for t in found], args)

        return {**self._organization(org), "team": team, "teams": teams}

    # -- mutations ------------------------------------------------------------------------------

    def create_pull(self, values: dict[str, Any]) -> Obj:
        ident = str(values["repositoryId"])
        number = parse_node_id(ident, "Repository")
        repo = self.visible_repo(number) if number is not None else None
        if repo is None:
            raise _unresolved(ident)
        payload: dict[str, Any] = {
            "title": values["title"],
            "head": values["headRefName"],
            "base": values["baseRefName"],
            "body": values.get("body"),
            "draft": bool(values.get("draft")),
        }
        if values.get("maintainerCanModify") is not None:
            payload["maintainer_can_modify"] = values["maintainerCanModify"]
        try:
            pull = self.svc.pulls.create(self.ctx, repo, payload)
        except ForgeError as exc:
            raise refused(exc, ident) from exc
        return {"clientMutationId": values.get("clientMutationId"), "pullRequest": self.pull(pull, repo)}

    def update_pull(self, values: dict[str, Any]) -> Obj:
        ident = str(values["pullRequestId"])
        pull, repo = self._subject(ident)
        for absent in ("milestoneId", "projectIds"):
            if values.get(absent):
                raise GraphQLError(f"This forge has no {absent[:-2]}s.", extensions={"type": "UNPROCESSABLE"})
        fields = {"title": "title", "body": "body", "baseRefName": "base", "state": "state"}
        payload = {rest: values[key] for key, rest in fields.items() if values.get(key) is not None}
        if "state" in payload:
            payload["state"] = str(payload["state"]).lower()
        if values.get("maintainerCanModify") is not None:
            payload["maintainer_can_modify"] = values["maintainerCanModify"]
        try:
            if payload:
                pull = self.svc.pulls.update(self.ctx, repo, pull, payload)
            if values.get("assigneeIds") is not None:
                logins = [self._account(i).login for i in values["assigneeIds"]]
                pull = self.svc.assignees.replace(self.ctx, repo, pull.number, logins)
            if values.get("labelIds") is not None:
                names = [self._label_name(repo, i) for i in values["labelIds"]]
                self.svc.labels.replace(self.ctx, repo, pull.number, names)
        except ForgeError as exc:
            raise refused(exc, ident) from exc
        fresh = self.svc.pulls.get(repo, pull.number)
        return self._payload(values, fresh, repo)

    def request_reviews(self, values: dict[str, Any]) -> Obj:
        """``union: true`` adds to the requested reviewers; otherwise they become exactly these."""
        ident = str(values["pullRequestId"])
        pull, repo = self._subject(ident)
        users = [self._account(i).login for i in values.get("userIds") or []]
        teams = [self._team_slug(i) for i in values.get("teamIds") or []]
        try:
            if not values.get("union"):
                current = self.svc.review_requests.listing(self.ctx, pull)
                gone_users = [u["login"] for u in current["users"] if u["login"] not in users]
                gone_teams = [t["slug"] for t in current["teams"] if t["slug"] not in teams]
                if gone_users or gone_teams:
                    remove = {"reviewers": gone_users, "team_reviewers": gone_teams}
                    pull = self.svc.review_requests.remove(self.ctx, repo, pull, remove)
            if users or teams:
                wanted = {"reviewers": users, "team_reviewers": teams}
                pull = self.svc.review_requests.request(self.ctx, repo, pull, wanted)
        except ForgeError as exc:
            raise refused(exc, ident) from exc
        return self._payload(values, pull, repo)

    def change_labels(self, values: dict[str, Any], add: bool) -> Obj:
        ident = str(values["labelableId"])
        pull, repo = self._subject(ident)
        names = [self._label_name(repo, i) for i in values["labelIds"]]
        try:
            if add:
                self.svc.labels.add(self.ctx, repo, pull.number, names)
            else:
                on = {label.name for label in self.svc.labels.on_issue(repo, pull.number)}
                for name in names:
                    if name in on:
                        self.svc.labels.remove(self.ctx, repo, pull.number, name)
        except ForgeError as exc:
            raise refused(exc, ident) from exc
        fresh = self.svc.pulls.get(repo, pull.number)
        return {"clientMutationId": values.get("clientMutationId"), "labelable": self.pull(fresh, repo)}

    def _payload(self, values: dict[str, Any], pull: Pull, repo: Repo) -> Obj:
        assert self.ctx.actor is not None
        return {
            "clientMutationId": values.get("clientMutationId"),
            "actor": self.actor(self.ctx.actor),
            "pullRequest": self.pull(pull, repo),
        }

    # -- node ids -------------------------------------------------------------------------------

    def _account(self, ident: str) -> Account:
        store = self.svc.forge.store
        for kind in ("User", "Bot"):
            number = parse_node_id(str(ident), kind)
            account = store.account_by_id(number) if number is not None else None
            if account is not None:
                return account
        raise _unresolved(str(ident))

    def _label_name(self, repo: Repo, ident: str) -> str:
        number = parse_node_id(str(ident), "Label")
        found = next((lb for lb in self.svc.forge.store.labels(repo.id) if lb.id == number), None)
        if found is None:
            raise _unresolved(str(ident))
        return found.name

    def _team_slug(self, ident: str) -> str:
        number = parse_node_id(str(ident), "Team")
        team = self.svc.forge.store.team_by_id(number) if number is not None else None
        if team is None:
            raise _unresolved(str(ident))
        return team.slug


def write_roots(graph: WriteGraph) -> dict[str, Any]:
    """The root fields this module adds: the lookups and the mutations."""
    return {
        "user": lambda _info, login: graph.user(login),
        "organization": lambda _info, login: graph.organization(login),
        "createPullRequest": lambda _info, input: graph.create_pull(input),
        "updatePullRequest": lambda _info, input: graph.update_pull(input),
        "requestReviews": lambda _info, input: graph.request_reviews(input),
        "addLabelsToLabelable": lambda _info, input: graph.change_labels(input, add=True),
        "removeLabelsFromLabelable": lambda _info, input: graph.change_labels(input, add=False),
        "closePullRequest": lambda _info, input: graph.update_pull({**input, "state": "CLOSED"}),
        "reopenPullRequest": lambda _info, input: graph.update_pull({**input, "state": "OPEN"}),
    }
