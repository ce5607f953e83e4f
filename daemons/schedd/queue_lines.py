"""The job queue's log lines: the whole queue as a compacted log writes it, a cluster's
submit, a job's attribute changes and its retirement. Kept apart from jobqueue.py, which
applies them; these only print (JobQueue inherits them)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Iterator

from daemons.schedd import txlog
from daemons.schedd.autocluster import round_text
from daemons.schedd.submit import common_attrs

if TYPE_CHECKING:
    from daemons.schedd.job import Job

HEADER_KEY = "0.0"


class QueueLines:
    """JobQueue's printing of log lines (uses its rounding, spellings, clusters and jobs)."""

    def _attr_lines(self, key: str, attrs: dict[str, str | None]) -> list[str]:
        lines: list[str] = []
        raws: list[tuple[str, str]] = []
        deleted: list[str] = []
        for k, v in attrs.items():
            if v is None:
                deleted.append(k)
                continue
            low = k.lower()
            if low.endswith("_raw") and low[:-4] in self.rounding:
                base = attrs.get(self._canon.get(low[:-4], ""))
                if base is None or round_text(self.rounding[low[:-4]], v) != base:
                    raws.append((k, v))  # not what replaying the base attribute would recreate
                continue
            if low in self.rounding:
                raw = attrs.get(self._canon.get(low + "_raw", ""))
                if raw is not None and round_text(self.rounding[low], raw) == v:
                    v = raw  # write the original: replay rounds it again, and recreates <attr>_RAW
            lines.append(txlog.op_set(key, k, v))
        # Stale or orphaned <attr>_RAW values go last so no replayed rounding overwrites them.
        lines.extend(txlog.op_set(key, k, v) for k, v in raws)
        lines.extend(txlog.op_delete_attr(key, k) for k in deleted)
        return lines

    def state_lines(self) -> list[str]:
        """The whole queue as log lines (for a compacted log): cluster ads, then each job's
        own attributes."""
        return list(self.iter_state_lines())

    def iter_state_lines(self) -> Iterator[str]:
        """state_lines() one job at a time (a compaction writes them as they are made)."""
        yield txlog.op_new(HEADER_KEY, "(empty)")
        yield txlog.op_set(HEADER_KEY, "NextClusterNum", str(self.next_cluster))
        if self.history_seq:
            yield txlog.op_set(HEADER_KEY, "HistorySeq", str(self.history_seq))
        if self.lease_renewal:
            yield txlog.op_set(HEADER_KEY, "LastJobLeaseRenewal", str(self.lease_renewal))
        for c, cad in self.clusters.items():
            key = f"{c}.-1"
            yield txlog.op_new(key)
            yield from self._attr_lines(key, cad.attrs)
        for job in self.jobs.values():
            lines: list[str] = []
            if job.cad is not None and self.clusters.get(job.cluster) is not job.cad:
                # (cannot happen through the log: a cluster ad goes only with its last job)
                own = dict(job.attrs.items())
            else:
                own = job.own
            lines.append(txlog.op_new(job.id))
            if job.cad is not None and job.cad.derived:
                # Written out, as HTCondor's log has them; replay learns them again.
                number = str(job.proc)
                lines.extend(txlog.op_set(job.id, k, head + number + tail)
                             for k, (head, tail) in job.cad.derived.items()
                             if k not in own and k not in job.cad.attrs)
            lines.extend(self._attr_lines(job.id, own))
            yield from lines

    def submit_lines(self, procs: list[dict[str, str]], cluster: int,
                     common: dict[str, str] | None = None) -> list[str]:
        """One cluster's log lines: its cluster ad (the attributes every job shares, given
        as `common` or found in `procs`), then each job with what differs (its ProcId
        at least). `procs` may hold whole job ads or only what differs from `common`."""
        if common is None:
            common = common_attrs(procs)
        return list(self._submit_lines(procs, cluster, common))

    @staticmethod
    def _submit_lines(procs: Iterable[dict[str, str]], cluster: int, common: dict[str, str]) -> Iterator[str]:
        return map(txlog.render, QueueLines._submit_ops(procs, cluster, common))

    @staticmethod
    def _submit_ops(procs: Iterable[dict[str, str]], cluster: int, common: dict[str, str]) -> Iterator[txlog.Op]:
        SET, NEW = txlog.SET, txlog.NEW
        key = f"{cluster}.-1"
        yield txlog.Op(SET, HEADER_KEY, "NextClusterNum", str(cluster + 1))
        yield txlog.Op(NEW, key, "Job")
        for k, v in common.items():
            yield txlog.Op(SET, key, k, v)
        for attrs in procs:
            key = f"{cluster}.{attrs['ProcId']}"
            yield txlog.Op(NEW, key, "Job")
            for k, v in attrs.items():
                if k == "ProcId" or common.get(k) != v:
                    yield txlog.Op(SET, key, k, v)

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

