"""Publishing: each kept candidate becomes one draft PR per changed component (docs/github.md).

For every component whose champion differs from its base: push the champion to ``crucible/<run-id>``
(fast-forward only, credentials in the environment), find the PR by ``owner:branch`` or open it as a
draft against the base branch, and rewrite crucible's block of its body. Everything is idempotent:
publishing twice creates nothing new, and a crash anywhere is repaired by publishing again, because
every step first looks at what exists on the forge. A branch head that is not what crucible pushed
last is a foreign push. With ``on_foreign_push = "adopt"`` it joins the PR's lineage: later champions
are applied onto it (``drift.build_on_adopted``) and pushed as fast-forwards, or, on a conflict, held
back with ``needs merge``; with ``"pause"`` crucible stops writing to that PR. The PR record keeps the
value crucible measured for what it published and a note whenever the PR does not show the run's best.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from controller.config.spec import ComponentSpec
from controller.domain import events
from controller.domain.enums import Direction, EventKind, SampleArm, TurnPhase
from controller.domain.errors import ConflictError, CrucibleError, NotFoundError
from controller.engine.conventions import kept_facts
from controller.engine.conventions import title as pr_title
from controller.engine.prbody import Point, PullFacts, Sibling, merge_body, score_table
from controller.forge.base import Forge, ForgeError, PullInfo
from controller.services.execution.context import RunContext
from controller.services.feedback.drift import author_of, build_on_adopted, follow_upstream
from controller.services.feedback.team import Measured, fit, mark_unheld, report_result, run_url
from controller.store.ports import PublishRecords, RunReads
from controller.store.records import ProcessState, PullRecord
from controller.workspace.git import is_ancestor
from controller.workspace.push import PushRejected, fetch_commit, push_commit


def branch_name(run_id: str) -> str:
    return f"crucible/{run_id}"


@dataclass(frozen=True)
class Target:
    """Where one component's PR lives and where its branch is pushed."""

    component: ComponentSpec
    upstream: str  # owner/name the PR targets
    push_repo: str  # owner/name the branch is pushed to (the fork when configured)

    @property
    def head_owner(self) -> str:
        return self.push_repo.split("/", 1)[0]


def targets(ctx: RunContext) -> list[Target]:
    out = []
    for comp in ctx.components:
        if comp.upstream:
            out.append(Target(comp, comp.upstream, comp.fork or comp.upstream))
    return out


def _facts(
    ctx: RunContext,
    records: PublishRecords,
    component: str,
    base_sha: str,
    head_sha: str,
    notes: list[str],
    siblings: list[Sibling],
) -> PullFacts:
    run = records.get_run(ctx.run_id)
    samples = records.list_samples(ctx.run_id)
    metric = ctx.spec.metric.name

    def values(turn: int, arm: SampleArm) -> list[float]:
        return [s.values[metric] for s in samples if s.turn == turn and s.arm == arm and s.valid]

    notes = [*notes, *round_notes(ctx, records, component)]
    turns = [t for t in records.list_turns(ctx.run_id) if t.phase == TurnPhase.DECIDED]
    champion_turn = next((t for t in turns if t.number == run.champion_turn), None)
    points = [Point(t.number, t.value, t.outcome == "accepted") for t in turns if t.value is not None]
    return PullFacts(
        run_id=ctx.run_id,
        component=component,
        objective=ctx.spec.objective,
        metric=metric,
        direction=str(ctx.direction),
        baseline=run.baseline_value,
        baseline_samples=values(0, SampleArm.BASELINE),
        candidate=run.champion_value if run.champion_turn else None,
        candidate_samples=values(run.champion_turn, SampleArm.CANDIDATE) if run.champion_turn else [],
        p_value=champion_turn.p_value if champion_turn else None,
        pairs=champion_turn.pairs if champion_turn else None,
        sequential_stop=str(champion_turn.sequential_stop)
        if champion_turn and champion_turn.sequential_stop
        else None,
        turn=run.champion_turn or None,
        base_sha=base_sha,
        head_sha=head_sha,
        points=points,
        siblings=siblings,
        notes=tuple(notes),
    )


