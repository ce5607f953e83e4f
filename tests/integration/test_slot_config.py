"""Slot configuration as HTCondor's startd reads it, on real pools: per-slot and per-slot-type
knobs, the default slot layout, IS_OWNER, boolean ranks, consumption policies."""
from __future__ import annotations

from daemons.cli.client import wait_for

from .conftest import STATIC, attr, wait_jobs, wait_slots

LONG = "executable = /bin/sleep\narguments = 100000\n{extra}queue {n}\n"


def _by_name(slots) -> dict:
    return {attr(s, "Name").split("@")[0]: s for s in slots}


async def test_slotN_startd_attrs_and_slot_type_knobs_apply_to_their_slots_alone(make_pool):
    """ep-policy-configuration.rst, "Configuring STARTD_ATTRS on a per-slot basis", and
    Resource.cpp init_classad: an attribute in STARTD_ATTRS takes SLOT<N>_<attr>, else
    SLOT_TYPE_<T>_<attr>, else <attr>; a name defined for no slot is skipped (the startd
    starts). Resource.cpp publish_slot_config_overrides: SLOT_TYPE_<N>_SLOT_WEIGHT,
    _START and the other policy knobs apply to their slot type."""
    pool = make_pool("NUM_CPUS = 3\nSLOT_TYPE_1 = cpus=1\nNUM_SLOTS_TYPE_1 = 2\nSLOT_TYPE_2 = cpus=1\n"
                     "NUM_SLOTS_TYPE_2 = 1\nSTARTD_ATTRS = MachineDataSet, NotDefinedAnywhere\n"
                     'SLOT1_MachineDataSet = "S00"\nSLOT_TYPE_2_MachineDataSet = "S02"\n'
                     "SLOT_TYPE_2_SLOT_WEIGHT = 10\nSLOT_TYPE_2_START = False\n")
    async with pool.client() as c:
        slots = _by_name(await wait_slots(c, 3))
        assert {n: attr(s, "MachineDataSet") for n, s in slots.items()} == {
            "slot1": "S00", "slot2": None, "slot3": "S02"}
        assert {n: attr(s, "SlotWeight") for n, s in slots.items()} == {"slot1": 1, "slot2": 1, "slot3": 10}
        await c.submit(LONG.format(extra="", n=3), "three.sub", "amy")
        running = await wait_jobs(c, "JobStatus == 2", 2)
        assert sorted(attr(j, "RemoteHost") for j in running) == ["slot1@testhost", "slot2@testhost"]
    log = (pool.state_dir / "log" / "StartLog").read_text()
    assert "STARTD_ATTRS names NotDefinedAnywhere, which is not defined for slot1, slot2, slot3" in log
    assert "STARTD_ATTRS names MachineDataSet, which is not defined for slot2" in log


async def test_a_boolean_rank_counts_as_one(make_pool):
    """matchmaker.cpp calculateRanks reads the job's Rank with EvalFloat, and the ClassAd
    library counts booleans among numbers (classad/value.h: NUMBER_VALUES includes
    BOOLEAN_VALUE): `rank = JobDataSet =?= MachineDataSet` is 1.0 on the slot that has the
    data set, so the job goes there rather than to slot1, which the default
    NEGOTIATOR_POST_JOB_RANK (-SlotID) would prefer."""
    pool = make_pool(STATIC + "NUM_CPUS = 2\nSTARTD_ATTRS = MachineDataSet\nSLOT1_MachineDataSet = \"S00\"\n"
                     'SLOT2_MachineDataSet = "S01"\nNEGOTIATOR_PRE_JOB_RANK = 0\n')
    async with pool.client() as c:
        await wait_slots(c, 2)
        await c.submit(LONG.format(extra='+JobDataSet = "S01"\nrank = JobDataSet =?= MachineDataSet\n', n=1),
                       "rank.sub", "bob")
        running = await wait_jobs(c, "JobStatus == 2", 1)
        assert attr(running[0], "RemoteHost") == "slot2@testhost"


async def test_default_slot_layout_is_one_partitionable_slot(make_pool):
    """slot_builder.cpp countTypes: without NUM_SLOTS_TYPE_<N>, slot type 0 is partitionable
    unless SLOT_TYPE_0_PARTITIONABLE = False (the default since HTCondor 23), and NUM_SLOTS
    defaults to 1 for it: one partitionable slot with all the machine's resources."""
    pool = make_pool("NUM_CPUS = 4\nMEMORY = 4096\n")
    async with pool.client() as c:
        slots = await wait_slots(c, 1)
        assert len(slots) == 1
        s = slots[0]
        assert (attr(s, "Name"), attr(s, "PartitionableSlot"), attr(s, "TotalSlotCpus"), attr(s, "TotalSlotMemory"),
                attr(s, "SlotTypeID")) == ("slot1@testhost", True, 4, 4096, 0)
        await c.submit(LONG.format(extra="", n=4), "four.sub", "cat")
        await wait_jobs(c, "JobStatus == 2", 4)
        dslots = await wait_slots(c, 4, "DynamicSlot =?= true")
        assert sorted(attr(d, "Name") for d in dslots) == [f"slot1_{i}@testhost" for i in range(1, 5)]
        assert {attr(d, "SlotTypeID") for d in dslots} == {0}


