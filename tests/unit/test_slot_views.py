"""Slot views (the negotiator's cheap read of slot ads) agree with reading the ads attribute by attribute."""
from __future__ import annotations

import random
import re

import classad2
from hypothesis import given, settings
from hypothesis import strategies as st

from daemons.core import ads
from daemons.negotiator.matchmaker import Matchmaker, MatchPolicy, symmetric_match
from daemons.negotiator.significant import SignificantAttributes
from daemons.negotiator.slotads import INSTANCE_ATTR_NAMES, INSTANCE_ATTRS, SlotCache, is_literal_text, name_pattern

POST = "(RemoteOwner =?= UNDEFINED) * (ifthenElse(isUndefined(KFlops), 1000, Kflops) - SlotID - 1.0e10*(Offline=?=True))"


def slot_text(host: str, slot_id: int, **extra) -> str:
    attrs = {"MyType": "Machine", "Name": f"slot{slot_id}@{host}", "Machine": host, "SlotID": slot_id,
             "Cpus": 1, "Memory": 2048, "State": "Unclaimed", "Activity": "Idle", "KFlops": 1000,
             "ClaimId": f"<1.2.3.4:5>#{slot_id}#{host}", "StartdIpAddr": "<1.2.3.4:5>",
             "Start": ads.Expr("TARGET.RequestMemory <= MY.Memory"), "Requirements": ads.Expr("START"),
             "SlotWeight": ads.Expr("Cpus"), "EnteredCurrentState": 1000 + slot_id}
    attrs.update(extra)
    return repr(classad2.ClassAd(ads.ad_text(attrs)))


def test_split_ad_text_reads_what_the_library_prints():
    ad = classad2.ClassAd()
    ad["S"] = 'a;b = "c"; d'
    ad["B"] = 'back\\slash "q";x'
    ad["L"] = classad2.ExprTree("{1, 2}")
    ad["E"] = classad2.ExprTree('strcat("x;", TARGET.Y) == "q;r"')
    items = ads.split_ad_text(repr(ad))
    assert items is not None and len(items) == len(ad)
    for name, text in items:
        assert repr(classad2.ClassAd(f"[ X = {text} ]").lookup("X")) == repr(ad.lookup(name))
    nested = classad2.ClassAd("[ A = 1; N = [ b = 1; c = 2 ] ]")
    assert ads.split_ad_text(repr(nested)) is None
    assert [k for k, _ in ads.ad_items(nested, repr(nested))] == list(nested.keys())
    assert ads.split_ad_text("[ ]") == []


def test_views_group_like_a_reading_of_every_attribute():
    cache = SlotCache()
    texts = [slot_text(f"h{i}", s) for i in range(4) for s in (1, 2)]
    views = [cache.view(t, classad2.ClassAd(t)) for t in texts]
    assert len({v.shape.id for v in views}) == 1
    assert {n.lower() for n in views[0].names} <= INSTANCE_ATTRS
    for v, t in zip(views, texts):
        ad = classad2.ClassAd(t)
        assert v.items == tuple(sorted((k.lower(), t2) for k, t2 in ads.ad_items(ad, t) if k != "CurrentTime"))
        for attr in ("Name", "State", "ClaimId", "SlotID", "Cpus", "Memory", "Start", "Nope", "KFlops"):
            assert v.get(attr) == ads.get(ad, attr), attr
    # A different Memory is a different shape; a string with a ';' is read the slow way.
    other = cache.view(slot_text("h9", 1, Memory=4096), None, classad2.ClassAd)
    odd = cache.view(slot_text("h8", 1, Note="a; Name = x"), None, classad2.ClassAd)
    assert len({views[0].shape.id, other.shape.id, odd.shape.id}) == 3
    assert odd.get("Note") == "a; Name = x" and odd.get("Name") == "slot1@h8"


def test_an_instance_attribute_that_is_an_expression_counts():
    cache = SlotCache()
    plain = cache.view(slot_text("h1", 1), None, classad2.ClassAd)
    looked = cache.view(slot_text("h2", 1, KeyboardIdle=ads.Expr("TARGET.X + Foo")), None, classad2.ClassAd)
    assert plain.shape is looked.shape
    assert "foo" in looked.machine_refs and "foo" not in plain.machine_refs
    assert plain.sig_key != looked.sig_key
    # The first slot of a shape is parsed to learn the shape; the others are not.
    assert not cache.view(slot_text("h4", 1), None, classad2.ClassAd).parsed
    # An expression that looks at an instance attribute makes the slot's weight its own.
    mine = cache.view(slot_text("h3", 1, SlotWeight=ads.Expr("SlotID")), None, classad2.ClassAd)
    assert mine.depends_on_instance() and not plain.depends_on_instance()


