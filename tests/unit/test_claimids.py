"""Claim ids kept as numbers (daemons/startd/claimids.py): printed in HTCondor's shape,
found again only from the whole id, secret included, and unguessable across startds."""
import classad2

from daemons.startd.claimids import IX_STEP, ClaimIds
from daemons.startd.config import Resources, SlotTypeSpec, StartdConfig
from daemons.startd.machines import Startd
from daemons.startd.slots import OFFER_AFTER_CLAIM

ADDR = "127.0.0.1:9618"


def test_an_id_has_htcondors_shape_and_its_number_back():
    ids = ClaimIds(ADDR, 1000.7)
    n = ids.next()
    text = ids.text(n)
    addr, started, seq, secret = text.split("#")
    assert (addr, started, seq) == (f"<{ADDR}>", "1000", str(n))
    assert len(secret) == 32 and int(secret, 16) >= 0          # 128 bits, hex
    assert ids.text(n) == text                                # printed again: the same id
    assert ids.number(text) == n and ids.text(0) == ""


def test_only_the_whole_id_finds_its_number():
    ids = ClaimIds(ADDR, 1000)
    a, b = ids.next(), ids.next()
    ta, tb = ids.text(a), ids.text(b)
    prefix, secret_a = ta.rsplit("#", 1)
    forged = [
        prefix + "#" + tb.rsplit("#", 1)[1],                   # b's secret on a's number
        prefix + "#" + "0" * 32,
        prefix + "#" + secret_a[:-1],                         # a secret cut short
        ta + "0",
        ta.replace(f"#{a}#", f"#0{a}#"),                     # the number spelled otherwise
        f"<{ADDR}>#1000#{ids.next(0) + (1 << 24)}#" + secret_a,   # a number not given out yet
        ta.replace("127.0.0.1", "127.0.0.2"),                 # another startd's address
        ta.replace("#1000#", "#1001#"),                       # another start time
        ta[:-1] + "é",                                        # not ASCII
        "", "#", f"<{ADDR}>#1000#", f"<{ADDR}>#1000#x#y", f"<{ADDR}>#1000#" + "9" * 40 + "#z",
    ]
    assert [ids.number(t) for t in forged] == [0] * len(forged)
    assert (ids.number(ta), ids.number(tb)) == (a, b)


def test_two_startds_with_the_same_address_and_start_give_different_secrets():
    one, two = ClaimIds(ADDR, 1000), ClaimIds(ADDR, 1000)
    n1, n2 = one.next(), two.next()
    assert n1 == n2 and one.text(n1) != two.text(n2)
    assert two.number(one.text(n1)) == 0                       # a restarted startd knows none of the old ids


def test_a_startd_finds_claims_and_offers_by_their_ids_alone():
    one = Resources(cpus=1, memory=1024, disk=10000)
    sd = Startd(["h1"], StartdConfig(machine=Resources(cpus=2, memory=2048, disk=20000),
                                     slot_types=(SlotTypeSpec(1, 2, False, one),)), ADDR, 1000.0)
    m = sd.machines["h1"]
    s = m.slots["slot1"]
    offer = s.capability
    assert sd.find_capability(offer) == (m, s) and sd.find_claim(offer) is None
    job = classad2.ClassAd('[ClusterId = 1; ProcId = 0; RequestCpus = 1; RequestMemory = 1; RequestDisk = 1; '
                           'Requirements = true; Duration = 60]')
    out = m.request_claim(s, job, "schedd@x", "127.0.0.1:1", "u@x", 1000.0)
    assert out.ok and out.claim_id == s.claim.id
    assert sd.find_claim(out.claim_id) == (m, s)
    assert sd.find_capability(offer) is None                   # the offer was taken
    assert sd.find_capability(s.capability) == (m, s)          # the claimed slot's offer for a preempting claim
    assert s.offer == OFFER_AFTER_CLAIM and s.cap == s.claim.seq + IX_STEP   # the number after the claim's
    assert m.slot_ad(s, 1000.0)["PublicClaimId"] == out.claim_id.rsplit("#", 1)[0]
    m.release(s, 1001.0, "done")
    assert sd.find_claim(out.claim_id) is None and sd.keepalive([out.claim_id], "", 1002.0) == [out.claim_id]


def test_an_old_id_does_not_find_the_dynamic_slot_that_took_its_slots_index():
    four = Resources(cpus=4, memory=4096, disk=40000)
    sd = Startd(["h1"], StartdConfig(machine=four, slot_types=(SlotTypeSpec(1, 1, True, four),)), ADDR, 1000.0)
    m = sd.machines["h1"]
    p = m.slots["slot1"]
    job = classad2.ClassAd('[ClusterId = 1; ProcId = 0; RequestCpus = 1; RequestMemory = 1; RequestDisk = 1; '
                           'Requirements = true; Duration = 60]')
    first = m.request_claim(p, job, "schedd@x", "127.0.0.1:1", "u@x", 1000.0)
    d1 = m.slots["slot1_1"]
    old_offer, old_ix = d1.capability, d1.ix
    m.release(d1, 1001.0, "done")                              # slot1_1 is deleted, its index freed
    second = m.request_claim(p, job, "schedd@x", "127.0.0.1:1", "u@x", 1002.0)
    d2 = m.slots["slot1_1"]
    assert d2 is not d1 and d2.ix == old_ix                    # the new dynamic slot took the index
    assert sd.find_claim(first.claim_id) is None and sd.find_capability(old_offer) is None
    assert sd.keepalive([first.claim_id], "", 1003.0) == [first.claim_id]
    assert sd.find_claim(second.claim_id) == (m, d2) and sd.find_capability(d2.capability) == (m, d2)
    assert sd.find_capability(p.capability) == (m, p)          # the p-slot keeps its own index
    assert len(sd.index) == 2
