"""The schedd's queue operations: remove, hold, release, edit, and queries."""
from __future__ import annotations

import itertools
import time
from typing import Iterator

from daemons.core import ads
from daemons.core.security.levels import DAEMON
from daemons.pb.htcpool import schedd_pb2
from daemons.schedd import scheduling
from daemons.schedd.claims import _quote
from daemons.schedd.history import SEQ_ATTR
from daemons.schedd.jobqueue import Job
from daemons.schedd.owners import Caller, may_act
from daemons.schedd.scheduling import ScheddClaim
from daemons.schedd.protected import owned_by_schedd, settable_problem
from daemons.schedd.submit import COMPLETED, HELD, IDLE, REMOVED, RUNNING
from daemons.schedd.submit_values import attribute_value_problem

_VERBS = {schedd_pb2.REMOVE: "remove", schedd_pb2.HOLD: "hold", schedd_pb2.RELEASE: "release",
          schedd_pb2.EDIT: "edit"}
# A reason is kept in the job ad (HoldReason, RemoveReason): a sentence, not a document.
MAX_REASON = 1024


class ActError(ValueError):
    pass


class ActDenied(PermissionError):
    """None of the jobs named may be acted on by this caller (HTCondor's wording)."""



class QueueOpsMixin:
    """ScheddDaemon's act and query methods."""

    def query_budget(self):
        return ads.work_budget(self.cfg.query_max_worktime_s, "SCHEDD_QUERY_MAX_WORKTIME")

    def select(self, job_ids: list[str], constraint: str, private: bool = False) -> list[Job]:
        """Jobs by id and/or constraint; a constraint sees private attributes only if `private`
        (and must finish within SCHEDD_QUERY_MAX_WORKTIME)."""
        if job_ids:
            jobs = self.queue.select(job_ids)
        else:
            jobs = list(self.queue.jobs.values())
        if constraint.strip():
            tree = ads.parse_expr(constraint, "constraint")
            now = self.clock.now()
            check = self.query_budget()
            chosen = []
            for j in jobs:
                check()
                if ads.is_true(ads.evaluate(tree, scheduling.with_time(j.classad() if private else j.public_classad(),
                                                                       now))):
                    chosen.append(j)
            jobs = chosen
        return jobs

    def owner_of(self, job: Job) -> str | None:
        v = ads.parse_expr(job.attrs.get("Owner", "undefined")).eval()
        return v if isinstance(v, str) else None

    async def act(self, action: int, job_ids: list[str], constraint: str, reason: str,
                  edits: dict[str, str], caller: Caller = Caller()) -> tuple[list[str], list[str]]:
        """Act on the jobs named; return (ids acted on, ids the caller may not act on)."""
        if not job_ids and not constraint.strip():
            raise ActError("name jobs (cluster or cluster.proc) or give a constraint")
        if len(reason) > MAX_REASON:
            raise ActError(f"the reason is {len(reason):,} characters; at most {MAX_REASON}")
        selected = self.select(job_ids, constraint, private=caller.open or DAEMON in caller.levels)
        supers = self.common.security.queue_super_users
        jobs = [j for j in selected if may_act(caller, self.owner_of(j), supers)]
        denied = [j for j in selected if j not in jobs]
        if denied:
            self.log.warning("%s denied to %s for job(s) %s (owned by %s)", _VERBS.get(action, "act"),
                             caller.identity, " ".join(j.id for j in denied[:20]),
                             ", ".join(sorted({str(self.owner_of(j)) for j in denied})))
            if not jobs:
                first = denied[0]
                raise ActDenied(f"Permission denied to {_VERBS.get(action, 'act on')} job {first.id}"
                                f"{f' and {len(denied) - 1} more' if len(denied) > 1 else ''}: owned by "
                                f"{self.owner_of(first)}, and {caller.identity} is neither its owner nor a queue "
                                f"super user (QUEUE_SUPER_USERS)")
        now = str(int(self.clock.now()))
        done: list[Job] = []
        to_release: list[ScheddClaim] = []
        removed: list[tuple[Job, dict[str, str | None]]] = []
        if action == schedd_pb2.EDIT:
            checked = {}
            for attr, value in edits.items():
                problem = settable_problem(attr)
                if problem is not None:
                    raise ActError(f"attribute {attr[:60]} cannot be edited: {problem}"
                                   if owned_by_schedd(attr) else problem)
                try:
                    checked[attr] = ads.expr_text(value, attr)
                except ads.AdError as e:
                    raise ActError(str(e)) from None
                problem = attribute_value_problem(attr, checked[attr])
                if problem is not None:
                    raise ActError(problem)
            if not checked:
                raise ActError("nothing to edit")
            for j in jobs:
                self.change(j, dict(checked))
                done.append(j)
        for j in jobs if action != schedd_pb2.EDIT else []:
            s = j.status
            claim = next((c for c in self.claims.values() if c.job == j.key), None)
            if action == schedd_pb2.REMOVE and s not in (REMOVED, COMPLETED):
                removed.append((j, {"JobStatus": str(REMOVED), "EnteredCurrentStatus": now,
                                    "RemoveReason": _quote(reason or "removed by user"), "RemoteHost": None,
                                    "ClaimId": None, "LastJobStatus": str(s)}))
            elif action == schedd_pb2.HOLD and s in (IDLE, RUNNING):
                self.change(j, {"JobStatus": str(HELD), "EnteredCurrentStatus": now,
                                "HoldReason": _quote(reason or "held by user"), "HoldReasonCode": "1",
                                "RemoteHost": None, "ClaimId": None, "LastJobStatus": str(s),
                                **(self.rotate_machine_attrs(j) if s == RUNNING else {})})
            elif action == schedd_pb2.RELEASE and s == HELD:
                self.change(j, {"JobStatus": str(IDLE), "EnteredCurrentStatus": now, "HoldReason": None,
                                "HoldReasonCode": None, "ReleaseReason": _quote(reason or "released by user"),
                                "LastJobStatus": str(s)})
            else:
                continue
            j.reserved = False
            done.append(j)
            if claim is not None:
                claim.job = None
                to_release.append(claim)
        if removed:
            self.retire(removed)
        await self.txlog.commit()
        self.write_history()
        for claim in to_release:
            await self._release_claim(claim, f"job {'removed' if action == schedd_pb2.REMOVE else 'held'}")
        verb = {schedd_pb2.REMOVE: "removed", schedd_pb2.HOLD: "held", schedd_pb2.RELEASE: "released",
                schedd_pb2.EDIT: "edited"}.get(action, "?")
        if done:
            self.log.info("%d job(s) %s: %s", len(done), verb, " ".join(j.id for j in done[:20]))
            self.trigger("advertise")
            if action == schedd_pb2.RELEASE:
                self.spawn(self._reschedule_negotiator(), "schedd:reschedule")
        return [j.id for j in done], [j.id for j in denied]

    # ---- queries --------------------------------------------------------------------
    def query(self, constraint: str, projection: list[str], history: bool, limit: int,
              private: bool = False) -> list[str]:
        """Job ads as text; private attributes (ClaimId, ...) only when `private` (DAEMON callers)."""
        return [t for chunk in self.query_chunks(constraint, projection, history, limit, private) for t in chunk]

    def query_chunks(self, constraint: str, projection: list[str], history: bool, limit: int,
                     private: bool = False, chunk: int = 1000) -> Iterator[list[str]]:
        """query() in chunks of `chunk` ads, each made only when asked for: a query of every
        job holds one chunk at a time and caches no job's ClassAd. A bad constraint raises
        here, before the first chunk; SCHEDD_QUERY_MAX_WORKTIME counts only the time spent
        making chunks, not the time the caller takes between them."""
        tree = ads.parse_expr(constraint, "constraint") if constraint.strip() else None
        watch = _Stopwatch()
        check = ads.work_budget(self.cfg.query_max_worktime_s, "SCHEDD_QUERY_MAX_WORKTIME", clock=watch)
        if history:
            return _chunked(self._history_texts(tree, projection, private, check), limit, chunk, watch)
        # The jobs as they are when each chunk is made; one that has left the queue meanwhile is skipped.
        keys = sorted(self.queue.jobs)
        return _chunked(self._job_texts(keys, tree, projection, private, check), limit, chunk, watch)

    def _job_texts(self, keys, tree, projection, private, check) -> Iterator[str]:
        jobs = self.queue.jobs
        wanted = [a for a in projection if ads.is_attr_name(a)] if projection else None
        for key in keys:
            j = jobs.get(key)
            if j is None:
                continue
            shared = self.ac_rejections.get(j.ac_id) if j.ac_id is not None and j.status == IDLE else None
            # The autocluster's last rejection speaks for every job in it.
            extra = {"LastRejMatchReason": _quote(shared[0]), "LastRejMatchTime": str(shared[1])} \
                if shared is not None else None
            if j.status == RUNNING:
                extra = self.renewed_lease(j)
            if tree is not None:
                check()
                ad = j.fresh_classad(private) if extra is None else ads.parse_ad(j.ad_text(private, extra))
                if not ads.is_true(ads.evaluate(tree, scheduling.with_time(ad, self.clock.now()))):
                    continue
            if wanted is None:
                yield j.ad_text(private, extra)
            else:
                yield ads.text_of_exprs(self._project(j, wanted, private, extra))

    def _project(self, job: Job, names: list[str], private: bool, extra: dict[str, str] | None) -> dict[str, str]:
        """The named attributes of what the job's whole ad would say (names ignore case; each
        keeps the spelling asked for), looked up one by one instead of making the whole ad."""
        out = {}
        lowered = {k.lower(): v for k, v in extra.items()} if extra else {}
        if job.ac_id is not None:
            lowered.setdefault("autoclusterid", str(job.ac_id))
            lowered.setdefault("autoclusterattrs", ads.literal(",".join(job.ac_attrs)))
        for n in names:
            low = n.lower()
            v = lowered.get(low)
            if v is None:
                spelled = self.queue.spelling(low)
                if spelled is None or (not private and ads.is_private(spelled)):
                    continue
                v = job.get(spelled)
            if v is not None:
                out[n] = v
        return out

    def _history_texts(self, tree, projection, private, check) -> Iterator[str]:
        now = self.clock.now()
        # A completed job leaves the queue when its transaction is applied, and its record
        # reaches the history file once that transaction is on disk. The history answers
        # with those waiting records too, so a query of the queue and then of the history
        # never misses a job completing between them (HTCondor's schedd writes the history
        # and destroys the job in one step). Records appended while this reads are the
        # waiting ones: the file is read up to the record it ended with when the query began.
        last = self.history.last_seq()
        waiting = [r.text for r in sorted(self.queue.retired, key=lambda r: r.seq) if r.seq > last]
        lines = itertools.chain(((line, True) for line in self.history.lines()), ((t, False) for t in waiting))
        for line, in_file in lines:
            try:
                ad = ads.parse_ad(line)
            except ads.AdError:
                continue
            if in_file:
                seq = ads.get(ad, SEQ_ATTR)
                if isinstance(seq, int) and seq > last:
                    continue   # appended meanwhile: among the waiting records
            if not private:
                ad = ads.without_private(ad)
            if tree is not None:
                check()
                if not ads.is_true(ads.evaluate(tree, scheduling.with_time(ad, now))):
                    continue
            yield repr(ads.project(ad, projection)) if projection else repr(ad)

    def autocluster_ads(self, constraint: str = "") -> list[str]:
        """condor_q -autocluster: the autoclusters of the jobs in the queue."""
        tree = ads.parse_expr(constraint, "constraint") if constraint.strip() else None
        check = self.query_budget()
        groups: dict[int, list[Job]] = {}
        for job in sorted(self.queue.jobs.values(), key=lambda j: j.key):
            if job.status in (COMPLETED, REMOVED):
                continue
            groups.setdefault(self.ac.assign(job), []).append(job)
        out = []
        for ac, jobs in sorted(groups.items()):
            first = jobs[0]
            attrs: dict[str, str] = {a: first.attrs.get(a, "undefined") for a in first.ac_attrs}
            attrs.update({
                "AutoClusterId": str(ac),
                "AutoClusterAttrs": ads.literal(",".join(first.ac_attrs)),
                "JobCount": str(len(jobs)),
                "JobIds": ads.literal(",".join(j.id for j in jobs)),
                "IdleJobs": str(sum(j.status == IDLE for j in jobs)),
                "RunningJobs": str(sum(j.status == RUNNING for j in jobs)),
            })
            rejection = self.ac_rejections.get(ac)
            if rejection is not None:
                attrs["LastRejMatchReason"] = _quote(rejection[0])
                attrs["LastRejMatchTime"] = str(rejection[1])
            ad = ads.parse_ad(ads.text_of_exprs(attrs))
            if tree is not None:
                check()
            if tree is None or ads.is_true(ads.evaluate(tree, ad)):
                out.append(repr(ad))
        return out




def _chunked(texts: Iterator[str], limit: int, chunk: int, watch: "_Stopwatch") -> Iterator[list[str]]:
    """`texts` in lists of `chunk`, at most `limit` (0: all); the stopwatch runs only while
    texts are being made, not while the caller holds a chunk."""
    sent = 0
    out: list[str] = []
    watch.start()
    for text in texts:
        out.append(text)
        sent += 1
        if limit and sent >= limit:
            break
        if len(out) >= chunk:
            watch.stop()
            yield out
            out = []
            watch.start()
    watch.stop()
    if out:
        yield out


class _Stopwatch:
    """A clock that runs only between start() and stop(): a query's own working time."""

    def __init__(self) -> None:
        self.total = 0.0
        self._since: float | None = None

    def start(self) -> None:
        self._since = time.monotonic()

    def stop(self) -> None:
        if self._since is not None:
            self.total += time.monotonic() - self._since
            self._since = None

    def __call__(self) -> float:
        return self.total + (time.monotonic() - self._since if self._since is not None else 0.0)
