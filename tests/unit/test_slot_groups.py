"""Grouped matchmaking picks exactly the slot a slot-by-slot search picks."""
from __future__ import annotations

import random

import classad2

from daemons.core import ads
from daemons.negotiator.matchmaker import Match, Matchmaker, MatchPolicy, SlotCache

PRE = "(10000000 * My.Rank) + (1000000 * (RemoteOwner =?= UNDEFINED)) - (100000 * Cpus) - Memory"
POST = "(RemoteOwner =?= UNDEFINED) * (ifthenElse(isUndefined(KFlops), 1000, Kflops) - SlotID - 1.0e10*(Offline=?=True))"


def slot(host: str, slot_id: int, cpus: int, memory: int, start: str = "true", kind: str = "x") -> classad2.ClassAd:
    return classad2.ClassAd(ads.ad_text({
        "MyType": "Machine", "Name": f"slot{slot_id}@{host}", "Machine": host, "SlotID": slot_id,
        "Cpus": cpus, "Memory": memory, "Disk": 10 ** 7, "Kind": kind, "State": "Unclaimed",
        "Activity": "Idle", "Rank": 0, "KFlops": 1000, "ClaimId": f"c-{slot_id}@{host}",
        "StartdIpAddr": f"<{host}:1>", "Start": ads.Expr(start),
        "Requirements": ads.Expr("START && TARGET.RequestCpus <= MY.Cpus && TARGET.RequestMemory <= MY.Memory"),
    }))


def request(cpus: int, memory: int, extra: str = "true", rank: str = "0") -> classad2.ClassAd:
    return classad2.ClassAd(ads.text_of_exprs({
        "ClusterId": "1", "ProcId": "0", "RequestCpus": str(cpus), "RequestMemory": str(memory),
        "Requirements": f"(TARGET.Cpus >= RequestCpus) && (TARGET.Memory >= RequestMemory) && ({extra})",
        "Rank": rank}))


def brute_force(slots: list[classad2.ClassAd], policy: MatchPolicy, req: classad2.ClassAd) -> str | None:
    """The slot-by-slot search: best (pre, job rank, post), ties to the first name."""
    pre = classad2.ExprTree(policy.pre_job_rank) if policy.pre_job_rank else None
    post = classad2.ExprTree(policy.post_job_rank) if policy.post_job_rank else None
    best, best_key = None, None
    for i, s in enumerate(sorted(slots, key=lambda a: a.eval("Name"))):
        if not req.symmetricMatch(s):
            continue
        key = (ads.as_number(ads.evaluate(pre, s, req)) or 0.0 if pre else 0.0,
               ads.as_number(ads.evaluate(req.lookup("Rank"), req, s)) or 0.0,
               ads.as_number(ads.evaluate(post, s, req)) or 0.0 if post else 0.0, -i)
        if best_key is None or key > best_key:
            best, best_key = s, key
    return best.eval("Name") if best is not None else None


def _pool(rng: random.Random) -> list[classad2.ClassAd]:
    shapes = [(1, 1024, "true", "a"), (4, 8192, "true", "b"), (8, 16384, 'TARGET.Dept =?= "x"', "c"),
              (2, 2048, "TARGET.RequestMemory <= 1024", "d")]
    out = []
    for h in range(rng.randint(3, 12)):
        cpus, mem, start, kind = rng.choice(shapes)
        for sid in range(1, rng.randint(1, 4) + 1):
            out.append(slot(f"host{h:02d}", sid, cpus, mem, start, kind))
    return out


def _requests(rng: random.Random, hosts: list[str]) -> list[classad2.ClassAd]:
    out = []
    for _ in range(30):
        extra = rng.choice(["true", f'TARGET.Machine == "{rng.choice(hosts)}"', 'TARGET.Kind != "a"', "true"])
        rank = rng.choice(["0", "TARGET.Memory", "-TARGET.Cpus", "TARGET.SlotID"])
        out.append(request(rng.choice([1, 1, 2, 4, 8]), rng.choice([512, 1024, 2048, 8192]), extra, rank))
    return out


