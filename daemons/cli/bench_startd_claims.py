"""`htcpool bench startd`'s second figure: the startd's CPU per match on its claim path.

A claim burst costs the startd a RequestClaims and an ActivateClaims call for every batch
of matches, and the collector update after the burst. Here a StartdDaemon in this process
(the dept, std or bigmem machines of `bench negotiator`, 8 static slots each) is driven
through its gRPC service's handlers, as a schedd drives it: claims in batches of BATCH,
each job's ad as the schedd prints it; then the activations of that batch, with the same
texts. Its collector is a stand-in that takes the update's texts, so the update after the
burst is built as the daemon builds it. Not included: the network, gRPC's framing and the
log file (the daemon's INFO lines are formatted, not written).

The figure is the process's CPU time over the matches (best of REPEATS fresh startds, so
that another process's burst on this machine counts least): what bench scale's startd
spends on each match of a burst, short of its transport and its log.
"""
from __future__ import annotations

import asyncio
import gc
import tempfile
import time
from pathlib import Path
from typing import Any

BATCH = 32          # claims per call: the schedd's batches hold 16 to 32
MACHINES = 250      # 2,000 slots (--claim-machines)
REPEATS = 5


class _Collector:
    """Takes the update's ad texts as the real client does (one at a time)."""

    async def update(self, ad_texts, *, invalidate_type="", invalidate_names=(), give_up_after_s=None):
        return sum(1 for _ in ad_texts)


class _Context:
    async def abort(self, code, details):
        raise RuntimeError(f"{code}: {details}")


def _daemon(cls: str, d: Path, machines: int):
    from daemons.cli import bench_negotiator as bn
    from daemons.core import config as configmod
    from daemons.core.common import CommonConfig
    from daemons.startd.config import read_startd_config
    from daemons.startd.daemon import StartdDaemon, host_names
    from daemons.startd.machines import Startd

    path = d / "startd.conf"
    path.write_text(bn.machine_config_text(cls))
    cfg = read_startd_config(configmod.load(path, local_dir=d))
    common = CommonConfig(role="startd", collector_host=None, bind_host="127.0.0.1", grpc_port=0, status_port=0,
                          time_scale=1.0, pool_epoch=0.0, local_dir=d, log_dir=None, spool_dir=d,
                          full_hostname="benchhost", uid_domain="benchhost", update_interval_s=300.0)
    daemon = StartdDaemon(common, cfg, host_names("benchhost", machines))
    daemon.model = Startd(daemon.hosts, cfg, "127.0.0.1:9618", daemon.clock.now())
    daemon.collector = _Collector()
    return daemon


async def _burst(daemon, job_texts: list[str]) -> int:
    from daemons.pb.htcpool import common_pb2
    from daemons.pb.htcpool import startd_pb2 as pb
    from daemons.startd.service import StartdService

    service, ctx = StartdService(daemon), _Context()
    caps = [s.capability for m in daemon.model.machines.values() for s in m.slots.values()]
    started = 0
    for i in range(0, len(caps), BATCH):
        claims = pb.RequestClaimsRequest(claims=[
            pb.RequestClaimRequest(claim_id=cap, job_ad=common_pb2.ClassAd(text=job_texts[i + k]),
                                   schedd_name="schedd@benchhost", schedd_address="127.0.0.1:1",
                                   submitter="u001@benchhost") for k, cap in enumerate(caps[i:i + BATCH])])
        # The messages cross the wire as bytes: parsed here as gRPC would parse them.
        reply = await service.RequestClaims(pb.RequestClaimsRequest.FromString(claims.SerializeToString()), ctx)
        reply.SerializeToString()
        acts = pb.ActivateClaimsRequest(activations=[
            pb.ActivateClaimRequest(claim_id=r.claim_id, job_ad=common_pb2.ClassAd(text=job_texts[i + k]))
            for k, r in enumerate(reply.replies) if r.ok])
        done = await service.ActivateClaims(pb.ActivateClaimsRequest.FromString(acts.SerializeToString()), ctx)
        done.SerializeToString()
        started += sum(r.ok for r in done.replies)
    if daemon._flush_task is not None:
        await daemon._flush_task      # the update after the burst
    return started


def measure(cls: str, machines: int = MACHINES) -> dict[str, Any]:
    from daemons.cli.bench_negotiator import SLOTS_PER_MACHINE, job_ad_text

    # One job per slot, each its own proc of one cluster (as a schedd's jobs differ).
    job_text = job_ad_text(cls)
    assert "ProcId = 0;" in job_text
    matches = machines * SLOTS_PER_MACHINE
    job_texts = [job_text.replace("ProcId = 0;", f"ProcId = {n};", 1) for n in range(matches)]
    best = None
    reused = 0
    with tempfile.TemporaryDirectory(prefix="htcpool-bench-startd-claims-") as d:
        for _ in range(REPEATS):
            daemon = _daemon(cls, Path(d), machines)
            gc.collect()
            t = time.process_time()
            started = asyncio.run(_burst(daemon, job_texts))
            spent = time.process_time() - t
            if started != matches:
                raise RuntimeError(f"{started} of {matches} jobs started")
            per = spent / started
            if best is None or per < best:
                best, reused = per, daemon.job_ads_reused
    return {"claim_path_us_per_match": round(best * 1e6, 1), "claim_path_matches": matches,
            "claim_path_batch": BATCH, "claim_path_job_ads_reused": reused}
