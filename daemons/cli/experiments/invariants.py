"""What must hold after a fault campaign, checked over what the pool recorded. Pure.

- every submitted job completed exactly once: none lost (neither completed nor still
  queued), none completed twice (two history records), none unfinished at the end;
  a job the experiment removed ends Removed instead, once, and never completes after
  its removal was confirmed;
- no two jobs ran on one slot at once (from the history: each completed run's
  interval on the startd's clock; pairs on a startd whose clock a fault skewed around
  that time cannot be compared and are counted apart);
- the schedd's, the startds' and the collector's views of every slot agree (after
  the last fault healed and the pool settled): same slots, same states, no claim one
  side holds and the other does not, no job running where the other side says not;
- the accountant's usage is right: HTCondor's accountant charges the slots the
  collector shows claimed, so its usage must equal the claimed slot time observed
  over the run however often the negotiator was killed, paused or restarted, within
  a tolerance: it samples the claimed slots once per cycle and charges a gap (the
  negotiator down or cut off) at the usage it saw last, as HTCondor's does. The
  check catches usage counted twice or lost across restarts, not that sampling. Nor
  may it be less than the jobs' own slot time (usage lost). It is more than the
  jobs' slot time by design: a claim is charged also between two jobs, for runs a
  fault cut short, and for the ads of a dead startd until they expire;
- no daemon logged a traceback.

Plus each fault's recovery time: from its heal until the pool's running count (the
busy slots the startds report) is back to its level just before the fault (to
`fraction` of it, or of all the work left when less than that remains).
"""
from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Collection, Iterable, Mapping, Sequence

REMOVED, COMPLETED = 3, 4
# CompletionDate is a whole second: two runs one after the other on a slot may seem to
# overlap by up to that much.
STAMP_SLACK_S = 1.0
TRACEBACK = "Traceback (most recent call last)"


@dataclass(frozen=True)
class JobRecord:
    """One history record."""
    job: str            # "ClusterId.ProcId"
    status: int         # JobStatus
    slot: str = ""      # LastRemoteHost: where its last run was
    start: float = 0.0  # that run's start, on the startd's clock
    end: float = 0.0    # CompletionDate
    slot_time: float = 0.0   # CumulativeSlotTime: all its runs


@dataclass(frozen=True)
class SlotView:
    state: str          # Unclaimed, Claimed, ...
    job: str = ""       # the job it runs, "" if none
    claimed: bool = False


@dataclass(frozen=True)
class ClockWindow:
    """A clock fault on one startd: in force over [start, stop) of true pool time,
    skewing its clock by at most `skew_s`."""
    startd: str
    start: float
    stop: float
    skew_s: float


@dataclass
class Verdict:
    submitted: int = 0
    completed: int = 0
    removed: int = 0
    lost: list[str] = field(default_factory=list)
    wrong_end: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    unfinished: list[str] = field(default_factory=list)
    overlapping: list[tuple[str, str, str]] = field(default_factory=list)   # (slot, job, job)
    overlap_unchecked: int = 0
    view_mismatches: list[str] = field(default_factory=list)
    tracebacks: list[str] = field(default_factory=list)
    usage_accountant_s: float | None = None
    usage_claimed_s: float = 0.0       # slot time the collector showed claimed
    usage_jobs_s: float = 0.0          # the jobs' CumulativeSlotTime
    usage_tolerance: float = 0.1

    @property
    def usage_error(self) -> float | None:
        """The accountant's usage against the claimed slot time, relative."""
        if self.usage_accountant_s is None or self.usage_claimed_s <= 0:
            return None
        return (self.usage_accountant_s - self.usage_claimed_s) / self.usage_claimed_s

    @property
    def usage_over_jobs(self) -> float | None:
        if self.usage_accountant_s is None or self.usage_jobs_s <= 0:
            return None
        return (self.usage_accountant_s - self.usage_jobs_s) / self.usage_jobs_s

    @property
    def usage_ok(self) -> bool:
        err, over = self.usage_error, self.usage_over_jobs
        return (err is None or abs(err) <= self.usage_tolerance) and \
            (over is None or over >= -self.usage_tolerance)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.unfinished or self.overlapping or self.view_mismatches
                    or self.tracebacks or self.wrong_end) and self.usage_ok

    def lines(self) -> list[str]:
        def mark(good: bool) -> str:
            return "ok  " if good else "FAIL"
        err, over = self.usage_error, self.usage_over_jobs
        usage = ("not measured" if err is None or over is None else
                 f"accountant {self.usage_accountant_s / 3600:.2f} h, claimed slots {self.usage_claimed_s / 3600:.2f} h "
                 f"({err:+.1%}), jobs {self.usage_jobs_s / 3600:.2f} h ({over:+.1%}); tolerance "
                 f"{self.usage_tolerance:.0%}")
        return [
            f"{mark(not self.lost)} every job completed (or removed, when removed): {self.completed} completed, "
            f"{self.removed} removed, of {self.submitted}; {len(self.lost)} lost{_some(self.lost)}",
            f"{mark(not self.wrong_end)} no removed job ran on, none removed unasked: {len(self.wrong_end)}"
            f"{_some(self.wrong_end)}",
            f"{mark(not self.unfinished)} none unfinished: {len(self.unfinished)}{_some(self.unfinished)}",
            f"{mark(not self.duplicated)} none completed twice: {len(self.duplicated)}{_some(self.duplicated)}",
            f"{mark(not self.overlapping)} no two jobs on one slot at once: {len(self.overlapping)} overlaps"
            f"{_some([f'{s}: {a} and {b}' for s, a, b in self.overlapping])}"
            + (f" ({self.overlap_unchecked} pairs under a clock fault not compared)" if self.overlap_unchecked else ""),
            f"{mark(not self.view_mismatches)} schedd, startd and collector agree on every slot: "
            f"{len(self.view_mismatches)} mismatches{_some(self.view_mismatches)}",
            f"{mark(self.usage_ok)} accountant usage = claimed slot time, and not below the jobs': {usage}",
            f"{mark(not self.tracebacks)} no traceback in any daemon log: {len(self.tracebacks)}"
            f"{_some(self.tracebacks)}",
        ]