def test_grouped_matching_agrees_with_slot_by_slot_search():
    for seed in range(25):
        rng = random.Random(seed)
        slots = _pool(rng)
        hosts = sorted({s.eval("Machine") for s in slots})
        for policy in (MatchPolicy(), MatchPolicy(PRE, POST), MatchPolicy(PRE, "")):
            mm = Matchmaker.from_ads([classad2.ClassAd(repr(s)) for s in slots], policy, 1000.0)
            remaining = [classad2.ClassAd(repr(s)) for s in slots]
            for req in _requests(rng, hosts):
                expected = brute_force(remaining, policy, classad2.ClassAd(repr(req)))
                got = mm.match(classad2.ClassAd(repr(req)))
                assert (got.slot_name if isinstance(got, Match) else None) == expected, (seed, policy)
                if expected is not None:
                    remaining = [s for s in remaining if s.eval("Name") != expected]


def test_identical_slots_form_one_group_and_one_evaluation_serves_them():
    slots = [slot(f"h{i}", 1, 4, 8192) for i in range(50)]
    mm = Matchmaker.from_ads(slots, MatchPolicy(), 1000.0)
    assert (mm.available, len(mm.groups)) == (50, 1)
    mm.match(request(1, 1024))
    assert mm.evaluations == 1
    assert mm.available == 49


def test_a_policy_that_looks_at_slot_id_splits_groups_by_it():
    slots = [slot(f"h{i}", sid, 1, 1024) for i in range(10) for sid in (1, 2)]
    assert len(Matchmaker.from_ads(slots, MatchPolicy(), 1000.0).groups) == 1
    assert len(Matchmaker.from_ads(slots, MatchPolicy(PRE, POST), 1000.0).groups) == 2


def test_a_request_naming_a_machine_is_searched_slot_by_slot():
    slots = [slot(f"h{i}", 1, 4, 8192) for i in range(20)]
    mm = Matchmaker.from_ads(slots, MatchPolicy(), 1000.0)
    got = mm.match(request(1, 1024, 'TARGET.Machine == "h13"'))
    assert isinstance(got, Match) and got.slot_name == "slot1@h13"
    assert mm.evaluations == 20


def test_the_cache_spares_reanalysing_unchanged_slots():
    cache = SlotCache()
    slots = [slot(f"h{i}", 1, 4, 8192) for i in range(5)]
    texts = [repr(s) for s in slots]
    Matchmaker.from_ads(slots, MatchPolicy(), 1000.0, texts, cache)
    assert len(cache._by_text) == 5
    Matchmaker.from_ads([classad2.ClassAd(t) for t in texts], MatchPolicy(), 2000.0, texts, cache)
    assert len(cache._by_text) == 5


def test_match_many_takes_the_slots_repeated_single_matches_take():
    for seed in range(20):
        rng = random.Random(100 + seed)
        slots = _pool(rng)
        hosts = sorted({s.eval("Machine") for s in slots})
        for policy in (MatchPolicy(), MatchPolicy(PRE, POST)):
            one = Matchmaker.from_ads([classad2.ClassAd(repr(s)) for s in slots], policy, 1000.0)
            many = Matchmaker.from_ads([classad2.ClassAd(repr(s)) for s in slots], policy, 1000.0)
            for req in _requests(rng, hosts)[:8]:
                count = rng.randint(1, 12)
                singles = []
                for _ in range(count):
                    r = one.match(classad2.ClassAd(repr(req)))
                    if not isinstance(r, Match):
                        break
                    singles.append(r.slot_name)
                got, rejection = many.match_many(classad2.ClassAd(repr(req)), count)
                assert [m.slot_name for m in got] == singles, (seed, policy)
                assert (rejection is None) == (len(singles) == count)


def test_match_many_evaluates_each_group_once_for_many_matches():
    slots = [slot(f"h{i:03d}", 1, 4, 8192) for i in range(200)]
    mm = Matchmaker.from_ads(slots, MatchPolicy(), 1000.0)
    got, rejection = mm.match_many(request(1, 1024), 150)
    assert (len(got), rejection, mm.evaluations) == (150, None, 1)
    assert [m.slot_name for m in got] == [f"slot1@h{i:03d}" for i in range(150)]


