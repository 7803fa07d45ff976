"""``crucible worker``: one round of a run, executed away from the controller (ADR-0014, docs/kubernetes.md).

A loop pod (or the subprocess broker's child) knows nothing but a controller URL, a token for one
round and an empty directory. The worker fetches its round (job, spec, the components' bases) and
the start commits (a git bundle per component), then runs the round with the code a local round
runs: ``run_loop`` over a ``RunContext`` whose ledger is the HTTP ledger. Before a kept turn's
decision is sent, the new commits go to the controller as a bundle, which it verifies first. At the
end the worker reports the round's outcome, which revokes its token.

A refinement round (round >= 1, ADR-0019) is begun and ended by the controller; the worker fetches
the feedback it addresses (``GET feedback``) and plays its turns with it quoted, until one holds
the score (``rounds.play_job``).

With ``broker.parallel > 1`` on Kubernetes a pod runs hypotheses instead (ADR-0018): one hypothesis
of one turn per token (it proposes with ``CRUCIBLE_PARALLEL_INDEX`` set, measures against the
champion in its own pod, sends its commits as a bundle and its report, and leaves the turn's
decision to the controller). A warm pod (``CRUCIBLE_SLOT=1``, ADR-0034) holds a slot token instead
and runs one such hypothesis after another (``run_slot``), each with the token the controller hands
out with it, in one working directory.

What it never has: a database URL, forge credentials, the operator API token. Its token is taken out
of the environment every command of the round sees (``worker_environ``). The controller holds the
run's lease for the whole round (``ctx.lease_elsewhere``), and keeps the exactly-once decision.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from controller.brokers.base import RoundOutcome
from controller.config.settings import Settings
from controller.config.spec import Spec, parse_spec
from controller.domain.enums import RunStatus, SampleArm, StopReason
from controller.domain.errors import CrucibleError, RetryLaterError, SpecError, UnauthenticatedError
from controller.domain.jobs import RoundJob
from controller.engine.knobs import Proposal
from controller.services.execution.context import Observer, RunContext
from controller.services.execution.hypotheses import try_hypothesis, with_base_samples
from controller.services.execution.loop import LoopResult, knob_proposer, run_loop
from controller.services.execution.runs import build_context
from controller.services.execution.turn import write_candidate_file
from controller.services.feedback.rounds import play_job
from controller.services.remote.confirming import confirm_claim
from controller.services.remote.turn_watch import HypothesisVoid, TurnWatch
from controller.services.remote.warm import WarmContext
from controller.store.http_ledger import BeforeKeep, HttpLedger, WorkerApi
from controller.store.worker_protocol import HypothesisScope, JobInputs, RoundEnd, RoundFeedback, SlotNext
from controller.workspace import bundles
from controller.workspace.checkout import CRUCIBLE_REF_PREFIX
from controller.workspace.git import run_git, run_git_bytes

TOKEN_VARIABLE = "CRUCIBLE_WORKER_TOKEN"
RECONNECT_S = 600.0  # how long a warm pod waits for its controller to come back
IDLE_S = 300.0  # how long a warm pod waits for a hypothesis before it exits


@dataclass(frozen=True)
class WorkerConfig:
    """Where the worker's round is and how to reach it; ``token`` is a secret (never in a repr)."""

    controller_url: str
    run_id: str
    round: int
    workdir: Path
    attempt: int | None = None
    parallel_index: int | None = None
    slot: bool = False
    token: str = field(default="", repr=False)


