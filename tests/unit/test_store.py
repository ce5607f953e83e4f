"""daemons/collector/store.py: the collector's ads, queries, privacy and expiry."""
import classad2
import pytest

from daemons.collector.store import AdStore, StoreError

NOW = 1000.0


def slot(name, cpus, **extra):
    attrs = {"MyType": '"Machine"', "Name": f'"{name}"', "Cpus": str(cpus),
             "ClaimId": '"<1.2.3.4:5>#1#1#abc"', "Capability": '"<1.2.3.4:5>#1#1#abc"'}
    attrs.update(extra)
    return classad2.ClassAd("[" + "; ".join(f"{k} = {v}" for k, v in attrs.items()) + "]")


def filled():
    s = AdStore(default_lifetime_s=900)
    s.update(slot("slot1@a", 4), NOW)
    s.update(slot("slot1@b", 8), NOW)
    s.update(classad2.ClassAd('[MyType = "Scheduler"; Name = "schedd@a"]'), NOW)
    return s


def names(texts):
    return sorted(classad2.ClassAd(t).eval("Name") for t in texts)


def test_query_by_type():
    s = filled()
    assert names(s.query("Machine", NOW)) == ["slot1@a", "slot1@b"]
    assert names(s.query("Scheduler", NOW)) == ["schedd@a"]
    assert names(s.query("Any", NOW)) == ["schedd@a", "slot1@a", "slot1@b"]


def test_query_with_constraint():
    s = filled()
    assert names(s.query("Machine", NOW, classad2.ExprTree("Cpus > 4"))) == ["slot1@b"]


def test_projection_keeps_only_named_attributes():
    s = filled()
    out = s.query("Machine", NOW, classad2.ExprTree('Name == "slot1@a"'), projection=["Name", "Cpus", "Nope"])
    assert [dict(classad2.ClassAd(t).items()) for t in out] == [{"Name": "slot1@a", "Cpus": 4}]


def test_update_replaces_and_stamps_last_heard():
    s = filled()
    s.update(slot("slot1@a", 2), NOW + 10)
    assert len(s) == 3
    [text] = s.query("Machine", NOW + 10, classad2.ExprTree('Name == "slot1@a"'))
    ad = classad2.ClassAd(text)
    assert (ad.eval("Cpus"), ad.eval("LastHeardFrom")) == (2, 1010)


def test_private_attributes_hidden_by_default():
    s = filled()
    ad = classad2.ClassAd(s.query("Machine", NOW, classad2.ExprTree('Name == "slot1@a"'))[0])
    assert ("ClaimId" in ad, "Capability" in ad, "Cpus" in ad) == (False, False, True)


def test_private_attributes_shown_when_asked():
    s = filled()
    ad = classad2.ClassAd(s.query("Machine", NOW, classad2.ExprTree('Name == "slot1@a"'),
                                  include_private=True)[0])
    assert (ad.eval("ClaimId"), ad.eval("Capability")) == ("<1.2.3.4:5>#1#1#abc", "<1.2.3.4:5>#1#1#abc")


def test_constraints_cannot_see_private_attributes():
    s = filled()
    # Otherwise a caller could test a claim id character by character.
    assert s.query("Machine", NOW, classad2.ExprTree('substr(ClaimId, 0, 1) == "<"')) == []
    assert s.query("Machine", NOW, classad2.ExprTree('eval(strcat("Claim", "Id")) isnt undefined')) == []
    assert s.query("Machine", NOW, classad2.ExprTree("isString(ClaimId)"), include_private=True) == []
    assert s.invalidate("Machine", constraint=classad2.ExprTree("isString(Capability)")) == 0


def test_projection_does_not_leak_private_attributes():
    s = filled()
    out = s.query("Machine", NOW, classad2.ExprTree('Name == "slot1@a"'), projection=["Name", "ClaimId"])
    assert [dict(classad2.ClassAd(t).items()) for t in out] == [{"Name": "slot1@a"}]
    out = s.query("Machine", NOW, classad2.ExprTree('Name == "slot1@a"'), projection=["ClaimId"],
                  include_private=True)
    assert [dict(classad2.ClassAd(t).items()) for t in out] == [{"ClaimId": "<1.2.3.4:5>#1#1#abc"}]


def test_ads_expire_after_the_default_lifetime():
    s = filled()
    assert names(s.query("Machine", NOW + 900)) == ["slot1@a", "slot1@b"]
    assert names(s.query("Machine", NOW + 901)) == []
    assert sorted(a.name for a in s.expire(NOW + 901)) == ["schedd@a", "slot1@a", "slot1@b"]
    assert (len(s), s.expired_total) == (0, 3)


def test_an_ads_own_lifetime_wins():
    s = filled()
    s.update(slot("slot2@a", 1, ClassAdLifetime="60"), NOW)
    assert names(s.query("Machine", NOW + 61)) == ["slot1@a", "slot1@b"]
    assert [a.name for a in s.expire(NOW + 61)] == ["slot2@a"]
    assert len(s) == 3


def test_invalidate_by_name():
    s = filled()
    assert s.invalidate("Machine", ["slot1@a", "slot9@z"]) == 1
    assert names(s.query("Machine", NOW)) == ["slot1@b"]


def test_invalidate_by_constraint_only_within_the_type():
    s = filled()
    assert s.invalidate("Machine", constraint=classad2.ExprTree('Name != "nobody"')) == 2
    assert names(s.query("Any", NOW)) == ["schedd@a"]
    assert s.invalidated_total == 2


def test_update_without_my_type_is_refused():
    with pytest.raises(StoreError) as e:
        AdStore(900).update(classad2.ClassAd('[Name = "x"]'), NOW, "startd ad")
    assert str(e.value) == "startd ad: MyType is missing or not a string"


def test_update_without_name_is_refused():
    with pytest.raises(StoreError) as e:
        AdStore(900).update(classad2.ClassAd('[MyType = "Machine"]'), NOW)
    assert str(e.value) == "ad: Name is missing or not a string"


def test_counts_by_type():
    assert filled().counts() == {"Machine": 2, "Scheduler": 1}


def test_a_query_or_invalidation_over_budget_stops_and_changes_nothing():
    """An expression's size does not bound its cost (ads.work_budget): a constraint that
    runs past its budget is refused, and an invalidation removes nothing."""
    from daemons.core import ads as adsmod
    store = AdStore(900.0)
    for i in range(5):
        store.update(adsmod.parse_ad(f'[ MyType = "Machine"; Name = "m{i}" ]'), 0.0)
    ticks = iter(range(100))
    check = adsmod.work_budget(2.5, "COLLECTOR_QUERY_MAX_WORKTIME", clock=lambda: float(next(ticks)))
    with pytest.raises(adsmod.WorkLimitError) as e:
        store.invalidate("Machine", constraint=adsmod.parse_expr("true"), check=check)
    assert "see COLLECTOR_QUERY_MAX_WORKTIME" in str(e.value)
    assert len(store) == 5
    ticks = iter(range(100))
    check = adsmod.work_budget(2.5, "COLLECTOR_QUERY_MAX_WORKTIME", clock=lambda: float(next(ticks)))
    with pytest.raises(adsmod.WorkLimitError):
        store.query("Machine", 0.0, adsmod.parse_expr("true"), check=check)
    assert len(store.query("Machine", 0.0, adsmod.parse_expr("true"))) == 5
