"""Startd scenarios whose every slot ad is printed at checkpoints, to show that the startd's
compact storage (a running job's ad kept as text, __slots__, streamed advertisements)
prints exactly the ads the earlier builder printed (tests/unit/data/startd_ads_before.json,
written by the code before that change).

Regenerate (only when a slot ad is meant to change): HTCPOOL_WRITE_STARTD_ADS=1
.venv/bin/python -m pytest tests/unit/test_startd_memory.py -k printed
"""
from __future__ import annotations

from typing import Callable

import classad2

from daemons.core import ads
from daemons.core.config import Param
from daemons.startd import preemption
from daemons.startd.config import read_startd_config
from daemons.startd.drain import start_drain
from daemons.startd.machines import Startd

NOW = 1_000_000.0
SCHEDD = "127.0.0.1:4000"
OTHER = "127.0.0.1:5000"


def job(proc: int, **extra: str) -> classad2.ClassAd:
    attrs = {"ClusterId": "7", "ProcId": str(proc), "Owner": '"alice"', "RequestCpus": "1",
             "RequestMemory": "100", "RequestDisk": "1000", "Requirements": "true", "Duration": "5000",
             "Department": '"physics"', "Prio": str(proc)}
    attrs.update(extra)
    return classad2.ClassAd("[" + "; ".join(f"{k} = {v}" for k, v in attrs.items()) + "]")


def _startd(knobs: dict[str, str], hosts: int = 2) -> Startd:
    return Startd([f"h{i}" for i in range(1, hosts + 1)], read_startd_config(Param.from_dict(knobs)),
                  "127.0.0.1:9618", NOW, secret=lambda n: f"s{n:04d}")


def _texts(sd: Startd, now: float) -> list[str]:
    """The ads as the startd sends them (printed from their static part and the rest); each
    has the attributes of the ad built as a dictionary."""
    texts = [t for m in sd.machines.values() for t in m.all_ads(now, as_text=True)]
    built = [ads.ad_text(a) for m in sd.machines.values() for a in m.all_ads(now)]
    assert [ads.exprs_of(classad2.ClassAd(t)) for t in texts] == [ads.exprs_of(classad2.ClassAd(t)) for t in built]
    return texts


def _run(m, name: str, j: classad2.ClassAd, now: float, submitter: str = "alice@d", schedd: str = SCHEDD) -> str:
    out = m.request_claim(m.slots[name], j, "schedd@sub", schedd, submitter, now)
    assert out.ok, out.reason
    slot = m.slots[out.slot_name.split("@")[0]]
    ok, why, _ = m.activate(slot, j, now)
    assert ok, why
    return out.slot_name


def static_dept() -> list[str]:
    """The bench's dept machines, with retirement, accounting groups and a preempting claim."""
    sd = _startd({"NUM_CPUS": "8", "MEMORY": "32768", "DISK": "1000000", "SLOT_TYPE_1": "cpus=1",
                  "NUM_SLOTS_TYPE_1": "8", "Department": '"physics"', "STARTD_ATTRS": "Department",
                  "START": "TARGET.Department =?= MY.Department", "RANK": "TARGET.Prio",
                  "MAXJOBRETIREMENTTIME": "TARGET.RequestCpus * 600"}, hosts=1)
    m = sd.machines["h1"]
    out = [*_texts(sd, NOW)]
    _run(m, "slot1", job(0, AccountingGroup='"grp.alice"', ConcurrencyLimits='"lic:2"'), NOW)
    _run(m, "slot2", job(1, MaxJobRetirementTime="300"), NOW + 1)
    _run(m, "slot3", job(2, MaxJobRetirementTime="9000"), NOW + 2)
    m.request_claim(m.slots["slot4"], job(3), "schedd@sub", SCHEDD, "alice@d", NOW + 3)
    out += _texts(sd, NOW + 100)
    pre = m.request_claim(m.slots["slot1"], job(9, AccountingGroup='"grp.bob"'), "schedd@other", OTHER, "bob@d",
                          NOW + 200, preempting=True)
    assert pre.ok and pre.pending, pre.reason
    out += _texts(sd, NOW + 250)
    preemption.tick(m, m.slots["slot1"], NOW + 800)
    out += _texts(sd, NOW + 801)
    m.finish_job(m.slots["slot2"], NOW + 5001)
    out += _texts(sd, NOW + 5002)
    return out


