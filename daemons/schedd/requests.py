"""Each submitter's resource-request list, kept in step with the queue. Pure.

A request is a run of consecutive idle jobs of one autocluster in the submitter's
priority order (scheduling.resource_requests). Rebuilding every list at every
negotiation costs a walk over every idle job; here the lists are kept as runs and
patched with what changed since the last negotiation: the queue tells us each job
that entered or left a submitter's idle order (with its place in it), each job whose
autocluster id was dropped, and each job reserved for a match or given back. The
first change of a job since the last negotiation records where it stood then; at the
next negotiation each changed job is taken out of its old place and put where it
stands now. Too many changes at once (a large submit, a replay), or a grown list of
significant attributes (every id changes), and the lists are rebuilt from the queue's
idle index instead. Either way the requests equal a rebuild's (tests/unit/test_request_lists.py).
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Any, Callable

from daemons.schedd.jobqueue import Job, JobQueue
from daemons.schedd.scheduling import Request

OrderKey = tuple[int, int, int]
Place = tuple[str, OrderKey]          # (submitter, order key) in the idle order
# Past this many changed jobs (and a quarter of the idle jobs), rebuilding is cheaper.
MIN_REBUILD_CHANGES = 1000
_UNKNOWN: Any = object()   # job_changed: the caller did not work out the job's idle entry


class _Run:
    __slots__ = ("ac", "keys", "jobs")

    def __init__(self, ac: int, keys: list[OrderKey], jobs: list[Job]) -> None:
        self.ac, self.keys, self.jobs = ac, keys, jobs


class _Runs:
    """One submitter's runs, in order; `starts` holds each run's first key for bisection."""
    __slots__ = ("runs", "starts")

    def __init__(self) -> None:
        self.runs: list[_Run] = []
        self.starts: list[OrderKey] = []

    def remove(self, key: OrderKey) -> bool:
        i = bisect_right(self.starts, key) - 1
        if i < 0:
            return False
        run = self.runs[i]
        j = bisect_left(run.keys, key)
        if j >= len(run.keys) or run.keys[j] != key:
            return False
        del run.keys[j]
        del run.jobs[j]
        if run.keys:
            self.starts[i] = run.keys[0]
            return True
        del self.runs[i]
        del self.starts[i]
        if 0 < i < len(self.runs) and self.runs[i - 1].ac == self.runs[i].ac:
            # The runs on either side of the one that emptied are of one autocluster: one run now.
            left, right = self.runs[i - 1], self.runs[i]
            left.keys.extend(right.keys)
            left.jobs.extend(right.jobs)
            del self.runs[i]
            del self.starts[i]
        return True

    def insert(self, key: OrderKey, job: Job, ac: int) -> None:
        runs, starts = self.runs, self.starts
        i = bisect_right(starts, key) - 1
        if i < 0:
            if runs and runs[0].ac == ac:
                runs[0].keys.insert(0, key)
                runs[0].jobs.insert(0, job)
                starts[0] = key
            else:
                runs.insert(0, _Run(ac, [key], [job]))
                starts.insert(0, key)
            return
        run = runs[i]
        j = bisect_left(run.keys, key)
        if run.ac == ac:
            run.keys.insert(j, key)
            run.jobs.insert(j, job)
            return
        if j == len(run.keys):
            # After this run, before the next one.
            if i + 1 < len(runs) and runs[i + 1].ac == ac:
                runs[i + 1].keys.insert(0, key)
                runs[i + 1].jobs.insert(0, job)
                starts[i + 1] = key
            else:
                runs.insert(i + 1, _Run(ac, [key], [job]))
                starts.insert(i + 1, key)
            return
        # Inside a run of another autocluster: it splits around the job.
        right = _Run(run.ac, run.keys[j:], run.jobs[j:])
        del run.keys[j:]
        del run.jobs[j:]
        runs[i + 1:i + 1] = [_Run(ac, [key], [job]), right]
        starts[i + 1:i + 1] = [key, right.keys[0]]

    def requests(self) -> list[Request]:
        return [Request(f"{r.ac}:{n}", r.jobs[0], len(r.jobs), r.ac, list(r.jobs)) for n, r in enumerate(self.runs)]


class RequestLists:
    """The queue's listener (JobQueue.listener): what changed, then the lists on demand."""

    def __init__(self, queue: JobQueue, autocluster_of: Callable[[Job], int],
                 generation: Callable[[], int] = lambda: 0,
                 assign_all: Callable[[list[Job]], list[int]] | None = None) -> None:
        self.queue = queue
        self.autocluster_of = autocluster_of
        # autocluster_of of many jobs at once, for a rebuild, when the owner has a faster way
        # than one call per job (Autoclusterer.assign_all)
        self.assign_all = assign_all
        self.generation = generation
        self._lists: dict[str, _Runs] = {}
        self._built_generation: int | None = None
        # id(job) -> (job, where it stood in the lists at the last negotiation, or None); by
        # identity, not by key: a job replaced under its key is another job
        self._changed: dict[int, tuple[Job, Place | None]] = {}
        self._stale = True          # rebuild every list from the queue when next asked
        self.rebuilds = 0           # lists built from the queue's idle index
        self.patched = 0            # jobs moved in place
        queue.listener = self

    # ---- what the queue tells us -------------------------------------------------------
    def _note(self, job: Job, place: Place | None) -> None:
        if self._stale or id(job) in self._changed:
            return
        self._changed[id(job)] = (job, place)
        if len(self._changed) > MIN_REBUILD_CHANGES and len(self._changed) * 4 > len(self.queue):
            self._stale = True
            self._changed.clear()

    def idle_added(self, submitter: str, key: OrderKey, job: Job) -> None:
        self._note(job, None)      # it was not in the idle order, so in no list

    def idle_removed(self, submitter: str, key: OrderKey, job: Job) -> None:
        self._note(job, None if job.reserved else (submitter, key))

    def job_changed(self, job: Job, was_reserved: bool, entry: Any = _UNKNOWN) -> None:
        """Its autocluster id was dropped, or it was reserved or given back; its place in the
        idle order is the one it has now (a change of place is reported first): `entry`, the
        queue's idle_entry of it if the caller has it (every match reserves a job)."""
        if entry is _UNKNOWN:
            entry = self.queue.idle_entry(job)
        self._note(job, None if entry is None or was_reserved else entry)

    # ---- the lists ------------------------------------------------------------------------
    def requests(self, submitter: str) -> list[Request]:
        """The submitter's resource requests now (equal to scheduling.resource_requests over
        scheduling.idle_jobs)."""
        self._sync()
        runs = self._lists.get(submitter)
        if runs is None:
            runs = self._lists[submitter] = self._build(submitter)
        return runs.requests()

    def _build(self, submitter: str) -> _Runs:
        # Runs built from whole lists, without a call per job: a rebuild walks every idle job
        # (all 100,000 of a queue when the significant attributes grow).
        self.rebuilds += 1
        runs = _Runs()
        keys, jobs, reserved = self.queue.idle_lists(submitter)
        if reserved:
            kept = [i for i, j in enumerate(jobs) if not j._reserved]
            keys, jobs = [keys[i] for i in kept], [jobs[i] for i in kept]
        if not jobs:
            return runs
        acs = self.assign_all(jobs) if self.assign_all is not None else [self.autocluster_of(j) for j in jobs]
        ends = [i for i, (a, b) in enumerate(zip(acs, acs[1:]), 1) if a != b]
        ends.append(len(jobs))
        start = 0
        for end in ends:
            runs.runs.append(_Run(acs[start], keys[start:end], jobs[start:end]))
            runs.starts.append(keys[start])
            start = end
        return runs

    def _sync(self) -> None:
        generation = self.generation()
        if self._stale or generation != self._built_generation:
            self._lists.clear()
            self._changed.clear()
            self._stale = False
            self._built_generation = generation
            return
        changed, self._changed = self._changed, {}
        for job, place in changed.values():
            if place is not None:
                runs = self._lists.get(place[0])
                if runs is not None:
                    runs.remove(place[1])
            if self.queue.jobs.get(job.key) is not job or job.reserved:
                continue
            entry = self.queue.idle_entry(job)
            if entry is None:
                continue
            runs = self._lists.get(entry[0])
            if runs is not None:   # (a submitter not yet built is built whole when asked for)
                runs.insert(entry[1], job, self.autocluster_of(job))
                self.patched += 1