def _some(items: Sequence[str], n: int = 5) -> str:
    if not items:
        return ""
    return " (" + ", ".join(str(i) for i in items[:n]) + (", ..." if len(items) > n else "") + ")"


# ---- jobs --------------------------------------------------------------------------------
def check_jobs(v: Verdict, submitted: Collection[str], history: Sequence[JobRecord],
               queue: Mapping[str, int], removed: Collection[str] = (), maybe_removed: Collection[str] = ()) -> None:
    """Every job ends once: Completed, or Removed when its removal was confirmed (`removed`)
    or may have happened (`maybe_removed`: the answer to the rm was lost). A confirmed
    removal must never be followed by a completion (the job ran after its rm)."""
    completed = Counter(r.job for r in history if r.status == COMPLETED)
    ended = Counter(r.job for r in history if r.status in (COMPLETED, REMOVED))
    gone = Counter(r.job for r in history if r.status == REMOVED)
    removed, maybe = set(removed), set(maybe_removed)
    v.submitted = len(submitted)
    v.completed = sum(1 for j in submitted if completed[j] >= 1)
    v.removed = sum(1 for j in submitted if gone[j] >= 1 and not completed[j])
    v.duplicated = sorted((j for j, n in ended.items() if n > 1), key=_job_key)
    v.unfinished = sorted((j for j in submitted if not ended[j] and j in queue), key=_job_key)
    v.lost = sorted((j for j in submitted if not ended[j] and j not in queue), key=_job_key)
    v.wrong_end = sorted([f"{j} completed after its rm was confirmed" for j in removed if completed[j]]
                         + [f"{j} removed, but no rm was asked" for j in gone
                            if j in submitted and j not in removed | maybe], key=_job_key)


def _job_key(job: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in job.split("."))
    except ValueError:
        return (1 << 62,)


def check_overlaps(v: Verdict, history: Sequence[JobRecord], startd_of_slot: Mapping[str, str] | None = None,
                   clock_windows: Sequence[ClockWindow] = ()) -> None:
    """Two completed runs on one slot whose intervals intersect (beyond the stamps' slack)."""
    by_slot: dict[str, list[JobRecord]] = defaultdict(list)
    for r in history:
        if r.status == COMPLETED and r.slot and r.end > 0:
            by_slot[r.slot].append(r)
    windows: dict[str, list[ClockWindow]] = defaultdict(list)
    for w in clock_windows:
        windows[w.startd].append(w)
    for slot, runs in sorted(by_slot.items()):
        runs.sort(key=lambda r: (r.start, r.end))
        startd = (startd_of_slot or {}).get(slot, "")
        for i, a in enumerate(runs):
            for b in runs[i + 1:]:
                if b.start >= a.end - STAMP_SLACK_S:
                    break
                if min(a.end, b.end) - max(a.start, b.start) <= STAMP_SLACK_S:
                    continue
                lo, hi = min(a.start, b.start), max(a.end, b.end)
                if any(w.start - w.skew_s < hi and lo < w.stop + w.skew_s for w in windows.get(startd, ())):
                    v.overlap_unchecked += 1
                    continue
                v.overlapping.append((slot, a.job, b.job))


