"""The collector's compact storage answers exactly what parsed ads would (daemons/collector/compact.py)."""
import random

import classad2

from daemons.collector import compact
from daemons.collector.store import AdStore
from daemons.core import ads

NOW = 1000.0
WRL = "(MY.Cpus > 0 && TARGET.RequestCpus <= MY.Cpus && MY.Memory > 0 && TARGET.RequestMemory <= MY.Memory)"

# Constraints of every kind the fast path must get right, and the ones it must leave to
# the exact path (eval, subscripts, whole-ad references, random).
CONSTRAINTS = [
    "Cpus > 2", "Memory >= 4096 && State == \"Unclaimed\"", "Requirements", "START", "Start =?= true",
    "WithinResourceLimits", "Machine == \"host1\"", "regexp(\"slot1_\", Name)", "Nope =?= undefined",
    "isUndefined(Department)", "Department == \"physics\" || Cpus == 1", "MY.Cpus * 2 > Memory / 1024",
    "TARGET.Cpus > 0", "Rank > 0 || Cpus > 3", "size(ChildCpus) > 1", "ChildCpus[0] == 1",
    "eval(strcat(\"Cp\", \"us\")) > 2", "substr(ClaimId, 0, 1) == \"<\"", "isString(Capability)",
    "LastHeardFrom >= 1000", "LastHeardFrom > 1000", "Bigger > 10", "Derived == Cpus + 1", "cpus > 2",
    "stringListMember(\"Cpus\", MachineResources, \" \")", "true", "false", "undefined", "1/0",
    "unparse(Requirements) == \"START\"", "Nested.a == 1", "Nested.b == 2", "Weird == \"my value\"",
    "ifThenElse(State == \"Claimed\", RemoteOwner == \"u1\", false)", ".Cpus > 2", "my.Cpus > 2",
    "MY[\"Cpus\"] > 2", "Start && (Department =!= \"physics\")", "strcat(Name, Machine) != \"\"",
]


def slot_attrs(rng: random.Random, i: int) -> dict:
    claimed = rng.random() < 0.3
    a = {"MyType": "Machine", "Name": f"slot1_{i}@host{i % 3}", "Machine": f"host{i % 3}",
         "Cpus": rng.choice([1, 2, 4, 8]), "Memory": rng.choice([1024, 2048, 4096, 8192]),
         "State": "Claimed" if claimed else "Unclaimed", "Start": ads.Expr(rng.choice(["true", "Cpus > 1"])),
         "Requirements": ads.Expr("START && WithinResourceLimits"), "WithinResourceLimits": ads.Expr(WRL),
         "Rank": rng.choice([0.0, 1.0]), "MachineResources": "Cpus Memory Disk",
         "Derived": ads.Expr(rng.choice(["Cpus + 1", "Memory"])), "ClaimId": f"<1.2.3.4:5>#{i}#1#secret"}
    if rng.random() < 0.5:
        a["Department"] = rng.choice(["physics", "chemistry"])
    if rng.random() < 0.3:
        a["ChildCpus"] = [1, rng.choice([1, 2])]
        a["Bigger"] = ads.Expr("ChildCpus[1] * 10")
    if rng.random() < 0.2:
        a["Weird"] = rng.choice(["my value", "eval(x)"])
    if claimed:
        a["RemoteOwner"] = rng.choice(["u1", "u2"])
        a["Capability"] = a["ClaimId"]
    return a


def reference(text: str, constraint: str) -> bool:
    """The old collector: parse the ad, drop private attributes, evaluate."""
    ad = ads.without_private(classad2.ClassAd(text))
    return ads.is_true(ads.evaluate(ads.parse_expr(constraint), ad))


