"""daemons/negotiator/accounting.py: the pie and usage of Phase 2, from slot views."""
from daemons.core import ads
from daemons.negotiator.accountant import Accountant, AccountantConfig
from daemons.negotiator.accounting import account
from daemons.negotiator.slotads import SlotCache


def views(*attrs: dict):
    cache = SlotCache()
    out = []
    for i, a in enumerate(attrs):
        ad = {"MyType": "Machine", "Name": f"slot{i}@host", "Cpus": 1, "State": "Unclaimed",
              "LastHeardFrom": 100, **a}
        out.append(cache.view(ads.ad_text(ad), parse=lambda t: ads.parse_ad(t, "slot ad")))
    return out


def test_the_pie_sums_slot_weights_and_usage_is_charged_to_the_remote_owner_and_its_groups():
    a = Accountant(AccountantConfig())
    vs = views({"Cpus": 4, "SlotWeight": ads.Expr("Cpus"), "State": "Claimed", "RemoteOwner": "alice@x"},
               {"Cpus": 2},                                                     # no SlotWeight: its Cpus
               {"Cpus": 8, "SlotWeight": ads.Expr("Cpus / 4"), "State": "Preempting", "RemoteOwner": "bob@x"},
               {"Cpus": 3, "SlotWeight": -1})                                   # unusable: 1
    pie, smallest = account(vs, a, 1000.0, lambda owner: ["group_a"] if owner == "alice@x" else [])
    assert pie == 4 + 2 + 2 + 1
    assert smallest == 1
    assert a.weighted_used("alice@x") == 4
    assert a.weighted_used("group_a") == 4
    assert a.weighted_used("bob@x") == 2


def test_without_slot_weights_every_slot_counts_one():
    a = Accountant(AccountantConfig(use_slot_weights=False))
    vs = views({"Cpus": 4, "State": "Claimed", "RemoteOwner": "alice@x"}, {"Cpus": 2})
    pie, smallest = account(vs, a, 1000.0, lambda owner: [], use_slot_weights=False)
    assert (pie, smallest) == (2, 1)
    assert a.weighted_used("alice@x") == 1


def test_an_empty_pool_has_no_pie_and_a_smallest_weight_of_one():
    assert account([], Accountant(AccountantConfig()), 0.0, lambda owner: []) == (0.0, 1.0)
