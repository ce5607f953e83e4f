"""The startd's compact storage keeps its behaviour: printed slot ads are those of the builder
before it (attribute for attribute) (a running job's ad as compressed text, __slots__, interned slot names, streamed
advertisements), what slots share they share, a full advertisement is built lazily, and
running jobs' ends wait behind one timer (TimerQueue)."""
import asyncio
import heapq
import json
import os
import re
import time
from pathlib import Path

import classad2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemons.core import ads
from daemons.core.clock import PoolClock, TimerQueue
from daemons.core.collector_client import UPDATE_CHUNK_ADS, iter_update_chunks, update_chunks
from daemons.startd import policy
from daemons.startd.config import Resources, SlotPolicy, SlotTypeSpec, StartdConfig
from daemons.startd.updates import machine_ad_texts
from daemons.core import adpack
from daemons.core.adpack import AdPacker, unpack
from daemons.startd.claimids import IX_BITS
from daemons.startd.machines import Startd
from daemons.startd.slots import NO_CHILDREN
from tests.unit.startd_scenarios import SCENARIOS

BEFORE = Path(__file__).parent / "data" / "startd_ads_before.json"
NOW = 1000.0
SCHEDD = "127.0.0.1:4000"
ONE = Resources(cpus=1, memory=1024, disk=10000)


def job(**extra):
    attrs = {"ClusterId": "3", "ProcId": "4", "RequestCpus": "1", "RequestMemory": "100", "RequestDisk": "1000",
             "Requirements": "true", "Duration": "600", "Note": '"a \\"quoted\\" value"', "Nested": "[ x = 1 ]",
             "RequestDisk2": "MAX({ 1024, (TransferInputSizeMB + 1) * 1.25 }) * 1024"}
    attrs.update(extra)
    return classad2.ClassAd("[" + "; ".join(f"{k} = {v}" for k, v in attrs.items()) + "]")


def static_startd(hosts=("h1", "h2"), count=4, **policy_knobs):
    spec = SlotTypeSpec(1, count, False, ONE, policy=SlotPolicy(**policy_knobs) if policy_knobs else None)
    machine = Resources(cpus=count, memory=1024 * count, disk=10000 * count)
    return Startd(list(hosts), StartdConfig(machine=machine, slot_types=(spec,)), "127.0.0.1:9618", NOW)


def busy(m, name="slot1", j=None):
    s = m.slots[name]
    j = j if j is not None else job()
    out = m.request_claim(s, j, "schedd@sub", SCHEDD, "alice@d", NOW)
    assert out.ok
    s = m.slots[out.slot_name.split("@")[0]]   # a p-slot's job runs on its new dynamic slot
    assert m.activate(s, j, NOW)[0]
    return s


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_printed_ads_are_those_of_the_builder_before(name):
    got = SCENARIOS[name]()
    if os.environ.get("HTCPOOL_WRITE_STARTD_ADS"):
        data = json.loads(BEFORE.read_text()) if BEFORE.exists() else {}
        data[name] = got
        BEFORE.write_text(json.dumps(data, indent=1) + "\n")
    want = json.loads(BEFORE.read_text())[name]
    # The same ads, attribute for attribute (their items' order is free: a slot ad's static
    # items are printed once for its shape, ahead of the rest), claim ids numbered as before.
    assert [_items(_sequence_only(t)) for t in got] == [_items(t) for t in want]


def _sequence_only(text):
    """Claim ids as they were recorded, before a number carried its slot's index (claimids.py):
    the number's sequence alone, in the id and in the scenarios' secret (s<number>)."""
    text = re.sub(r"#(\d+)#s(\d+)", lambda m: f"#{int(m[1]) >> IX_BITS}#s{int(m[2]) >> IX_BITS:04d}", text)
    return re.sub(r"(<[^>]*>#\d+#)(\d+)(?=[\\\"])", lambda m: f"{m[1]}{int(m[2]) >> IX_BITS}", text)


def _items(text: str) -> dict[str, str] | str:
    """An ad's attributes; a checkpoint's other output (a list of names) as it is."""
    try:
        return ads.exprs_of(classad2.ClassAd(text))
    except Exception:
        return text


