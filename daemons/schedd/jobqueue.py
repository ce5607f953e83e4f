"""The schedd's job queue in memory: ads as attribute -> expression text.

Pure. Every change is a list of log lines (txlog.op_*) applied through `apply`,
the same code path replay uses, so what is on disk and what is in memory cannot
disagree. Jobs keep their attributes as ClassAd expression text; a classad2 ad is
built only when something needs to evaluate it, and cached until the job changes.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

import classad2

from daemons.core import ads
from daemons.schedd import txlog
from daemons.schedd.autocluster import AutoclusterConfig, Rounding, round_text
from daemons.schedd.history import Record, record_text
from daemons.schedd.submit import HELD, IDLE, RUNNING, submitter_of

HEADER_KEY = "0.0"
_LIVE = Path("<live change>")


@dataclass
class Job:
    cluster: int
    proc: int
    attrs: dict[str, str] = field(default_factory=dict)
    submitter: str = ""
    # Not persisted: a match is being turned into a running job.
    reserved: bool = False
    # Not persisted: the pool time its latest match arrived (0: none pending), for the
    # match-to-activation delay.
    matched_at: float = 0.0
    # Not persisted: the autocluster cache (AutoClusterId, AutoClusterAttrs).
    ac_id: int | None = None
    ac_attrs: tuple[str, ...] = ()
    ac_attrs_lower: frozenset[str] = frozenset()
    ac_generation: int = -1
    owner: str = ""          # the Owner attribute's text, as counted in JobQueue.owner_counts
    _classad: tuple[int | None, classad2.ClassAd] | None = None
    _public: tuple[int | None, classad2.ClassAd] | None = None

    @property
    def id(self) -> str:
        return f"{self.cluster}.{self.proc}"

    @property
    def key(self) -> tuple[int, int]:
        return (self.cluster, self.proc)

    @property
    def status(self) -> int:
        # JobStatus as a number, re-parsed only when its text changes (a hot path).
        text = self.attrs.get("JobStatus")
        if text is not self._status_text:
            self._status_text = text
            try:
                self._status = int(text) if text is not None else IDLE
            except ValueError:
                self._status = IDLE
        return self._status

    _status: int = IDLE
    _status_text: str | None = None

    def int_attr(self, name: str, default: int = 0) -> int:
        try:
            return int(float(self.attrs.get(name, default)))
        except (ValueError, OverflowError):   # not a number, or too big for one (a 400-digit priority)
            return default

    def view(self) -> dict[str, str]:
        """The job ad as others see it: its attributes plus the autocluster cache."""
        if self.ac_id is None:
            return self.attrs
        out = dict(self.attrs)
        out["AutoClusterId"] = str(self.ac_id)
        out["AutoClusterAttrs"] = ads.literal(",".join(self.ac_attrs))
        return out

    def classad(self) -> classad2.ClassAd:
        if self._classad is None or self._classad[0] != self.ac_id:
            self._classad = (self.ac_id, classad2.ClassAd(ads.text_of_exprs(self.view())))
        return self._classad[1]

    def public_view(self) -> dict[str, str]:
        """view() without the private attributes (ClaimId): what non-daemons may see or test."""
        view = self.view()
        if not any(ads.is_private(k) for k in view):
            return view
        return {k: v for k, v in view.items() if not ads.is_private(k)}

    def public_classad(self) -> classad2.ClassAd:
        if not any(ads.is_private(k) for k in self.attrs):
            return self.classad()
        if self._public is None or self._public[0] != self.ac_id:
            self._public = (self.ac_id, classad2.ClassAd(ads.text_of_exprs(self.public_view())))
        return self._public[1]

    def text(self) -> str:
        return ads.text_of_exprs(self.view())

    def forget_autocluster(self) -> None:
        self.ac_id = None
        self._classad = None
        self._public = None


def parse_job_id(text: str) -> tuple[int, int | None]:
    """'12.3' -> (12, 3); '12' -> (12, None)."""
    t = text.strip()
    if "." in t:
        c, p = t.split(".", 1)
        return int(c), int(p)
    return int(t), None


class JobQueue:
    def __init__(self, uid_domain: str, rounding: Iterable[Rounding] = AutoclusterConfig().rounding) -> None:
        self.uid_domain = uid_domain
        self.jobs: dict[tuple[int, int], Job] = {}
        self.next_cluster = 1
        self.rounding = {r.attr.lower(): r for r in rounding}
        self._canon: dict[str, str] = {}
        # submitter -> its jobs, so a negotiation looks only at that submitter's jobs
        self.by_submitter: dict[str, dict[tuple[int, int], Job]] = {}
        # submitter -> counts for its ad, kept by every change instead of by rescans
        self.counts: dict[str, dict[str, int]] = {}
        # submitter -> its idle jobs' order keys, sorted, and key -> job: the order in which
        # they are offered to the negotiator and to a claim, kept by every change (a claim of a
        # partitionable slot's leftover used to scan and sort all of a submitter's jobs).
        self._idle_keys: dict[str, list[tuple[int, int, int]]] = {}
        self._idle_jobs: dict[tuple[int, int, int], Job] = {}
        # Owner (the attribute's text) -> jobs in the queue: MAX_JOBS_PER_OWNER.
        self.owner_counts: dict[str, int] = {}
        # History records (history.py): the last number given, and records decided by
        # applied transactions that the schedd has not yet written to the history file.
        self.history_seq = 0
        self._numbering: int | None = None
        self.retired: list[Record] = []

    @staticmethod
    def _contribution(job: Job) -> tuple[str, int, int] | None:
        if not job.submitter:
            return None
        return (job.submitter, job.status, job.int_attr("RequestCpus", 1))

    @staticmethod
    def _idle_entry(job: Job) -> tuple[str, tuple[int, int, int]] | None:
        if not job.submitter or job.status != IDLE:
            return None
        # HTCondor's order within a submitter: higher JobPrio first, then submission order.
        return job.submitter, (-job.int_attr("JobPrio"), job.cluster, job.proc)

    def _index(self, entry: tuple[str, tuple[int, int, int]] | None, job: Job, add: bool) -> None:
        if entry is None:
            return
        submitter, key = entry
        keys = self._idle_keys.setdefault(submitter, [])
        if add:
            bisect.insort(keys, key)
            self._idle_jobs[key] = job
            return
        i = bisect.bisect_left(keys, key)
        if i < len(keys) and keys[i] == key:
            del keys[i]
        self._idle_jobs.pop(key, None)
        if not keys:
            del self._idle_keys[submitter]

    def idle_in_order(self, submitter: str) -> Iterator[Job]:
        """The submitter's idle jobs in priority order (reserved ones included: the caller
        skips those). Do not change the queue while iterating."""
        for key in self._idle_keys.get(submitter, ()):
            yield self._idle_jobs[key]

    def _count(self, c: tuple[str, int, int] | None, sign: int) -> None:
        if c is None:
            return
        submitter, status, cpus = c
        k = self.counts.setdefault(submitter, {"idle": 0, "running": 0, "held": 0, "weighted_idle": 0,
                                               "weighted_running": 0, "jobs": 0})
        k["jobs"] += sign
        if status == IDLE:
            k["idle"] += sign
            k["weighted_idle"] += sign * cpus
        elif status == RUNNING:
            k["running"] += sign
            k["weighted_running"] += sign * cpus
        elif status == HELD:
            k["held"] += sign
        if k["jobs"] == 0:
            del self.counts[submitter]

    def _set_submitter(self, job: Job, submitter: str) -> None:
        if job.submitter == submitter:
            return
        if job.submitter:
            mine = self.by_submitter.get(job.submitter)
            if mine is not None:
                mine.pop(job.key, None)
                if not mine:
                    del self.by_submitter[job.submitter]
        job.submitter = submitter
        self.by_submitter.setdefault(submitter, {})[job.key] = job

    def _count_owner(self, job: Job, owner: str) -> None:
        if job.owner == owner:
            return
        if job.owner:
            left = self.owner_counts.get(job.owner, 0) - 1
            if left > 0:
                self.owner_counts[job.owner] = left
            else:
                self.owner_counts.pop(job.owner, None)
        job.owner = owner
        if owner:
            self.owner_counts[owner] = self.owner_counts.get(owner, 0) + 1

    def jobs_of_owner(self, owner: str) -> int:
        """Jobs in the queue whose Owner is `owner` (a user name)."""
        return self.owner_counts.get(ads.literal(owner), 0)

    def jobs_of(self, submitter: str) -> list[Job]:
        return list(self.by_submitter.get(submitter, {}).values())

    def canonical(self, name: str) -> str:
        """ClassAd names ignore case: every job spells an attribute the way it was first seen."""
        c = self._canon.get(name.lower())
        if c is None:
            c = self._canon[name.lower()] = name
        return c

    def __len__(self) -> int:
        return len(self.jobs)

    def get(self, job_id: str) -> Job | None:
        try:
            c, p = parse_job_id(job_id)
        except ValueError:
            return None
        return None if p is None else self.jobs.get((c, p))

    def select(self, ids: Iterable[str]) -> list[Job]:
        """Jobs named by 'c.p' or whole clusters 'c'; unknown ids are skipped."""
        out: list[Job] = []
        for text in ids:
            try:
                c, p = parse_job_id(text)
            except ValueError:
                continue
            if p is None:
                out.extend(j for j in self.jobs.values() if j.cluster == c)
            elif (c, p) in self.jobs:
                out.append(self.jobs[(c, p)])
        return out

    # ---- applying log entries ----------------------------------------------
    def apply(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.apply_op(txlog.parse_op(line, 0, _LIVE))

    def apply_op(self, op: txlog.Op) -> None:
        if op.key == HEADER_KEY:
            if op.code == txlog.SET and op.name == "NextClusterNum":
                self.next_cluster = int(op.value)
            elif op.code == txlog.SET and op.name == "HistorySeq":
                # Numbers the history record of the job destroyed next (history.py).
                self.history_seq = int(op.value)
                self._numbering = self.history_seq
            return
        if op.code == txlog.NEW:
            c, p = parse_job_id(op.key)
            if p is None:
                return
            self.jobs[(c, p)] = Job(c, p)
            return
        try:
            c, p = parse_job_id(op.key)
        except ValueError:
            return
        job = self.jobs.get((c, p)) if p is not None else None
        if job is None:
            return
        if op.code == txlog.DESTROY:
            if self._numbering is not None:
                self.retired.append(Record(self._numbering, record_text(job.text(), self._numbering)))
                self._numbering = None
            del self.jobs[(c, p)]
            self._count(self._contribution(job), -1)
            self._index(self._idle_entry(job), job, add=False)
            self._count_owner(job, "")
            mine = self.by_submitter.get(job.submitter)
            if mine is not None:
                mine.pop(job.key, None)
                if not mine:
                    del self.by_submitter[job.submitter]
            return
        name = self.canonical(op.name)
        low = name.lower()
        before = self._contribution(job)
        idle_before = self._idle_entry(job)
        if op.code == txlog.SET:
            value = op.value
            rule = self.rounding.get(low)
            if rule is not None:
                # SCHEDD_ROUND_ATTR_<attr>: round for matchmaking, keep the original.
                rounded = round_text(rule, value)
                if rounded is not None:
                    job.attrs[self.canonical(name + "_RAW")] = value
                    value = rounded
            job.attrs[name] = value
        elif op.code == txlog.DELETE_ATTR:
            job.attrs.pop(name, None)
        job._classad = None
        job._public = None
        if job.ac_id is not None and low in job.ac_attrs_lower:
            job.forget_autocluster()
        if low in ("owner", "accountinggroup") or not job.submitter:
            self._set_submitter(job, submitter_of(job.attrs, self.uid_domain))
        if low == "owner":
            self._count_owner(job, job.attrs.get(name, ""))
        after = self._contribution(job)
        if after != before:
            self._count(before, -1)
            self._count(after, +1)
        idle_after = self._idle_entry(job)
        if idle_after != idle_before:
            self._index(idle_before, job, add=False)
            self._index(idle_after, job, add=True)

    def state_lines(self) -> list[str]:
        """The whole queue as log lines (for a compacted log)."""
        lines = [txlog.op_new(HEADER_KEY, "(empty)"),
                 txlog.op_set(HEADER_KEY, "NextClusterNum", str(self.next_cluster))]
        if self.history_seq:
            lines.append(txlog.op_set(HEADER_KEY, "HistorySeq", str(self.history_seq)))
        for job in self.jobs.values():
            lines.append(txlog.op_new(job.id))
            raws: list[tuple[str, str]] = []
            for k, v in job.attrs.items():
                low = k.lower()
                if low.endswith("_raw") and low[:-4] in self.rounding:
                    base = job.attrs.get(self._canon.get(low[:-4], ""))
                    if base is None or round_text(self.rounding[low[:-4]], v) != base:
                        raws.append((k, v))  # not what replaying the base attribute would recreate
                    continue
                if low in self.rounding:
                    raw = job.attrs.get(self._canon.get(low + "_raw", ""))
                    if raw is not None and round_text(self.rounding[low], raw) == v:
                        v = raw  # write the original: replay rounds it again, and recreates <attr>_RAW
                lines.append(txlog.op_set(job.id, k, v))
            # Stale or orphaned <attr>_RAW values go last so no replayed rounding overwrites them.
            lines.extend(txlog.op_set(job.id, k, v) for k, v in raws)
        return lines

    # ---- building changes ---------------------------------------------------
    def submit_lines(self, procs: list[dict[str, str]], cluster: int) -> list[str]:
        lines = [txlog.op_set(HEADER_KEY, "NextClusterNum", str(cluster + 1))]
        for attrs in procs:
            key = f"{cluster}.{attrs['ProcId']}"
            lines.append(txlog.op_new(key))
            lines.extend(txlog.op_set(key, k, v) for k, v in attrs.items())
        return lines

    def retire_lines(self, finished: list[tuple[Job, dict[str, str | None]]]) -> list[str]:
        """One transaction's lines that give each job its final attributes, number its
        history record and destroy it (see history.py for why these go together)."""
        lines: list[str] = []
        seq = self.history_seq
        for job, changes in finished:
            seq += 1
            lines += self.set_lines(job, changes)
            lines += [txlog.op_set(HEADER_KEY, "HistorySeq", str(seq)), txlog.op_destroy(job.id)]
        return lines

    @staticmethod
    def set_lines(job: Job, changes: dict[str, str | None]) -> list[str]:
        """Log lines that set (or, for None, delete) attributes of `job`."""
        out = []
        for k, v in changes.items():
            if v is None:
                if k in job.attrs:
                    out.append(txlog.op_delete_attr(job.id, k))
            else:
                out.append(txlog.op_set(job.id, k, v))
        return out

    # ---- queries --------------------------------------------------------------
    def by_status(self, status: int) -> Iterator[Job]:
        return (j for j in self.jobs.values() if j.status == status)

    def counts_by_submitter(self) -> dict[str, dict[str, int]]:
        return {k: {n: v for n, v in c.items() if n != "jobs"} for k, c in self.counts.items()}
