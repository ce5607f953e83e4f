"""Autoclustering: jobs that are identical for matchmaking share an id. Pure.

HTCondor's scheme (the third step of a negotiation cycle, as the schedd prepares its requests):
- the significant list is the negotiator's significant attributes, then Requirements,
  Rank and ConcurrencyLimits, then ADD_SIGNIFICANT_ATTRIBUTES, minus
  REMOVE_SIGNIFICANT_ATTRIBUTES; SIGNIFICANT_ATTRIBUTES, if set, replaces all of it;
- the job attributes that the expressions on that list refer to are appended, one
  level deep, in case-insensitive alphabetical order (autocluster.cpp, getClusterid);
- the signature is the sequence "Name = <expression text>" in that order, a missing
  attribute being a value of its own; equal signatures get the same integer id;
- the id is cached with the job (AutoClusterId, AutoClusterAttrs); setting any
  attribute named in AutoClusterAttrs drops the cache, and a grown negotiator list
  drops every job's cache. The schedd keeps the union of the lists it has received.

Here a signature is a tuple of the attribute list and the values' texts, which is the
same information as HTCondor's string and cheaper to build and hash.

Beyond HTCondor (seed 000, "Future Work"): with `enabled = False` every job is its own
autocluster, for comparison.
"""
from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import classad2

FIXED_SIGNIFICANT = ("Requirements", "Rank", "ConcurrencyLimits")
DEFAULT_ROUNDING = {"ImageSize": "25%", "DiskUsage": "25%", "ResidentSetSize": "25%", "ExecutableSize": "25%"}
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NUMBER = re.compile(r"^-?\d+(\.\d+)?([eE][-+]?\d+)?$")


# ---- SCHEDD_ROUND_ATTR_<attr> ---------------------------------------------------------
@dataclass(frozen=True)
class Rounding:
    """Round a numeric job attribute up, keeping the original in <attr>_RAW.

    "P%": to P percent of the value's order of magnitude, the magnitude stepping up at
    5·10^k (so 101 -> 125 and 501 -> 750 at 25%); "N": to a multiple of 10^N
    ("0" turns rounding off).
    """
    attr: str
    percent: float | None = None
    digits: int | None = None

    def apply(self, value: float) -> float:
        if value <= 0:
            return value
        if self.digits is not None:
            # HTCondor truncates a real to an integer before rounding to 10^N.
            step = 10.0 ** self.digits
            return math.ceil(int(value) / step - 1e-9) * step
        assert self.percent is not None
        # qmgmt.cpp: magnitude = (int)(log(|v|/5)/log(10) + 1); roundto = 10^magnitude * pct/100
        magnitude = int(math.log10(value / 5) + 1)
        step = 10.0 ** magnitude * self.percent / 100.0
        return math.ceil(value / step - 1e-9) * step


def parse_rounding(attr: str, text: str) -> Rounding | None:
    """`text` is "P%" (0 < P <= 100) or a digit count 0..9 ("0": no rounding); ValueError otherwise."""
    t = text.strip()
    if t.endswith("%"):
        try:
            p = float(t[:-1])
        except ValueError:
            raise ValueError(f"{t!r} is not a percentage") from None
        if not 0 < p <= 100:
            raise ValueError(f"{t!r}: the percentage must be above 0 and at most 100")
        return Rounding(attr, percent=p)
    if t.isdigit():
        n = int(t)
        if n > 9:
            raise ValueError(f"{t!r}: at most 9 digits")
        return None if n == 0 else Rounding(attr, digits=n)
    raise ValueError(f"{t!r} is neither a percentage (25%) nor a number of digits (2)")


def round_text(rule: Rounding, text: str) -> str | None:
    """The rounded expression text of a numeric literal, or None if `text` is not one."""
    t = text.strip()
    if not _NUMBER.match(t):
        return None
    v = float(t)
    r = rule.apply(v)
    return str(int(r)) if "." not in t and "e" not in t.lower() and r == int(r) else repr(float(r))


# ---- configuration ---------------------------------------------------------------------
@dataclass(frozen=True)
class AutoclusterConfig:
    enabled: bool = True
    significant: tuple[str, ...] | None = None   # SIGNIFICANT_ATTRIBUTES: replaces the whole list
    add: tuple[str, ...] = ()                     # ADD_SIGNIFICANT_ATTRIBUTES
    remove: tuple[str, ...] = ()                  # REMOVE_SIGNIFICANT_ATTRIBUTES
    rounding: tuple[Rounding, ...] = tuple(Rounding(a, percent=25.0) for a in DEFAULT_ROUNDING)


