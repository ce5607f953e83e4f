"""A job in the schedd's queue: its attributes as ClassAd expression text, its own over
its cluster's (HTCondor's proc ad chained to its cluster ad). Pure.

A classad2 ad is built only when something needs to evaluate the job, and cached until
the job changes (jobqueue.JobQueue drops the cache as it applies each change).
"""
from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from types import MappingProxyType
from typing import TYPE_CHECKING

import classad2

from daemons.core import ads
from daemons.schedd.submit import IDLE

if TYPE_CHECKING:
    from daemons.schedd.jobqueue import JobQueue


_MISSING = object()
_AUTOCLUSTER_ATTRS = ("AutoClusterId", "AutoClusterAttrs")    # view() adds them
_NONE: Mapping[str, str | None] = MappingProxyType({})   # a job's own attributes while it has none


class ClusterAd:
    """The attributes a cluster's jobs share (HTCondor's cluster ad, key "<cluster>.-1").

    A job of the cluster keeps only what differs (its ProcId, and whatever changes
    later) and looks the rest up here, so 100,000 jobs of one `queue 100000` hold one
    copy of their common attributes, in memory and in the log.
    """
    __slots__ = ("cluster", "attrs", "derived", "procs", "born", "_text", "version", "ac_memo")

    def __init__(self, cluster: int) -> None:
        self.cluster = cluster
        self.attrs: dict[str, str] = {}
        # Attributes every job has its own value of, made from the job's number: name ->
        # (text before it, text after it). ProcId and GlobalJobId, learnt from the first job
        # of the cluster as it is made; a job whose value is otherwise keeps its own.
        self.derived: dict[str, tuple[str, str]] = {}
        self.procs = 0
        # What the queue's indexes need of a job that has nothing of its own yet
        # (submitter, Owner, JobStatus, RequestCpus, -JobPrio); None: not yet worked out.
        self.born: tuple[str, str, int, int, int] | None = None
        self._text: tuple[str, bool] | None = None
        self.version = 0          # bumped by every change of the cluster's attributes
        # The autocluster of a job that takes every significant attribute from the cluster
        # (autocluster.Autoclusterer.assign): (generation, version, id, attrs, lowered).
        self.ac_memo: tuple | None = None

    def changed(self) -> None:
        self.born = None
        self._text = None
        self.version += 1
        self.ac_memo = None

    def text(self) -> tuple[str, bool]:
        """The attributes as ad text without brackets, printed once for every job of the
        cluster; and whether any of them is private."""
        if self._text is None:
            self._text = ("; ".join(f"{k} = {v}" for k, v in self.attrs.items()),
                          any(ads.is_private(k) for k in self.attrs))
        return self._text


class JobAttrs(MutableMapping):
    """A job's attributes as one mapping: its own over its cluster's (the cluster ad's, and
    those made from the job's number: ClusterAd.derived).

    Own values of None hide a cluster attribute the job has deleted. Writes go to the
    job's own attributes, never to the shared cluster ad.
    """
    __slots__ = ("job",)

    def __init__(self, job: Job) -> None:
        self.job = job

    def __getitem__(self, name: str) -> str:
        v = self.job.get(name, _MISSING)
        if v is _MISSING:
            raise KeyError(name)
        return v

    def get(self, name: str, default=None):
        return self.job.get(name, default)

    def __contains__(self, name: object) -> bool:
        return self.job.get(name, _MISSING) is not _MISSING  # type: ignore[arg-type]

    def items(self):  # type: ignore[override]
        job = self.job
        own, cad = job.own, job.cad
        if cad is None:
            for k, v in own.items():
                if v is not None:
                    yield k, v
            return
        base = cad.attrs
        for k, v in base.items():
            o = own.get(k, _MISSING)
            if o is _MISSING:
                yield k, v
            elif o is not None:
                yield k, o
        number = str(job.proc)
        for k, (head, tail) in cad.derived.items():
            if k in base:
                continue
            o = own.get(k, _MISSING)
            if o is _MISSING:
                yield k, head + number + tail
            elif o is not None:
                yield k, o
        for k, v in own.items():
            if v is not None and k not in base and k not in cad.derived:
                yield k, v

    def __iter__(self):
        return (k for k, _ in self.items())

    def __len__(self) -> int:
        return sum(1 for _ in self.items())

    def __setitem__(self, name: str, value: str) -> None:
        self.job.writable()[name] = value

    def __delitem__(self, name: str) -> None:
        if name not in self:
            raise KeyError(name)
        self.job.delete(name)

    def __repr__(self) -> str:
        return repr(dict(self.items()))