def filled(n: int = 60, seed: int = 1) -> tuple[AdStore, list[str]]:
    rng = random.Random(seed)
    store = AdStore(900)
    texts = []
    for i in range(n):
        text = ads.ad_text(slot_attrs(rng, i))
        texts.append(text)
        store.update(ads.parse_ad(text), NOW)
    # An ad with a nested ad: kept in the exact (uncompacted) form.
    nested = '[ MyType = "Machine"; Name = "nested@host9"; Cpus = 3; Nested = [ a = 1; b = Cpus ] ]'
    store.update(ads.parse_ad(nested), NOW)
    texts.append(nested)
    return store, texts


def test_every_constraint_selects_what_a_parsed_ad_would():
    store, _ = filled()
    public = {classad2.ClassAd(t).eval("Name"): t for t in store.query("Machine", NOW, include_private=False)}
    for c in CONSTRAINTS:
        got = sorted(classad2.ClassAd(t).eval("Name") for t in store.query("Machine", NOW, ads.parse_expr(c)))
        want = sorted(n for n, t in public.items() if reference(t, c))
        assert got == want, c


def test_every_ad_prints_back_as_it_was_stored():
    store, texts = filled()
    by_name = {classad2.ClassAd(t).eval("Name"): t for t in texts}
    for t in store.query("Machine", NOW, include_private=True):
        got = classad2.ClassAd(t)
        sent = classad2.ClassAd(by_name[got.eval("Name")])
        assert got.eval("LastHeardFrom") == 1000
        del got["LastHeardFrom"]
        assert ads.exprs_of(got) == ads.exprs_of(sent)


def test_printed_text_is_the_classad_librarys_own():
    # The negotiator's slot cache reads the text: one line, each item as classad2 prints it.
    store, _ = filled(10)
    for t in store.query("Machine", NOW, include_private=True):
        if "[" in t[1:]:
            continue       # a nested ad or a subscript: kept as classad2 printed it
        assert sorted(ads.split_ad_text(t)) == sorted(ads.split_ad_text(repr(classad2.ClassAd(t))))


def test_projections_as_parsed_ads_give_them():
    store, _ = filled()
    for include_private in (False, True):
        for t in store.query("Machine", NOW, projection=["name", "Cpus", "ClaimId", "Nope", "Nested", "Cpus",
                                                          "bad name", "LastHeardFrom"],
                             include_private=include_private):
            ad = classad2.ClassAd(t)
            keys = {k.lower() for k in ad.keys()}
            assert {"name", "cpus", "lastheardfrom"} <= keys
            assert ("claimid" in keys) == (include_private and ads.get(ad, "Name") != "nested@host9")
            assert keys <= {"name", "cpus", "claimid", "nested", "lastheardfrom"}
            assert "name" in t   # spelled as asked


def test_private_attributes_never_reach_a_constraint_or_a_public_answer():
    store, _ = filled()
    for t in store.query("Machine", NOW):
        assert "secret" not in t
    assert store.query("Machine", NOW, ads.parse_expr('eval("ClaimId") isnt undefined')) == []
    assert store.query("Machine", NOW, ads.parse_expr("ClaimId isnt undefined"), include_private=True) == []


def full_way(text: str):
    """What the collector stored for `text` before: the parsed ad (or None if refused)."""
    try:
        ad = ads.parse_ad(text)
        AdStore.check(ad)
    except (ads.AdError, ValueError):
        return None
    return ad


def as_stored(store: AdStore) -> dict:
    return {classad2.ClassAd(t).eval("Name"): ads.exprs_of(classad2.ClassAd(t))
            for t in store.query("Any", NOW, include_private=True)}


def test_updates_read_item_by_item_store_what_parsing_would():
    rng = random.Random(7)
    fast, slow = AdStore(900), AdStore(900)
    for i in range(300):
        text = ads.ad_text(slot_attrs(rng, i))
        p = fast.prepare(text)
        # A subscript (ChildCpus[1]) is left to the parser; everything else is read item by item.
        assert (p is None) == ("[1]" in text), text
        if p is None:
            fast.update(full_way(text), NOW)
        else:
            fast.update_prepared(p, NOW)
        slow.update(full_way(text), NOW)
    assert fast.prepared_total > 150
    assert as_stored(fast) == as_stored(slow)


