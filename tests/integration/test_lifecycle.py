"""The daemon lifecycle every role shares: start/close, own ads, status pages."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp

from daemons.cli.client import PoolClient, wait_for
from daemons.collector.daemon import CollectorConfig, CollectorDaemon
from daemons.core.clock import PoolClock
from daemons.core.common import CommonConfig

from .conftest import STATIC, PSLOT, wait_jobs, wait_slots


def _common(tmp_path: Path) -> CommonConfig:
    return CommonConfig(role="collector", collector_host=None, bind_host="127.0.0.1", grpc_port=0,
                        status_port=0, time_scale=1.0, pool_epoch=0.0, local_dir=tmp_path,
                        log_dir=tmp_path / "log", spool_dir=tmp_path / "spool", full_hostname="h",
                        uid_domain="h", update_interval_s=60.0)


async def test_start_and_close_are_idempotent(tmp_path):
    d = CollectorDaemon(_common(tmp_path), CollectorConfig(), PoolClock())
    await d.start()
    address, url = d.address, d.status_url
    await d.start()
    assert (d.address, d.status_url) == (address, url)
    assert d.ready
    assert set(d.status()["periodic"]) == {"advertise", "expire"}
    async with PoolClient(address) as c:
        own = await c.ads("Collector")
        assert [a.get("Name") for a in own] == ["h"]
    await d.close()
    await d.close()
    assert not d.ready
    never_started = CollectorDaemon(_common(tmp_path), CollectorConfig(), PoolClock())
    await never_started.close()


async def test_status_pages_metrics_and_cycle_records(make_pool):
    pool = make_pool("NUM_CPUS = 2\n" + PSLOT)
    async with pool.client() as c:
        await wait_slots(c, 1)
        await c.submit("executable = /bin/sleep\narguments = 50\nqueue 2\n", "two.sub", "alice")
        await wait_jobs(c, "true", 2, history=True)
        async with aiohttp.ClientSession() as http:
            for d in pool.daemons.values():
                url = d.info["status_url"]
                async with http.get(f"{url}/status") as r:
                    status = await r.json()
                assert status["role"] == d.role and status["ready"] is True and status["pid"] == d.pid
                async with http.get(f"{url}/metrics") as r:
                    text = await r.text()
                assert f"htcpool_{d.role}_up 1" in text.splitlines()
                async with http.get(url) as r:
                    assert d.role in await r.text()
            async with http.get(pool.daemons["negotiator"].info["status_url"] + "/status") as r:
                cycles = (await r.json())["cycle_history"]
        matched = [r for r in cycles if r["matches"]]
        assert len(matched) == 1 and matched[0]["slots"] == 1 and matched[0]["submitters"] == 1
        assert all(r["end"] >= r["start"] for r in cycles)
        history = await c.cycles()
        # The two views are read at different moments (a cycle may end in between):
        # compare the cycles both hold, by start time.
        page_matches = {round(r["start"], 6): r["matches"] for r in cycles}
        both = [r for r in history if round(r.start, 6) in page_matches]
        assert both and len(both) >= min(len(history), len(cycles)) - 1
        assert [r.matches for r in both] == [page_matches[round(r.start, 6)] for r in both]
        log = (pool.state_dir / "log" / "NegotiatorLog").read_text()
        assert "      Successfully matched with slot1@testhost" in log
        assert log.count("---------- Started Negotiation Cycle ----------") >= len(cycles)
        # With no jobs left, the schedd withdraws its submitter ad.
        async def no_submitters():
            return not await c.ads("Submitter")
        await wait_for(no_submitters, timeout_s=20, what="the submitter ad to be withdrawn")


async def test_shutdown_withdraws_the_daemons_ads(make_pool):
    pool = make_pool(STATIC + "NUM_CPUS = 2\n")
    async with pool.client() as c:
        await wait_slots(c, 2)
        assert len(await c.ads("Negotiator")) == 1
        await c.shutdown(pool.daemons["negotiator"].address)
        await c.shutdown(pool.daemons["startd1"].address)

        async def withdrawn():
            return not await c.ads("Negotiator") and not await c.ads("Machine") and not await c.ads("StartDaemon")
        await wait_for(withdrawn, timeout_s=20, what="the negotiator's and startd's ads to be withdrawn")
        assert await asyncio.to_thread(pool.daemons["negotiator"].proc.wait, 20) == 0
        assert await asyncio.to_thread(pool.daemons["startd1"].proc.wait, 20) == 0


async def test_reschedule_starts_a_cycle_at_once(make_pool):
    pool = make_pool(STATIC + "NUM_CPUS = 1\nNEGOTIATOR_INTERVAL = 1000000\nNEGOTIATOR_CYCLE_DELAY = 0\n")
    async with pool.client() as c:
        await wait_slots(c, 1)
        before = len(await c.cycles())
        await c.reschedule()
        await wait_for(lambda: _more_cycles(c, before), timeout_s=20, what="a rescheduled cycle")
        assert (await c.cycles())[-1].rescheduled


async def _more_cycles(c: PoolClient, n: int) -> bool:
    return len(await c.cycles()) > n


async def test_overlapping_accountant_saves_all_land(tmp_path):
    # A cycle's save and a SetUserPrio's can overlap (seen under load as a SetUserPrio
    # failing on the shared temporary file): every save succeeds and the file ends with
    # the newest state.
    from daemons.negotiator.daemon import NegotiatorConfig, NegotiatorDaemon
    path = tmp_path / "spool" / "Accountantnew.json"
    d = NegotiatorDaemon(_common(tmp_path), NegotiatorConfig(accountant_file=path), PoolClock())
    saves = []
    for i in range(20):
        d.accountant.set_priority(f"u{i}@h", float(i + 1))    # as SetUserPrio does before it saves
        saves.append(asyncio.ensure_future(d._save_accountant()))
    await asyncio.gather(*saves)
    assert path.read_text() == json.dumps(d.accountant.to_state())
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


async def test_a_negotiation_cycle_pauses_cyclic_garbage_collection_and_resumes_it(tmp_path):
    # The cycle allocates its views and candidates by the hundred thousand; collections in
    # its middle walked them all. Paused for the cycle, resumed after it whatever its end.
    import gc

    from daemons.negotiator.daemon import NegotiatorConfig, NegotiatorDaemon
    d = NegotiatorDaemon(_common(tmp_path), NegotiatorConfig(accountant_file=tmp_path / "acct.json"), PoolClock())
    seen = []

    async def negotiate(rec):
        seen.append(gc.isenabled())
        if len(seen) == 2:
            raise RuntimeError("a cycle that fails")

    d._negotiate = negotiate
    assert gc.isenabled()
    ok = await d.negotiation_cycle()
    failed = await d.negotiation_cycle()
    assert seen == [False, False] and gc.isenabled()
    assert ok.error == "" and "a cycle that fails" in failed.error
    gc.disable()
    try:
        await d.negotiation_cycle()
        assert not gc.isenabled()   # a process that had it off keeps it off
    finally:
        gc.enable()


async def test_a_query_read_as_it_arrives_gives_what_the_plain_query_gives(tmp_path):
    """CollectorClient.query(each=...): every ad of a multi-chunk answer made into
    something as its chunk arrives (the negotiator reads its slot ads so), in order."""
    d = CollectorDaemon(_common(tmp_path), CollectorConfig(), PoolClock())
    await d.start()
    try:
        async with PoolClient(d.address) as c:
            n = 2500   # three of the collector's chunks of 1,000
            await c.collector.update(f'[ MyType = "Machine"; Name = "slot1@m{i:04d}"; Machine = "m{i:04d}"; '
                                     f'Cpus = {i % 7} ]' for i in range(n))
            plain = await c.collector.query("Machine")
            seen: list[str] = []

            def each(text: str) -> tuple[int, str]:
                seen.append(text)
                return len(seen), text

            made = await c.collector.query("Machine", each=each)
            assert len(plain) == n
            assert made == list(enumerate(plain, 1))
    finally:
        await d.close()