def test_a_running_jobs_ad_is_kept_as_text_and_parses_back_equal():
    m = static_startd().machines["h1"]
    j = job(AccountingGroup='"grp.a"', ConcurrencyLimits='"lic"', MaxJobRetirementTime="60")
    s = busy(m, j=j)
    c = s.claim
    assert isinstance(c.job_packed, bytes) and 0 < len(c.job_packed) < len(repr(j))
    assert c.job_ad == j                     # CurrentTime, set at activation, included
    assert c.job_ad is not c.job_ad          # a fresh parse each time: no parsed ad is kept
    assert c.job_advertised == (("AccountingGroup", "grp.a"), ("ConcurrencyLimits", "lic"))
    assert c.job_has_mjrt is True
    a = m.slot_ad(s, NOW)
    assert (a["AccountingGroup"], a["ConcurrencyLimits"]) == ("grp.a", "lic")
    m.finish_job(s, NOW + 600)
    assert (c.job_packed, c.job_zdict, c.job_advertised, c.job_has_mjrt, c.job_ad) == (b"", b"", (), False, None)


def test_job_ads_of_one_startd_are_packed_against_one_dictionary():
    sd = static_startd()
    h1, h2 = sd.machines["h1"], sd.machines["h2"]
    first = busy(h1, "slot1", job(ProcId="1"))
    second = busy(h2, "slot3", job(ProcId="2", RequestMemory="512"))
    assert second.claim.job_zdict is first.claim.job_zdict        # one dictionary for the startd's machines
    assert len(second.claim.job_packed) * 8 < len(repr(second.claim.job_ad))
    assert (ads.get(first.claim.job_ad, "ProcId"), ads.get(second.claim.job_ad, "RequestMemory")) == (1, 512)


def test_a_job_ad_unlike_the_dictionary_becomes_the_next_one():
    packer = AdPacker()
    a = job(ProcId="1")
    other = classad2.ClassAd("[" + "; ".join(f"Other{i} = {i * 7919}" for i in range(60)) + "]")
    za, pa = packer.pack(a)
    zo, po = packer.pack(other)
    assert zo is not za and zo == repr(other).encode() and packer.zdict is zo
    zb, pb = packer.pack(job(ProcId="2"))
    assert zb is not zo and packer.zdict is zb                       # and back: each ad keeps its own dictionary
    zc, pc = packer.pack(job(ProcId="3"))
    assert zc is zb and len(pc) * 8 < len(zc)
    assert unpack(za, pa) == a and unpack(zo, po) == other and ads.get(unpack(zb, pb), "ProcId") == 2



def test_ads_larger_than_the_compression_window_come_back_whole():
    # The packer's window (adpack.WBITS) is 16 KB: an ad and a dictionary larger than that
    # pack less well, never wrongly.
    def big(seed: int) -> classad2.ClassAd:
        return classad2.ClassAd("[" + "; ".join(f'Attr{i} = "{(i * seed) % 100003:06d}{"x" * 40}"'
                                                 for i in range(700)) + "]")
    packer = AdPacker()
    first, second = big(7), big(11)
    assert len(repr(first)) > 2 << adpack.WBITS
    z1, p1 = packer.pack(first)
    z2, p2 = packer.pack(second)
    assert unpack(z1, p1) == first and unpack(z2, p2) == second

def test_attributes_that_are_not_strings_are_not_advertised():
    m = static_startd().machines["h1"]
    s = busy(m, j=job(AccountingGroup="42"))
    assert s.claim.job_advertised == () and "AccountingGroup" not in m.slot_ad(s, NOW)
    assert s.claim.job_has_mjrt is False


def test_a_constant_policy_never_parses_the_running_job():
    m = static_startd(max_job_retirement_time="120", preempt="False").machines["h1"]
    s = busy(m)
    calls = []

    def parse():
        calls.append(1)
        return s.claim.job_ad

    assert policy.number(m, "120", s, parse, NOW) == 120.0
    assert calls == []
    assert policy.truth(m, "TARGET.ProcId == 4", s, parse, NOW) is True
    assert calls == [1]
    assert policy.retirement_deadline(m, s, NOW) == NOW + 120


def test_slots_keep_no_instance_dict_and_static_slots_share_no_children():
    sd = static_startd()
    a, b = sd.machines["h1"].slots["slot1"], sd.machines["h2"].slots["slot2"]
    assert not hasattr(a, "__dict__") and not hasattr(busy(sd.machines["h1"]).claim, "__dict__")
    assert a.children is NO_CHILDREN and b.children is NO_CHILDREN