def test_a_policy_that_looks_at_slot_id_splits_view_groups_by_it():
    cache = SlotCache()
    texts = [slot_text(f"h{i}", s) for i in range(5) for s in (1, 2, 3)]
    views = [cache.view(t, None, classad2.ClassAd) for t in texts]
    assert len(Matchmaker.from_views(views, MatchPolicy(), 1000.0, cache).groups) == 1
    assert len(Matchmaker.from_views(views, MatchPolicy("", POST), 1000.0, cache).groups) == 3
    # Only the slot that taught the shape has been parsed; matching parses the group's first slot.
    mm = Matchmaker.from_views(views, MatchPolicy(), 1000.0, cache)
    assert sum(v.parsed for v in views) == 1
    assert mm.match(classad2.ClassAd("[ Requirements = true; RequestMemory = 1 ]")).slot_name == "slot1@h0"
    assert sum(v.parsed for v in views) == 1


def test_significant_attributes_from_views_equal_those_from_ads():
    rng = random.Random(7)
    cache = SlotCache()
    texts = []
    for i in range(30):
        extra = rng.choice([{}, {"Start": ads.Expr('TARGET.Dept =?= "x"')}, {"Rank": ads.Expr('TARGET.Owner == "u"')},
                            {"KeyboardIdle": ads.Expr("TARGET.Idle")}])
        texts.append(slot_text(f"h{i % 7}", i, **extra))
    pairs = [(classad2.ClassAd(t), t) for t in texts]
    views = [cache.view(t, None, classad2.ClassAd) for t in texts]
    policy = ["TARGET.Foo + Cpus"]
    assert SignificantAttributes().compute_views(views, policy) == SignificantAttributes().compute(pairs, policy)


def test_one_evaluation_of_both_requirements_is_symmetric_match():
    values = ["true", "false", "1", "0", "0.5", "0.0", '"yes"', "undefined", "error", "1/0", "TARGET.Missing",
              "TARGET.V > 1", "MY.V > 1", "V > 1", "TARGET.V", "{1}"]
    rng = random.Random(3)
    for _ in range(400):
        job = classad2.ClassAd(f"[ V = {rng.choice(['1', '2', 'true', 'undefined'])} ]")
        slot = classad2.ClassAd("[ V = " + rng.choice(["0", "2", "false", '"s"']) + " ]")
        for ad in (job, slot):
            r = rng.choice(values + ["missing"])
            if r != "missing":
                ad["Requirements"] = classad2.ExprTree(r)
        assert symmetric_match(job, slot) == job.symmetricMatch(slot), (repr(job), repr(slot))


def test_literal_texts():
    for t in ('"a"', "1", "-1", "1.5", "1.500000000000000E+03", "true", "false", "undefined", "error"):
        assert is_literal_text(t), t
    for t in ('"a" + b', "x", "1 + 2", "-inf", '"a\\"b"', "{ 1,2 }"):
        assert not is_literal_text(t), t


def test_a_policy_that_reaches_job_attributes_through_the_slot_is_evaluated_per_request():
    from tests.unit.test_slot_groups import brute_force, request, slot

    # The pre-job rank looks at the slot's Rank, which looks at the job's Prio; RemoteOwner
    # is a job attribute only some requests have.
    pre = "10 * My.Rank + (RemoteOwner =?= undefined) - Memory"
    post = "KFlops - SlotID"
    rng = random.Random(11)
    for seed in range(10):
        slots = []
        for h in range(6):
            rank = rng.choice(["0", "TARGET.Prio", "TARGET.Prio * 2"])
            for sid in (1, 2):
                s = slot(f"h{h}", sid, 4, rng.choice([2048, 4096]))
                s["Rank"] = classad2.ExprTree(rank)
                slots.append(s)
        policy = MatchPolicy(pre, post)
        mm = Matchmaker.from_ads([classad2.ClassAd(repr(s)) for s in slots], policy, 1000.0)
        remaining = [classad2.ClassAd(repr(s)) for s in slots]
        for _ in range(10):
            req = request(1, 1024)
            if rng.random() < 0.5:
                req["Prio"] = rng.randint(-3, 3)
            if rng.random() < 0.3:
                req["RemoteOwner"] = "someone"
            expected = brute_force(remaining, policy, classad2.ClassAd(repr(req)))
            got = mm.match(classad2.ClassAd(repr(req)))
            assert getattr(got, "slot_name", None) == expected, seed
            remaining = [s for s in remaining if s.eval("Name") != expected]