def check_names(knob: str, names: Iterable[str]) -> tuple[str, ...]:
    bad = [n for n in names if not IDENTIFIER.match(n)]
    if bad:
        raise ValueError(f"{knob} names {', '.join(repr(b) for b in bad)}, which are not ClassAd attribute names")
    return tuple(names)


# ---- references -----------------------------------------------------------------------
_EMPTY = classad2.ClassAd()


def job_references(text: str) -> tuple[str, ...]:
    """Names an expression refers to that live in the job ad (unqualified or MY.)."""
    try:
        refs = _EMPTY.externalRefs(classad2.ExprTree(text + "\n"))
    except Exception:
        return ()
    out = []
    for r in refs:
        if not r:
            continue  # classad2 reports [''] for a literal
        head, _, rest = r.partition(".")
        if rest:
            if head.lower() == "target":
                continue
            if head.lower() == "my":
                r = rest
            else:
                continue  # a nested reference (ad.attr): not a job attribute
        if "." not in r:
            out.append(r)
    return tuple(out)


# ---- the clusterer ----------------------------------------------------------------------
class JobLike:
    """What the clusterer needs of a job (daemons.schedd.jobqueue.Job satisfies it)."""
    attrs: dict[str, str]
    cluster: int
    proc: int
    ac_id: int | None
    ac_attrs: tuple[str, ...]
    ac_attrs_lower: frozenset[str]
    ac_generation: int

    def values(self, names: tuple[str, ...]) -> tuple[str | None, ...]:
        """Each named attribute's text, None where the job has none."""
        raise NotImplementedError


