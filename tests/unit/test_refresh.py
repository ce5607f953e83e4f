"""Periodic refreshes of slot ads (daemons/startd/refresh.py): nothing in a slot ad but
the refreshed attributes follows the clock, and a collector that holds the ads and takes
the refreshes ends up with the ads a whole periodic update would have given it."""
from __future__ import annotations

from pathlib import Path

import classad2
import pytest

from daemons.collector.store import AdStore
from daemons.core import ads
from daemons.startd import refresh
from daemons.startd.drain import expected_draining
from daemons.startd.slotad import clock_attrs
from tests.unit import startd_scenarios
from tests.unit.startd_scenarios import SCENARIOS
from tests.unit.test_startd_daemon_updates import job, startd


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_only_the_refreshed_attributes_follow_the_clock(monkeypatch, name):
    printed = startd_scenarios._texts
    checked = [0]

    def texts(sd, now):
        for m in sd.machines.values():
            for s in m.slots.values():
                for later in (now, now + 1, now + 37, now + 4000):
                    before = m.slot_ad(s, now)
                    before.update(expected_draining(m, later))
                    before.update(clock_attrs(m, s, later))
                    assert list(before.items()) == list(m.slot_ad(s, later).items()), m.name_of(s)
                    checked[0] += 1
        return printed(sd, now)

    monkeypatch.setattr(startd_scenarios, "_texts", texts)
    SCENARIOS[name]()
    assert checked[0] > 0


class Collector:
    """A stand-in collector client over a real AdStore."""

    def __init__(self) -> None:
        self.store = AdStore(1e9)
        self.now = 0.0
        self.whole = 0
        self.refreshed = 0

    async def update(self, ad_texts, *, invalidate_type="", invalidate_names=(), give_up_after_s=None):
        n = 0
        for t in ad_texts:
            p = self.store.prepare(t)
            self.store.update_prepared(p, self.now) if p else self.store.update(ads.parse_ad(t), self.now)
            n += 1
        self.store.invalidate(invalidate_type or "Machine", list(invalidate_names))
        self.whole += n
        return n

    async def refresh(self, my_type, refreshes, give_up_after_s=None):
        missed = []
        for names, items, own in refreshes:
            common = self.store.refresh_items(items)
            for i, n in enumerate(names):
                new = common + (self.store.refresh_items(own[i]) if own else [])
                if self.store.refresh(my_type, n, new, self.now):
                    self.refreshed += 1
                else:
                    missed.append(n)
        return missed

    def slot_ads(self) -> dict[str, dict[str, str]]:
        out = {}
        for t in self.store.query("Machine", self.now, include_private=True):
            ad = classad2.ClassAd(t)
            del ad["LastHeardFrom"]
            out[ad.eval("Name")] = ads.exprs_of(ad)
        return out


def startd_ads(d) -> dict[str, dict[str, str]]:
    now = d.clock.now()
    return {m.name_of(s): ads.exprs_of(classad2.ClassAd(ads.ad_text(m.slot_ad(s, now))))
            for m in d.model.machines.values() for s in m.slots.values()}


async def test_refreshed_ads_are_the_ads_a_whole_update_gives(tmp_path: Path, monkeypatch):
    c = Collector()
    d = startd(tmp_path, c)
    clock = [1_000_000.0]
    monkeypatch.setattr(d.clock, "now", lambda: clock[0])
    await d.advertise()                       # first: every machine is dirty, all whole
    assert c.whole == 7 and c.refreshed == 0
    h1, h2 = d.model.machines["h1"], d.model.machines["h2"]
    out = d.request_claim(h1.slots["slot1"].capability, job(500), "schedd", "127.0.0.1:1", "alice@d")
    assert out.ok
    d.activate(out.claim_id, job(500))
    for step in range(4):
        clock[0] += 100
        c.now = clock[0]
        if step == 1:
            d.release([out.claim_id], "done")   # a change: that slot goes whole
        whole = c.whole
        await d.advertise()
        assert c.slot_ads() == startd_ads(d), step
        assert c.whole - whole == (1 + (1 if step in (0, 1) else 0))   # daemon ad + changed slots
    assert c.refreshed > 0 and d.ads_refreshed == c.refreshed
    # A collector that lost the ads: refreshes miss, and the slots are sent whole again.
    c.store = AdStore(1e9)
    await d.advertise()
    assert all(s.short_name in m.touched for m in (h1, h2) for s in m.slots.values())
    await d._flush_dirty()
    assert c.slot_ads() == startd_ads(d)


def test_the_plan_leaves_out_what_is_sent_whole():
    sd = startd_scenarios._startd({"NUM_CPUS": "2", "SLOT_TYPE_1": "cpus=1", "NUM_SLOTS_TYPE_1": "2"}, hosts=3)
    h1, h2, h3 = sd.machines.values()
    for m in (h1, h2, h3):
        m.dirty = False
    h2.dirty = True
    h3.touch(h3.slots["slot1"])
    sent = refresh.whole([m for m in (h1, h2, h3) if m.due])
    assert sent == {"h2": None, "h3": frozenset({"slot1"})}
    h3.touched.clear()
    h2.dirty = False
    planned = list(refresh.plan([h1, h2, h3], lambda: 5.0, sent))
    assert [r.names for r in planned] == [("slot1@h1", "slot2@h1"), ("slot2@h3",)]
    assert planned[0].items.startswith("ExpectedMachineGracefulDrainingCompletion = 5;") and planned[0].own == ()
