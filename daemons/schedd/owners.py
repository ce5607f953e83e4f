"""Who owns a job and who may act on it: the schedd's side of authorization (pure).

As HTCondor's schedd (qmgmt's OwnerCheck and isQueueSuperUser): a job's Owner is the
user part of the identity that submitted it, never what the client's ad says; only its
owner or a queue super user (QUEUE_SUPER_USERS, HTCondor's default `root, condor`) may
remove, hold, release or edit it; a super user may also submit jobs owned by another
user when QUEUE_SUPER_USER_MAY_IMPERSONATE matches that user's name. A call whose
level has authentication NEVER (security off) is trusted as before: the request names
the owner and may act on any job.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from daemons.core.security.authz import UNAUTHENTICATED

_USER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,63}$")


class OwnerError(ValueError):
    """A request the caller may not make about owners; the message says why."""


@dataclass(frozen=True)
class Caller:
    identity: str = UNAUTHENTICATED
    authenticated: bool = False
    open: bool = True          # security off for this call: trust the request
    levels: frozenset[str] = frozenset()

    @property
    def user(self) -> str:
        return self.identity.rsplit("@", 1)[0]


def caller_of(call: Any) -> Caller:
    """The caller of the RPC being served (`current_call()`); an in-process call is trusted."""
    if call is None:
        return Caller()
    return Caller(identity=call.identity, authenticated=call.authenticated,
                  open=bool(call.notes.get("open", not call.authenticated and not call.levels)),
                  levels=call.levels)


def is_super_user(caller: Caller, super_users: tuple[str, ...]) -> bool:
    """An entry with '@' names one identity; without, a user name in any domain."""
    if caller.open:
        return True
    if not caller.authenticated:
        return False
    for entry in super_users:
        if ("@" in entry and entry.lower() == caller.identity.lower()) or entry == caller.user:
            return True
    return False


def submit_owner(caller: Caller, requested: str, super_users: tuple[str, ...], impersonate: str | None) -> str:
    """The Owner of jobs this caller submits, given the owner its request names (may be '')."""
    if caller.open:
        return requested or "nobody"
    if not requested or requested == caller.user:
        return caller.user
    if not is_super_user(caller, super_users):
        raise OwnerError(f"{caller.identity} may not submit jobs owned by {requested!r}: only a queue super user "
                         f"(QUEUE_SUPER_USERS) may submit for another user")
    if not _USER.match(requested):
        raise OwnerError(f"owner {requested!r} is not a user name")
    if not impersonate or not re.fullmatch(impersonate, requested):
        raise OwnerError(f"{caller.identity} may not submit as {requested!r} (QUEUE_SUPER_USER_MAY_IMPERSONATE "
                         f"does not match it)")
    return requested


def may_act(caller: Caller, job_owner: str | None, super_users: tuple[str, ...]) -> bool:
    """Whether the caller may remove, hold, release or edit a job owned by `job_owner`."""
    if is_super_user(caller, super_users):
        return True
    return caller.authenticated and job_owner is not None and job_owner == caller.user