@dataclass
class Autoclusterer:
    cfg: AutoclusterConfig = field(default_factory=AutoclusterConfig)
    canon: Callable[[str], str] = lambda name: name
    negotiator_attrs: list[str] = field(default_factory=list)
    generation: int = 0
    ids_assigned: int = 0
    assign_seconds: float = 0.0
    _ids: dict[tuple, int] = field(default_factory=dict)
    _next_id: int = 1
    _refs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    _lists: dict[tuple, tuple[tuple[str, ...], frozenset[str]]] = field(default_factory=dict)
    _expansions: dict[tuple, tuple[str, ...]] = field(default_factory=dict)
    _base: tuple[str, ...] | None = None

    def update_negotiator_attrs(self, attrs: Iterable[str]) -> bool:
        """Merge a negotiator's significant attributes; True if the list grew (all caches dropped)."""
        known = {a.lower() for a in self.negotiator_attrs}
        new = [self.canon(a) for a in attrs if a.lower() not in known]
        if not new:
            return False
        self.negotiator_attrs = sorted(self.negotiator_attrs + list(dict.fromkeys(new)), key=str.lower)
        self.generation += 1
        self._base = None
        self._ids.clear()  # a signature over a different list cannot collide, but need not be kept
        self._expansions.clear()
        return True

    def base_list(self) -> tuple[str, ...]:
        if self._base is None:
            if self.cfg.significant is not None:
                names = list(self.cfg.significant)
            else:
                names = list(self.negotiator_attrs) + list(FIXED_SIGNIFICANT) + list(self.cfg.add)
            removed = {r.lower() for r in self.cfg.remove}
            seen: set[str] = set()
            base = []
            for n in names:
                c = self.canon(n)
                if c.lower() in removed or c.lower() in seen:
                    continue
                seen.add(c.lower())
                base.append(c)
            self._base = tuple(base)
        return self._base

    def _references(self, text: str) -> tuple[str, ...]:
        refs = self._refs.get(text)
        if refs is None:
            refs = tuple(self.canon(r) for r in job_references(text))
            self._refs[text] = refs
        return refs

    def _expansion(self, base: tuple[str, ...], base_values: tuple[str | None, ...]) -> tuple[str, ...]:
        """The job attributes the significant expressions refer to, one level deep (as HTCondor)."""
        cached = self._expansions.get(base_values)
        if cached is not None:
            return cached
        base_lower = {a.lower() for a in base}
        extra: dict[str, str] = {}
        for v in base_values:
            if v is None:
                continue
            for r in self._references(v):
                low = r.lower()
                if low not in base_lower and low not in extra:
                    extra[low] = r
        cached = tuple(sorted(extra.values(), key=str.lower))
        self._expansions[base_values] = cached
        return cached

    def _full_list(self, base: tuple[str, ...], extra: tuple[str, ...]) -> tuple[tuple[str, ...], frozenset[str]]:
        key = (base, extra)
        cached = self._lists.get(key)
        if cached is None:
            full = base + extra
            cached = (full, frozenset(a.lower() for a in full))
            self._lists[key] = cached
        return cached

    def assign(self, job: JobLike) -> int:
        """The job's autocluster id, computed unless its cache is still good."""
        if job.ac_id is not None and job.ac_generation == self.generation:
            return job.ac_id
        t0 = time.perf_counter()
        if not self.cfg.enabled:
            attrs: tuple[str, ...] = ("ClusterId", "ProcId")
            lowered = frozenset(("clusterid", "procid"))
            key: tuple = (job.cluster, job.proc)
        else:
            # Jobs of one cluster that have no significant attribute of their own (the jobs of
            # one `queue N`, mostly) share their cluster's signature: worked out once per cluster.
            cad = getattr(job, "cad", None)
            memo = self._cluster_memo(cad)
            if memo is not None and self._takes_memo(job, memo):
                return memo[2]
            base = self.base_list()
            base_values = job.values(base)
            extra = self._expansion(base, base_values)
            attrs, lowered = self._full_list(base, extra)
            # The signature: every significant attribute's text, None for a missing one.
            key = (base_values, extra, job.values(extra))
        ac = self._ids.get(key)
        if ac is None:
            ac = self._next_id
            self._next_id += 1
            self._ids[key] = ac
        job.ac_id, job.ac_attrs, job.ac_attrs_lower, job.ac_generation = ac, attrs, lowered, self.generation
        if self.cfg.enabled:
            cad = getattr(job, "cad", None)
            own = job.own if cad is not None else None
            if cad is not None and (not own or own.keys().isdisjoint(attrs)) \
                    and cad.derived.keys().isdisjoint(attrs):
                cad.ac_memo = (self.generation, cad.version, ac, attrs, lowered)
        self.ids_assigned += 1
        self.assign_seconds += time.perf_counter() - t0
        return ac

    def _cluster_memo(self, cad: Any) -> tuple | None:
        """The cluster's shared signature (ClusterAd.ac_memo) if it holds now: worked out for
        this generation and this version of the cluster, and none of the attributes each job
        makes from its number is significant. A job takes it unless it has a significant
        value of its own."""
        memo = cad.ac_memo if cad is not None else None
        if memo is not None and memo[0] == self.generation and memo[1] == cad.version \
                and cad.derived.keys().isdisjoint(memo[3]):
            return memo
        return None

    def _takes_memo(self, job: JobLike, memo: tuple) -> bool:
        """Give the job its cluster's shared signature, unless it has a significant value of
        its own (then False, and it needs one worked out)."""
        own = job.own
        if own and not own.keys().isdisjoint(memo[3]):
            return False
        job.ac_id, job.ac_attrs, job.ac_attrs_lower, job.ac_generation = memo[2], memo[3], memo[4], self.generation
        self.ids_assigned += 1
        return True

    def assign_all(self, jobs: list[JobLike]) -> list[int]:
        """assign() of each job, for one pass over many jobs during which neither the jobs nor
        the significant attributes change (a request list built in one go). After the
        negotiator's list grows every idle job is assigned again: here a cluster's shared
        signature is checked once per run of that cluster's jobs, not once per job, and a
        job that takes it costs no call (`bench negotiator`'s 100,000 jobs, rebuilt in one
        process: 50 - 60 ms with a call per job, 36 - 44 ms this way)."""
        gen, assign, enabled = self.generation, self.assign, self.cfg.enabled
        out: list[int] = []
        append = out.append
        last_cad: Any = self       # (no cluster is the Autoclusterer)
        good: tuple | None = None  # last_cad's memo, when it holds for this pass
        shared_ac, shared_attrs, shared_lower = 0, (), frozenset()
        taken = 0
        for job in jobs:
            if job.ac_generation == gen and job.ac_id is not None:
                append(job.ac_id)
                continue
            cad = getattr(job, "cad", None)
            if cad is not last_cad:
                last_cad = cad
                good = self._cluster_memo(cad) if cad is not None and enabled else None
                if good is not None:
                    shared_ac, shared_attrs, shared_lower = good[2], good[3], good[4]
            if good is not None:
                own = job.own
                if not own or own.keys().isdisjoint(shared_attrs):
                    job.ac_id, job.ac_attrs, job.ac_attrs_lower, job.ac_generation = \
                        shared_ac, shared_attrs, shared_lower, gen
                    taken += 1
                    append(shared_ac)
                    continue
            append(assign(job))
            last_cad = self    # assign may have left the cluster a memo: read it for the next job
        self.ids_assigned += taken
        return out

    @property
    def known_signatures(self) -> int:
        return len(self._ids)