def test_partitionable_slots_have_their_own_children():
    ten = Resources(cpus=10, memory=16384, disk=1048576)
    sd = Startd(["h1", "h2"], StartdConfig(machine=ten, slot_types=(SlotTypeSpec(1, 1, True, ten),)),
                "127.0.0.1:9618", NOW)
    p1, p2 = sd.machines["h1"].slots["slot1"], sd.machines["h2"].slots["slot1"]
    assert p1.children is not p2.children and p1.children is not NO_CHILDREN
    busy(sd.machines["h1"])
    assert (p1.children, p2.children) == ({1}, set())
    assert sd.machines["h1"].slots["slot1_1"].children is NO_CHILDREN


def test_machines_share_slot_names_and_resource_limits():
    sd = static_startd()
    h1, h2 = sd.machines["h1"], sd.machines["h2"]
    n1 = next(k for k in h1.slots if k == "slot3")
    n2 = next(k for k in h2.slots if k == "slot3")
    assert n1 is n2
    # the slot index holds the slots themselves, no (machine, name) pair for each id
    assert all(s.machine.slots[s.short_name] is s for s in sd.index)
    assert h1.wrl is h2.wrl


def test_machine_ad_texts_are_built_lazily_and_equal_the_ads():
    sd = static_startd(hosts=("h1", "h2", "h3"))
    h1, h2, h3 = sd.machines.values()
    s = busy(h2, "slot2")
    h2.release(s, NOW, "done")
    h3.deleted.append("slot9_1@h3")
    for m in (h1, h2, h3):
        m.dirty = True
    want = [ads.ad_text(a) for m in (h1, h2, h3) for a in m.all_ads(NOW)]
    deleted: list[str] = []
    gen = machine_ad_texts([h1, h2, h3], NOW, deleted)
    first = next(gen)
    assert (h1.dirty, h2.dirty, h3.dirty) == (False, True, True)   # only the first machine built so far
    assert [first, *gen] == want
    assert deleted == ["slot9_1@h3"] and h3.deleted == [] and not any(m.dirty for m in (h1, h2, h3))


def test_update_chunks_take_ads_one_chunk_at_a_time_and_names_after_the_last():
    taken = []
    names: list[str] = []

    def texts():
        for i in range(UPDATE_CHUNK_ADS * 2 + 1):
            taken.append(i)
            yield f"[ N = {i} ]"
        names.append("gone")   # added by the generator once it has given every ad

    chunks = iter_update_chunks(texts(), names)
    ads_part, names_part = next(chunks)
    assert (len(ads_part), names_part, len(taken)) == (UPDATE_CHUNK_ADS, [], UPDATE_CHUNK_ADS + 1)
    rest = list(chunks)
    assert [len(a) for a, _ in rest] == [UPDATE_CHUNK_ADS, 1] and rest[-1][1] == ["gone"]
    all_texts = [f"[ N = {i} ]" for i in range(UPDATE_CHUNK_ADS * 2 + 1)]
    assert [(ads_part, names_part), *rest] == update_chunks(all_texts, ["gone"])


def test_timer_queue_runs_due_keys_in_time_order_once_behind_one_timer():
    async def main():
        clock = PoolClock(scale=1e6, epoch=0.0)   # a pool second is a microsecond
        fired = []

        def fire(key):
            fired.append(key)
            if key == "boom":
                raise RuntimeError("a failing callback does not stop the others")

        q = TimerQueue(clock, fire)
        t0 = clock.now()
        for key, dt in (("c", 3000), ("a", 1000), ("b", 2000), ("x", 1500), ("boom", 2500), ("later", 1e9)):
            q.set(key, t0 + dt)
        assert q.cancel("x") is True and q.cancel("x") is False
        q.set("b", t0 + 500)                      # set again, earlier: runs once, then
        deadline = time.monotonic() + 10
        while len(q) > 1 and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        armed = q._timer is not None and q._timer.pool_time == t0 + 1e9
        q.close()
        return fired, len(q), armed

    fired, left, armed = asyncio.run(main())
    assert fired == ["b", "a", "boom", "c"]
    assert (left, armed) == (0, True)