def _cite(author: str, path: str | None, line: int | None, url: str) -> str:
    """``@bob on `a.py`:3``, linked to the comment when the forge gave its URL."""
    text = f"@{author}" + (f" on `{path}`" + (f":{line}" if line else "") if path else "")
    return f"[{text}]({url})" if url else text


def round_notes(ctx: RunContext, records: PublishRecords, component: str) -> list[str]:
    """One line per finished refinement round of ``component``: what feedback it addressed and how."""
    lines: list[str] = []
    for finished in _finished_rounds(ctx, records, component):
        number = finished.round
        items = [i for i in records.list_feedback(ctx.run_id, round=number) if i.component == component]
        who = ", ".join(_cite(i.author, i.path, i.line, i.url) for i in items)
        if finished.kept:
            head = (finished.head or "")[:12]
            lines.append(f"round {number} addressed feedback from {who}: {head} ({finished.detail})")
        else:
            lines.append(f"round {number} (feedback from {who}) could not hold the score; nothing was pushed")
    return lines


def _title(ctx: RunContext, records: RunReads, component: str, value: float | None = None) -> str:
    """The title ``[publish] title`` gives the PR, with ``value`` (default: the run's best)."""
    run = records.get_run(ctx.run_id)
    shown = run.champion_value if value is None else value
    facts = kept_facts(
        ctx.spec, ctx.run_id, component, run.baseline_value, shown, None, run.champion_turn or 0
    )
    return pr_title(ctx.spec.publish, facts)


@dataclass
class _Plan:
    """One component's PR after pushing and finding/opening it, before its body is written."""

    target: Target
    pull: PullInfo
    pushed: str
    paused: bool
    notes: list[str]
    known: PullRecord | None
    skip: bool = False
    value: float | None = None  # what crucible measured for ``pushed`` (None: nobody measured it)
    held: str | None = None  # why the PR does not show the run's best, when it does not