# ---- views ----------------------------------------------------------------------------------
def check_views(v: Verdict, startd: Mapping[str, SlotView], collector: Mapping[str, SlotView],
                schedd_claims: Mapping[str, str], schedd_running: Mapping[str, str]) -> None:
    """`startd`/`collector`: slot -> view; `schedd_claims`: slot -> job on it ("" idle);
    `schedd_running`: job -> slot, for every job the queue says is running."""
    out = []
    for slot in sorted(set(startd) | set(collector)):
        s, c = startd.get(slot), collector.get(slot)
        if s is None:
            out.append(f"{slot}: in the collector ({c.state}) but no startd has it")
        elif c is None:
            out.append(f"{slot}: the startd has it ({s.state}) but the collector does not")
        elif (s.state, s.job) != (c.state, c.job):
            out.append(f"{slot}: startd says {s.state} {s.job or '-'}, collector says {c.state} {c.job or '-'}")
    for slot, job in sorted(schedd_claims.items()):
        s = startd.get(slot)
        if s is None or not s.claimed:
            out.append(f"{slot}: the schedd holds a claim the startd does not")
    for slot, s in sorted(startd.items()):
        if s.claimed and slot not in schedd_claims:
            out.append(f"{slot}: the startd holds a claim the schedd does not (a leaked claim)")
        if s.job and schedd_running.get(s.job) != slot:
            out.append(f"{slot}: the startd runs job {s.job}, the schedd says it runs "
                       f"{'on ' + schedd_running[s.job] if s.job in schedd_running else 'nowhere'}")
    for job, slot in sorted(schedd_running.items()):
        s = startd.get(slot)
        if s is None or s.job != job:
            out.append(f"job {job}: the schedd says it runs on {slot}, the startd "
                       f"{'has no such slot' if s is None else 'runs ' + (s.job or 'nothing') + ' there'}")
    v.view_mismatches = out


# ---- usage and logs -------------------------------------------------------------------------
def check_usage(v: Verdict, accountant_s: float | None, claimed_s: float, history: Sequence[JobRecord],
                tolerance: float) -> None:
    v.usage_accountant_s = accountant_s
    v.usage_claimed_s = claimed_s
    v.usage_jobs_s = sum(r.slot_time for r in history if r.status == COMPLETED)
    v.usage_tolerance = tolerance


def slot_seconds(points: Sequence[tuple[float, int | None]]) -> float:
    """The time integral of a sampled count (t, n): each value holds until the next sample;
    a missing value (None) holds the last one known."""
    total = 0.0
    last: int | None = None
    for (t, n), (t_next, _) in zip(points, points[1:]):
        if n is not None:
            last = n
        if last is not None:
            total += last * (t_next - t)
    return total


def check_logs(v: Verdict, logs: Mapping[str, str]) -> None:
    """Each traceback as 'file: the exception line'."""
    out = []
    for name, text in sorted(logs.items()):
        lines = text.splitlines()
        for i, line in enumerate(lines):
            if TRACEBACK in line:
                exc = next((x.strip() for x in lines[i + 1:i + 200] if x and not x.startswith((" ", "\t"))
                            and TRACEBACK not in x), "?")
                out.append(f"{name}: {exc[:160]}")
    v.tracebacks = out


# ---- recovery ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Sample:
    t: float                     # pool seconds from the campaign's start
    running: int | None          # None: the schedd did not answer
    idle: int | None


def recovery_time(samples: Sequence[Sample], start: float, stop: float, fraction: float = 0.9) -> float | None:
    """Pool seconds from `stop` until running is back to `fraction` of its level at
    `start` (or of all the work left, when less remains); None if it never is."""
    before = [s for s in samples if s.t <= start and s.running is not None]
    if not before:
        return None
    level = before[-1].running or 0
    for s in samples:
        if s.t < stop or s.running is None:
            continue
        target = min(level, s.running + (s.idle or 0))
        if s.running >= fraction * target:
            return max(0.0, s.t - stop)
    return None


def summarize_recovery(by_kind: Mapping[str, Iterable[float | None]]) -> dict[str, dict[str, float | int | None]]:
    out = {}
    for kind, values in sorted(by_kind.items()):
        vals = list(values)
        done = [x for x in vals if x is not None]
        out[kind] = {"n": len(vals), "recovered": len(done),
                     "median": round(statistics.median(done), 1) if done else None,
                     "max": round(max(done), 1) if done else None}
    return out
