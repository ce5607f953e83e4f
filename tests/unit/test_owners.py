"""The schedd's owners: Owner from the identity, and who may act on whose jobs."""
from __future__ import annotations

import pytest

from daemons.schedd.owners import Caller, OwnerError, caller_of, is_super_user, may_act, submit_owner

SUPERS = ("root", "condor", "ops@site.example")
ALICE = Caller("alice@pool", authenticated=True, open=False)
ROOT = Caller("root@pool", authenticated=True, open=False)
OPS = Caller("ops@site.example", authenticated=True, open=False)
OPS_ELSEWHERE = Caller("ops@other", authenticated=True, open=False)
NOBODY = Caller(authenticated=False, open=False)
OPEN = Caller(open=True)


def test_owner_is_the_callers_user():
    assert submit_owner(ALICE, "", SUPERS, ".*") == "alice"
    assert submit_owner(ALICE, "alice", SUPERS, ".*") == "alice"
    with pytest.raises(OwnerError, match="alice@pool may not submit jobs owned by 'bob'"):
        submit_owner(ALICE, "bob", SUPERS, ".*")


def test_super_users_may_submit_for_others_where_impersonation_allows():
    assert submit_owner(ROOT, "bob", SUPERS, ".*") == "bob"
    assert submit_owner(OPS, "bob", SUPERS, "b.*") == "bob"
    with pytest.raises(OwnerError, match="QUEUE_SUPER_USER_MAY_IMPERSONATE"):
        submit_owner(OPS, "carol", SUPERS, "b.*")
    with pytest.raises(OwnerError, match="QUEUE_SUPER_USER_MAY_IMPERSONATE"):
        submit_owner(ROOT, "bob", SUPERS, None)      # HTCondor's default: no impersonation
    with pytest.raises(OwnerError, match="not a user name"):
        submit_owner(ROOT, "bo b", SUPERS, ".*")


def test_super_user_entries_name_a_user_or_one_identity():
    assert is_super_user(ROOT, SUPERS) and is_super_user(OPS, SUPERS)
    assert not is_super_user(OPS_ELSEWHERE, SUPERS) and not is_super_user(ALICE, SUPERS)
    assert not is_super_user(NOBODY, ("unauthenticated",))


def test_who_may_act_on_a_job():
    assert may_act(ALICE, "alice", SUPERS) and not may_act(ALICE, "bob", SUPERS)
    assert may_act(ROOT, "bob", SUPERS)
    assert not may_act(NOBODY, "unauthenticated", SUPERS)
    assert not may_act(ALICE, None, SUPERS)


def test_security_off_trusts_the_request():
    assert submit_owner(OPEN, "bob", SUPERS, None) == "bob"
    assert may_act(OPEN, "anyone", SUPERS)
    assert caller_of(None) == OPEN