# ---- metrics over time (seed 000, "Future Work") --------------------------------------
HISTOGRAM_US = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)


@dataclass
class AutoclusterStats:
    """Autocluster counts and the cost of computing ids, sampled at every negotiation."""
    keep: int = 500
    samples: list[tuple[float, int, int]] = field(default_factory=list)   # (pool time, autoclusters, idle jobs)
    cost_us: list[float] = field(default_factory=list)                    # mean µs per id, per negotiation
    histogram: list[int] = field(default_factory=lambda: [0] * (len(HISTOGRAM_US) + 1))
    _cycle: int | None = None
    _cycle_time: float = 0.0
    _cycle_acs: set[int] = field(default_factory=set)
    _cycle_jobs: int = 0

    def note(self, cycle: int, now: float, autoclusters: Iterable[int], jobs: int, assigned: int,
             seconds: float) -> None:
        """One submitter's negotiation; a cycle's sample merges all of its submitters."""
        if cycle != self._cycle:
            self._flush()
            self._cycle, self._cycle_time = cycle, now
        self._cycle_acs.update(autoclusters)
        self._cycle_jobs += jobs
        self.record_cost(assigned, seconds)

    def _flush(self) -> None:
        if self._cycle is not None:
            self.samples.append((self._cycle_time, len(self._cycle_acs), self._cycle_jobs))
            del self.samples[:-self.keep]
        self._cycle, self._cycle_acs, self._cycle_jobs = None, set(), 0

    def record(self, now: float, autoclusters: int, jobs: int, assigned: int, seconds: float) -> None:
        self.samples.append((now, autoclusters, jobs))
        del self.samples[:-self.keep]
        self.record_cost(assigned, seconds)

    def record_cost(self, assigned: int, seconds: float) -> None:
        if assigned:
            us = seconds * 1e6 / assigned
            self.cost_us.append(us)
            del self.cost_us[:-self.keep]
            i = next((k for k, edge in enumerate(HISTOGRAM_US) if us <= edge), len(HISTOGRAM_US))
            self.histogram[i] += assigned

    @staticmethod
    def _mean_sd(values: list[float]) -> tuple[float, float]:
        if not values:
            return 0.0, 0.0
        m = sum(values) / len(values)
        return m, math.sqrt(sum((v - m) ** 2 for v in values) / len(values))

    def summary(self) -> dict:
        samples = list(self.samples)
        if self._cycle is not None:  # the cycle in progress counts as far as it has got
            samples.append((self._cycle_time, len(self._cycle_acs), self._cycle_jobs))
        acs = [float(a) for _, a, _ in samples]
        per = [j / a for _, a, j in samples if a]
        m_ac, sd_ac = self._mean_sd(acs)
        m_per, sd_per = self._mean_sd(per)
        m_us, sd_us = self._mean_sd(self.cost_us)
        last = samples[-1] if samples else (0.0, 0, 0)
        return {
            "active_autoclusters": last[1],
            "idle_jobs": last[2],
            "active_autoclusters_mean": m_ac, "active_autoclusters_sd": sd_ac,
            "jobs_per_autocluster_mean": m_per, "jobs_per_autocluster_sd": sd_per,
            "id_cost_us_mean": m_us, "id_cost_us_sd": sd_us,
            "id_cost_histogram_us": {(f"<={e}" if i < len(HISTOGRAM_US) else f">{HISTOGRAM_US[-1]}"): n
                                     for i, (e, n) in enumerate(zip(HISTOGRAM_US + (HISTOGRAM_US[-1],),
                                                                    self.histogram))},
            "samples": [{"time": t, "autoclusters": a, "idle_jobs": j} for t, a, j in samples[-50:]],
        }