def test_views_of_ads_gone_from_the_pool_are_forgotten():
    cache = SlotCache()
    for cycle in range(5):
        # Every cycle the collector's stamp makes new texts of the same 200 slots.
        texts = [slot_text(f"h{i}", 1, LastHeardFrom=cycle) for i in range(200)]
        views = [cache.view(t, None, classad2.ClassAd) for t in texts]
        Matchmaker.from_views(views, MatchPolicy(), 1000.0, cache)
        assert len(cache._by_text) <= 2 * 200 + 100
    assert len(cache._shapes) == 1


def test_the_factored_name_pattern_matches_exactly_the_names():
    pattern = re.compile(name_pattern(INSTANCE_ATTR_NAMES))
    assert all(pattern.fullmatch(n) for n in INSTANCE_ATTR_NAMES)
    near = {n[:-1] for n in INSTANCE_ATTR_NAMES} | {n + "s" for n in INSTANCE_ATTR_NAMES} | {
        "Remote", "Preempting", "ExpectedMachine", "Job", "", "name", "Slot"}
    assert not [n for n in near - set(INSTANCE_ATTR_NAMES) if pattern.fullmatch(n)]
    small = re.compile(name_pattern(["a", "ab", "abc", "b", "bcd", "bce"]))
    assert [w for w in ("a", "ab", "abc", "abcd", "b", "bc", "bcd", "bce", "c") if small.fullmatch(w)] == [
        "a", "ab", "abc", "b", "bcd", "bce"]


def test_strings_holding_cut_like_text_read_as_the_library_reads_them():
    """Strings anywhere (instance or shape attributes) that hold ';', '; Name = ' and the
    like: each view's attributes are the ad's, whichever way the cache reads it, and
    plain ads still take the cheap way."""
    rng = random.Random(11)
    bits = ["; Name = ", ";", "; SlotID = 7", " = ", "x", "Machine", "; ClaimId = \"", "q"]
    cache = SlotCache()
    fast = 0
    for i in range(300):
        extra = {}
        for attr in rng.sample(["Note", "Name", "Machine", "ClaimId", "Other"], rng.randint(0, 2)):
            extra[attr] = "".join(rng.choice(bits) for _ in range(rng.randint(1, 4)))
        text = slot_text(f"h{i}", i % 4 + 1, **extra)
        ad = classad2.ClassAd(text)
        v = cache.view(text, None, classad2.ClassAd)
        fast += not v.parsed
        assert v.items == tuple(sorted((k.lower(), t) for k, t in ads.ad_items(ad, text) if k != "CurrentTime"))
        for attr in ("Name", "Machine", "ClaimId", "Note", "Other", "SlotID", "Cpus", "Start"):
            assert v.get(attr) == ads.get(ad, attr), (attr, text)
    assert fast > 50    # the plain ads of a known shape were not parsed


class _SplitOnly(SlotCache):
    """The cache as it reads without templates: every text cut by the general split."""

    fast = 0

    def _template_of(self, inner):
        return None

    def _fast_view(self, text, ad, parse):
        v = super()._fast_view(text, ad, parse)
        self.fast += v is not None
        return v


_BITS = ["; Name = ", ";", "; SlotID = 7", " = ", "x", "Machine", '"', "; ClaimId = \"", "q", "1", "-"]


