"""One startd process emulating machines of several configurations (--machine-group)."""
import classad2
import pytest

from daemons.core.config import ConfigError, Param
from daemons.core.runner import build_daemon, parse_machine_group
from daemons.startd.config import read_startd_config
from daemons.startd.machines import Startd

NOW = 1000.0


def cfg(memory, start="True", **more):
    knobs = {"NUM_CPUS": "2", "MEMORY": str(memory), "SLOT_TYPE_1": "cpus=1", "NUM_SLOTS_TYPE_1": "2",
             "START": start, **more}
    return read_startd_config(Param.from_dict(knobs))


def job():
    return classad2.ClassAd('[ClusterId = 1; ProcId = 0; RequestCpus = 1; RequestMemory = 100; RequestDisk = 1000; '
                            'Requirements = true; Department = "physics"]')


def test_each_machine_has_its_groups_slots_and_policy():
    small, big = cfg(2048), cfg(8192, start='TARGET.Department =?= "physics"', PREEMPT="False")
    sd = Startd(["s1", "s2"], small, "127.0.0.1:9618", NOW, machine_groups=[(["b1"], big)])
    assert list(sd.machines) == ["s1", "s2", "b1"]
    assert sd.cfg is small      # the process's own knobs (the claim lease) are its first configuration's
    assert sd.machines["b1"].cfg is big and sd.machines["s2"].cfg is small
    ads = {m: sd.machines[m].slot_ad(sd.machines[m].slots["slot1"], NOW) for m in ("s1", "b1")}
    assert (ads["s1"]["Memory"], ads["b1"]["Memory"]) == (1024, 4096)
    assert "Department" in str(ads["b1"]["Start"]) and str(ads["s1"]["Start"]).lower() == "true"
    # one index of claim ids for all of them
    b1 = sd.machines["b1"]
    out = b1.request_claim(b1.slots["slot2"], job(), "schedd@x", "127.0.0.1:1", "u@x", NOW)
    assert out.ok and sd.find_claim(out.claim_id) == (b1, b1.slots["slot2"])
    s1 = sd.machines["s1"]
    assert sd.find_capability(s1.slots["slot1"].capability) == (s1, s1.slots["slot1"])


def test_machine_group_syntax():
    assert parse_machine_group("250:dept3-:/etc/htcpool/dept.conf") == (250, "dept3-", "/etc/htcpool/dept.conf")
    assert parse_machine_group("1:a:c:/with/colons.conf") == (1, "a", "c:/with/colons.conf")
    for bad in ("", "10", "10:p", "0:p:f", "x:p:f", "10::f", "10:p:"):
        with pytest.raises(ConfigError, match="COUNT:PREFIX:CONFIG"):
            parse_machine_group(bad)


def test_groups_need_names_of_their_own():
    param = Param.from_dict({"COLLECTOR_HOST": "127.0.0.1:9618", "NUM_CPUS": "1"})
    with pytest.raises(ConfigError, match="same host names"):
        build_daemon("startd", param, machines=2, host_prefix="a", machine_groups=[(2, "a", cfg(1024))])
    with pytest.raises(ConfigError, match="only a startd"):
        build_daemon("schedd", param, machine_groups=[(2, "a", cfg(1024))])
    d = build_daemon("startd", param, machines=2, host_prefix="a", machine_groups=[(1, "b", cfg(1024))])
    assert d.hosts == ["a001", "a002", "b001"] and d.default_name() == "startd@a001+2"