NAMES = ["MyType", "Name", "Cpus", "error", "a", "A", "LastHeardFrom", "ClassAdLifetime", "MyAddress", "x_1",
         "HtcpoolLoopLagSustainedWall", "ClaimId"]
VALUES = ['"Machine"', '"n1"', '"n2"', "1", "007", "-3", "0", "99999999999999999999", "1.5", "1e400", "true", "True",
          "undefined", "a + 1", "(1", "1 2", "1 // c", "1 /* c */", "1 /*", '"a\\"b"', '"tab\there"', '"x;y"',
          "{ 1, 2 }", "[ b = 1 ]", "x[0]", 'strcat("a", "b")', "MY.Cpus", "'quoted'", "", "1 ] [ z = 2",
          '"<127.0.0.1:5>"', "Cpus > 2 && Memory", "ifThenElse(a, 1, 2)", "\"u\u00e9\"", '"é"']
SEPARATORS = ["; ", ";", " ; ", ";;", " ", "; junk ", "\n; "]


def test_no_text_is_read_item_by_item_that_parsing_would_refuse_or_read_otherwise():
    rng = random.Random(11)
    fast, slow = AdStore(900), AdStore(900)
    taken = 0
    for _ in range(3000):
        items = [("MyType", '"Machine"'), ("Name", f'"n{rng.randrange(50)}"')]
        items += [(rng.choice(NAMES), rng.choice(VALUES)) for _ in range(rng.randrange(4))]
        rng.shuffle(items)
        text = "[ " + "".join(f"{n} = {v}" + (rng.choice(SEPARATORS) if k < len(items) - 1 else "")
                              for k, (n, v) in enumerate(items)) + rng.choice([" ]", "]", "; ]"])
        p = fast.prepare(text)
        ad = full_way(text)
        if p is None:
            continue
        assert ad is not None, text
        taken += 1
        fast.update_prepared(p, NOW)
        slow.update(ad, NOW)
        key = ("machine", ad.eval("Name"))
        got, want = (classad2.ClassAd(st._ads[key].text(include_private=True)) for st in (fast, slow))
        assert ads.exprs_of(got) == ads.exprs_of(want), text
    assert taken > 100


def test_updates_that_need_parsing_are_left_to_it():
    store = AdStore(900)
    for text in ['[ MyType = "Machine"; Name = strcat("a", "b") ]',
                 '[ MyType = "Machine"; Name = "a"; HtcpoolLoopLagSustainedWall = 0.5 ]',
                 '[ MyType = "Machine"; Name = "a"; ClassAdLifetime = 10 * 6 ]',
                 '[ MyType = "Machine"; Name = "a"; Nested = [ b = 1 ] ]',
                 '[ MyType = "Machine"; Name = "a"; \'odd name\' = 1 ]',
                 '[ MyType = "Machine" ]', "[ ]", "not an ad"]:
        assert store.prepare(text) is None, text
    p = store.prepare('[ MyType = "Machine"; Name = "a"; ClassAdLifetime = 60; MyAddress = "<1.2.3.4:5>" ]')
    assert (p.my_type, p.name, p.lifetime, p.my_address) == ("Machine", "a", 60, "<1.2.3.4:5>")
    store.update_prepared(p, NOW)
    assert store.expire(NOW + 61)[0].name == "a"


def test_an_incoming_last_heard_from_is_replaced():
    store = AdStore(900)
    store.update(ads.parse_ad('[ MyType = "Machine"; LastHeardFrom = 5; Name = "x" ]'), NOW)
    [t] = store.query("Machine", NOW)
    assert sorted(ads.split_ad_text(t)) == [("LastHeardFrom", "1000"), ("MyType", '"Machine"'), ("Name", '"x"')]


