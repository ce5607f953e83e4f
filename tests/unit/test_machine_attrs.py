"""schedd/machine_attrs.py: MachineAttr<X><N> as HTCondor's schedd records them
(schedd.cpp, Scheduler::InsertMachineAttrs and RotateAttributeList)."""
from __future__ import annotations

import classad2

from daemons.schedd.machine_attrs import on_leave, on_start

SYSTEM = ("Cpus", "SlotWeight")


def slot(**attrs) -> classad2.ClassAd:
    ad = classad2.ClassAd()
    for k, v in attrs.items():
        ad[k] = v
    return ad


def test_a_start_records_the_jobs_and_the_systems_attributes():
    job = {"JobMachineAttrs": '"Machine,GLIDEIN_Site"'}
    got = on_start(job, slot(Machine="node1", Cpus=4, SlotWeight=4), SYSTEM, 1)
    assert got == {"MachineAttrMachine0": '"node1"', "MachineAttrGLIDEIN_Site0": "error",
                   "MachineAttrCpus0": "4", "MachineAttrSlotWeight0": "4"}


def test_a_history_length_of_zero_records_nothing():
    assert on_start({"JobMachineAttrsHistoryLength": "0"}, slot(Cpus=1), SYSTEM, 0) == {}


def test_leaving_unfinished_rotates_the_history():
    job = {"JobMachineAttrs": '"Machine"', "JobMachineAttrsHistoryLength": "3",
           "MachineAttrMachine0": '"b"', "MachineAttrMachine1": '"a"'}
    assert on_leave(job, (), 1) == {"MachineAttrMachine2": '"a"', "MachineAttrMachine1": '"b"'}


def test_no_rotation_for_a_history_of_one_or_before_any_start():
    assert on_leave({"MachineAttrCpus0": "4"}, SYSTEM, 1) == {}
    assert on_leave({"JobMachineAttrsHistoryLength": "2"}, SYSTEM, 1) == {}


def test_the_system_history_length_wins_when_longer():
    job = {"MachineAttrCpus0": "4"}
    assert on_leave(job, ("Cpus",), 2) == {"MachineAttrCpus1": "4"}
