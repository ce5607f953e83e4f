"""daemons/startd/evalads.py: a kept slot ad brought up to date is the ad a fresh parse gives."""
import random

import classad2
import pytest

from daemons.core import ads
from daemons.startd import evalads
from daemons.startd.evalads import EvalAds
from tests.unit import startd_scenarios
from tests.unit.startd_scenarios import SCENARIOS, job


def fresh(m, s, now):
    return classad2.ClassAd(ads.ad_text(m.slot_ad(s, now, for_eval=True)))


def same(a: classad2.ClassAd, b: classad2.ClassAd) -> bool:
    return ads.exprs_of(a) == ads.exprs_of(b)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_kept_ads_equal_fresh_ones_at_every_checkpoint(monkeypatch, name):
    printed = startd_scenarios._texts
    seen = {"hits": 0, "pslots": False}

    def texts(sd, now):
        for m in sd.machines.values():
            for s in list(m.slots.values()):
                for _ in range(2):          # the second time comes from the kept ad
                    assert same(m.classad(s, now), fresh(m, s, now)), m.name_of(s)
        seen["hits"] = next(iter(sd.machines.values())).eval_ads.hits
        seen["pslots"] |= any(s.kind.value == "Partitionable" for m in sd.machines.values() for s in m.slots.values())
        return printed(sd, now)

    monkeypatch.setattr(startd_scenarios, "_texts", texts)
    SCENARIOS[name]()
    assert seen["hits"] > 0


PSLOTS = {"NUM_CPUS": "8", "MEMORY": "16384", "SLOT_TYPE_1": "100%", "SLOT_TYPE_1_PARTITIONABLE": "True",
          "NUM_SLOTS_TYPE_1": "1", "RANK": "TARGET.Prio"}
# Static slots whose policy looks at the job and at the claim (RANK, START), and a
# STARTD_ATTRS entry that overrides one of the slot's own items (the merged path).
STATIC = {"NUM_CPUS": "4", "MEMORY": "8192", "SLOT_TYPE_1": "cpus=1", "NUM_SLOTS_TYPE_1": "4",
          "RANK": "TARGET.Prio + ifThenElse(MY.RemoteOwner is undefined, 0, 100)",
          "START": "TARGET.Prio >= 0 && MY.State =!= \"Owner\""}
STATIC_OVERRIDE = dict(STATIC, STARTD_ATTRS="Mips", Mips="42")


@pytest.mark.parametrize("knobs", [PSLOTS, STATIC, STATIC_OVERRIDE], ids=["pslots", "static", "override"])
def test_claims_activations_and_releases_in_any_order_keep_the_ads_exact(knobs):
    rng = random.Random(3)
    sd = startd_scenarios._startd(knobs, hosts=2)
    now = startd_scenarios.NOW
    for step in range(300):
        now += rng.choice([0, 1, 7])
        m = rng.choice(list(sd.machines.values()))
        slots = list(m.slots.values())
        s = rng.choice(slots)
        op = rng.random()
        if op < 0.4 and (s.kind.value == "Partitionable" or (s.kind.value == "Static" and s.claim is None)):
            m.request_claim(s, job(step, RequestCpus=str(rng.choice([1, 2]))), "schedd@sub",
                            startd_scenarios.SCHEDD, rng.choice(["alice@d", "bob@d"]), now)
        elif op < 0.7 and s.claim is not None:
            m.activate(s, job(step), now)
        elif op < 0.85 and s.claim is not None:
            m.finish_job(s, now)
        elif s.claim is not None:
            m.release(s, now, "done")
        for t in m.slots.values():
            assert same(m.classad(t, now), fresh(m, t, now)), (step, m.name_of(t))


def test_only_a_bounded_number_of_ads_is_kept():
    kept = EvalAds(keep_slots=3)
    for i in range(10):
        kept.slot_ad(i, None, {"MyType": "Machine", "Cpus": i}, {})
    assert len(kept._slots) == 3 and kept.misses == 10
    ad = kept.slot_ad(9, None, {"MyType": "Machine", "Cpus": 1.5, "L": [1, 2], "E": ads.Expr("Cpus * 2"), "S": "x"}, {})
    assert kept.hits == 1 and ad.eval("E") == 3.0 and ad.eval("S") == "x"
    ad = kept.slot_ad(9, None, {"MyType": "Machine", "Cpus": -0.0, "E": ads.Expr("Cpus + 1")}, {})
    assert "L" not in ad and ad.eval("E") == 1.0 and same(ad, classad2.ClassAd(
        ads.ad_text({"MyType": "Machine", "Cpus": -0.0, "E": ads.Expr("Cpus + 1")})))
    assert evalads.KEEP >= 100 and evalads.KEEP_SLOTS >= 100


def test_one_kept_ad_serves_every_slot_of_its_shape_in_any_order():
    # slot2 of either machine (one claimed, one not) share a static part and so one kept
    # ad; slot3 has its own. Each ad given out is exact for its slot at that moment.
    sd = startd_scenarios._startd(STATIC, hosts=2)
    now = startd_scenarios.NOW
    m1, m2 = sd.machines.values()
    startd_scenarios._run(m1, "slot2", job(1), now)
    kept = EvalAds()
    from daemons.startd.slotad import eval_parts
    for m, s in [(m1, m1.slots["slot2"]), (m2, m2.slots["slot2"]), (m1, m1.slots["slot2"]), (m2, m2.slots["slot3"]),
                 (m2, m2.slots["slot2"])]:
        assert same(kept.slot_ad(id(s), *eval_parts(m, s, now + 5)), fresh(m, s, now + 5))
    assert (kept.hits, kept.misses, len(kept._shapes), len(kept._slots)) == (3, 2, 2, 0)
    # A slot whose STARTD_ATTRS override its own item is kept by slot.
    sd = startd_scenarios._startd(STATIC_OVERRIDE, hosts=1)
    [m] = sd.machines.values()
    for s in [m.slots["slot1"], m.slots["slot2"], m.slots["slot1"]]:
        assert same(kept.slot_ad(id(s), *eval_parts(m, s, now)), fresh(m, s, now))
    assert len(kept._slots) == 2 and ads.get(fresh(m, m.slots["slot1"], now), "Mips") == 42
