"""daemons/negotiator/significant.py: the job attributes machine ads and policy refer to."""
import classad2

from daemons.negotiator.significant import SignificantAttributes, is_removed

SLOT = ('[ Name = "slot1@h"; Machine = "h"; Cpus = 4; Memory = 4096; Disk = 100000; '
        'Start = TARGET.Owner =!= "bob" && RequestGPUs =?= undefined; '
        'WithinResourceLimits = TARGET.RequestCpus <= MY.Cpus && TARGET.RequestMemory <= Memory; '
        'Requirements = START && WithinResourceLimits; Rank = TARGET.Foo; ChildCpus = {1,2}; '
        'ChildReq = { TARGET.Zed, 1 }; '
        'CurrentRank = CurrentTime - Slot1_Bar + RemoteUserPrio ]')
PRE_JOB_RANK = "(10000000 * My.Rank) + (1000000 * (RemoteOwner =?= UNDEFINED)) - (100000 * Cpus) - Memory"


def pair(text):
    return classad2.ClassAd(text), text


def test_slot_ad_references():
    assert SignificantAttributes().compute([pair(SLOT)]) == ["Foo", "Owner", "RequestCpus", "RequestGPUs",
                                                            "RequestMemory"]


def test_unqualified_names_the_ad_defines_are_not_significant():
    text = "[ Cpus = 4; Memory = 10; Start = Cpus > 2 && Memory > 1 && Unknown > 0 ]"
    assert SignificantAttributes().compute([pair(text)]) == ["Unknown"]


def test_target_names_count_even_when_the_ad_defines_them():
    text = "[ Cpus = 4; Start = TARGET.Cpus <= Cpus ]"
    assert SignificantAttributes().compute([pair(text)]) == ["Cpus"]


def test_list_valued_attributes_are_skipped():
    text = "[ Cpus = 1; ChildReq = { TARGET.Zed, OTHER.Yak }; Start = true ]"
    assert SignificantAttributes().compute([pair(text)]) == []


def test_removed_names():
    text = ("[ Start = CurrentTime > 0 && RemoteUserPrio < 1 && SubmittorPrio < 1 && SlotID > 0 && "
            "Slot2_Foo > 0 && RemoteUserResourcesInUse > 0 && TARGET.JobUniverse == 5 ]")
    assert SignificantAttributes().compute([pair(text)]) == ["JobUniverse"]


def test_is_removed():
    assert [is_removed(n) for n in ("currenttime", "Slot12_Cpus", "RemoteUser", "Owner", "SlotIDx")] == [
        True, True, True, False, False]


def test_nested_references_are_trimmed_to_their_first_name():
    text = "[ Start = TARGET.Foo.Bar > 0 && TARGET.Lst[0] > 1 ]"
    assert SignificantAttributes().compute([pair(text)]) == ["Foo", "Lst"]


def test_policy_adds_nothing_when_the_sample_defines_the_names():
    s = SignificantAttributes()
    assert s.compute([pair(SLOT)], [PRE_JOB_RANK]) == s.compute([pair(SLOT)])


def test_policy_adds_its_external_names():
    s = SignificantAttributes()
    out = s.compute([pair(SLOT)], ["TARGET.JobPrio + MY.Cpus", "", "Memory - DiskUsage"])
    assert out == ["DiskUsage", "Foo", "JobPrio", "Owner", "RequestCpus", "RequestGPUs", "RequestMemory"]


def test_policy_is_read_against_the_first_ad():
    first = "[ Cpus = 4; Start = true ]"
    second = "[ Memory = 4; Start = true ]"
    assert SignificantAttributes().compute([pair(first), pair(second)], ["Cpus + Memory"]) == ["Memory"]


def test_job_constraint_adds_its_names():
    assert SignificantAttributes().compute([pair(SLOT)], job_constraint="JobPrio > 0") == [
        "Foo", "JobPrio", "Owner", "RequestCpus", "RequestGPUs", "RequestMemory"]