def test_item_texts_are_shared_and_swept():
    store = AdStore(10)
    store._interner.sweep_floor = 0
    for i in range(300):
        store.update(ads.parse_ad(f'[ MyType = "Machine"; Name = "s{i}"; Arch = "X86_64"; Cpus = {i % 4} ]'), NOW)
    a, b = ([t for t in s.items if t.startswith("Arch")][0] for s in list(store._ads.values())[:2])
    assert a is b          # 'Arch = "X86_64"', one string for every ad
    assert len({id(s.layout) for s in store._ads.values()}) == 1
    store.update(ads.parse_ad('[ MyType = "Machine"; Name = "late"; Arch = "X86_64" ]'), NOW + 10)
    assert len(store.expire(NOW + 11)) == 300 and len(store) == 1
    assert set(store._interner.items) == {'MyType = "Machine"', 'Arch = "X86_64"', "LastHeardFrom = 1010"}
    assert len(store._interner.layouts) == 1


def test_constraint_results_are_memoized_per_set_of_reached_items():
    c = compact.Constraint(ads.parse_expr("Cpus > 2 && Requirements"))
    interner = compact.Interner()
    got = []
    for i in range(100):
        layout, items = interner.compact([("Name", f'"s{i}"'), ("Cpus", str(i % 2 + 2)), ("Requirements", "Cpus > 0")],
                                         0)
        got.append(c.matches(layout, items))
    assert got == [False, True] * 50
    assert len(c._memo) == 2      # two distinct (Cpus, Requirements) pairs: two evaluations


def test_the_strict_split_takes_exactly_the_texts_the_plain_pattern_takes():
    """ads._ITEM is possessive for speed; it must accept and split exactly as the plain
    (backtracking) form of the same pattern does, on any text."""
    import re
    plain = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*((?:"(?:[^"\\]|\\.)*"|[^;"\[\]])*)(;|$)')
    rng = random.Random(5)
    alphabet = 'ab_=; "\\[]x1.\t'
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 16))) for _ in range(50_000)]
    texts += [ads.ad_text(slot_attrs(rng, i))[1:-1] for i in range(50)]
    for t in texts:
        assert ads._split_exactly(t) == ads._split_exactly(t, plain), t


def test_queries_and_invalidations_by_type_see_only_that_type():
    """The store indexes ads by MyType (case-insensitively): a query of one type, an
    invalidation by name or by constraint, and expiry keep the index in step with the ads."""
    from daemons.collector.store import AdStore
    store = AdStore(100.0)
    for i in range(5):
        store.update(classad2.ClassAd(f'[ MyType = "Machine"; Name = "slot{i}"; Cpus = {i} ]'), 10.0)
    store.update(classad2.ClassAd('[ MyType = "Negotiator"; Name = "neg"; ClassAdLifetime = 5 ]'), 10.0)
    store.update(classad2.ClassAd('[ MyType = "Scheduler"; Name = "sched" ]'), 10.0)
    assert sorted(s.name for s in store.select("negotiator", 11.0)) == ["neg"]
    assert len(store.select("MACHINE", 11.0)) == 5 and len(store.select("Any", 11.0)) == 7
    assert store.invalidate("Machine", names=["slot0"]) == 1
    assert store.invalidate("machine", constraint=classad2.ExprTree("Cpus >= 3")) == 2
    assert sorted(s.name for s in store.select("Machine", 11.0)) == ["slot1", "slot2"]
    assert [s.name for s in store.expire(16.0)] == ["neg"]
    assert store.select("Negotiator", 16.0) == [] and store.counts() == {"Machine": 2, "Scheduler": 1}
    assert len(store) == 3