async def test_is_owner_puts_a_slot_in_the_owner_state_where_nothing_matches(make_pool):
    """ResState.cpp: an unclaimed slot whose IS_OWNER is true goes to the Owner state
    ("IS_OWNER is TRUE"); a slot in the Owner state takes no claim. IS_OWNER may be set
    per slot type (Resource.cpp publish_slot_config_overrides)."""
    pool = make_pool(STATIC + "NUM_CPUS = 2\nSLOT_TYPE_1 = cpus=1\nNUM_SLOTS_TYPE_1 = 1\nSLOT_TYPE_2 = cpus=1\n"
                     "NUM_SLOTS_TYPE_2 = 1\nSLOT_TYPE_2_IS_OWNER = True\n")
    async with pool.client() as c:
        slots = _by_name(await wait_slots(c, 2))
        assert {n: (attr(s, "State"), attr(s, "Activity")) for n, s in slots.items()} == {
            "slot1": ("Unclaimed", "Idle"), "slot2": ("Owner", "Idle")}
        since = await c.pool_now()
        await c.submit(LONG.format(extra="", n=2), "two.sub", "dan")
        running = await wait_jobs(c, "JobStatus == 2", 1)
        assert [attr(j, "RemoteHost") for j in running] == ["slot1@testhost"]

        async def later_cycle():
            return [r for r in await c.cycles() if r.start > since and r.rejections]
        await wait_for(later_cycle, timeout_s=30, what="a cycle that rejects the second job")
        assert len(await c.jobs("JobStatus == 2")) == 1
        owner = _by_name(await c.ads("Machine"))["slot2"]
        assert attr(owner, "State") == "Owner"


# HTCondor's own regression test src/condor_tests/job_consumption_policies_basic_van.run,
# its configuration as published (knobs htcpool does not emulate are read and ignored).
CONSUMPTION_POLICIES_BASIC = """\
NUM_CPUS = 20
MACHINE_RESOURCE_tokens = 3
CONSUMPTION_POLICY = True
CONSUMPTION_CPUS = ifthenelse(target.Cpus isnt undefined, quantize(target.Cpus, {1}), 1)
CONSUMPTION_MEMORY = ifthenelse(target.Memory isnt undefined, quantize(target.Memory, {1}), 1)
CONSUMPTION_DISK = ifthenelse(target.Disk isnt undefined, quantize(target.Disk, {100}), 100)
CONSUMPTION_TOKENS = ifthenelse(target.Tokens isnt undefined, target.Tokens, 0)
SLOT_WEIGHT = Cpus
NUM_CLAIMS = 5
SLOT_TYPE_1 = cpus=5,memory=100,disk=25%,tokens=0
SLOT_TYPE_1_PARTITIONABLE = True
SLOT_TYPE_1_NUM_CLAIMS = 10
NUM_SLOTS_TYPE_1 = 1
SLOT_TYPE_2 = cpus=5,memory=100,disk=25%,tokens=0
SLOT_TYPE_2_PARTITIONABLE = True
NUM_SLOTS_TYPE_2 = 1
SLOT_TYPE_2_CONSUMPTION_MEMORY = quantize(target.RequestMemory, {25})
SLOT_TYPE_2_SLOT_WEIGHT = floor(Memory / 25)
SLOT_TYPE_3 = cpus=5,memory=100,disk=25%,tokens=3
SLOT_TYPE_3_PARTITIONABLE = True
NUM_SLOTS_TYPE_3 = 1
SLOT_TYPE_3_CONSUMPTION_TOKENS = 1
SLOT_TYPE_3_CONSUMPTION_CPUS = 0
SLOT_TYPE_3_CONSUMPTION_MEMORY = 0
SLOT_TYPE_3_CONSUMPTION_DISK = 0
SLOT_TYPE_3_SLOT_WEIGHT = Tokens
SLOT_TYPE_4 = cpus=5,memory=100,disk=25%,tokens=0
SLOT_TYPE_4_PARTITIONABLE = True
NUM_SLOTS_TYPE_4 = 1
SLOT_TYPE_4_CONSUMPTION_CPUS = TotalSlotCpus
SLOT_TYPE_4_CONSUMPTION_MEMORY = TotalSlotMemory
SLOT_TYPE_4_CONSUMPTION_DISK = floor(0.9 * Disk)
SLOT_TYPE_4_CONSUMPTION_TOKENS = TotalSlotTokens
MUST_MODIFY_REQUEST_EXPRS = False
CLAIM_PARTITIONABLE_LEFTOVERS = False
NEGOTIATOR_USE_SLOT_WEIGHTS = True
CLAIM_WORKLIFE=0
MAXJOBRETIREMENTTIME = 3600
PREEMPT = False
RANK = 0
PREEMPTION_REQUIREMENTS = False
NEGOTIATOR_CONSIDER_PREEMPTION = False
NEGOTIATOR_MATCHLIST_CACHING = False
NEGOTIATOR_INTERVAL = 30
START = (Cpus > 0) || (SlotType is "Dynamic")
"""


