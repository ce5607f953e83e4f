"""The schedd's job queue in memory: ads as attribute -> expression text.

Pure. Every change is a list of log lines (txlog.op_*) applied through `apply`,
the same code path replay uses, so what is on disk and what is in memory cannot
disagree; a job's own attribute changes (its start, its end) are applied as the lines
would be without reading them back (`apply_changes`, held equal to `apply` by a
property test). Jobs (job.py) keep their attributes as ClassAd expression text; the jobs of
a cluster share its cluster ad (log key "<cluster>.-1"), holding only what differs.
"""
from __future__ import annotations

import bisect
from pathlib import Path
from typing import Iterable, Iterator

from daemons.core import ads
from daemons.schedd import txlog
from daemons.schedd.autocluster import AutoclusterConfig, Rounding, round_text
from daemons.schedd.history import Record, record_text
from daemons.schedd.job import ClusterAd, Job, JobAttrs  # noqa: F401  (JobAttrs: re-exported)
from daemons.schedd.queue_lines import HEADER_KEY, QueueLines
from daemons.schedd.submit import HELD, IDLE, RUNNING, ClusterBuild, submitter_of

_LIVE = Path("<live change>")


# Attributes that the queue's indexes depend on (submitter, counts, idle order).
_INDEXED = frozenset(("jobstatus", "requestcpus", "jobprio", "owner", "accountinggroup"))
# Attributes a cluster can make from each job's number (job.ClusterAd.derived).
_DERIVABLE = frozenset(("ProcId", "GlobalJobId"))


def parse_job_id(text: str) -> tuple[int, int | None]:
    """'12.3' -> (12, 3); '12' -> (12, None)."""
    c, dot, p = text.partition(".")
    if dot:
        return int(c), int(p)
    return int(c), None


def _header_int(op: txlog.Op) -> int:
    try:
        return int(op.value)
    except ValueError:
        raise ValueError(f"{op.key} {op.name} = {op.value[:40]!r} is not an integer") from None


