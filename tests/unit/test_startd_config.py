"""daemons/startd/config.py: SLOT_TYPE_<N> syntax, slot layouts, the startd's knobs."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemons.core.config import ConfigError, Param
from daemons.startd.config import (Resources, SlotTypeSpec, parse_slot_type, read_slot_types,
                                   read_startd_config)

TEN = Resources(cpus=10, memory=16384, disk=1048576)
EIGHT = Resources(cpus=8, memory=16384, disk=1048576)


def test_hundred_percent_is_the_whole_machine():
    assert parse_slot_type("100%", TEN, "SLOT_TYPE_1") == {"Cpus": 10, "Memory": 16384, "Disk": 1048576}


def test_named_amounts_leave_the_rest_auto():
    assert parse_slot_type("cpus=4, mem=1024", TEN, "SLOT_TYPE_1") == {
        "Cpus": 4, "Memory": 1024, "Disk": "auto"}


def test_memory_and_disk_units():
    assert parse_slot_type("c=1, m=2g, d=1g", TEN, "SLOT_TYPE_1") == {
        "Cpus": 1, "Memory": 2048, "Disk": 1048576}


def test_fraction_applies_to_every_resource():
    assert parse_slot_type("1/4", EIGHT, "SLOT_TYPE_1") == {"Cpus": 2, "Memory": 4096, "Disk": 262144}


def test_percentage_applies_to_every_resource():
    assert parse_slot_type("25%", EIGHT, "SLOT_TYPE_1") == {"Cpus": 2, "Memory": 4096, "Disk": 262144}


def test_auto_alone():
    assert parse_slot_type("auto", TEN, "SLOT_TYPE_1") == {"Cpus": "auto", "Memory": "auto", "Disk": "auto"}


def test_unknown_resource_name_is_an_error():
    with pytest.raises(ConfigError) as e:
        parse_slot_type("cpus=2, gpus=1", TEN, "SLOT_TYPE_1")
    assert "SLOT_TYPE_1" in str(e.value)
    assert "unknown resource 'gpus'" in str(e.value)


def test_unparsable_amount_is_an_error():
    with pytest.raises(ConfigError) as e:
        parse_slot_type("cpus=lots", TEN, "SLOT_TYPE_1")
    assert "'lots'" in str(e.value)


def test_one_partitionable_slot_of_the_whole_machine():
    p = Param.from_dict({"SLOT_TYPE_1": "100%", "NUM_SLOTS_TYPE_1": "1", "SLOT_TYPE_1_PARTITIONABLE": "True"})
    assert read_slot_types(p, TEN) == (SlotTypeSpec(1, 1, True, TEN),)


def test_auto_type_shares_what_the_fixed_type_leaves():
    p = Param.from_dict({
        "SLOT_TYPE_1": "cpus=4, memory=4096, disk=50%", "NUM_SLOTS_TYPE_1": "1",
        "SLOT_TYPE_2": "auto", "NUM_SLOTS_TYPE_2": "3",
    })
    assert read_slot_types(p, TEN) == (
        SlotTypeSpec(1, 1, False, Resources(4, 4096, 524288)),
        SlotTypeSpec(2, 3, False, Resources(2, 4096, 174762)),
    )


def test_two_fixed_slot_types_number_in_order():
    p = Param.from_dict({
        "SLOT_TYPE_1": "cpus=2, mem=2048, disk=1000", "NUM_SLOTS_TYPE_1": "2",
        "SLOT_TYPE_2": "cpus=6, mem=8192, disk=5000", "NUM_SLOTS_TYPE_2": "1",
        "SLOT_TYPE_2_PARTITIONABLE": "true",
    })
    assert read_slot_types(p, TEN) == (
        SlotTypeSpec(1, 2, False, Resources(2, 2048, 1000)),
        SlotTypeSpec(2, 1, True, Resources(6, 8192, 5000)),
    )


def test_default_layout_is_one_partitionable_slot_with_the_whole_machine():
    # slot_builder.cpp countTypes: SLOT_TYPE_0_PARTITIONABLE defaults to true, NUM_SLOTS to 1.
    machine = Resources(cpus=4, memory=8192, disk=400000)
    assert read_slot_types(Param.from_dict({}), machine) == (SlotTypeSpec(0, 1, True, machine),)


def test_default_static_layout_is_one_single_cpu_slot_per_cpu():
    machine = Resources(cpus=4, memory=8192, disk=400000)
    assert read_slot_types(Param.from_dict({"SLOT_TYPE_0_PARTITIONABLE": "False"}), machine) == (
        SlotTypeSpec(0, 4, False, Resources(1, 2048, 100000)),)


def test_num_slots_divides_the_default_layout():
    machine = Resources(cpus=4, memory=8192, disk=400000)
    assert read_slot_types(Param.from_dict({"NUM_SLOTS": "2"}), machine) == (
        SlotTypeSpec(0, 2, True, Resources(2, 4096, 200000)),)
    assert read_slot_types(Param.from_dict({"NUM_SLOTS": "2", "SLOT_TYPE_0_PARTITIONABLE": "False"}), machine) == (
        SlotTypeSpec(0, 2, False, Resources(2, 4096, 200000)),)


def test_a_slot_count_without_a_slot_type_takes_an_equal_share():
    machine = Resources(cpus=4, memory=8192, disk=400000)
    assert read_slot_types(Param.from_dict({"NUM_SLOTS_TYPE_1": "4"}), machine) == (
        SlotTypeSpec(1, 4, False, Resources(1, 2048, 100000)),)


def test_over_commit_names_the_resources():
    p = Param.from_dict({"SLOT_TYPE_1": "cpus=6", "NUM_SLOTS_TYPE_1": "2"})
    with pytest.raises(ConfigError) as e:
        read_slot_types(p, TEN)
    msg = str(e.value)
    assert "12 cpus" in msg
    assert "NUM_CPUS, MEMORY, DISK" in msg


def test_slot_type_without_slots_is_an_error():
    with pytest.raises(ConfigError) as e:
        read_slot_types(Param.from_dict({"SLOT_TYPE_1": "100%"}), TEN)
    assert "NUM_SLOTS_TYPE_1" in str(e.value)


def test_read_startd_config_machine_and_slots():
    cfg = read_startd_config(Param.from_dict({
        "NUM_CPUS": "10", "MEMORY": "16384", "DISK": "1048576",
        "SLOT_TYPE_1": "100%", "NUM_SLOTS_TYPE_1": "1", "SLOT_TYPE_1_PARTITIONABLE": "True",
        "CLAIM_PARTITIONABLE_LEFTOVERS": "False", "START": "TARGET.Owner == \"alice\"",
        "ALIVE_INTERVAL": "60", "MAX_CLAIM_ALIVES_MISSED": "3",
    }))
    assert cfg.machine == TEN
    assert cfg.slot_types == (SlotTypeSpec(1, 1, True, TEN),)
    assert cfg.claim_partitionable_leftovers is False
    assert cfg.start == 'TARGET.Owner == "alice"'
    assert cfg.claim_lease_s == 180.0


def test_startd_attrs_are_published_with_their_expressions():
    cfg = read_startd_config(Param.from_dict({
        "STARTD_ATTRS": "ConsumptionCpus, Foo",
        "ConsumptionCpus": "quantize(target.RequestCpus, {1})", "Foo": "1 + 2",
    }))
    assert cfg.startd_attrs == (("ConsumptionCpus", "quantize(target.RequestCpus, { 1 })"), ("Foo", "1 + 2"))


def test_startd_attrs_naming_an_undefined_knob_is_skipped_with_a_warning():
    cfg = read_startd_config(Param.from_dict({"STARTD_ATTRS": "NotDefinedAnywhere, Foo", "Foo": "1"}))
    assert cfg.startd_attrs == (("Foo", "1"),)
    assert cfg.warnings == ("configuration: STARTD_ATTRS names NotDefinedAnywhere, which is not defined for "
                            "slot1; not advertised there",)


def test_startd_attrs_per_slot_and_per_slot_type():
    # ep-policy-configuration.rst, "Configuring STARTD_ATTRS on a per-slot basis".
    cfg = read_startd_config(Param.from_dict({
        "NUM_CPUS": "3", "SLOT_TYPE_0_PARTITIONABLE": "False",
        "favorite_color": '"blue"', "favorite_season": '"spring"',
        "STARTD_ATTRS": "favorite_color, favorite_season",
        "SLOT2_favorite_color": '"green"', "SLOT3_favorite_season": '"summer"',
        "SLOT1_STARTD_ATTRS": "favorite_movie", "favorite_movie": '"Brazil"',
    }))
    assert cfg.attrs_of(1) == (("favorite_color", '"blue"'), ("favorite_season", '"spring"'),
                               ("favorite_movie", '"Brazil"'))
    assert cfg.attrs_of(2) == (("favorite_color", '"green"'), ("favorite_season", '"spring"'))
    assert cfg.attrs_of(3) == (("favorite_color", '"blue"'), ("favorite_season", '"summer"'))


def test_an_attribute_defined_only_for_one_slot_is_advertised_by_that_slot_alone():
    cfg = read_startd_config(Param.from_dict({
        "NUM_CPUS": "2", "SLOT_TYPE_0_PARTITIONABLE": "False",
        "STARTD_ATTRS": "MachineDataSet", "SLOT1_MachineDataSet": '"S00"'}))
    assert (cfg.attrs_of(1), cfg.attrs_of(2)) == ((("MachineDataSet", '"S00"'),), ())
    assert cfg.warnings == ("configuration: STARTD_ATTRS names MachineDataSet, which is not defined for slot2; "
                            "not advertised there",)


def test_policy_knobs_per_slot_type():
    cfg = read_startd_config(Param.from_dict({
        "NUM_CPUS": "4", "SLOT_TYPE_1": "cpus=2", "NUM_SLOTS_TYPE_1": "1", "SLOT_TYPE_1_PARTITIONABLE": "True",
        "SLOT_TYPE_2": "cpus=2", "NUM_SLOTS_TYPE_2": "1",
        "START": "TARGET.Owner =!= \"bob\"", "SLOT_TYPE_2_START": "false", "SLOT_TYPE_1_SLOT_WEIGHT": "Memory",
        "SLOT_TYPE_2_IS_OWNER": "true", "SLOT_TYPE_1_MAXJOBRETIREMENTTIME": "3600",
    }))
    one, two = (cfg.policy(t) for t in cfg.slot_types)
    assert (one.start, one.slot_weight, one.is_owner, one.max_job_retirement_time) == (
        'TARGET.Owner isnt "bob"', "Memory", "False", "3600")
    assert (two.start, two.slot_weight, two.is_owner, two.max_job_retirement_time) == ("false", "Cpus", "true", "0")


def test_slot_weight_falls_back_to_a_slot_weight_macro():
    # Resource.cpp: SLOT_WEIGHT, else SlotWeight, else Cpus (seed 001 sets SlotWeight).
    cfg = read_startd_config(Param.from_dict({"SlotWeight": "floor(Memory / 512)"}))
    assert cfg.policy(cfg.slot_types[0]).slot_weight == "floor(Memory / 512)"


def test_modify_request_expr_fallbacks_are_htcondors_defaults():
    # HTCondor's defaults: cpus to 1, memory to 128 MB, disk to 1024 KB.
    cfg = read_startd_config(Param.from_dict({}))
    exprs = dict(cfg.modify_request_exprs)
    assert exprs["RequestCpus"] == "quantize(RequestCpus,{1})"
    assert exprs["RequestMemory"] == "quantize(RequestMemory,{128})"
    assert exprs["RequestDisk"] == "quantize(RequestDisk,{1024})"


_NAMES = st.sampled_from(["GPUs", "gpus", "Licenses", "FPGA"])
_RESOURCES = st.builds(
    lambda c, m, d, custom: Resources.of({"Cpus": c, "Memory": m, "Disk": d, **dict(custom)}),
    st.integers(0, 64), st.integers(0, 1 << 20), st.integers(0, 1 << 30),
    st.lists(st.tuples(_NAMES, st.integers(0, 8)), max_size=3))


def _fits_generally(a: Resources, b: Resources) -> bool:
    theirs = {k.lower(): v for k, v in b.as_dict().items()}
    return all(v <= theirs.get(k.lower(), 0) for k, v in a.as_dict().items())


@settings(max_examples=300, deadline=None, database=None)
@given(_RESOURCES, _RESOURCES)
def test_resource_arithmetic_takes_the_general_way_s_answers(a, b):
    """Sums, differences and fits taken field by field (the usual case: no custom
    resources, or the same ones) equal those worked out name by name."""
    assert a + b == a._combine_generally(b, +1)
    assert a - b == a._combine_generally(b, -1)
    assert a.fits(b) == _fits_generally(a, b)
