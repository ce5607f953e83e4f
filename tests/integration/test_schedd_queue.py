"""The schedd's queue at size, over real gRPC: a query streams in chunks made as they are
sent and caches no job's ClassAd; a restart replays the compact log into the same queue."""
from __future__ import annotations

import gc
from pathlib import Path

import grpc
import pytest

from daemons.cli.client import PoolClient
from daemons.collector.daemon import CollectorConfig, CollectorDaemon
from daemons.core import ads, heap
from daemons.core.clock import PoolClock
from daemons.core.common import CommonConfig
from daemons.pb.htcpool import schedd_pb2, schedd_pb2_grpc
from daemons.schedd.daemon import ScheddConfig, ScheddDaemon

JOBS = 2500


def _common(tmp_path: Path, role: str, collector: str | None) -> CommonConfig:
    return CommonConfig(role=role, collector_host=collector, bind_host="127.0.0.1", grpc_port=0, status_port=0,
                        time_scale=1.0, pool_epoch=0.0, local_dir=tmp_path / role, log_dir=tmp_path / role / "log",
                        spool_dir=tmp_path / role / "spool", full_hostname="sub", uid_domain="sub",
                        update_interval_s=300.0)


def _schedd(tmp_path: Path, collector: str, clock: PoolClock) -> ScheddDaemon:
    return ScheddDaemon(_common(tmp_path, "schedd", collector),
                        ScheddConfig(job_queue_log=tmp_path / "job_queue.log", history_file=tmp_path / "history"),
                        clock)


async def _stream(stub, **request) -> list[list[str]]:
    return [[a.text for a in chunk.ads]
            async for chunk in stub.Query(schedd_pb2.QueryJobsRequest(**request), timeout=60.0)]


async def test_queries_stream_and_a_restart_replays_the_same_queue(tmp_path):
    clock = PoolClock()
    collector = CollectorDaemon(_common(tmp_path, "collector", None), CollectorConfig(), clock)
    await collector.start()
    schedd = _schedd(tmp_path, collector.address, clock)
    await schedd.start()
    restarted = None
    try:
        async with PoolClient(collector.address) as c:
            cluster, count = await c.submit(f"executable = /bin/sleep\narguments = 60\nqueue {JOBS}\n", "n.sub",
                                            "alice")
            assert count == JOBS
            stub = schedd_pb2_grpc.ScheddStub(c.channels.get(schedd.address))

            chunks = await _stream(stub)
            assert [len(ch) for ch in chunks] == [1000, 1000, 500]
            whole = [ads.parse_ad(t) for ch in chunks for t in ch]
            assert [ads.get(a, "ProcId") for a in whole] == list(range(JOBS))
            assert {ads.get(a, "Args") for a in whole} == {"60"}
            assert all(ads.get(a, "ClaimId") is None for a in whole)
            # Nothing was kept: a query of every job builds no job's ClassAd for good.
            assert all(j._classad is None and j._public is None for j in schedd.queue.jobs.values())

            [[first]] = await _stream(stub, projection=["procid", "Owner", "NoSuchAttr"], limit=1)
            assert ads.exprs_of(ads.parse_ad(first)) == {"procid": "0", "Owner": '"alice"'}
            picked = [t for ch in await _stream(stub, constraint="ProcId >= 2490 && JobStatus == 1") for t in ch]
            assert [ads.get(ads.parse_ad(t), "ProcId") for t in picked] == list(range(2490, JOBS))
            with pytest.raises(grpc.aio.AioRpcError) as e:
                await _stream(stub, constraint="ProcId >=")
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT

            # One job changes; one leaves. The log holds the cluster's common attributes once.
            await c.act(schedd_pb2.HOLD, [f"{cluster}.7"], reason="testing")
            await c.act(schedd_pb2.REMOVE, [f"{cluster}.8"])
            before = {k: dict(j.attrs.items()) for k, j in schedd.queue.jobs.items()}
        await schedd.close()
        log = tmp_path / "job_queue.log"
        assert log.stat().st_size < 250 * JOBS, "the log should not repeat the cluster's attributes per job"

        restarted = _schedd(tmp_path, collector.address, clock)
        await restarted.start()
        after = {k: dict(j.attrs.items()) for k, j in restarted.queue.jobs.items()}
        assert after == before and len(after) == JOBS - 1
        assert restarted.queue.get(f"{cluster}.7").status == 5
        assert restarted.queue.counts_by_submitter()["alice@sub"]["idle"] == JOBS - 2
        assert set(restarted.queue.clusters) == {cluster}
    finally:
        if restarted is not None:
            await restarted.close()
        else:
            await schedd.close()
        await collector.close()


async def test_submitted_jobs_settle_the_heap_in_bulk(tmp_path):
    """Once SETTLE_EVERY_JOBS jobs (here 1,000) have been submitted, the schedd moves what
    it holds out of the cyclic collector's walks (core/heap.py); smaller submits count up."""
    clock = PoolClock()
    collector = CollectorDaemon(_common(tmp_path, "collector", None), CollectorConfig(), clock)
    await collector.start()
    schedd = _schedd(tmp_path, collector.address, clock)
    await schedd.start()
    schedd.heap = heap.Settler(1000)
    gc.unfreeze()
    try:
        async with PoolClient(collector.address) as c:
            await c.submit("executable = /bin/sleep\narguments = 60\nqueue 600\n", "a.sub", "alice")
            assert schedd.heap.settled == 0 and gc.get_freeze_count() == 0
            await c.submit("executable = /bin/sleep\narguments = 60\nqueue 600\n", "b.sub", "alice")
            assert schedd.heap.settled == 1 and schedd.heap.pending == 0
            assert gc.get_freeze_count() >= len(schedd.queue.jobs) == 1200
    finally:
        gc.unfreeze()
        await schedd.close()
        await collector.close()