class Laps:
    """Where one hypothesis's time went in a warm pod, for the pod's log: a turn of N pods waits for the
    slowest, so the parts of a slow one (waiting for the offer, fetching, setting up the arms, the
    commands, crucible's own work around them, sending the report) say what to cut (ADR-0034)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._last = clock()
        self.parts: list[tuple[str, float]] = []

    def lap(self, name: str) -> None:
        """The time since the previous lap, as part ``name``."""
        now = self._clock()
        self.parts.append((name, now - self._last))
        self._last = now

    def add(self, name: str, seconds: float) -> None:
        """A figure measured elsewhere (the commands' wall time inside a part)."""
        self.parts.append((name, seconds))

    def line(self) -> str:
        return " ".join(f"{name}={seconds:.3f}" for name, seconds in self.parts)


def worker_config(
    environ: Mapping[str, str],
    *,
    controller: str | None = None,
    run_id: str | None = None,
    round: int | None = None,
    workdir: Path | None = None,
) -> WorkerConfig:
    """The configuration from the environment (the contract's variables), flags overriding;
    SpecError naming the variable or flag that is missing or malformed."""
    url = controller or environ.get("CRUCIBLE_CONTROLLER_URL", "")
    if not url.startswith(("http://", "https://")):
        raise SpecError(
            "CRUCIBLE_CONTROLLER_URL", "the controller's API URL (http:// or https://) is required"
        )
    token = environ.get(TOKEN_VARIABLE, "")
    if not token:
        raise SpecError(TOKEN_VARIABLE, "the round's token is required (only from the environment)")
    run = run_id or environ.get("CRUCIBLE_RUN_ID", "")
    if not run:
        raise SpecError("CRUCIBLE_RUN_ID", "the run id is required (or --run)")
    number = round if round is not None else _int(environ, "CRUCIBLE_ROUND", required=True)
    assert number is not None
    return WorkerConfig(
        controller_url=url,
        run_id=run,
        round=number,
        workdir=(workdir or Path.cwd()).resolve(),
        attempt=_int(environ, "CRUCIBLE_ROUND_ATTEMPT"),
        parallel_index=_int(environ, "CRUCIBLE_PARALLEL_INDEX"),
        slot=environ.get("CRUCIBLE_SLOT") == "1",
        token=token,
    )


def _int(environ: Mapping[str, str], name: str, *, required: bool = False) -> int | None:
    raw = environ.get(name)
    if raw is None or raw == "":
        if required:
            raise SpecError(name, "is required")
        return None
    try:
        value = int(raw)
    except ValueError:
        raise SpecError(name, f"must be an integer, got {raw!r}") from None
    if value < 0:
        raise SpecError(name, f"must be >= 0, got {value}")
    return value


def worker_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment the round's commands start from: the worker's own, without its token (the
    run's scrubbing then removes every other ``CRUCIBLE_*`` and secret-looking variable)."""
    return {name: value for name, value in environ.items() if name != TOKEN_VARIABLE}


class WorkerLedgers(Protocol):
    """Builds the worker's HTTP ledger: the round's record behind the controller's worker routes,
    reached with the round's token. The composition root makes it (``Root.worker_ledgers``), so a
    ledger is built in one place; ``before_keep`` sends a kept turn's commits before its decision."""

    def __call__(self, *, before_keep: BeforeKeep | None = None) -> HttpLedger: ...


def run_worker(
    config: WorkerConfig,
    environ: Mapping[str, str],
    *,
    ledgers: WorkerLedgers,
    ledgers_for: Callable[[str], WorkerLedgers] | None = None,
    cancel: threading.Event | None = None,
    observer: Observer | None = None,
    log: Callable[[str], None] | None = None,
    laps: Laps | None = None,
    warm: WarmContext | None = None,
) -> RoundOutcome:
    """Execute the round ``config`` names to its end and report it; the outcome the controller accepted.
    ``ledgers_for(token)``: the ledgers of another token of the same controller, which a warm pod
    (``config.slot``) runs each of its hypotheses with; ``log``: where a warm pod writes a line per
    hypothesis saying where its time went (``laps``: a hypothesis's parts, filled in here); ``warm``:
    the context a warm pod's hypotheses share (ADR-0047)."""
    if config.slot:
        if ledgers_for is None:
            raise CrucibleError("a warm hypothesis pod needs the ledgers of the tokens it is handed")
        return run_slot(config, environ, ledgers_for, cancel=cancel, observer=observer, log=log)
    api = WorkerApi(config.controller_url, config.token, config.run_id)
    ledger: HttpLedger | None = None
    try:
        inputs = api.job()
        job = inputs.job.job()
        if job.key != (config.run_id, config.round):
            raise CrucibleError(f"the token is for round {job.round} of run {job.run_id}, not {config.round}")
        if inputs.confirm is not None:  # a confirmation of a claimed keep: no agent runs (ADR-0043)
            spec = _fetch_components(api, config.workdir, inputs)
            ledger = ledgers()
            ctx = _context(config, spec, job, inputs, ledger, environ, cancel, observer)
            return confirm_claim(ctx, api, job, inputs.confirm)
        if inputs.hypothesis is not None:
            if laps is not None:
                laps.lap("job")
            return _run_hypothesis(
                config, api, ledgers, inputs, inputs.hypothesis, job, environ, cancel, observer, laps, warm
            )
        spec = _fetch_components(api, config.workdir, inputs)
        uploads = _Uploads(api, config.workdir / "outgoing", job)
        ledger = ledgers(before_keep=uploads)
        ctx = _context(config, spec, job, inputs, ledger, environ, cancel, observer)
        uploads.ctx = ctx
        if job.round == 0:
            result = run_loop(ctx, then=_stay if inputs.hand_over else None)
            outcome = RoundOutcome(result.status, result.stop_reason, result.message)
        else:
            outcome = _refine(ctx, job, api.feedback())
        api.finish(
            RoundEnd(
                run_status=outcome.run_status,
                stop_reason=outcome.stop_reason,
                message=outcome.message,
                kept=outcome.kept,
            )
        )
        return outcome
    finally:
        if ledger is not None:
            ledger.close()
        api.close()


def _run_hypothesis(
    config: WorkerConfig,
    api: WorkerApi,
    ledgers: WorkerLedgers,
    inputs: JobInputs,
    scope: HypothesisScope,
    job: RoundJob,
    environ: Mapping[str, str],
    cancel: threading.Event | None,
    observer: Observer | None,
    laps: Laps | None = None,
    warm: WarmContext | None = None,
) -> RoundOutcome:
    """A hypothesis pod (ADR-0018): one hypothesis of one turn, proposed and measured against the
    champion here, its commits sent as a bundle, its report sent; the controller decides the turn.
    A warm pod's hypotheses share one context (``warm``, ADR-0047), keyed by what a context fixes."""
    lap: Callable[[str], None] = laps.lap if laps is not None else lambda _name: None
    number, index = scope.turn, scope.index
    watch = TurnWatch(ledgers(), config.run_id, number)  # its first look runs beside the fetch
    try:
        spec = _fetch_components(api, config.workdir, inputs)
    except BaseException:
        watch.stop()
        raise
    lap("fetch")
    uploads = _Uploads(api, config.workdir / "outgoing", job)
    ledger = ledgers()

    def build() -> RunContext:
        return _context(config, spec, job, inputs, ledger, environ, cancel, observer)

    try:
        if warm is None:
            ctx = build()
        else:
            bases = tuple(sorted((c.name, c.base_sha) for c in inputs.components))
            ctx = warm.context((config.run_id, job.round, inputs.spec, bases), build, ledger, job.heads)
        spent = ctx.executor.command_seconds  # a warm context counts every hypothesis's commands
        uploads.ctx = ctx
        outer = ctx.executor.cancel
        watch.follow(outer)
        ctx.executor.cancel = watch.cancel  # the pod's cancel, or the hypothesis withdrawn
        try:
            run = ledger.get_run(config.run_id)
            if not spec.metric.interleave:  # the champion's stored samples are its arm
                turn = run.champion_turn or 0
                arm = SampleArm.BASELINE if turn == 0 else SampleArm.CANDIDATE
                ctx.champion.measured(ctx.arm_from_store(turn, arm))
            write_candidate_file(ctx, 0, run=run)
            lap("context")
            report = try_hypothesis(ctx, number, index, _proposal(ctx, scope.proposal))
            report = with_base_samples(ctx, number, report)
        finally:
            ctx.executor.cancel = outer
        lap("tried")
        if laps is not None:
            laps.add("commands", ctx.executor.command_seconds - spent)
        # Taken ahead of its turn (ADR-0051): sent only once the turn started, dropped if withdrawn.
        if not watch.wait_started():
            raise HypothesisVoid(f"hypothesis {index} of turn {number} was withdrawn before its turn started")
        if report.commits:
            uploads(config.run_id, number, report.commits)
        ledger.report_hypothesis(config.run_id, number, report)
        lap("report")
    finally:
        watch.stop()
        ledger.close()
    message = f"hypothesis {index} of turn {number}: {report.reason}"
    outcome = RoundOutcome(RunStatus.RUNNING, None, message)
    api.finish(RoundEnd(run_status=outcome.run_status, message=message))
    lap("finish")
    return outcome


def run_slot(
    config: WorkerConfig,
    environ: Mapping[str, str],
    ledgers_for: Callable[[str], WorkerLedgers],
    *,
    cancel: threading.Event | None = None,
    observer: Observer | None = None,
    log: Callable[[str], None] | None = None,
) -> RoundOutcome:
    """A warm hypothesis pod (ADR-0034): holding slot ``config.parallel_index`` of the round, it asks
    the controller for the slot's next hypothesis, runs it as a one-shot hypothesis pod would (with
    that hypothesis's own token, in the same working directory, so its clones are reused and only
    the new champion's commits are fetched), and asks again, until the controller says ``done`` (the
    run no longer runs) or nothing was offered for ``IDLE_S`` (the round ended without stopping the
    run; a later offer starts another pod).
    A hypothesis that raises ends the pod as it would have ended a one-shot one: the controller
    reports it lost and starts another pod for the slot.
    ``log`` gets a line per hypothesis: ``slot <i> turn <t>: waited=… job=… fetch=… context=… tried=…
    commands=… report=… finish=…`` (seconds; ``waited`` from the previous hypothesis's end, or the
    pod's start, to this one's offer; ``commands`` is the part of ``tried`` spent in the agent,
    validation and metric commands; the rest of ``tried`` is crucible's own work around them)."""
    slot = WorkerApi(config.controller_url, config.token, config.run_id)
    after, ran = -1, 0
    idle_since = time.monotonic()
    laps = Laps()
    warm = WarmContext()
    try:
        while cancel is None or not cancel.is_set():
            offered = _next(slot, after, cancel)
            if offered.done:
                break
            if offered.turn is None or offered.token is None:  # nothing offered yet
                if time.monotonic() - idle_since > IDLE_S:
                    break
                continue
            laps.lap("waited")
            one = dataclasses.replace(config, slot=False, parallel_index=offered.index, token=offered.token)
            ledgers = ledgers_for(offered.token)
            try:
                run_worker(
                    one, environ, ledgers=ledgers, cancel=cancel, observer=observer, laps=laps, warm=warm
                )
            except (HypothesisVoid, UnauthenticatedError) as void:
                # Withdrawn (ADR-0051), or its token no longer good: nothing of it counts. It asks
                # again after the same turn as before, so the turn's replanned hypothesis is its next.
                # A token refused mid-way may have left the arms anywhere: the next builds afresh.
                if not isinstance(void, HypothesisVoid):
                    warm.forget()
                if log is not None:
                    log(f"slot {config.parallel_index} void turn {offered.turn}: {laps.line()}")
                laps = Laps()
                idle_since = time.monotonic()
                continue
            if log is not None:
                log(f"slot {config.parallel_index} turn {offered.turn}: {laps.line()}")
            laps = Laps()
            after, ran = offered.turn, ran + 1
            idle_since = time.monotonic()
    finally:
        slot.close()
    message = f"slot {config.parallel_index}: {ran} hypotheses"
    return RoundOutcome(RunStatus.RUNNING, None, message)


def _next(slot: WorkerApi, after: int, cancel: threading.Event | None) -> SlotNext:
    """The slot's next answer; a controller away (restarting, its lease moving to another) is
    waited for up to ``RECONNECT_S``, the way a resumed controller adopts the pods (ADR-0018)."""
    gave_up = time.monotonic() + RECONNECT_S
    while True:
        try:
            return slot.next_hypothesis(after)
        except RetryLaterError:
            if time.monotonic() > gave_up or (cancel is not None and cancel.is_set()):
                raise
            time.sleep(1.0)


def _proposal(ctx: RunContext, data: Mapping[str, Any] | None) -> Proposal | None:
    """The knobs proposal the controller computed for this hypothesis; None for a real agent."""
    if data is None:
        return None
    found = knob_proposer(ctx)
    knobs = {k.ident: k for k in found[1]} if found else {}
    knob = knobs.get((data["file"], data["key"]))
    if knob is None:
        raise CrucibleError(f"the spec has no knob {data['key']!r} in {data['file']!r}")
    return Proposal(knob, data["old"], data["new"], str(data.get("hypothesis") or ""))


def _refine(ctx: RunContext, job: RoundJob, feedback: RoundFeedback) -> RoundOutcome:
    """A refinement round's turns (ADR-0019): the controller began the round (PR refreshed, feedback
    consumed) and ends it (replies, push); the worker plays the turns with the feedback quoted, from
    the PR head the job names, until one holds the score."""
    component = feedback.component or next(iter(job.heads))
    items = feedback.items
    ctx.ensure_arm("champion", dict(job.heads))  # the quotes read the lines a comment points at there
    kept = play_job(ctx, job, items, str(component))
    if kept is None:  # a cancel cut it off; the run stays in the round for a resume
        return RoundOutcome(RunStatus.CANCELLED, StopReason.CANCELLED, f"round {job.round} cut off")
    return RoundOutcome(RunStatus.RUNNING, None, f"round {job.round} done", kept=kept)


def _stay(ctx: RunContext, searched: LoopResult) -> LoopResult:
    """Round 0 hands over to the feedback watch: the controller watches, not the worker."""
    return searched


def _fetch_components(api: WorkerApi, workdir: Path, inputs: JobInputs) -> Spec:
    """A local repository per component holding its start commits and base; the spec pointed at them.
    A warm pod's second hypothesis finds the repository there: it fetches only the commits past its
    previous start (none when the champion did not move)."""
    repos = workdir / "repos"
    paths: dict[str, Path] = {}
    heads = inputs.job.heads
    for comp in inputs.components:
        name = comp.name
        repo = repos / name
        paths[name] = repo
        start_ref = f"{CRUCIBLE_REF_PREFIX}{inputs.job.run_id}/start/{name}"
        have = _resolve(repo, start_ref) if (repo / ".git").is_dir() else None
        if have is not None and name in heads and _resolve(repo, f"{heads[name]}^{{commit}}"):
            bundles.pin(repo, start_ref, heads[name])  # the champion did not move: nothing to fetch
            continue
        bundle = workdir / "incoming" / f"{name}.bundle"
        bundle.parent.mkdir(parents=True, exist_ok=True)
        api.start_bundle(name, bundle, have)
        repo.mkdir(parents=True, exist_ok=True)
        if have is None:
            run_git(["init", "-q"], repo)
        found = bundles.list_heads(bundle, repo)
        bundles.fetch(bundle, repo, list(found))
        for ref, sha in found.items():
            bundles.pin(repo, ref, sha)
    # The spec's repositories are the controller host's; each component's is its clone here.
    spec = parse_spec(inputs.spec, repos, repos=paths)
    missing = [c.name for c in spec.components if c.name not in paths]
    if missing:
        raise CrucibleError(f"the controller sent no commits for component(s) {', '.join(missing)}")
    return spec


def _resolve(repo: Path, name: str) -> str | None:
    """The commit ``name`` resolves to in ``repo``; None when it does not."""
    code, out, _ = run_git_bytes(["rev-parse", "-q", "--verify", name], repo, check=False)
    return out.decode().strip() if code == 0 else None


def _context(
    config: WorkerConfig,
    spec: Spec,
    job: RoundJob,
    inputs: JobInputs,
    ledger: HttpLedger,
    environ: Mapping[str, str],
    cancel: threading.Event | None,
    observer: Observer | None,
) -> RunContext:
    # No database: the URL below is never opened (the worker's record is the ledger).
    settings = Settings(home=config.workdir / "home", database_url="sqlite://")
    bases = {c.name: c.base_sha for c in inputs.components}
    return build_context(
        settings,
        ledger,  # no store: the turn path reaches the record through the HTTP ledger only
        config.run_id,
        spec,
        base_shas=bases,
        heads=dict(job.heads),
        environ=worker_environ(environ),
        observer=observer,
        cancel=cancel,
        lease_elsewhere=True,
        contained=spec.broker.kind == "kubernetes",  # this worker runs in a loop pod
    )


class _Uploads:
    """The HTTP ledger's ``before_keep``: bundle the commits about to be kept and send them first."""

    def __init__(self, api: WorkerApi, where: Path, job: RoundJob) -> None:
        self.api = api
        self.where = where
        self.job = job
        self.ctx: RunContext | None = None

    def __call__(self, run_id: str, turn: int, commits: Mapping[str, str]) -> None:
        assert self.ctx is not None
        out = self.where / f"turn-{turn}.bundle"
        # One bundle per component (each has its own clone); the start head is the prerequisite.
        for name, sha in commits.items():
            repo = self.ctx.checkout("candidate", name).path
            ref = f"{CRUCIBLE_REF_PREFIX}{run_id}/{name}"
            bundles.create_bundle(repo, out, {ref: sha}, exclude=(self.job.heads[name],))
            self.api.send_bundle(out, turn)
