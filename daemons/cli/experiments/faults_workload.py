"""The fault experiment's workload: jobs submitted in batches, some removed or held, through faults.

A submit whose answer a fault swallowed is retried only once the schedd shows no job
of its batch (each batch carries FaultBatch), so a lost answer never submits twice.
Acts (rm, hold, release) are judged by the schedd's answer: confirmed, refused (the
job had ended), or unanswered (it may have happened); the checker allows for each.
"""
from __future__ import annotations

import asyncio
import random
import time
from typing import TYPE_CHECKING

import grpc

if TYPE_CHECKING:
    from daemons.cli.experiments.faults import Run
    from daemons.cli.experiments.faults_args import Config


def durations(cfg: "Config") -> list[float]:
    rng = random.Random(f"faults-workload:{cfg.seed}")
    return [round(rng.uniform(cfg.mean_s / 2, 1.5 * cfg.mean_s), 1) for _ in range(cfg.jobs)]


def _transient() -> tuple[type[BaseException], ...]:
    """What a pool under faults answers now and then: an RPC error, or a daemon's ad that
    the collector does not have for a while (its clock jumped, it was restarted)."""
    from daemons.cli.client import ClientError
    return (grpc.aio.AioRpcError, ClientError, OSError, asyncio.TimeoutError)


async def _retry(what: str, fn, deadline: float, errors: list[str] | None = None):
    """Call `fn` until it answers (faults make the pool refuse now and then) or the deadline."""
    delay = 0.2
    while True:
        try:
            return await fn()
        except _transient() as e:
            if time.monotonic() + delay >= deadline:
                if errors is not None:
                    errors.append(f"{what}: gave up ({type(e).__name__})")
                raise
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)


# ---- the workload ---------------------------------------------------------------------------
async def submit_loop(c, clock, t0: float, r: "Run", emit) -> None:
    """Half the jobs at once, the rest in batches spread over the first 60% of the run."""
    cfg = r.cfg
    lengths = durations(cfg)
    first = max(1, cfg.jobs // 2) if cfg.batches > 1 else cfg.jobs
    rest = cfg.jobs - first
    n_rest = max(0, cfg.batches - 1) if rest else 0
    chunks = [lengths[:first]] + [lengths[first + i * rest // n_rest:first + (i + 1) * rest // n_rest]
                                  for i in range(n_rest)]
    for k, chunk in enumerate(chunks):
        if not chunk:
            continue
        at = t0 + (0.0 if k == 0 else r.span_s * 0.6 * k / max(1, len(chunks) - 1))
        await clock.sleep_until(at)
        ids = await submit_batch(c, k, chunk, r)
        r.submitted.update(ids)
        r.batches_done += 1
        emit(f"faults: batch {k} submitted at pool time {clock.now() - t0:.0f} s: {len(ids)} jobs")
        r.acts.append(asyncio.create_task(act_on(c, clock, r, ids, random.Random(f"faults-acts:{cfg.seed}:{k}"))))
    await asyncio.gather(*r.acts, return_exceptions=True)


async def act_on(c, clock, r: "Run", ids: list[str], rng: random.Random) -> None:
    """Remove some of a batch's jobs, and hold some for a while then release them, at
    random times while the faults run (the rm or hold may meet a claim being made)."""
    n = round(len(ids) * r.cfg.act_fraction / 2)
    if not n:
        return
    picked = rng.sample(sorted(ids), min(len(ids), 2 * n))
    now = clock.now()
    plans = [(now + rng.uniform(0, 0.3 * r.span_s), "rm", j, 0.0) for j in picked[:n]] + \
            [(now + rng.uniform(0, 0.3 * r.span_s), "hold", j, rng.uniform(60.0, 600.0)) for j in picked[n:]]
    await asyncio.gather(*(_act(c, clock, r, *p) for p in plans))


async def _act(c, clock, r: "Run", at: float, what: str, job: str, hold_s: float) -> None:
    from daemons.pb.htcpool import schedd_pb2
    await clock.sleep_until(at)
    action = schedd_pb2.REMOVE if what == "rm" else schedd_pb2.HOLD
    from daemons.cli.client import ClientError
    try:
        done = job in await c.act(action, [job], reason=f"experiment faults: {what}")
    except ClientError:
        done = False      # the schedd's address was not to be had: nothing was sent
    except grpc.aio.AioRpcError as e:
        # Refused (the job had ended) or unanswered (it may have happened): only the latter is unknown.
        done = None if e.code() not in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND) else False
    if what == "rm":
        if done:
            r.removed.add(job)
        elif done is None:
            r.maybe_removed.add(job)
        return
    if done is False:
        return
    await clock.sleep_until(at + hold_s)
    # A held job must be released, or it never ends: insist, through whatever faults (for
    # ten minutes at most; a job still held then shows as unfinished).
    deadline = time.monotonic() + 600.0
    while time.monotonic() < deadline:
        try:
            await c.act(schedd_pb2.RELEASE, [job], reason="experiment faults: release")
            held = await c.jobs(f"ClusterId == {job.split('.')[0]} && ProcId == {job.split('.')[1]} && "
                                f"JobStatus == 5", ["ClusterId"])
            if not held:
                r.held_released += 1
                return
        except _transient():
            pass
        await asyncio.sleep(1.0)


def submit_text(batch: int, lengths: list[float]) -> str:
    lines = ["universe = vanilla", "executable = /bin/sleep", f"+FaultBatch = {batch}"]
    for d in lengths:
        lines += [f"arguments = {d}", "queue"]
    return "\n".join(lines) + "\n"


async def submit_batch(c, batch: int, lengths: list[float], r: "Run") -> list[str]:
    deadline = time.monotonic() + 600.0
    text = submit_text(batch, lengths)
    while True:
        try:
            cluster, n = await c.submit(text, f"batch{batch}.sub", "faults")
            return [f"{cluster}.{p}" for p in range(n)]
        except _transient() as e:
            invalid = isinstance(e, grpc.aio.AioRpcError) and e.code() == grpc.StatusCode.INVALID_ARGUMENT
            if invalid or time.monotonic() > deadline:
                r.errors.append(f"submitting batch {batch}: {type(e).__name__} "
                                f"{e.code().name if isinstance(e, grpc.aio.AioRpcError) else e}")
                return []
        # The answer may have been lost after the schedd committed: look before submitting again.
        for _ in range(3):
            await asyncio.sleep(1.0)
            try:
                found = await batch_ids(c, batch)
            except _transient():
                continue
            if found:
                return found


async def batch_ids(c, batch: int) -> list[str]:
    ids = []
    for history in (False, True):
        for j in await c.jobs(f"FaultBatch == {batch}", ["ClusterId", "ProcId"], history=history):
            ids.append(f"{j.lookup('ClusterId')}.{j.lookup('ProcId')}")
    return ids