async def test_consumption_policies_basic_van(make_pool):
    """HTCondor's regression test job_consumption_policies_basic_van: 13 one-cpu jobs
    fill four partitionable slots with four consumption policies in one cycle, each
    slot used until it runs out (slot1 x5, slot2 x4, slot3 x3, slot4 x1), and the slots
    end as the test expects: SLOT_TYPE_<N>_SLOT_WEIGHT per slot type (Resource.cpp), and a
    dynamic slot gets at least 1 cpu and 1 MB even when the policy consumes none, taken
    from the partitionable slot (Resource.cpp create_dslot: "MAX(num_cpus, 1.0)"), so
    slot3 keeps 2 of its 5 cpus and 97 of its 100 MB."""
    pool = make_pool(CONSUMPTION_POLICIES_BASIC)
    async with pool.client() as c:
        await wait_slots(c, 4)
        await c.submit("executable = /bin/sleep\narguments = 3600\nrequest_cpus = 1\nrequest_memory = 1\n"
                       "request_disk = 1\nqueue 13\n", "cp.sub", "eve")
        await wait_jobs(c, "JobStatus == 2", 13)

        async def all_split():
            found = await c.ads("Machine", "DynamicSlot =?= true")
            return found if len(found) == 13 else None
        dslots = await wait_for(all_split, timeout_s=30, what="13 dynamic slots")
        pslots = await c.ads("Machine", "DynamicSlot =!= true")

        def table(ads_):
            out: dict[str, int] = {}
            for a in ads_:
                key = " ".join(str(int(attr(a, k))) for k in ("SlotTypeID", "SlotWeight", "Cpus", "Memory", "Tokens"))
                out[key] = out.get(key, 0) + 1
            return out
        assert table(pslots) == {"1 0 0 95 0": 1, "2 0 1 0 0": 1, "3 0 2 97 0": 1, "4 0 0 0 0": 1}
        assert table(dslots) == {"1 1 1 1 0": 5, "2 1 1 25 0": 4, "3 1 1 1 1": 3, "4 5 5 100 0": 1}
    matched = [line.split("Successfully matched with ")[1].split("@")[0]
               for line in (pool.state_dir / "log" / "NegotiatorLog").read_text().splitlines()
               if "Successfully matched with" in line]
    assert matched == ["slot1"] * 5 + ["slot2"] * 4 + ["slot3"] * 3 + ["slot4"]


async def test_a_request_that_does_not_set_request_res_consumes_none(make_pool):
    """consumption_policy.cpp cp_compute_consumption: "a RequestXxx attribute not present -
    default to zero" while Consumption<Res> is evaluated (and removed again afterwards).
    Here the GPU policy would consume 1 for an undefined request, but a job that never
    asks for GPUs is evaluated with RequestGPUs = 0: it matches, consumes no GPU, and
    nothing is logged as a bad policy."""
    pool = make_pool("NUM_CPUS = 4\nMACHINE_RESOURCE_GPUs = 2\nSLOT_TYPE_1 = 100%\nSLOT_TYPE_1_PARTITIONABLE = True\n"
                     "NUM_SLOTS_TYPE_1 = 1\nCONSUMPTION_POLICY = True\nCONSUMPTION_GPUS = TARGET.RequestGPUs ?: 1\n"
                     "CLAIM_PARTITIONABLE_LEFTOVERS = False\n")
    async with pool.client() as c:
        await wait_slots(c, 1)
        await c.submit(LONG.format(extra="", n=3), "cpu.sub", "fay")
        await c.submit(LONG.format(extra="request_GPUs = 1\n", n=1), "gpu.sub", "fay")
        await wait_jobs(c, "JobStatus == 2", 4)

        # Busy: the startd activated each claim too (it checks the job against the slot again).
        async def split():
            found = await c.ads("Machine", 'DynamicSlot =?= true && Activity == "Busy"')
            return found if len(found) == 4 else None
        dslots = await wait_for(split, timeout_s=30, what="four busy dynamic slots")
        assert sorted(attr(d, "GPUs") for d in dslots) == [0, 0, 0, 1]
        p = (await c.ads("Machine", "PartitionableSlot =?= true"))[0]
        assert attr(p, "GPUs") == 1
    log = (pool.state_dir / "log" / "NegotiatorLog").read_text()
    assert "does not evaluate" not in log
    assert "activation failed" not in (pool.state_dir / "log" / "StartLog").read_text()