class Job:
    # Slots: 100,000 jobs each without a __dict__.
    __slots__ = ("cluster", "proc", "key", "own", "cad", "submitter", "_reserved", "ac_id", "ac_attrs",
                 "ac_attrs_lower", "ac_generation", "owner", "_classad", "_public", "_status", "_status_text", "queue",
                 "matched_at")

    def __init__(self, cluster: int, proc: int, attrs: dict[str, str] | None = None, submitter: str = "",
                 cluster_ad: ClusterAd | None = None) -> None:
        self.cluster, self.proc = cluster, proc
        self.key = (cluster, proc)     # one tuple, shared with the queue's indexes
        # Its own attributes (None: a cluster attribute deleted); _NONE, read-only, until it has one.
        self.own: Mapping[str, str | None] = attrs if attrs is not None else _NONE
        self.cad = cluster_ad
        self.submitter = submitter
        # Not persisted: a match is being turned into a running job.
        self._reserved = False
        self.queue: JobQueue | None = None   # the queue it is in, told when the job is reserved
        # Not persisted: the pool time its latest match arrived (0: none pending), for the
        # match-to-activation delay.
        self.matched_at = 0.0
        # Not persisted: the autocluster cache (AutoClusterId, AutoClusterAttrs).
        self.ac_id: int | None = None
        self.ac_attrs: tuple[str, ...] = ()
        self.ac_attrs_lower: frozenset[str] = frozenset()
        self.ac_generation = -1
        self.owner = ""          # the Owner attribute's text, as counted in JobQueue.owner_counts
        self._classad: tuple[int | None, classad2.ClassAd] | None = None
        self._public: tuple[int | None, classad2.ClassAd] | None = None
        self._status = IDLE
        self._status_text: str | None = None

    @property
    def reserved(self) -> bool:
        """Not persisted: a match is being turned into a running job (so it is in no request)."""
        return self._reserved

    @reserved.setter
    def reserved(self, value: bool) -> None:
        was, self._reserved = self._reserved, value
        if was != value and self.queue is not None:
            self.queue.reserved_changed(self, was)

    @property
    def attrs(self) -> JobAttrs:
        """Every attribute of the job: its own over its cluster's."""
        return JobAttrs(self)

    def writable(self) -> dict[str, str | None]:
        """The job's own attributes, to change."""
        if self.own is _NONE:
            self.own = {}
        return self.own  # type: ignore[return-value]

    def inherits(self, name: str) -> bool:
        """Whether the job's cluster gives it `name` (a cluster attribute, or one made from its number)."""
        cad = self.cad
        return cad is not None and (name in cad.attrs or name in cad.derived)

    def delete(self, name: str) -> None:
        if self.cad is not None:
            # Hides the cluster's value, now or once the cluster learns to make it (derived).
            self.writable()[name] = None
        elif name in self.own:
            del self.writable()[name]

    def get(self, name: str, default=None):
        """One attribute's text (the hot path: no mapping object is made)."""
        v = self.own.get(name, _MISSING)
        if v is _MISSING:
            cad = self.cad
            if cad is None:
                return default
            v = cad.attrs.get(name, _MISSING)
            if v is _MISSING:
                made = cad.derived.get(name)
                return default if made is None else made[0] + str(self.proc) + made[1]
            return v
        return default if v is None else v

    def values(self, names: tuple[str, ...]) -> tuple[str | None, ...]:
        """Each named attribute's text, None where the job has none (an autocluster signature)."""
        own = self.own
        if self.cad is None:
            get = own.get
            return tuple([get(a) for a in names])
        if not own and not self.cad.derived:
            get = self.cad.attrs.get
            return tuple([get(a) for a in names])
        return tuple([self.get(a) for a in names])

    @property
    def id(self) -> str:
        return f"{self.cluster}.{self.proc}"

    @property
    def status(self) -> int:
        # JobStatus as a number, re-parsed only when its text changes (a hot path).
        text = self.get("JobStatus")
        if text is not self._status_text:
            self._status_text = text
            try:
                self._status = int(text) if text is not None else IDLE
            except ValueError:
                self._status = IDLE
        return self._status

    def int_attr(self, name: str, default: int = 0) -> int:
        try:
            return int(float(self.get(name, default)))
        except (ValueError, OverflowError):   # not a number, or too big for one (a 400-digit priority)
            return default

    def view(self) -> dict[str, str]:
        """The job ad as others see it: its attributes plus the autocluster cache."""
        out = dict(self.attrs.items())
        if self.ac_id is not None:
            out["AutoClusterId"] = str(self.ac_id)
            out["AutoClusterAttrs"] = ads.literal(",".join(self.ac_attrs))
        return out

    def classad(self) -> classad2.ClassAd:
        if self._classad is None or self._classad[0] != self.ac_id:
            self._classad = (self.ac_id, classad2.ClassAd(ads.text_of_exprs(self.view())))
        return self._classad[1]

    def has_private(self) -> bool:
        return any(ads.is_private(k) for k in self.attrs)

    def public_view(self) -> dict[str, str]:
        """view() without the private attributes (ClaimId): what non-daemons may see or test."""
        view = self.view()
        if not any(ads.is_private(k) for k in view):
            return view
        return {k: v for k, v in view.items() if not ads.is_private(k)}

    def public_classad(self) -> classad2.ClassAd:
        if not self.has_private():
            return self.classad()
        if self._public is None or self._public[0] != self.ac_id:
            self._public = (self.ac_id, classad2.ClassAd(ads.text_of_exprs(self.public_view())))
        return self._public[1]

    def fresh_classad(self, private: bool) -> classad2.ClassAd:
        """The job's ClassAd for a one-off use (a query): the cached one if there is one,
        else a new one that is not kept, so a query of every job grows no cache."""
        cached = self._classad if private or not self.has_private() else self._public
        if cached is not None and cached[0] == self.ac_id:
            return cached[1]
        return classad2.ClassAd(ads.text_of_exprs(self.view() if private else self.public_view()))

    def text(self) -> str:
        """The whole ad's text, private attributes included (its cluster's part printed once
        for the cluster: see ad_text)."""
        return self.ad_text(True)

    def ad_text(self, private: bool, extra: dict[str, str] | None = None) -> str:
        """The text of view() (or public_view()) with `extra` set, as text_of_exprs prints
        it; when the job's own attributes are apart from its cluster's (most jobs, most of
        the time), the cluster's part is the one text printed once for the cluster."""
        cad, own = self.cad, self.own
        added = dict(extra) if extra else {}
        if self.ac_id is not None:
            added = {"AutoClusterId": str(self.ac_id), "AutoClusterAttrs": ads.literal(",".join(self.ac_attrs)),
                     **added}
        if cad is not None and cad.attrs and own.keys().isdisjoint(cad.attrs) and own.keys().isdisjoint(added) \
                and cad.attrs.keys().isdisjoint(added) and cad.derived.keys().isdisjoint(added) \
                and own.keys().isdisjoint(cad.derived):
            shared, secret = cad.text()
            if private or not secret:
                # (own holds no None here: a None only hides a cluster attribute)
                number = str(self.proc)
                parts = [shared]
                parts.extend(f"{k} = {head}{number}{tail}" for k, (head, tail) in cad.derived.items()
                             if k not in cad.attrs and (private or not ads.is_private(k)))
                parts.extend(f"{k} = {v}" for k, v in own.items() if private or not ads.is_private(k))
                parts.extend(f"{k} = {v}" for k, v in added.items())
                return "[ " + "; ".join(parts) + " ]"
        view = self.view() if private else self.public_view()
        if extra:
            view.update(extra)
        return ads.text_of_exprs(view)

    def forget_autocluster(self) -> None:
        self.ac_id = None
        self._classad = None
        self._public = None
