"""StartdDaemon's collector updates built as they are sent, and its running jobs' ends
behind one TimerQueue: a daemon in this process with a stand-in collector client."""
from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

import classad2
import pytest

from daemons.core.common import CommonConfig
from daemons.startd.config import Resources, SlotTypeSpec, StartdConfig
from daemons.startd import updates as startd_updates
from daemons.startd.daemon import StartdDaemon
from daemons.startd.updates import update_due_at
from daemons.startd.machines import Startd
from daemons.startd.slots import Machine

ONE = Resources(cpus=1, memory=1024, disk=10000)


class Collector:
    """Takes ad texts as the real client does (one at a time, names after the last)."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.updates: list[tuple[list[str], list[str]]] = []

    async def update(self, ad_texts, *, invalidate_type="", invalidate_names=(), give_up_after_s=None):
        texts = list(ad_texts)
        if self.fail:
            raise ConnectionError("collector gone")
        self.updates.append((texts, list(invalidate_names)))
        return len(texts)


def startd(tmp_path: Path, collector: Collector, scale: float = 100.0) -> StartdDaemon:
    common = CommonConfig(role="startd", collector_host=None, bind_host="127.0.0.1", grpc_port=0, status_port=0,
                          time_scale=scale, pool_epoch=0.0, local_dir=tmp_path, log_dir=tmp_path,
                          spool_dir=tmp_path, full_hostname="test", uid_domain="test", update_interval_s=60.0)
    cfg = StartdConfig(machine=Resources(2, 2048, 20000), slot_types=(SlotTypeSpec(1, 2, False, ONE),))
    d = StartdDaemon(common, cfg, ["h1", "h2", "h3"])
    d.model = Startd(d.hosts, cfg, "127.0.0.1:9618", d.clock.now())
    d.collector = collector
    return d


def job(duration: int) -> classad2.ClassAd:
    return classad2.ClassAd(f"[ ClusterId = 1; ProcId = 0; RequestCpus = 1; RequestMemory = 10; RequestDisk = 10; "
                            f"Requirements = true; Duration = {duration} ]")


def test_an_update_waits_for_a_burst_of_claims_to_pause_but_not_past_its_bound():
    quiet, bound = startd_updates.UPDATE_COALESCE_WALL_S, startd_updates.UPDATE_COALESCE_MAX_WALL_S
    burst = startd_updates.UPDATE_HOLD_MIN_CLAIMS
    # No claim since the change (a job ended): the update goes after the coalescing wait.
    assert update_due_at(100.0, 0.0, 0) == pytest.approx(100.0 + quiet)
    assert update_due_at(100.0, 99.0, 0) == pytest.approx(100.0 + quiet)
    # A claim and its activation are not a burst: nothing is held.
    assert update_due_at(100.0, 100.01, 2) == pytest.approx(100.0 + quiet)
    # A burst of claims: it goes once they have paused for that long ...
    assert update_due_at(100.0, 100.05, burst) == pytest.approx(100.05 + quiet)
    # ... and never later than the bound after the first change, however long they come.
    assert update_due_at(100.0, 100.0 + bound, burst) == pytest.approx(100.0 + bound)
    assert update_due_at(100.0, 105.0, 10 * burst) == pytest.approx(100.0 + bound)
    assert quiet < bound


async def test_a_flush_sends_the_dirty_machines_ads_and_their_deleted_names_last(tmp_path):
    c = Collector()
    d = startd(tmp_path, c)
    h1, h2, h3 = d.model.machines.values()
    for m in (h1, h2, h3):
        m.dirty = False
    h2.dirty = h3.dirty = True
    h3.deleted.append("slot1_1@h3")
    await d._flush_dirty()
    [(texts, names)] = c.updates
    assert [classad2.ClassAd(t)["Name"] for t in texts] == ["slot1@h2", "slot2@h2", "slot1@h3", "slot2@h3"]
    assert names == ["slot1_1@h3"] and h3.deleted == [] and not any(m.dirty for m in (h1, h2, h3))


async def test_a_failed_update_leaves_the_machines_dirty_and_keeps_the_names(tmp_path, caplog):
    c = Collector(fail=True)
    d = startd(tmp_path, c)
    h1 = d.model.machines["h1"]
    h1.deleted.append("slot1_1@h1")
    task = asyncio.create_task(d._flush_dirty())
    deadline = time.monotonic() + 10
    while not any("collector update failed" in r.getMessage() for r in caplog.records) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert all(m.dirty for m in d.model.machines.values()) and h1.deleted == ["slot1_1@h1"]


async def test_a_fault_building_ads_is_not_taken_for_a_collector_failure(tmp_path, caplog, monkeypatch):
    c = Collector()
    d = startd(tmp_path, c)
    all_ads = Machine.all_ads

    def broken(m, now, **kw):
        if m.host == "h2":
            raise ZeroDivisionError("a bug in a slot ad")
        return all_ads(m, now, **kw)
    monkeypatch.setattr(Machine, "all_ads", broken)   # (a Machine has __slots__: not on the instance)
    with caplog.at_level(logging.WARNING), pytest.raises(ZeroDivisionError):
        await asyncio.wait_for(d._flush_dirty(), 10)   # not retried as a collector failure would be
    assert not any("collector update failed" in r.getMessage() for r in caplog.records)


async def test_running_jobs_end_behind_one_timer(tmp_path):
    c = Collector()
    d = startd(tmp_path, c, scale=10_000.0)
    ids = []
    for m in d.model.machines.values():
        for s in m.slots.values():
            out = d.request_claim(s.capability, job(5 + len(ids)), "schedd@x", "127.0.0.1:1", "u@x")
            assert out.ok, out.reason
            ids.append(out.claim_id)
            assert d.activate(out.claim_id, job(5 + len(ids)))[0]
    assert len(d._job_ends) == 6 and d._timers == {}
    assert d.release([ids[0]], "done") == 1       # that job's end no longer stands
    deadline = time.monotonic() + 20
    while d.jobs_finished < 5 and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert (d.jobs_finished, len(d._job_ends)) == (5, 0)
    assert [e.claim_id for e, _ in d._events] == ids[1:]
    await d.on_close()


def hand_clock(monkeypatch) -> tuple[dict[str, float], Any]:
    """A clock of the test's own for startd/updates.py (its loop_time and its sleeps):
    returns the time, to move by hand, and a coroutine function that lets every task that
    can run at that time do so."""
    now = {"t": 1000.0}
    monkeypatch.setattr(startd_updates, "loop_time", lambda: now["t"])
    real_sleep = asyncio.sleep

    async def sleep_on_test_clock(seconds, *args):
        until = now["t"] + seconds
        while now["t"] < until:
            await real_sleep(0)
    monkeypatch.setattr(startd_updates.asyncio, "sleep", sleep_on_test_clock)

    async def settle():
        for _ in range(20):
            await real_sleep(0)
    return now, settle


async def test_a_burst_in_small_calls_is_held_from_its_first_claim_and_sent_once(tmp_path, monkeypatch):
    """Claims and activations three at a time, 12 ms apart (each call's flush task starts only
    after the call): the burst counts from its first claim, so they make one update, after
    the last of them. On a clock of the test's own, moved by hand."""
    c = Collector()
    d = startd(tmp_path, c)
    now, settle = hand_clock(monkeypatch)

    caps = [s.capability for m in d.model.machines.values() for s in m.slots.values()]
    ids = []
    for k in range(0, len(caps), 3):          # two calls of claims ...
        for cap in caps[k:k + 3]:
            out = d.request_claim(cap, job(1000), "schedd@x", "127.0.0.1:1", "u@x")
            assert out.ok, out.reason
            ids.append(out.claim_id)
        await settle()
        now["t"] += 0.012
    for k in range(0, len(ids), 3):           # ... and two of activations
        for cid in ids[k:k + 3]:
            assert d.activate(cid, job(1000))[0]
        await settle()
        now["t"] += 0.012
    assert c.updates == []                    # 48 ms in, claims still coming: held
    for _ in range(10):
        now["t"] += 0.005
        await settle()
    [(texts, _)] = c.updates
    assert sorted(classad2.ClassAd(t)["Activity"] for t in texts) == ["Busy"] * 6
    await d.on_close()