def test_the_daemons_printed_form_is_read_as_the_strict_split_reads_it():
    """prepare() reads a text split at "; " (each piece a whole item, remembered once
    checked) exactly as the strict split reads it: the same items, names, lifetime and
    address, or None for both; pieces that are not whole items (a "; " inside a string,
    other spacing) go the strict way."""
    rng = random.Random(13)
    canon_fast, canon_strict = compact.Canon(), compact.Canon()
    values = VALUES + ['"a; b"', '"x\\"; Y = 1"', '"; "', '"p; Q = \\"r"', "1 ; 2", "a;b", " 1", "1 "]
    taken = 0
    for i in range(4000):
        items = [("MyType", '"Machine"'), ("Name", f'"n{rng.randrange(50)}"')]
        items += [(rng.choice(NAMES), rng.choice(values)) for _ in range(rng.randrange(5))]
        rng.shuffle(items)
        sep = rng.choice(["; "] * 4 + SEPARATORS)
        text = "[ " + sep.join(f"{n} = {v}" for n, v in items) + rng.choice([" ]", "]", "; ]"])
        got = compact.prepare(text, canon_fast)
        want = compact._prepare_strictly(text, canon_strict)
        if i % 500 == 0:
            canon_fast.items.clear()     # misses and hits both
        assert (got is None) == (want is None), text
        if got is not None:
            taken += 1
            assert (got.my_type, got.name, got.lifetime, got.my_address, got.names, got.items) == \
                (want.my_type, want.name, want.lifetime, want.my_address, want.names, want.items), text
    assert taken > 300
    # A slot ad as the startd prints it is read the fast way, its items remembered.
    text = ads.ad_text(slot_attrs(random.Random(1), 1))
    canon = compact.Canon()
    assert compact.prepare(text, canon) is not None and len(canon.items) > 5


def test_a_refresh_stores_what_the_whole_update_would():
    """A refresh sets the given items in a stored ad (and LastHeardFrom), and the ad is then
    exactly the one a whole update with those values stores."""
    rng = random.Random(17)
    for i in range(200):
        attrs = slot_attrs(rng, i)
        attrs["TotalClaimRunTime"] = 5
        attrs["ExpectedMachineGracefulDrainingCompletion"] = 1000
        if "[" in ads.ad_text(attrs)[1:-1]:
            continue          # kept uncompacted (a subscript): sent whole, never refreshed
        refreshed, whole = AdStore(900), AdStore(900)
        refreshed.update_prepared(refreshed.prepare(ads.ad_text(attrs)), NOW)
        later = dict(attrs, TotalClaimRunTime=rng.randrange(100), ExpectedMachineGracefulDrainingCompletion=2000)
        new = refreshed.refresh_items(f"TotalClaimRunTime = {later['TotalClaimRunTime']}; "
                                      "ExpectedMachineGracefulDrainingCompletion = 2000")
        assert refreshed.refresh("Machine", attrs["Name"], new, NOW + 10)
        text = ads.ad_text(later)
        whole.update(full_way(text), NOW + 10)
        assert as_stored(refreshed) == as_stored(whole)
    assert refreshed.refreshed_total == 1


def test_a_refresh_that_does_not_fit_changes_nothing():
    store = AdStore(900)
    text = '[ MyType = "Machine"; Name = "a"; Cpus = 1; TotalClaimRunTime = 5 ]'
    store.update_prepared(store.prepare(text), NOW)
    before = store.query("Machine", NOW, include_private=True)
    for items in ["Memory = 2", "cpus = 2", "Cpus = 2; Cpus = 3", "Name = \"b\"", "MyType = \"X\"",
                  "ClassAdLifetime = 5", "LastHeardFrom = 7", "Cpus = (", "Cpus = 1;", "HtcpoolLoopLagWall = 1"]:
        new = store.refresh_items(items)
        assert new is None or not store.refresh("Machine", "a", new, NOW + 1), items
    assert not store.refresh("Machine", "nope", store.refresh_items("Cpus = 2"), NOW + 1)
    assert not store.refresh("Machine", "a", store.refresh_items("Cpus = 2"), NOW + 901)   # expired
    assert store.query("Machine", NOW, include_private=True) == before
    assert store.refresh("Machine", "a", store.refresh_items("Cpus = 2"), NOW + 1)
    assert store.refresh_items("") == []