@st.composite
def _pool_texts(draw):
    """Texts of slots of a few shapes, with instance values that are plain, odd or cut-like,
    in any order, some repeated (the collector's same ad again)."""
    shapes = draw(st.lists(st.fixed_dictionaries({
        "Memory": st.sampled_from([2048, 4096]),
        "Note": st.one_of(st.none(), st.lists(st.sampled_from(_BITS), max_size=3).map("".join))}),
        min_size=1, max_size=3))
    texts = []
    for i in range(draw(st.integers(1, 12))):
        extra = dict(draw(st.sampled_from(shapes)))
        if extra["Note"] is None:
            del extra["Note"]
        for attr in draw(st.lists(st.sampled_from(["Name", "Machine", "ClaimId", "JobId"]), max_size=2, unique=True)):
            extra[attr] = draw(st.one_of(st.lists(st.sampled_from(_BITS), max_size=4).map("".join),
                                         st.integers(-5, 10**6)))
        if draw(st.booleans()):
            extra["EnteredCurrentState"] = draw(st.integers(0, 10**9))
        text = slot_text(f"h{draw(st.integers(0, 5))}", draw(st.integers(1, 3)), **extra)
        tail = draw(st.sampled_from(["", "; Zeta = 5", "; JobStart = 7", '; Zeta = "a; Name = b"']))
        texts.append(text[:-2] + tail + " ]")   # another shape that only adds an attribute at the end
    return texts


@settings(max_examples=100, deadline=None, database=None)
@given(_pool_texts())
def test_a_template_reads_every_text_as_the_general_split_does(texts):
    """A text a learnt cut's template matches gives the view the general split gives:
    the same instance names and values, the same shape's attributes and references, or
    the slow way for both; and every view's attributes are the ad's."""
    with_templates, split_only = SlotCache(), _SplitOnly()
    with_templates.template_after = 2
    used = [0]
    template_of = with_templates._template_of

    def counted(inner):
        found = template_of(inner)
        used[0] += found is not None
        return found
    with_templates._template_of = counted
    # A cut is compiled at its second sight; each text is read twice in turn at the end, so
    # a text of a compiled cut then meets its template first.
    for text in texts * 2 + [t for t in texts for _ in range(2)]:
        a, b = with_templates.view(text, None, classad2.ClassAd), split_only.view(text, None, classad2.ClassAd)
        assert (a.names, a.values, a.shape.items, a.machine_refs, a.parsed) == \
               (b.names, b.values, b.shape.items, b.machine_refs, b.parsed), text
        ad = classad2.ClassAd(text)
        assert a.items == tuple(sorted((k.lower(), t) for k, t in ads.ad_items(ad, text) if k != "CurrentTime"))
        with_templates._by_text.clear()   # read every text afresh, not from the cache of texts
        split_only._by_text.clear()
    if split_only.fast:   # a text read the cheap way was read four times: its template met it
        assert used[0] > 0


def test_a_cut_becomes_a_template_once_split_often_enough():
    cache = SlotCache()
    cache.template_after = 10
    texts = [slot_text(f"h{i}", s, EnteredCurrentState=i) for i in range(50) for s in (1, 2)]
    views = [cache.view(t, None, classad2.ClassAd) for t in texts[:9]]
    assert not cache._templates
    views += [cache.view(t, None, classad2.ClassAd) for t in texts[9:]]
    assert len(cache._templates) == 1 and len({v.shape.id for v in views}) == 1
    assert not any(v.parsed for v in views[1:])
    assert cache._template_of("; " + texts[-1][2:-2]) == (views[0].shape, views[-1].names, views[-1].values)
    # A text of the same lengths whose pieces differ is not the template's.
    other = texts[-1].replace('"Unclaimed"', '"Unclaimex"')
    assert cache._template_of("; " + other[2:-2]) is None


def test_a_template_pushed_out_comes_back_without_a_new_compile():
    """Three shapes in turn, two templates tried: a cut whose template was pushed out is
    tried again once the split meets it, from the one compiled before."""
    cache = SlotCache()
    cache.template_after = 3
    texts = {m: [slot_text(f"h{i}", 1, Memory=m, EnteredCurrentState=i) for i in range(12)] for m in (1, 22, 333)}
    for m in (1, 22, 333):
        for t in texts[m][:4]:
            cache.view(t, None, classad2.ClassAd)
    assert len(cache._compiled) == 3 and len(cache._templates) == 2
    first = cache._compiled[next(iter(cache._compiled))]
    assert first not in cache._templates
    v = cache.view(texts[1][5], None, classad2.ClassAd)      # the split, then its template again
    assert cache._templates[0] is first and len(cache._compiled) == 3
    w = cache.view(texts[1][6], None, classad2.ClassAd)          # read through the template
    assert cache._template_of("; " + texts[1][6][2:-2]) == (v.shape, v.names, w.values)
    assert not w.parsed and w.shape is v.shape
