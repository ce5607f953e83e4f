"""The one authorization table: every RPC has a level (fail closed), and ad types' levels."""
from __future__ import annotations

import importlib
import pkgutil

import daemons.pb.htcpool as pb
from daemons.core.security.table import TABLE, advertise_level, rule_for
from daemons.pb.htcpool import collector_pb2, common_pb2


def all_methods() -> list[str]:
    """Every method of every service in the generated descriptors."""
    out = []
    for mod in pkgutil.iter_modules(pb.__path__):
        if not mod.name.endswith("_pb2"):
            continue
        descriptor = importlib.import_module(f"{pb.__name__}.{mod.name}").DESCRIPTOR
        for service in descriptor.services_by_name.values():
            out.extend(f"/{service.full_name}/{m.name}" for m in service.methods)
    return out


def test_every_rpc_of_every_service_has_a_level():
    methods = all_methods()
    assert len(methods) >= 20
    assert [m for m in methods if m not in TABLE] == []
    assert [m for m in TABLE if m not in methods] == []     # no stale entries either


def test_an_rpc_missing_from_the_table_has_no_rule():
    assert rule_for("/htcpool.v1.Schedd/NoSuchThing") is None


def test_ad_types_need_htcondors_advertise_levels():
    assert [advertise_level(t) for t in ("Machine", "StartDaemon", "Scheduler", "Submitter", "DaemonMaster",
                                         "Negotiator", "Accounting", "Defrag", "Collector", "Generic")] == [
        "ADVERTISE_STARTD", "ADVERTISE_STARTD", "ADVERTISE_SCHEDD", "ADVERTISE_SCHEDD", "ADVERTISE_MASTER",
        "NEGOTIATOR", "NEGOTIATOR", "DAEMON", "DAEMON", "DAEMON"]


def test_requests_name_the_further_levels_they_need():
    update = rule_for("/htcpool.v1.Collector/UpdateAds").needs
    req = collector_pb2.UpdateAdsRequest(ads=[common_pb2.ClassAd(text='[MyType="Machine"; Name="s@h"]'),
                                              common_pb2.ClassAd(text='[MyType="Scheduler"; Name="h"]'),
                                              common_pb2.ClassAd(text='[MyType="Machine"; Name="t@h"]')],
                                         invalidate_type="Submitter", invalidate_names=["u@h"])
    assert [(n.what, n.level) for n in update(req)] == [
        ("Machine ads", "ADVERTISE_STARTD"), ("Scheduler ads", "ADVERTISE_SCHEDD"),
        ("Submitter ads", "ADVERTISE_SCHEDD")]
    query = rule_for("/htcpool.v1.Collector/QueryAds").needs
    assert query(collector_pb2.QueryAdsRequest(my_type="Machine")) == []
    assert [n.level for n in query(collector_pb2.QueryAdsRequest(include_private=True))] == ["NEGOTIATOR"]
    invalidate = rule_for("/htcpool.v1.Collector/InvalidateAds").needs
    assert [n.level for n in invalidate(collector_pb2.InvalidateAdsRequest(my_type="Machine"))] == [
        "ADVERTISE_STARTD"]
    assert "DAEMON" in [n.level for n in invalidate(collector_pb2.InvalidateAdsRequest(my_type="Any"))]