class Publisher:
    """Publishes a run's champion through one ``Forge``; call ``publish`` after every keep and at the end.
    ``records``: the run's record as publishing reads and writes it (its PRs, the feedback its rounds
    addressed, an adopted head), handed in by the driver: the round environment holds no store."""

    def __init__(self, forge: Forge, records: PublishRecords, *, dashboard_url: str | None = None) -> None:
        self.forge = forge
        self.records = records
        self.dashboard_url = dashboard_url  # where the run pages are served, for the status's link

    def publish(self, ctx: RunContext) -> list[PullRecord]:
        """Push, open and describe every changed component's PR; return the run's PR records."""
        known = {p.component: p for p in self.records.list_pulls(ctx.run_id)}
        plans: list[_Plan] = []
        failures: list[str] = []
        for target in targets(ctx):
            name = target.component.name
            head = ctx.champion_heads[name]
            if head == ctx.base_shas[name] and name not in known:
                continue  # nothing to show for this component yet
            try:
                plans.append(self._push_and_open(ctx, target, known.get(name)))
            except CrucibleError as exc:  # one component's failure must not hide the others' PRs
                failures.append(f"{name}: {exc}")
        links = [Sibling(p.target.component.name, p.pull.number, p.pull.url) for p in plans]
        records = []
        for plan in plans:
            siblings = [s for s in links if s.component != plan.target.component.name]
            records.append(self._describe(ctx, plan, siblings))
        if failures:
            raise ForgeError("publishing failed for " + "; ".join(failures))
        return records

    def _push_and_open(self, ctx: RunContext, target: Target, known: PullRecord | None) -> _Plan:
        name = target.component.name
        branch = branch_name(ctx.run_id)
        notes: list[str] = []
        if known is not None and known.paused:
            # Paused: no push, no body edit, nothing at all until `crucible runs resume-pr`.
            pull = self.forge.get_pull(target.upstream, known.number)
            return _Plan(target, pull, known.pushed_sha, True, notes, known, skip=True)
        remote = self.forge.branch_sha(target.push_repo, branch)
        adopted, paused = self._settle(ctx, target, known, remote, notes)
        clone = ctx.checkout("candidate", name).path
        pushed = known.pushed_sha if known else ctx.champion_heads[name]
        value = known.published_value if known else None
        held: str | None = None
        may_push = not paused
        if paused:
            held = (
                f"paused after someone else pushed {str(remote)[:12]}: crucible writes nothing to this PR "
                f"until `crucible runs resume-pr {ctx.run_id} {name}`"
            )
        elif adopted is not None:
            if remote == adopted and pushed != adopted:
                pushed, value = adopted, None  # the branch is theirs now: nobody measured it
            lineage = build_on_adopted(ctx, self.records, name, adopted, notes)
            may_push, held = lineage.builds_on, lineage.held
            notes.append(self._adopted_note(ctx, name, adopted, branch))
        head = ctx.champion_heads[name]
        if remote == head:
            if pushed != head:
                pushed, value = head, self._value_of(ctx, name, head, adopted)
        elif may_push:
            repo = self.forge.repo(target.push_repo)
            try:
                push_commit(clone, repo.clone_url, head, branch, self.forge.git_auth_env(target.push_repo))
                pushed, value = head, self._value_of(ctx, name, head, adopted)
            except PushRejected:
                held = f"the branch {branch} moved under crucible; nothing was pushed"
                notes.append(held)
        pull = self._find_or_create(ctx, target, branch, pushed, notes)
        return _Plan(target, pull, pushed, paused, notes, known, value=value, held=held)

    def _settle(
        self, ctx: RunContext, target: Target, known: PullRecord | None, remote: str | None, notes: list[str]
    ) -> tuple[str | None, bool]:
        """Follow a moved base when the branch is crucible's, adopt or pause on a foreign push;
        return the adopted head (if any) and whether the PR is now paused."""
        name = target.component.name
        branch = branch_name(ctx.run_id)
        adopted = self._adopted(ctx, name)
        clone = ctx.checkout("candidate", name).path
        ours = known is None or remote in (None, known.pushed_sha)
        if ours and (adopted is None or is_ancestor(clone, adopted, ctx.champion_heads[name])):
            follow_upstream(ctx, self.records, self.forge, target.component, notes)
        if known is None or remote is None or remote in (known.pushed_sha, adopted):
            return adopted, False
        if self._foreign_policy(ctx) == "pause":
            notes.append(
                f"someone else pushed {remote[:12]} to {branch}; crucible stopped writing to this PR "
                f"until `crucible runs resume-pr {ctx.run_id} {name}` (on_foreign_push = pause)"
            )
            return adopted, True
        return self.adopt(ctx, target, name, remote), False

    @staticmethod
    def _adopted_note(ctx: RunContext, name: str, adopted: str, branch: str) -> str:
        who = author_of(ctx, name, adopted)
        head = ctx.champion_heads[name]
        if head != adopted and is_ancestor(ctx.checkout("candidate", name).path, adopted, head):
            return (
                f"built on {who}'s commit {adopted[:12]}, pushed to {branch} by someone else: crucible "
                "never rewrites it and applies every later result onto it"
            )
        return (
            f"adopted {adopted[:12]}, {who}'s commit pushed to {branch} by someone else: crucible never "
            "rewrites it, applies every later result onto it, and the next refinement round starts from it"
        )

    def _value_of(self, ctx: RunContext, name: str, sha: str, adopted: str | None) -> float | None:
        """What crucible measured for ``sha``, the champion head being pushed: its re-measured value
        when it was applied onto another commit, else the run's champion value."""
        if sha == adopted:
            return None  # a head someone else pushed: no turn measured it
        comp = next(c for c in self.records.list_components(ctx.run_id) if c.name == name)
        measured = comp.extra.get("head_value")
        if isinstance(measured, dict) and measured.get("sha") == sha:
            return float(measured["value"])
        return self.records.get_run(ctx.run_id).champion_value

    def _adopted(self, ctx: RunContext, name: str) -> str | None:
        for comp in self.records.list_components(ctx.run_id):
            if comp.name == name:
                value = comp.extra.get("adopted_head")
                return str(value) if value else None
        return None

    def adopt(self, ctx: RunContext, target: Target, name: str, remote: str) -> str:
        """Fetch the foreign head into the candidate clone and remember it; it is never rewritten."""
        repo = self.forge.repo(target.push_repo)
        clone = ctx.checkout("candidate", name)
        fetched = fetch_commit(clone.path, repo.clone_url, remote, self.forge.git_auth_env(target.push_repo))
        clone.set_refs({"refs/crucible/adopted": fetched})
        self.records.update_component_extra(ctx.run_id, name, {"adopted_head": fetched})
        self.records.append_event(
            ctx.run_id, EventKind.PUBLISHED, {"component": name, "adopted_head": fetched}
        )
        return fetched

    def _describe(self, ctx: RunContext, plan: _Plan, siblings: list[Sibling]) -> PullRecord:
        name = plan.target.component.name
        if plan.skip and plan.known is not None:
            return plan.known
        facts = _facts(ctx, self.records, name, ctx.base_shas[name], plan.pushed, plan.notes, siblings)
        if plan.pushed != ctx.champion_heads[name]:
            # The PR does not show the run's best: its table must not claim the best's numbers.
            facts = replace(facts, candidate=plan.value, candidate_samples=[], p_value=None, turn=None)
        pull = plan.pull
        body = merge_body(pull.body, facts)
        ours = plan.known.title if plan.known is not None and plan.known.title is not None else pull.title
        title = _title(ctx, self.records, name, plan.value) if plan.value is not None else ours
        retitle = title if pull.title == ours and title != pull.title else None  # never over a person's
        if body != pull.body or retitle is not None:
            changed = body if body != pull.body else None
            pull = self.forge.update_pull(plan.target.upstream, pull.number, body=changed, title=retitle)
        ours = retitle or ours
        process, status_sha = self._fit(ctx, plan, pull, facts)
        record = PullRecord(
            run_id=ctx.run_id,
            component=name,
            repo=plan.target.upstream,
            number=pull.number,
            url=pull.url,
            branch=branch_name(ctx.run_id),
            head_sha=pull.head_sha,
            pushed_sha=plan.pushed,
            base_sha=ctx.base_shas[name],
            draft=pull.draft,
            state=pull.state,
            paused=plan.paused,
            published_value=plan.value,
            note=_note(ctx, plan),
            title=ours,
            process=process,
            status_sha=status_sha,
        )
        self.records.save_pull(record)
        if plan.known is None or plan.known.pushed_sha != plan.pushed:
            payload = {"component": name, "number": pull.number, "url": pull.url, "head_sha": plan.pushed}
            payload["value"] = plan.value
            self.records.append_event(ctx.run_id, EventKind.PUBLISHED, payload)
        return record

    def _fit(
        self, ctx: RunContext, plan: _Plan, pull: PullInfo, facts: PullFacts
    ) -> tuple[ProcessState, str | None]:
        """The team's process on an open PR (``services.team``): labels, reviews, assignees once,
        the measurement on each pushed head, a mark for each round that could not hold the score."""
        known = plan.known
        state = known.process if known is not None else ProcessState()
        status_sha = known.status_sha if known is not None else None
        publish = ctx.spec.publish
        if publish is None or pull.state != "open":
            return state, status_sha
        repo, name, process = plan.target.upstream, plan.target.component.name, self.forge.team_process()
        fitted = fit(process, publish, repo, pull.number, state)
        notes = list(fitted.refused)
        for deferred in fitted.deferred:
            ctx.observer.warn(f"{name}: will try again at the next publish: {deferred}")
        state = fitted.state
        if publish.status != "off":
            try:
                if plan.value is not None and plan.pushed != status_sha:
                    run = self.records.get_run(ctx.run_id)
                    measured = Measured(
                        metric=ctx.spec.metric.name,
                        minimize=ctx.direction is Direction.MINIMIZE,
                        baseline=run.baseline_value,
                        value=plan.value,
                        p_value=facts.p_value,
                        table=score_table(facts),
                    )
                    url = run_url(self.dashboard_url, ctx.run_id)
                    notes += [
                        n for n in [report_result(process, publish, repo, plan.pushed, measured, url)] if n
                    ]
                    status_sha = plan.pushed
                for number, detail in _unheld_rounds(ctx, self.records, name, state.marked):
                    metric = ctx.spec.metric.name
                    found = mark_unheld(process, publish, repo, plan.pushed, metric, number, detail)
                    notes += [found] if found else []
                    state = replace(state, marked=(*state.marked, number))
            except ForgeError as exc:
                ctx.observer.warn(f"{name}: the result could not be reported on the PR yet: {exc}")
        if notes:
            state = replace(state, problems=(*state.problems, *(n for n in notes if n not in fitted.refused)))
            payload = {"component": name, "number": pull.number, "url": pull.url, "refused": notes}
            self.records.append_event(ctx.run_id, EventKind.PUBLISHED, payload)
        return state, status_sha

    def _find_or_create(
        self, ctx: RunContext, target: Target, branch: str, head: str, notes: list[str]
    ) -> PullInfo:
        found = self.forge.find_pull(target.upstream, f"{target.head_owner}:{branch}")
        if found is not None:
            return found
        base_branch = target.component.base
        if base_branch == "HEAD":
            base_branch = self.forge.repo(target.upstream).default_branch
        facts = _facts(
            ctx, self.records, target.component.name, ctx.base_shas[target.component.name], head, notes, []
        )
        return self.forge.create_pull(
            target.upstream,
            head=f"{target.head_owner}:{branch}",
            base=base_branch,
            title=_title(ctx, self.records, target.component.name),
            body=merge_body("", facts),
            draft=True,
        )

    @staticmethod
    def _foreign_policy(ctx: RunContext) -> str:
        return ctx.spec.feedback.on_foreign_push if ctx.spec.feedback else "adopt"


