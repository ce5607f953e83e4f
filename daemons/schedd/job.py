"""A job in the schedd's queue: its attributes as ClassAd expression text, its own over
its cluster's (HTCondor's proc ad chained to its cluster ad). Pure.

A classad2 ad is built only when something needs to evaluate the job, and cached until
the job changes (jobqueue.JobQueue drops the cache as it applies each change).
"""
from __future__ import annotations

from collections.abc import MutableMapping
from typing import TYPE_CHECKING

import classad2

from daemons.core import ads
from daemons.schedd.submit import IDLE

if TYPE_CHECKING:
    from daemons.schedd.jobqueue import JobQueue


_MISSING = object()


class ClusterAd:
    """The attributes a cluster's jobs share (HTCondor's cluster ad, key "<cluster>.-1").

    A job of the cluster keeps only what differs (its ProcId, and whatever changes
    later) and looks the rest up here, so 100,000 jobs of one `queue 100000` hold one
    copy of their common attributes, in memory and in the log.
    """
    __slots__ = ("cluster", "attrs", "procs", "born", "_text")

    def __init__(self, cluster: int) -> None:
        self.cluster = cluster
        self.attrs: dict[str, str] = {}
        self.procs = 0
        # What the queue's indexes need of a job that has nothing of its own yet
        # (submitter, Owner, JobStatus, RequestCpus, -JobPrio); None: not yet worked out.
        self.born: tuple[str, str, int, int, int] | None = None
        self._text: tuple[str, bool] | None = None

    def changed(self) -> None:
        self.born = None
        self._text = None

    def text(self) -> tuple[str, bool]:
        """The attributes as ad text without brackets, printed once for every job of the
        cluster; and whether any of them is private."""
        if self._text is None:
            self._text = ("; ".join(f"{k} = {v}" for k, v in self.attrs.items()),
                          any(ads.is_private(k) for k in self.attrs))
        return self._text


class JobAttrs(MutableMapping):
    """A job's attributes as one mapping: its own over its cluster ad's.

    Own values of None hide a cluster attribute the job has deleted. Writes go to the
    job's own attributes, never to the shared cluster ad.
    """
    __slots__ = ("own", "base")

    def __init__(self, own: dict[str, str | None], base: dict[str, str] | None) -> None:
        self.own, self.base = own, base

    def __getitem__(self, name: str) -> str:
        v = self.own.get(name, _MISSING)
        if v is _MISSING:
            if self.base is None:
                raise KeyError(name)
            return self.base[name]
        if v is None:
            raise KeyError(name)
        return v  # type: ignore[return-value]

    def get(self, name: str, default=None):
        v = self.own.get(name, _MISSING)
        if v is _MISSING:
            return default if self.base is None else self.base.get(name, default)
        return default if v is None else v

    def __contains__(self, name: object) -> bool:
        v = self.own.get(name, _MISSING)  # type: ignore[call-overload]
        if v is _MISSING:
            return self.base is not None and name in self.base
        return v is not None

    def items(self):  # type: ignore[override]
        own, base = self.own, self.base
        if base:
            for k, v in base.items():
                o = own.get(k, _MISSING)
                if o is _MISSING:
                    yield k, v
                elif o is not None:
                    yield k, o
            for k, v in own.items():
                if v is not None and k not in base:
                    yield k, v
        else:
            for k, v in own.items():
                if v is not None:
                    yield k, v

    def __iter__(self):
        return (k for k, _ in self.items())

    def __len__(self) -> int:
        return sum(1 for _ in self.items())

    def __setitem__(self, name: str, value: str) -> None:
        self.own[name] = value

    def __delitem__(self, name: str) -> None:
        if name not in self:
            raise KeyError(name)
        if self.base is not None and name in self.base:
            self.own[name] = None
        else:
            del self.own[name]

    def __repr__(self) -> str:
        return repr(dict(self.items()))


class Job:
    __slots__ = ("cluster", "proc", "key", "own", "cad", "submitter", "_reserved", "ac_id", "ac_attrs", "ac_attrs_lower",
                 "ac_generation", "owner", "_classad", "_public", "_status", "_status_text", "queue")

    def __init__(self, cluster: int, proc: int, attrs: dict[str, str] | None = None, submitter: str = "",
                 cluster_ad: ClusterAd | None = None) -> None:
        self.cluster, self.proc = cluster, proc
        self.key = (cluster, proc)     # one tuple, shared with the queue's indexes
        self.own: dict[str, str | None] = attrs if attrs is not None else {}
        self.cad = cluster_ad
        self.submitter = submitter
        # Not persisted: a match is being turned into a running job.
        self._reserved = False
        self.queue: JobQueue | None = None   # the queue it is in, told when the job is reserved
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
        if was != value and self.queue is not None and self.queue.listener is not None:
            self.queue.listener.job_changed(self, was)

    @property
    def attrs(self) -> JobAttrs:
        """Every attribute of the job: its own over its cluster ad's."""
        return JobAttrs(self.own, self.cad.attrs if self.cad is not None else None)

    def get(self, name: str, default=None):
        """One attribute's text (the hot path: no mapping object is made)."""
        v = self.own.get(name, _MISSING)
        if v is _MISSING:
            return default if self.cad is None else self.cad.attrs.get(name, default)
        return default if v is None else v

    def values(self, names: tuple[str, ...]) -> tuple[str | None, ...]:
        """Each named attribute's text, None where the job has none (an autocluster signature)."""
        own = self.own
        if self.cad is None:
            get = own.get
            return tuple([get(a) for a in names])
        base = self.cad.attrs
        # An own None hides the cluster's value: it reads as missing, which is what it is.
        return tuple([own[a] if a in own else base.get(a) for a in names])

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
        return ads.text_of_exprs(self.view())

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
                and cad.attrs.keys().isdisjoint(added):
            shared, secret = cad.text()
            if private or not secret:
                # (own holds no None here: a None only hides a cluster attribute)
                parts = [shared]
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