def pslot_gpus() -> list[str]:
    """A partitionable slot with a custom resource, dynamic slots busy and idle, leftovers."""
    sd = _startd({"NUM_CPUS": "8", "MEMORY": "16384", "DISK": "1000000", "MACHINE_RESOURCE_GPUs": "2",
                  "SLOT_TYPE_1": "100%", "NUM_SLOTS_TYPE_1": "1", "SLOT_TYPE_1_PARTITIONABLE": "True",
                  "STARTD_ATTRS": "Foo", "Foo": "1 + 2"}, hosts=1)
    m = sd.machines["h1"]
    out = [*_texts(sd, NOW)]
    _run(m, "slot1", job(0, RequestGPUs="1", ConcurrencyLimits='"gpu"'), NOW)
    _run(m, "slot1", job(1, RequestCpus="3", RequestMemory="3000"), NOW + 5)
    m.request_claim(m.slots["slot1"], job(2), "schedd@sub", SCHEDD, "alice@d", NOW + 6)
    out += _texts(sd, NOW + 60)
    m.finish_job(m.slots["slot1_1"], NOW + 5000)
    m.release(m.slots["slot1_2"], NOW + 5000, "done")
    out += _texts(sd, NOW + 5001)
    return out


def consumption() -> list[str]:
    """A p-slot with a consumption policy (negotiator-side splitting)."""
    sd = _startd({"NUM_CPUS": "4", "MEMORY": "8192", "DISK": "100000", "SLOT_TYPE_1": "100%",
                  "NUM_SLOTS_TYPE_1": "1", "SLOT_TYPE_1_PARTITIONABLE": "True",
                  "SLOT_TYPE_1_CONSUMPTION_POLICY": "True"}, hosts=1)
    m = sd.machines["h1"]
    out = [*_texts(sd, NOW)]
    _run(m, "slot1", job(0, RequestMemory="1000", AccountingGroup='"grp.x"'), NOW)
    out += _texts(sd, NOW + 10)
    return out


def draining() -> list[str]:
    """A graceful drain of a machine with busy slots and an idle claim."""
    sd = _startd({"NUM_CPUS": "4", "MEMORY": "8192", "DISK": "100000", "SLOT_TYPE_1": "cpus=1",
                  "NUM_SLOTS_TYPE_1": "4", "MAXJOBRETIREMENTTIME": "1000"}, hosts=1)
    m = sd.machines["h1"]
    _run(m, "slot1", job(0, MaxJobRetirementTime="100"), NOW)
    _run(m, "slot2", job(1), NOW)
    m.request_claim(m.slots["slot3"], job(2), "schedd@sub", SCHEDD, "alice@d", NOW)
    out = [*_texts(sd, NOW + 10)]
    start_drain(m, "graceful", False, "", "", "test", "r1", NOW + 20)
    out += _texts(sd, NOW + 30)
    return out


def preempt_policy() -> list[str]:
    """PREEMPT that looks at the running job (TARGET), retiring then vacating."""
    sd = _startd({"NUM_CPUS": "2", "MEMORY": "4096", "DISK": "100000", "SLOT_TYPE_1": "cpus=1",
                  "NUM_SLOTS_TYPE_1": "2", "PREEMPT": "TARGET.Prio > 0", "WANT_VACATE": "TARGET.Prio > 5",
                  "MAXJOBRETIREMENTTIME": "10", "MachineMaxVacateTime": "TARGET.Prio * 10"}, hosts=1)
    m = sd.machines["h1"]
    _run(m, "slot1", job(0), NOW)
    _run(m, "slot2", job(7), NOW)
    preempted = [s.short_name for s in preemption.check_preempt(m, NOW + 50)]
    out = [*_texts(sd, NOW + 51), repr(preempted)]
    for s in m.slots.values():
        preemption.tick(m, s, NOW + 60)
    out += _texts(sd, NOW + 61)
    out += [repr([(e.kind, e.job_id, e.slot_name) for e in m.outbox])]
    return out


SCENARIOS: dict[str, Callable[[], list[str]]] = {
    "static_dept": static_dept, "pslot_gpus": pslot_gpus, "consumption": consumption,
    "draining": draining, "preempt_policy": preempt_policy,
}