def _note(ctx: RunContext, plan: _Plan) -> str | None:
    """The sentence the PR record carries when the PR does not show the run's best, and why."""
    best = ctx.champion_heads[plan.target.component.name]
    if plan.pushed == best and not plan.paused:
        return None
    if plan.held:
        return plan.held
    return f"the PR head {plan.pushed[:12]} is not the run's best {best[:12]}"


def _unheld_rounds(
    ctx: RunContext, records: RunReads, component: str, marked: tuple[int, ...]
) -> list[tuple[int, str]]:
    """The finished refinement rounds of ``component`` that kept nothing and are not marked yet."""
    return [
        (r.round, r.detail)
        for r in _finished_rounds(ctx, records, component)
        if not r.kept and r.round not in marked
    ]


def _finished_rounds(ctx: RunContext, records: RunReads, component: str) -> list[events.RoundFinishedPayload]:
    """The ``round_finished`` events of ``component``, oldest first (a malformed one is skipped)."""
    found = records.list_events(ctx.run_id, kinds={EventKind.ROUND_FINISHED})
    payloads = [events.read(events.RoundFinishedPayload, e.payload) for e in found]
    return [p for p in payloads if p is not None and p.component == component]


def resume_pull(ctx: RunContext, publisher: Publisher, component: str) -> PullRecord:
    """Lift a ``pause``: adopt whatever now heads the PR branch (never rewritten) and write again.

    Raises NotFoundError if the run has no PR for ``component``, ConflictError if it is not paused."""
    records = publisher.records
    record = next((p for p in records.list_pulls(ctx.run_id) if p.component == component), None)
    if record is None:
        raise NotFoundError(f"run {ctx.run_id} has no pull request for component {component!r}")
    if not record.paused:
        raise ConflictError(f"the pull request of {component!r} is not paused")
    target = next(t for t in targets(ctx) if t.component.name == component)
    remote = publisher.forge.branch_sha(target.push_repo, record.branch)
    pushed = record.pushed_sha
    if remote is not None and remote != record.pushed_sha:
        pushed = publisher.adopt(ctx, target, component, remote)
    value = record.published_value if pushed == record.pushed_sha else None
    records.save_pull(replace(record, paused=False, pushed_sha=pushed, published_value=value))
    publisher.publish(ctx)
    return next(p for p in records.list_pulls(ctx.run_id) if p.component == component)
