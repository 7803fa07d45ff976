"""The controller's side of a remote round (ADR-0014): worker tokens, the worker's inputs, its bundles.

A round executed by ``crucible worker`` (in a loop pod, or a local child process) reaches the run's
record only through the worker routes, with a bearer token minted here for that one round:

- ``mint_worker_env(job)``: a fresh random token for ``job`` (a new attempt; earlier attempts of the
  round are revoked), stored only as its sha256 with the job and an expiry, and the environment
  ``crucible worker`` is configured by. No database, forge or API credential is in it.
- ``authenticate(token, run_id)``: the attempt the token grants, or UnauthenticatedError (unknown,
  expired, revoked: the round ended) / ForbiddenError (another run) / NotFoundError (no such run).
- ``feedback``: the feedback items a refinement round addresses (only those of its job).
- ``start_bundle``: the round's start commits (and the base) of one component, as a git bundle
  (past a commit the worker has, for a warm hypothesis pod: ``mint_slot_env``, ``next_hypothesis``).
- ``open_upload`` / ``receive_bundle``: a bundle the worker sends before deciding a kept turn,
  streamed to a file of the run's scratch directory (the route enforces ``MAX_BUNDLE_BYTES`` while
  reading; one upload at a time per token, ``upload_marks``); one past the cap is answered 413 at once
  and recorded as refused after the answer (``oversized``, ``refuse_oversized``), the token good for
  nothing in between. It is verified before anything is recorded, every git command on
  it bounded in time: only refs ``refs/crucible/<run>/<component>``, every commit descending from
  the round's start head of its component, every path any commit changes inside the component's
  mutable surface and outside its protected paths and evaluator files, no submodule link and no
  symlink leaving the repository (as on the local path). A refused bundle is recorded
  as ``policy_violation`` (the turn it was for is decided so), the attempt's token is revoked, and
  nothing from it is published. Accepted heads are pinned under ``refs/crucible/`` in the run's
  candidate clone, where publishing finds them, and remembered for ``decide_turn``.
- ``decide_turn``, ``report_hypothesis``, ``set_baseline``: the ledger's writes of a worker's
  verdicts, each recomputed from its samples first (``recount``: the controller decides) and refused
  as ``policy_violation`` when they do not match (``refusals``), and refusing component heads no
  verified bundle of this attempt brought in; a keep counts once a confirmation reproduced it
  (``keep_gate``). Samples are stored apart only for the baseline.
- ``finish`` / ``remote_outcome``: the outcome the worker reported (its token is revoked with it),
  as the remote broker reads it.
- ``mint_confirm_env`` / ``confirm``: a confirmation of a claimed keep (``confirm``, ADR-0043): a token
  good only for fetching the champion and the claimed commits from this host and reporting samples
  (never handed to the round's pod; earlier ones of the turn are revoked), and its judged report.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from controller.brokers.base import RoundOutcome
from controller.config.settings import Settings
from controller.config.spec import Spec
from controller.domain.enums import EventKind, Outcome, Reason, RunStatus
from controller.domain.errors import (
    CrucibleError,
    ForbiddenError,
    NotFoundError,
    UnauthenticatedError,
)
from controller.domain.jobs import RoundJob
from controller.services.execution.work import EVENT_OF_OUTCOME
from controller.services.remote import referee, scopes
from controller.services.remote.bundle_import import import_bundle
from controller.services.remote.confirm import confirm_grant, confirm_scope_of, record_confirmation
from controller.services.remote.keep_gate import KeepGate, LauncherFor
from controller.services.remote.quotes import round_feedback
from controller.services.remote.recount import recount_decision, recount_hypothesis
from controller.services.remote.refusals import PolicyViolation, refuse_bundle, refuse_report
from controller.services.remote.slots import WAIT_S, Slots, Taken
from controller.services.remote.upload_marks import UploadMarks
from controller.services.views.layout import RunLayout
from controller.services.views.specs import stored_spec
from controller.store.ports import RemoteRoundStore
from controller.store.records import (
    ChampionUpdate,
    ComponentRecord,
    EventRecord,
    HypothesisRecord,
    HypothesisReport,
    Sample,
    TurnDecision,
    TurnRecord,
    WorkerRoundRecord,
)
from controller.store.worker_protocol import (
    ComponentBase,
    ConfirmationOutcome,
    EventSpec,
    HypothesisScope,
    JobInputs,
    JobJson,
    RoundEnd,
    RoundFeedback,
    TurnStart,
)
from controller.store.worker_rounds import slot_index
from controller.workspace import bundles
from controller.workspace.checkout import CRUCIBLE_REF_PREFIX

TOKEN_BYTES = 32
MAX_BUNDLE_BYTES = 512 * 1024 * 1024  # a round's own commits; the start bundle goes the other way

Json = Mapping[str, Any]

WORKER_ENV = ("CRUCIBLE_CONTROLLER_URL", "CRUCIBLE_WORKER_TOKEN", "CRUCIBLE_RUN_ID", "CRUCIBLE_ROUND")


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def utc_now() -> datetime:
    return datetime.now(UTC)


class RemoteRounds:
    """See the module docstring. ``controller_url`` is the controller's API as workers reach it."""

    def __init__(
        self,
        settings: Settings,
        store: RemoteRoundStore,
        *,
        controller_url: str,
        token_ttl_s: float = 6 * 3600.0,
        hand_over: Callable[[str], bool] | None = None,
        confirmations: LauncherFor | None = None,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.settings = settings
        self.store = store
        self.controller_url = controller_url.rstrip("/")
        self.token_ttl_s = token_ttl_s
        self._hand_over = hand_over or (lambda _run: False)
        self._clock = clock
        self.max_bundle_bytes = MAX_BUNDLE_BYTES  # an upload past it is refused while it is read
        self.uploads = UploadMarks()  # tokens with an upload in flight, or its refusal (409 meanwhile)
        self._specs: dict[str, Spec] = {}
        self.slots = Slots(store, self.mint_hypothesis_env)  # warm hypothesis pods' next hypotheses
        self.slot_wait_s = WAIT_S  # how long one ``next_hypothesis`` waits for an offer
        # A remote round's keeps wait for a confirmation where the run has a launcher (ADR-0043).
        self.gate = KeepGate(store, self.mint_confirm_env, confirmations or (lambda _run: None))

    # -- the broker's side --------------------------------------------------------------------

    def mint_worker_env(self, job: RoundJob) -> dict[str, str]:
        """The environment of ``crucible worker`` for a new attempt of ``job`` (module docstring)."""
        return self._mint(job, job.to_json(), {})

    def mint_hypothesis_env(
        self, job: RoundJob, turn: int, index: int, proposal: Json | None, replacing: str | None = None
    ) -> dict[str, str]:
        """The environment of a hypothesis pod (ADR-0018): ``crucible worker`` runs hypothesis
        ``index`` of ``turn`` from ``job.heads`` (the champion) and reports it; the token is scoped
        to that one hypothesis (``hypothesis_scope``), and earlier grants of it are revoked.
        ``replacing``: the offer a warm pod takes (ConflictError once it was withdrawn, ADR-0051)."""
        data = {**job.to_json(), "hypothesis": {"turn": turn, "index": index, "proposal": proposal}}
        extra = {"CRUCIBLE_TURN": str(turn), "CRUCIBLE_PARALLEL_INDEX": str(index)}
        return self._mint(job, data, extra, replacing)

    def mint_slot_env(self, job: RoundJob, index: int) -> dict[str, str]:
        """The environment of a warm hypothesis pod holding slot ``index`` of ``job``'s round
        (ADR-0034): its token only asks for the slot's next hypothesis (``next_hypothesis``), each of
        which brings a token of its own; earlier grants of the slot are revoked."""
        extra = {"CRUCIBLE_PARALLEL_INDEX": str(index), "CRUCIBLE_SLOT": "1"}
        return self._mint(job, {**job.to_json(), "slot": index}, extra)

    def mint_confirm_env(
        self, job: RoundJob, turn: int, champion: Mapping[str, str], candidate: Mapping[str, str]
    ) -> dict[str, str]:
        """The environment of a confirmation of ``turn``'s claimed keep (module docstring)."""
        return self._mint(job, confirm_grant(job, turn, champion, candidate), {"CRUCIBLE_TURN": str(turn)})

    def _mint(
        self, job: RoundJob, data: Json, extra: Mapping[str, str], replacing: str | None = None
    ) -> dict[str, str]:
        token = secrets.token_urlsafe(TOKEN_BYTES)
        expires = self._clock() + timedelta(seconds=self.token_ttl_s)
        hashed = token_hash(token)
        record = self.store.add_worker_round(
            job.run_id, job.round, token_hash=hashed, job=data, expires_at=expires, replacing=replacing
        )
        return {
            "CRUCIBLE_CONTROLLER_URL": self.controller_url,
            "CRUCIBLE_WORKER_TOKEN": token,
            "CRUCIBLE_RUN_ID": job.run_id,
            "CRUCIBLE_ROUND": str(job.round),
            "CRUCIBLE_ROUND_ATTEMPT": str(record.attempt),
            **extra,
        }

    def remote_outcome(self, run_id: str, round: int) -> RoundOutcome | None:
        """What the worker of ``round`` reported at its end, once accepted; None before."""
        record = self.store.worker_outcome(run_id, round)
        if record is None or record.outcome is None:
            return None
        end = RoundEnd.model_validate(record.outcome)
        return RoundOutcome(end.run_status, end.stop_reason, end.message, kept=end.kept)

    def revoke(self, run_id: str, round: int) -> None:
        """The round ended (or was cancelled): no token of it is good any more."""
        self.store.revoke_worker_rounds(run_id, round)

    # -- the worker's side --------------------------------------------------------------------

    def authenticate(self, token: str, run_id: str, *, slot: bool = False) -> WorkerRoundRecord:
        """The attempt ``token`` grants, for a request about ``run_id`` (errors: module docstring).
        A warm pod's slot token (ADR-0034) is good for ``next_hypothesis`` (``slot``) and nothing
        else; no other token is good for that."""
        digest = token_hash(token) if token else ""
        grant = self.store.worker_round_by_token(digest) if digest else None
        # The lookup is by hash; comparing the hashes again in constant time costs nothing.
        if grant is None or not hmac.compare_digest(grant.token_hash, digest):
            raise UnauthenticatedError("missing or invalid worker token")
        if grant.revoked_at is not None:
            raise UnauthenticatedError(
                f"round {grant.round} of run {grant.run_id} is over; the token is revoked"
            )
        if grant.expires_at <= self._clock():
            raise UnauthenticatedError("the worker token has expired")
        self.uploads.require_usable(grant.token_hash)  # 409 between an oversized upload's 413 and its record
        if run_id != grant.run_id:
            self.store.get_run(run_id)  # NotFoundError for a run that does not exist
            raise ForbiddenError(f"this worker token is for run {grant.run_id}, not {run_id}")
        if (slot_index(grant.job) is not None) != slot:
            raise ForbiddenError("a slot token asks for its next hypothesis, and only it may")
        return grant

    def next_hypothesis(self, grant: WorkerRoundRecord, after: int) -> Taken:
        """The next hypothesis of the grant's slot after turn ``after`` (``slots.Slots.take``), or
        ``done`` once the run no longer runs (its pod exits)."""
        index = slot_index(grant.job)
        assert index is not None

        def stopped() -> bool:
            return self.store.get_run(grant.run_id).status is not RunStatus.RUNNING

        if stopped():
            return Taken(done=True)
        return self.slots.take(grant.run_id, grant.round, index, after, self.slot_wait_s, stopped)

    def require_round(self, grant: WorkerRoundRecord) -> None:
        """ForbiddenError for a hypothesis pod's token on a route only a round's worker may use
        (starting or deciding turns, the baseline, the run's status): the controller decides the
        turns of a round whose hypotheses run in pods (ADR-0018)."""
        scopes.require_round(grant)

    def _require_scope(self, grant: WorkerRoundRecord, turn: int | None, index: int | None = None) -> None:
        scopes.require_scope(grant, turn, index)

    def job(self, grant: WorkerRoundRecord) -> JobInputs:
        """What the worker needs besides commits: its job, the spec and the components' bases."""
        run = self.store.get_run(grant.run_id)
        components = self.store.list_components(grant.run_id)
        scope = grant.job.get("hypothesis")
        return JobInputs(
            job=JobJson.model_validate({k: v for k, v in grant.job.items() if k not in scopes.SCOPES}),
            hypothesis=HypothesisScope.model_validate(scope) if isinstance(scope, Mapping) else None,
            confirm=confirm_scope_of(grant.job),
            attempt=grant.attempt,
            spec=run.spec_text,
            hand_over=self._hand_over(grant.run_id),
            components=[ComponentBase(name=c.name, base_sha=c.base_sha) for c in components],
        )

    def feedback(self, grant: WorkerRoundRecord) -> RoundFeedback:
        """The feedback a refinement round addresses (``quotes.round_feedback``)."""
        return round_feedback(self.store, grant)

    def start_bundle(self, grant: WorkerRoundRecord, component: str, have: str | None = None) -> Path:
        """A bundle of ``component``'s start head and base, written under the run's directory; with
        ``have`` (a commit the worker holds: a warm pod's previous start, ADR-0034) only the start's
        commits past it, when this host knows it too (otherwise the whole bundle)."""
        comp = self._component(grant.run_id, component)
        job = RoundJob.from_json(grant.job)
        start = job.heads.get(component)
        if start is None:
            raise NotFoundError(f"round {grant.round} of run {grant.run_id} has no component {component!r}")
        repo = self._repo(comp)
        out = self._scratch(grant.run_id) / f"start-{grant.round}-{grant.attempt}-{component}.bundle"
        prefix = f"{CRUCIBLE_REF_PREFIX}{grant.run_id}/start/"
        refs = {f"{prefix}{component}": start, f"{prefix}{component}-base": comp.base_sha}
        claim = confirm_scope_of(grant.job)
        if claim is not None:  # a confirmation (ADR-0043): the claimed commit too, from this host's clone
            refs[f"{prefix}{component}-candidate"] = claim.candidate[component]
        elif bundles.can_exclude(repo, have, start):
            assert have is not None
            bundles.create_bundle(repo, out, {f"{prefix}{component}": start}, exclude=(have,))
            return out
        bundles.create_bundle(repo, out, refs)
        return out

    def open_upload(self, grant: WorkerRoundRecord) -> Path:
        """A file for one bundle upload of ``grant``'s token; ConflictError while another upload of
        the same token is in flight (uploads do not queue up on a token). ``close_upload`` ends it."""
        name = f"upload-{grant.round}-{grant.attempt}-{secrets.token_hex(4)}.bundle"
        path = self._scratch(grant.run_id) / name
        self.uploads.claim(grant.token_hash)
        return path

    def close_upload(self, grant: WorkerRoundRecord, path: Path) -> None:
        """The upload at ``path`` is over: its file is removed and the token may upload again."""
        try:
            path.unlink(missing_ok=True)
        finally:
            self.uploads.release(grant.token_hash)

    def oversized(self, grant: WorkerRoundRecord, turn: int | None) -> str:
        """The 413's message for an upload that passed ``max_bundle_bytes`` (it was not read further),
        answered before the refusal is recorded: until ``refuse_oversized`` and ``close_upload`` the
        token answers 409 everywhere (``upload_marks``). ForbiddenError for another hypothesis's turn."""
        self._require_scope(grant, turn)
        self.uploads.refusing(grant.token_hash)
        return f"policy_violation: bundle refused: {self._too_large()}"

    def refuse_oversized(self, grant: WorkerRoundRecord, turn: int | None) -> PolicyViolation:
        """Record an upload that passed ``max_bundle_bytes`` as refused (``refusals.refuse_bundle``)."""
        self._require_scope(grant, turn)
        return self._refuse(grant, turn, self._too_large())

    def _too_large(self) -> str:
        return f"the bundle is larger than {self.max_bundle_bytes} bytes"

    def receive_bundle(self, grant: WorkerRoundRecord, path: Path, turn: int | None) -> dict[str, str]:
        """Verify and import the bundle of the worker's commits at ``path``; the heads it proved
        (module docstring). PolicyViolation (recorded) when it is refused."""
        self._require_scope(grant, turn)
        if path.stat().st_size > self.max_bundle_bytes:
            raise self.refuse_oversized(grant, turn)
        return self._import(grant, path, turn)

    def decide_turn(
        self,
        grant: WorkerRoundRecord,
        number: int,
        decision: TurnDecision,
        *,
        champion: ChampionUpdate | None,
        component_heads: Mapping[str, str],
        event: tuple[EventKind, Mapping[str, Any]],
        samples: Sequence[Sample],
        hypotheses: Mapping[int, tuple[Reason, str]] | None = None,
    ) -> TurnRecord:
        """The ledger's decision, refusing heads no verified bundle of this round brought in, a decision
        its samples do not give (``recount``: 403, recorded) and a keep not confirmed (``keep_gate``)."""
        self.require_round(grant)
        problem = "a worker does not decide a parallel turn" if hypotheses is not None else None
        problem = problem or referee.event_mismatch(event, EVENT_OF_OUTCOME[decision.outcome], number=number)
        problem = problem or recount_decision(
            self._spec(grant.run_id),
            RoundJob.from_json(grant.job),
            number,
            decision,
            champion=champion,
            component_heads=component_heads,
            samples=samples,
            reference=referee.reference(self.store, self._spec(grant.run_id), grant.run_id),
        )
        if problem is not None:
            referee.require_started(self.store, grant.run_id, number)  # 404, 409 for a late one
            raise refuse_report(self.store, grant, number, problem)
        self._require_proved(grant, {**component_heads, **decision.commits})
        if decision.outcome is Outcome.ACCEPTED:  # only once a confirmation reproduced it (ADR-0043)
            referee.require_started(self.store, grant.run_id, number)
            self.gate.require_confirmed(grant, number, {**component_heads, **decision.commits})
        elif decision.reason is Reason.UNCONFIRMED:
            self.gate.require_failed(grant, number)
        return self.store.decide_turn(
            grant.run_id,
            number,
            decision,
            champion=champion,
            component_heads=component_heads,
            event=event,
            samples=samples,
            hypotheses=hypotheses,
        )

    def report_hypothesis(
        self, grant: WorkerRoundRecord, turn: int, report: HypothesisReport
    ) -> HypothesisRecord:
        """The ledger's report of one parallel hypothesis, refusing commits no verified bundle brought
        (and, for a hypothesis pod's token, any other turn or index than its own)."""
        self._require_scope(grant, turn, report.index)
        referee.require_champion(self.store, grant)
        spec = self._spec(grant.run_id)
        problem = recount_hypothesis(spec, report, referee.reference(self.store, spec, grant.run_id))
        if problem is not None:
            referee.require_unreported(self.store, grant.run_id, turn, report.index)
            raise refuse_report(self.store, grant, turn, f"hypothesis {report.index}: {problem}")
        self._require_proved(grant, report.commits)
        try:
            return self.store.report_hypothesis(grant.run_id, turn, report)
        finally:
            self.slots.reported()  # a turn waiting on its reports looks now (ADR-0034)

    def start_turn(self, grant: WorkerRoundRecord, body: TurnStart) -> TurnRecord:
        """The ledger's ``start_turn``, its event (if any) ``turn_started`` for that turn."""
        self.require_round(grant)
        event = body.event.pair() if body.event is not None else None
        if event is not None:
            referee.require_event(event, EventKind.TURN_STARTED, number=body.number, round=body.round)
        return self.store.start_turn(grant.run_id, body.number, body.round, event=event)

    def append_event(self, grant: WorkerRoundRecord, body: EventSpec) -> EventRecord:
        """A worker's progress event; any other kind is ForbiddenError, nothing stored."""
        self.require_round(grant)
        referee.require_progress(body.kind)
        referee.require_own_progress(grant, body.payload)
        return self.store.append_event(grant.run_id, body.kind, body.payload)

    def add_baseline_samples(self, grant: WorkerRoundRecord, turn: int, samples: Sequence[Sample]) -> None:
        """The baseline's samples (``referee.add_baseline_samples``)."""
        self.require_round(grant)
        referee.add_baseline_samples(self.store, grant, turn, samples)

    def set_baseline(self, grant: WorkerRoundRecord, value: float, event_payload: Mapping[str, Any]) -> None:
        """The baseline, if its samples give ``value`` (``referee.set_baseline``)."""
        self.require_round(grant)
        referee.set_baseline(self.store, self._spec(grant.run_id), grant, value, event_payload)

    def _require_proved(self, grant: WorkerRoundRecord, commits: Mapping[str, str]) -> None:
        if not commits:
            return
        proved = self.store.proved_heads(grant.run_id, grant.round)
        for name, sha in commits.items():
            if sha not in proved.get(name, set()):
                raise ForbiddenError(f"commit {sha[:12]} of {name} came in no verified bundle of this round")

    def confirm(self, grant: WorkerRoundRecord, samples: Sequence[Sample]) -> ConfirmationOutcome:
        """A confirmation's samples, judged and stored (``confirm.record_confirmation``)."""
        found = record_confirmation(self.store, self._spec(grant.run_id), grant, samples)
        self.gate.reported()  # a keep waiting on it answers now
        return found

    def close_waits(self) -> None:
        """The server is stopping: long polls (slots, keeps waiting on a confirmation) answer now."""
        self.slots.close()
        self.gate.close()

    def finish(self, grant: WorkerRoundRecord, outcome: RoundEnd) -> None:
        """Record the worker's outcome (validated by its schema) and revoke its token."""
        scopes.not_confirming(grant)
        self.store.finish_worker_round(grant.token_hash, outcome.model_dump(mode="json"))

    # -- bundles ------------------------------------------------------------------------------

    def _import(self, grant: WorkerRoundRecord, path: Path, turn: int | None) -> dict[str, str]:
        components = {c.name: c for c in self.store.list_components(grant.run_id)}
        return import_bundle(
            self.store,
            grant,
            path,
            turn,
            spec=self._spec(grant.run_id),
            components=tuple(components),
            repo_of=lambda name: self._repo(components[name]),
            scratch=self._scratch(grant.run_id),
        )

    def _refuse(self, grant: WorkerRoundRecord, turn: int | None, detail: str) -> PolicyViolation:
        return refuse_bundle(self.store, grant, turn, detail)

    def _spec(self, run_id: str) -> Spec:
        """The run's spec as it was read: relative repository paths resolve against the spec file's
        directory (only the globs, commands and the metric's rule are used here). A run's spec never
        changes, so it is read and parsed once per run: every report of it is checked against it."""
        spec = self._specs.get(run_id)
        if spec is None:
            spec = stored_spec(self.store, run_id)
            if len(self._specs) > 64:  # runs come and go; a few are live at once
                self._specs.clear()
            self._specs[run_id] = spec
        return spec

    def _component(self, run_id: str, name: str) -> ComponentRecord:
        for comp in self.store.list_components(run_id):
            if comp.name == name:
                return comp
        raise NotFoundError(f"run {run_id} has no component {name!r}")

    def _repo(self, comp: ComponentRecord) -> Path:
        """The run's candidate clone of ``comp`` (where the controller commits and publishes from);
        the user's repository when this host holds no clone yet (a run's first round: the start is
        the base, which the user's repository has)."""
        names = tuple(c.name for c in self.store.list_components(comp.run_id))
        clone = RunLayout(self.settings.run_dir(comp.run_id), names).checkout("candidate", comp.name)
        if (clone / ".git").exists():
            return clone
        repo = Path(comp.repo)
        if not repo.exists():
            raise CrucibleError(f"no repository for component {comp.name} of run {comp.run_id} on this host")
        return repo

    def _scratch(self, run_id: str) -> Path:
        path = self.settings.run_dir(run_id) / "bundles"
        path.mkdir(parents=True, exist_ok=True)
        return path