def test_requests_alike_in_their_significant_attributes_share_results_and_agree_with_a_fresh_search():
    from daemons.negotiator.significant import SignificantAttributes
    from daemons.negotiator.slotads import SlotCache as Cache
    for seed in range(15):
        rng = random.Random(300 + seed)
        slots = _pool(rng)
        hosts = sorted({s.eval("Machine") for s in slots})
        for policy in (MatchPolicy(), MatchPolicy(PRE, POST)):
            cache = Cache()
            views = [cache.view(repr(s), classad2.ClassAd(repr(s))) for s in slots]
            sig = SignificantAttributes().compute_views(views, [policy.pre_job_rank, policy.post_job_rank], "")
            shared = Matchmaker.from_views(views, policy, 1000.0, cache, significant=sig)
            plain = Matchmaker.from_ads([classad2.ClassAd(repr(s)) for s in slots], policy, 1000.0)
            reqs = _requests(rng, hosts)
            # Jobs that differ only in what no slot looks at (their arguments) are requested
            # one by one, as a schedd that does not autocluster sends them.
            for req in reqs[:10] + reqs[:10]:
                for args in ("a", "b"):
                    r = classad2.ClassAd(repr(req))
                    r["Args"] = args
                    a, b = shared.match(classad2.ClassAd(repr(r))), plain.match(classad2.ClassAd(repr(r)))
                    assert (a.slot_name if isinstance(a, Match) else a) == (
                        b.slot_name if isinstance(b, Match) else b), (seed, policy)
            assert shared.evaluations <= plain.evaluations


def test_slots_that_differ_only_in_their_expected_draining_times_are_one_group_unless_asked_for():
    """The startd restamps ExpectedMachine*Draining* at every update: like a timestamp they do
    not split slots into groups, until a request looks at them."""
    slots = []
    for i in range(12):
        s = slot(f"h{i:02d}", 1, 4, 8192)
        s["ExpectedMachineGracefulDrainingCompletion"] = 1_000_000 + (i * 7919) % 12 * 600
        s["ExpectedMachineGracefulDrainingBadput"] = (i * 31) % 5
        slots.append(s)
    mm = Matchmaker.from_ads([classad2.ClassAd(repr(s)) for s in slots], MatchPolicy(), 1000.0)
    assert len(mm.groups) == 1
    for rank in ("-TARGET.ExpectedMachineGracefulDrainingCompletion", "TARGET.ExpectedMachineGracefulDrainingBadput"):
        mm = Matchmaker.from_ads([classad2.ClassAd(repr(s)) for s in slots], MatchPolicy(), 1000.0)
        req = request(1, 1024, rank=rank)
        got = mm.match(classad2.ClassAd(repr(req)))
        assert isinstance(got, Match) and got.slot_name == brute_force(slots, MatchPolicy(), req), rank


def test_a_requests_attributes_read_from_its_text_give_the_same_matches():
    """The negotiator reads a request's names and texts from the ad's text (`items`) rather
    than back from classad2: the matches are those of the parsed ad alone."""
    from daemons.core import ads
    from daemons.negotiator.significant import SignificantAttributes
    from daemons.negotiator.slotads import SlotCache as Cache
    for seed in range(10):
        rng = random.Random(700 + seed)
        slots = _pool(rng)
        hosts = sorted({s.eval("Machine") for s in slots})
        for policy in (MatchPolicy(), MatchPolicy(PRE, POST)):
            made = []
            for _ in range(2):
                cache = Cache()
                views = [cache.view(repr(s), classad2.ClassAd(repr(s))) for s in slots]
                sig = SignificantAttributes().compute_views(views, [policy.pre_job_rank, policy.post_job_rank], "")
                made.append(Matchmaker.from_views(views, policy, 1000.0, cache, significant=sig))
            from_text, from_ad = made
            reqs = _requests(rng, hosts)
            for req in reqs[:10] + reqs[:10]:
                for args in ("a", "b"):
                    r = classad2.ClassAd(repr(req))
                    r["Args"] = args
                    text = ads.one_line(repr(r))
                    items = {k.lower(): v for k, v in ads.split_ad_text(text)}
                    count = rng.randint(1, 5)
                    a, ra = from_text.match_many(ads.parse_ad(text), count, items=items)
                    b, rb = from_ad.match_many(ads.parse_ad(text), count)
                    assert [m.slot_name for m in a] == [m.slot_name for m in b], (seed, policy)
                    assert (ra.reason if ra else None) == (rb.reason if rb else None)
            assert from_text.evaluations == from_ad.evaluations