def test_timer_queue_keeps_its_heap_the_size_of_what_waits():
    async def main():
        q = TimerQueue(PoolClock(scale=1.0, epoch=0.0), lambda key: None)
        now = q.clock.now()
        for i in range(1000):
            q.set(f"k{i}", now + 3600 + i)
        for i in range(990):
            q.cancel(f"k{i}")
        sizes = (len(q), len(q._heap))
        q.close()
        return sizes

    n, heap = asyncio.run(main())
    assert n == 10 and heap <= 2 * n + 64


def test_a_timer_queue_whose_owner_says_what_is_current_keeps_no_dict():
    async def main():
        clock = PoolClock(scale=1e6, epoch=0.0)   # a pool second is a microsecond
        ends: dict[int, float] = {}               # the owner's own record (the startd: its claims' job ends)
        fired = []
        q = TimerQueue(clock, fired.append, current=lambda key, t: ends.get(key) == t)
        t0 = clock.now()
        a, b, c, x, later = 10, 20, 30, 40, 50
        for key, dt in ((c, 3000), (a, 1000), (b, 2000), (x, 1500), (later, 1e9)):
            ends[key] = t0 + dt
            q.set(key, t0 + dt)
        del ends[x]                               # the owner forgot x: its entry is stale
        ends[b] = t0 + 500                        # b ends earlier now: its first entry is stale
        q.set(b, t0 + 500)
        q.set(b, t0 + 500)                        # set twice for one time: runs once
        assert q._due is None and len(q) == 4 and x not in q and a in q
        deadline = time.monotonic() + 10
        while len(fired) < 3 and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.01)                 # (anything wrongly due would fire by now)
        q.close()
        return fired

    assert asyncio.run(main()) == [20, 10, 30]


def test_a_timer_queue_whose_owner_says_what_is_current_sweeps_stale_entries():
    async def main():
        ends: dict[int, float] = {}
        q = TimerQueue(PoolClock(scale=1.0, epoch=0.0), lambda key: None, current=lambda k, t: ends.get(k) == t)
        now = q.clock.now()
        biggest = 0
        for i in range(5000):
            if ends.pop(i - 10, None) is not None:   # ten wait at a time; the rest went (evicted, released)
                q.cancel(i - 10)
            ends[i] = now + 3600 + i
            q.set(i, ends[i])
            biggest = max(biggest, len(q._heap))
        waiting = sorted(k for t, k in q._heap if ends.get(k) == t)
        q.close()
        return biggest, waiting

    # Swept once the cancelled entries are more than those waiting and 128: never a heap of 5,000.
    biggest, waiting = asyncio.run(main())
    assert biggest <= 2 * 10 + 130 and waiting == list(range(4990, 5000))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.tuples(st.integers(0, 50).map(float), st.integers(-2**63, 2**63 - 1)), st.none()),
                max_size=200))
def test_the_array_heap_pops_what_heapq_pops(steps):
    # _PairHeap (a running job's end: 16 bytes, not a tuple's 72) against heapq, pushes and
    # pops interleaved (None pops), times that tie included, and a sweep at the end.
    from daemons.core.clock import _PairHeap
    h, ref = _PairHeap(), []
    for step in steps:
        if step is None:
            if ref:
                assert h.pop() == heapq.heappop(ref)
        else:
            h.push(*step)
            heapq.heappush(ref, step)
        assert len(h) == len(ref) and (not ref or h.peek() == ref[0])
    h.keep(lambda t, k: k % 3 != 0)
    ref = [e for e in ref if e[1] % 3 != 0]
    heapq.heapify(ref)
    assert [h.pop() for _ in range(len(h))] == [heapq.heappop(ref) for _ in range(len(ref))]


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=24), st.tuples(st.integers(0, 10**10), st.integers(0, 10**10)).map(
    lambda cp: f"{cp[0]}.{cp[1]}")))
def test_a_claims_job_id_reads_back_as_it_was_set(text):
    # Kept as an int of cluster and proc where it is one (32 bytes, not the text's 56).
    from daemons.startd.claimids import ClaimIds
    from daemons.startd.slots import Claim
    c = Claim(ClaimIds("127.0.0.1:1", 0), 1, "s", "127.0.0.1:2", "u", 0.0, 0.0)
    c.job_id = text
    assert c.job_id == text and bool(c.job_id) == bool(text)
    c.job_id = "12.3"
    assert c.job == (12 << 32) | 3 and c.job_id == "12.3"