def test_job_constraint_is_read_in_an_empty_ad():
    # Cpus is defined by the slot ad, but the constraint is about the job.
    assert "Cpus" in SignificantAttributes().compute([pair(SLOT)], job_constraint="Cpus > 1")


def test_no_slot_ads_no_attributes():
    assert SignificantAttributes().compute([], [PRE_JOB_RANK], "JobPrio > 0") == []


def test_union_over_ads_sorted_case_insensitively():
    a = "[ Start = TARGET.zeta > 0 ]"
    b = "[ Start = TARGET.Alpha > 0 && TARGET.beta > 0 ]"
    assert SignificantAttributes().compute([pair(a), pair(b)]) == ["Alpha", "beta", "zeta"]


def test_deduplicated_case_insensitively():
    a = "[ Start = TARGET.Foo > 0 ]"
    b = "[ Start = TARGET.FOO > 0 && TARGET.foo < 9 ]"
    out = SignificantAttributes().compute([pair(a), pair(b)])
    assert len(out) == 1
    assert out[0].lower() == "foo"


def test_case_variants_keep_the_first_spelling_seen():
    # HTCondor's classad::References is a case-insensitive set: the first spelling inserted wins,
    # so the list does not depend on anything but the ads and their order.
    a = "[ Start = TARGET.Foo > 0 ]"
    b = "[ Start = TARGET.foo > 0 ]"
    assert SignificantAttributes().compute([pair(a), pair(b)]) == ["Foo"]
    assert SignificantAttributes().compute([pair(b), pair(a)]) == ["foo"]


def test_results_are_cached_by_ad_text():
    s = SignificantAttributes()
    ad, text = pair(SLOT)
    first = s.of_ad(ad, text)
    assert isinstance(first, tuple)  # ordered: the first spelling of a name wins, whatever the hash seed
    assert s.of_ad(classad2.ClassAd(text), text) is first
    s.compute([(ad, text)])
    assert s.of_ad(ad, text) is first


def test_without_text_nothing_is_cached():
    s = SignificantAttributes()
    ad, _ = pair(SLOT)
    assert s.of_ad(ad) == s.of_ad(ad)
    assert s.of_ad(ad) is not s.of_ad(ad)


def test_a_changed_ad_is_analysed_afresh():
    s = SignificantAttributes()
    assert s.compute([pair("[ Start = TARGET.A > 0 ]")]) == ["A"]
    assert s.compute([pair("[ Start = TARGET.B > 0 ]")]) == ["B"]


def test_inserted_refs_are_the_removed_names_something_refers_to():
    """Not significant to a schedd (its jobs lack them), but the matchmaker must tell requests
    apart by the negotiator's own figures that a slot or a policy looks at."""
    s = SignificantAttributes()
    s.compute([pair("[ Cpus = 4; Start = TARGET.Owner != \"x\" ]")])
    assert s.inserted_refs == frozenset()
    assert s.compute([pair("[ Cpus = 4; Start = TARGET.SubmitterUserPrio < 10 && CurrentTime > 0 ]")]) == []
    # CurrentTime is the ClassAd library's own (the time) as the daemons load it, not a reference.
    assert s.inserted_refs == {"submitteruserprio"}
    s.compute([pair("[ Cpus = 4; Start = true ]")], ["RemoteUserPrio > SubmitterUserPrio * 1.2"])
    assert s.inserted_refs == {"remoteuserprio", "submitteruserprio"}
    s.compute([])
    assert s.inserted_refs == frozenset()


def test_inserted_refs_from_views_agree_with_those_from_ads():
    from daemons.negotiator.slotads import SlotCache
    text = "[ Name = \"slot1@h\"; Cpus = 4; Start = TARGET.SubmitterGroupResourcesInUse < Cpus ]"
    by_ads, by_views = SignificantAttributes(), SignificantAttributes()
    by_ads.compute([pair(text)])
    by_views.compute_views([SlotCache().view(text, classad2.ClassAd(text))])
    assert by_ads.inserted_refs == by_views.inserted_refs == {"submittergroupresourcesinuse"}