def _served(mm: Matchmaker, prio: float, in_use: float, count: int = 1):
    r = request(1, 1024)
    r["SubmitterUserPrio"], r["SubmitterUserResourcesInUse"] = prio, in_use
    return mm.match_many(r, count)


def test_requests_of_submitters_alike_share_results_unless_a_slot_looks_at_the_submitter():
    """The negotiator's figures in a request (SubmitterUserPrio...) tell requests apart only
    when some slot or policy refers to them: then each submitter's request is evaluated, and
    gets the slots a fresh search gives it."""
    from daemons.negotiator.significant import SignificantAttributes
    for start, shared in (("true", True), ("TARGET.SubmitterUserPrio < 10", False)):
        slots = [slot(f"h{i:02d}", 1, 4, 8192, start) for i in range(6)]
        cache = SlotCache()
        views = [cache.view(repr(s), classad2.ClassAd(repr(s))) for s in slots]
        sig = SignificantAttributes()
        names = sig.compute_views(views)
        mm = Matchmaker.from_views(views, MatchPolicy(), 1000.0, cache, significant=names,
                                   inserted_refs=sig.inserted_refs)
        got = [_served(mm, prio, used) for prio, used in ((0.5, 0.0), (0.5, 1.0), (500.0, 2.0))]
        assert [len(found) for found, _ in got] == ([1, 1, 1] if shared else [1, 1, 0])
        assert mm.evaluations == (1 if shared else 2)   # the usage figure no slot reads splits nothing
        if not shared:
            assert got[2][1] is not None and got[2][1].reason == "no match found"


def test_without_inserted_refs_every_negotiator_figure_tells_requests_apart():
    slots = [slot(f"h{i:02d}", 1, 4, 8192) for i in range(4)]
    cache = SlotCache()
    views = [cache.view(repr(s), classad2.ClassAd(repr(s))) for s in slots]
    mm = Matchmaker.from_views(views, MatchPolicy(), 1000.0, cache, significant=[])
    for prio, used in ((0.5, 0.0), (0.5, 1.0)):
        _served(mm, prio, used)
    assert mm.evaluations == 2


def test_groups_split_only_by_a_rank_policy_share_their_symmetric_match():
    """HTCondor's default post-job rank looks at SlotID, so slots 1 - 4 of identical machines
    are four groups; whether a request matches them is one evaluation, since nothing their
    Requirements or the request's look at tells them apart. A START that looks at SlotID
    does tell them apart, and each group is evaluated."""
    slots = [slot(f"h{i}", sid, 1, 1024) for i in range(10) for sid in (1, 2, 3, 4)]
    mm = Matchmaker.from_ads(slots, MatchPolicy(PRE, POST), 1000.0)
    assert len(mm.groups) == 4
    got, rejection = mm.match_many(request(1, 512), 3)
    assert rejection is None and mm.evaluations == 1
    assert [m.slot_name for m in got] == ["slot1@h0", "slot1@h1", "slot1@h2"]   # POST prefers SlotID 1
    picky = [slot(f"h{i}", sid, 1, 1024, start="MY.SlotID > 2") for i in range(10) for sid in (1, 2, 3, 4)]
    mm = Matchmaker.from_ads(picky, MatchPolicy(PRE, POST), 1000.0)
    got, rejection = mm.match_many(request(1, 512), 3)
    assert mm.evaluations == 4
    assert [m.slot_name for m in got] == ["slot3@h0", "slot3@h1", "slot3@h2"]