async def test_a_burst_that_begins_while_an_update_is_on_its_way_is_held_like_any_other(tmp_path, monkeypatch):
    """A job's end starts an update; a burst of claims comes while that update is still on its
    way: when it returns, the burst is not sent in pieces but once, after it pauses."""
    class SlowCollector(Collector):
        def __init__(self) -> None:
            super().__init__()
            self.answer = asyncio.Event()

        async def update(self, ad_texts, **kw):
            n = await super().update(ad_texts, **kw)
            await self.answer.wait()
            return n

    c = SlowCollector()
    d = startd(tmp_path, c)
    now, settle = hand_clock(monkeypatch)

    h1 = d.model.machines["h1"]
    for m in d.model.machines.values():
        m.dirty = False
    h1.dirty = True
    d._changed()                              # a change that is not a claim (a job's end)
    now["t"] += 0.025
    await settle()
    assert len(c.updates) == 1                # on its way, not answered yet
    caps = [s.capability for m in d.model.machines.values() for s in m.slots.values()]
    for k in range(0, len(caps), 2):          # the burst: 6 claims, then their 6 activations
        ids = [d.request_claim(cap, job(1000), "schedd@x", "127.0.0.1:1", "u@x").claim_id for cap in caps[k:k + 2]]
        assert all(d.activate(cid, job(1000))[0] for cid in ids)
        if k == 2:
            c.answer.set()                    # the first update returns in the middle of the burst
        await settle()
        now["t"] += 0.012
    assert len(c.updates) == 1                # still held: claims keep coming
    for _ in range(10):
        now["t"] += 0.005
        await settle()
    assert len(c.updates) == 2
    texts, _ = c.updates[1]
    assert sorted(classad2.ClassAd(t)["Activity"] for t in texts) == ["Busy"] * 6
    await d.on_close()