class JobQueue(QueueLines):
    def __init__(self, uid_domain: str, rounding: Iterable[Rounding] = AutoclusterConfig().rounding) -> None:
        self.uid_domain = uid_domain
        self.jobs: dict[tuple[int, int], Job] = {}
        self.clusters: dict[int, ClusterAd] = {}
        self._last_key, self._last_id = "", (0, 0)   # the last job key read (apply_op; never the header)
        self._submitters: dict[tuple[str | None, str | None], str] = {}   # (group, owner) texts -> submitter
        self.next_cluster = 1
        self.rounding = {r.attr.lower(): r for r in rounding}
        self._canon: dict[str, str] = {}
        # submitter -> its jobs, so a negotiation looks only at that submitter's jobs
        self.by_submitter: dict[str, dict[tuple[int, int], Job]] = {}
        # submitter -> counts for its ad, kept by every change instead of by rescans
        self.counts: dict[str, dict[str, int]] = {}
        # JobStatus -> jobs, of the jobs counted in `counts` (those with a submitter): what a
        # metrics scrape reads instead of walking the queue.
        self.status_counts: dict[int, int] = {}
        # submitter -> its idle jobs' order keys, sorted, and key -> job: the order in which
        # they are offered to the negotiator and to a claim, kept by every change (a claim of a
        # partitionable slot's leftover used to scan and sort all of a submitter's jobs).
        self._idle_keys: dict[str, list[tuple[int, int, int]]] = {}
        self._idle_jobs: dict[tuple[int, int, int], Job] = {}
        # The same keys less the reserved jobs' (matched, their claims on the way): what a
        # claim may still take. After a cycle of thousands of matches every leftover claim
        # used to walk past all of them first.
        self._free_keys: dict[str, list[tuple[int, int, int]]] = {}
        # Counts jobs that became free to take (idle, not reserved): a request's walk
        # (scheduling.Request.next_job) starts again from its first job when it moves.
        self.freed = 0
        # Told of every change to the idle order and of every job whose autocluster id is
        # dropped (requests.RequestLists), so request lists need not be rebuilt each cycle.
        self.listener = None
        # Owner (the attribute's text) -> jobs in the queue: MAX_JOBS_PER_OWNER.
        self.owner_counts: dict[str, int] = {}
        # History records (history.py): the last number given, and records decided by
        # applied transactions that the schedd has not yet written to the history file.
        self.history_seq = 0
        # When the schedd last renewed every running job's lease: the header's (0.0's)
        # LastJobLeaseRenewal, one record for all of them (HTCondor writes one per job).
        self.lease_renewal = 0
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

    idle_entry = _idle_entry

    def _index(self, entry: tuple[str, tuple[int, int, int]] | None, job: Job, add: bool) -> None:
        if entry is None:
            return
        submitter, key = entry
        keys = self._idle_keys.setdefault(submitter, [])
        if self.listener is not None:
            (self.listener.idle_added if add else self.listener.idle_removed)(submitter, key, job)
        if add:
            bisect.insort(keys, key)
            self._idle_jobs[key] = job
            if not job.reserved:
                self._free(submitter, key, True)
            return
        i = bisect.bisect_left(keys, key)
        if i < len(keys) and keys[i] == key:
            del keys[i]
        self._idle_jobs.pop(key, None)
        if not keys:
            del self._idle_keys[submitter]
        self._free(submitter, key, False)

    def _free(self, submitter: str, key: tuple[int, int, int], free: bool) -> None:
        keys = self._free_keys.setdefault(submitter, [])
        i = bisect.bisect_left(keys, key)
        there = i < len(keys) and keys[i] == key
        if free and not there:
            keys.insert(i, key)
            self.freed += 1
        elif not free and there:
            del keys[i]
        if not keys:
            del self._free_keys[submitter]

    def reserved_changed(self, job: Job, was: bool) -> None:
        """Job.reserved changed: an idle job leaves or rejoins what claims may take."""
        entry = self._idle_entry(job)
        if entry is not None and self._idle_jobs.get(entry[1]) is job:
            self._free(entry[0], entry[1], not job.reserved)
        if self.listener is not None:
            self.listener.job_changed(job, was, entry)

    def idle_in_order(self, submitter: str) -> Iterator[Job]:
        """The submitter's idle jobs that are not reserved, in priority order. Do not change
        the queue while iterating."""
        for key in self._free_keys.get(submitter, ()):
            yield self._idle_jobs[key]

    def idle_lists(self, submitter: str) -> tuple[list[tuple[int, int, int]], list[Job], bool]:
        """The submitter's idle jobs in priority order, as two lists (copies: the queue may
        change after), their order keys and the jobs, and whether any of them is reserved."""
        keys = list(self._idle_keys.get(submitter, ()))
        reserved = len(self._free_keys.get(submitter, ())) != len(keys)
        return keys, list(map(self._idle_jobs.__getitem__, keys)), reserved

    def _count(self, c: tuple[str, int, int] | None, sign: int) -> None:
        if c is None:
            return
        submitter, status, cpus = c
        self.status_counts[status] = self.status_counts.get(status, 0) + sign
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

    def spelling(self, lower: str) -> str | None:
        """How the queue spells the attribute whose lower-case name is `lower` (None: no job has it)."""
        return self._canon.get(lower)

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

    def apply_changes(self, job: Job, changes: dict[str, str | None]) -> list[str]:
        """apply(set_lines(job, changes)), returning those lines, without reading them back
        and with the queue's indexes brought up to date once for the job, not once per
        attribute: a job's start and its end change a dozen attributes each, and reading
        each line back and re-indexing after each was a fifth of a busy schedd's time.

        The same end state as the lines applied one by one (tests/unit/test_request_lists.py
        compares them on random queues): each attribute takes the path apply_op gives it;
        only the index updates of the non-first changes are folded into one. A change of
        the job's submitter (Owner, AccountingGroup), a job not yet filed under one, or a
        name the log would not read back as one name goes the line-by-line way."""
        lines = self.set_lines(job, changes)
        if self.jobs.get(job.key) is not job or not job.submitter or job.cluster < 0 or job.proc < 0:
            self.apply(lines)
            return lines
        named = []
        for k, v in changes.items():
            if v is None and k not in job.attrs:
                continue          # (set_lines leaves it out)
            name = self.canonical(k)
            low = name.lower()
            if low in ("owner", "accountinggroup") or not ads.is_attr_name(name):
                self.apply(lines)
                return lines
            # (A line's empty value reads back as UNDEFINED.)
            named.append((name, low, None if v is None else v or "UNDEFINED"))
        if not named:
            return lines
        indexed = any(low in _INDEXED for _, low, _ in named)
        if indexed:
            before, idle_before = self._contribution(job), self._idle_entry(job)
        rounding, cad, forgot = self.rounding, job.cad, False
        for name, low, value in named:
            if value is not None and low not in _INDEXED and low not in rounding and job.ac_id is None:
                # apply_op's common case (nothing to re-index), as it takes it.
                job._classad = job._public = None
                if cad is not None and name in _DERIVABLE and name not in job.own and name not in cad.attrs \
                        and self._derives(cad, name, job.cluster, job.proc, value):
                    continue
                job.writable()[name] = value
                continue
            if value is not None:
                self._set_value(job.writable(), name, low, value)
            else:
                job.delete(name)
            job._classad = job._public = None
            if job.ac_id is not None and low in job.ac_attrs_lower:
                job.forget_autocluster()
                forgot = True
        if indexed:
            self._reindex(job, "", before, idle_before)
        if forgot and self.listener is not None:
            self.listener.job_changed(job, job.reserved)
        return lines

    def apply_op(self, op: txlog.Op) -> None:
        key = op.key
        if key == self._last_key:
            # A job's entries come one after another: its key is read once.
            c, p = self._last_id
        else:
            if key == HEADER_KEY:
                if op.code == txlog.SET and op.name == "NextClusterNum":
                    self.next_cluster = _header_int(op)
                elif op.code == txlog.SET and op.name == "LastJobLeaseRenewal":
                    self.lease_renewal = _header_int(op)
                elif op.code == txlog.SET and op.name == "HistorySeq":
                    # Numbers the history record of the job destroyed next (history.py).
                    self.history_seq = _header_int(op)
                    self._numbering = self.history_seq
                return
            try:
                c, p = parse_job_id(key)
            except ValueError:
                return
            if p is None:
                return
            self._last_key, self._last_id = key, (c, p)
        if p < 0:
            self._apply_cluster_op(c, op)
            return
        if op.code == txlog.NEW:
            cad = self.clusters.get(c)
            old = self.jobs.get((c, p))
            if old is not None:
                # (HTCondor's log never makes a job twice; a second one replaces the first)
                self._drop(old)
                if cad is not None:
                    self.clusters[c] = cad
            job = Job(c, p, cluster_ad=cad)
            self.jobs[job.key] = job
            job.queue = self
            if cad is not None:
                cad.procs += 1
                if cad.attrs:
                    # The job is born with its cluster's attributes: index it as it is. What
                    # the indexes need is the same for every job of the cluster: work it out once.
                    if cad.born is None:
                        cad.born = (self._submitter(job), job.get("Owner", ""), job.status,
                                    job.int_attr("RequestCpus", 1), -job.int_attr("JobPrio"))
                    submitter, owner, status, cpus, prio = cad.born
                    self._set_submitter(job, submitter)
                    self._count_owner(job, owner)
                    self._count((submitter, status, cpus), +1)
                    if status == IDLE:
                        self._index((submitter, (prio, c, p)), job, add=True)
            return
        job = self.jobs.get((c, p))
        if job is None:
            return
        if op.code == txlog.DESTROY:
            if self._numbering is not None:
                self.retired.append(Record(self._numbering, record_text(job.text(), self._numbering)))
                self._numbering = None
            self._drop(job)
            return
        if op.code not in (txlog.SET, txlog.DELETE_ATTR):
            return
        name = self.canonical(op.name)
        low = name.lower()
        if (op.code == txlog.SET and job.submitter and low not in _INDEXED and low not in self.rounding
                and job.ac_id is None):
            # The common case of a replay and a submit (ProcId, GlobalJobId): nothing to re-index.
            job._classad = job._public = None
            cad = job.cad
            if cad is not None and name in _DERIVABLE and name not in job.own and name not in cad.attrs \
                    and self._derives(cad, name, c, p, op.value):
                return      # the cluster makes it from the job's number: nothing to keep per job
            job.writable()[name] = op.value
            return

        def change() -> None:
            if op.code == txlog.SET:
                self._set_value(job.writable(), name, low, op.value)
            else:
                job.delete(name)
        self._changed(job, low, change)

    @staticmethod
    def _derives(cad: ClusterAd, name: str, c: int, p: int, value: str) -> bool:
        """Whether `value`, the job's `name`, is what its cluster makes from its number;
        the first job of a cluster teaches it how (ClusterAd.derived)."""
        made = cad.derived.get(name)
        if made is None:
            number = str(p)
            if name == "ProcId":
                made = ("", "") if value == number else None
            else:
                # GlobalJobId: "<schedd>#<cluster>.<proc>#<QDate>", as a string literal.
                mark = f"#{c}.{number}#"
                i = value.find(mark)
                made = (value[:i] + f"#{c}.", "#" + value[i + len(mark):]) \
                    if i >= 0 and value.rfind(mark) == i else None
            if made is None:
                return False
            cad.derived[name] = made
        return made[0] + str(p) + made[1] == value

    def _drop(self, job: Job) -> None:
        """Take a job out of the queue and every index."""
        del self.jobs[job.key]
        self._count(self._contribution(job), -1)
        self._index(self._idle_entry(job), job, add=False)
        job.queue = None
        self._count_owner(job, "")
        mine = self.by_submitter.get(job.submitter)
        if mine is not None:
            mine.pop(job.key, None)
            if not mine:
                del self.by_submitter[job.submitter]
        cad = job.cad
        if cad is not None:
            cad.procs -= 1
            if cad.procs <= 0 and self.clusters.get(job.cluster) is cad:
                del self.clusters[job.cluster]   # the last job of the cluster is gone, and its cluster ad with it

    def _set_value(self, attrs: dict, name: str, low: str, value: str) -> None:
        rule = self.rounding.get(low)
        if rule is not None:
            # SCHEDD_ROUND_ATTR_<attr>: round for matchmaking, keep the original.
            rounded = round_text(rule, value)
            if rounded is not None:
                attrs[self.canonical(name + "_RAW")] = value
                value = rounded
        attrs[name] = value

    def _changed(self, job: Job, low: str, change, before_change=None) -> None:
        """Make one change to a job's attributes and keep every index in step with it
        (`before_change`: the job's index entries before, when the change is already made)."""
        indexed = low in _INDEXED or not job.submitter or before_change is not None
        if before_change is not None:
            before, idle_before = before_change
        elif indexed:
            before = self._contribution(job)
            idle_before = self._idle_entry(job)
        change()
        job._classad = None
        job._public = None
        forgot = job.ac_id is not None and low in job.ac_attrs_lower
        if forgot:
            job.forget_autocluster()
        if indexed:
            self._reindex(job, low, before, idle_before)
        if forgot and self.listener is not None:
            self.listener.job_changed(job, job.reserved)

    def _reindex(self, job: Job, low: str, before, idle_before) -> None:
        if low in ("owner", "accountinggroup") or not job.submitter:
            self._set_submitter(job, self._submitter(job))
        if low == "owner":
            self._count_owner(job, job.get("Owner", ""))
        after = self._contribution(job)
        if after != before:
            self._count(before, -1)
            self._count(after, +1)
        idle_after = self._idle_entry(job)
        if idle_after != idle_before:
            self._index(idle_before, job, add=False)
            self._index(idle_after, job, add=True)

    def _apply_cluster_op(self, c: int, op: txlog.Op) -> None:
        """An entry for a cluster ad ("<cluster>.-1")."""
        if op.code == txlog.NEW:
            if c not in self.clusters:
                self.clusters[c] = ClusterAd(c)
            return
        cad = self.clusters.get(c)
        if cad is None:
            return
        if op.code == txlog.DESTROY:
            # HTCondor destroys a cluster ad after its last job; jobs still holding it keep it.
            del self.clusters[c]
            return
        if op.code not in (txlog.SET, txlog.DELETE_ATTR):
            return
        name = self.canonical(op.name)
        low = name.lower()
        cad.changed()
        # Written while the cluster is made, before its jobs; a later change (rare) reaches
        # every job of the cluster, each kept in the indexes like a change of its own.
        members = [j for j in self.jobs.values() if j.cad is cad] if cad.procs else []
        before = [(self._contribution(j), self._idle_entry(j)) for j in members]
        if op.code == txlog.SET:
            self._set_value(cad.attrs, name, low, op.value)
        else:
            cad.attrs.pop(name, None)
        for job, (contribution, idle) in zip(members, before):
            self._changed(job, low, lambda: None, (contribution, idle))

    def _submitter(self, job: Job) -> str:
        key = (job.get("AccountingGroup"), job.get("Owner"))
        s = self._submitters.get(key)
        if s is None:
            s = self._submitters[key] = submitter_of(job.attrs, self.uid_domain)
        return s

    # ---- building changes ---------------------------------------------------
    def submit_transaction(self, build: ClusterBuild, cluster: int) -> list[str]:
        """Add a built cluster to the queue; returns the transaction's text for the log, in
        pieces (TxLog.append_transaction).

        Line by line, each applied as it is written (the same path as replay), so a
        `queue 100000` never holds its lines, only their text. Every value is checked
        first: nothing changes if one cannot be logged."""
        for attrs in (build.common, *build.distinct()):
            for k, v in attrs.items():
                if "\n" in v:
                    raise ValueError(f"attribute {k}: value spans lines")
        pieces: list[str] = []
        lines = [f"{txlog.BEGIN} "]
        render, apply_op = txlog.render, self.apply_op
        for op in self._submit_ops(build.procs(), cluster, build.common):
            # The op is applied as the line written for it reads back (render and parse_op
            # are each other's inverse), without parsing it again.
            lines.append(render(op))
            apply_op(op)
            if len(lines) >= 4096:
                pieces.append("\n".join(lines) + "\n")
                lines = []
        lines.append(f"{txlog.END} ")
        pieces.append("\n".join(lines) + "\n")
        return pieces

    def retire_jobs(self, finished: list[tuple[Job, dict[str, str | None]]]) -> list[str]:
        """apply(retire_lines(finished)), returning those lines: each job's changes as
        apply_changes makes them, then its history number and its end as apply_op would."""
        lines: list[str] = []
        for job, changes in finished:
            lines += self.apply_changes(job, changes)
            seq = str(self.history_seq + 1)
            self.apply_op(txlog.Op(txlog.SET, HEADER_KEY, "HistorySeq", seq))
            self.apply_op(txlog.Op(txlog.DESTROY, job.id))
            lines += [txlog.op_set(HEADER_KEY, "HistorySeq", seq), txlog.op_destroy(job.id)]
        return lines

    # ---- queries --------------------------------------------------------------
    def jobs_by_status(self) -> dict[int, int]:
        """JobStatus -> how many jobs have it (statuses no job has left out)."""
        counted = {k: v for k, v in self.status_counts.items() if v}
        if sum(counted.values()) == len(self.jobs):
            return counted
        # Some job has no submitter yet (no Owner): count them all the long way.
        out: dict[int, int] = {}
        for j in self.jobs.values():
            out[j.status] = out.get(j.status, 0) + 1
        return out

    def by_status(self, status: int) -> Iterator[Job]:
        return (j for j in self.jobs.values() if j.status == status)

    def counts_by_submitter(self) -> dict[str, dict[str, int]]:
        return {k: {n: v for n, v in c.items() if n != "jobs"} for k, c in self.counts.items()}
