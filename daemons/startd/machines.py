"""The machines one startd process emulates, and the indexes from claim ids and
capabilities to their slots: lookups, keep-alives and lease expiry across machines.

Pure, like daemons/startd/slots.py, which holds one machine's slots and claims.
"""
from __future__ import annotations

import sys
from typing import Callable, Iterable

from daemons.startd.config import StartdConfig
from daemons.startd.claimids import ClaimIds, SlotIndex
from daemons.startd.slots import JobEvent, Machine, Shared, Slot

# The most a schedd's reported round trip stretches its claims' leases, in leases: beyond
# that the pool is so far behind its time scale that the lag policy is the answer.
MAX_ROUND_TRIP_LEASES = 2


class Startd:
    """The machines of one startd process, with indexes from claim ids to slots."""

    def __init__(self, hosts: list[str], cfg: StartdConfig, address: str, now: float,
                 secret: Callable[[int], str] | None = None,
                 machine_groups: "list[tuple[list[str], StartdConfig]] | None" = None) -> None:
        """`hosts` configured by `cfg`, then each group's hosts by its own configuration;
        `cfg` is also the process's (its claim lease)."""
        self.cfg = cfg
        self.ids = ClaimIds(address, now, secret)
        self.index: SlotIndex[Slot] = SlotIndex()   # the slots by the index in their claim ids' numbers
        self.shared = Shared()
        # Each schedd's longest recent round trip to this startd, as its keepalives say (pool
        # seconds): a claim granted now is named in that schedd's keepalives only that much
        # later, so its lease is stretched by it (expire_leases).
        self.round_trips: dict[str, float] = {}
        self._round_trip_heard: dict[str, float] = {}   # when each schedd's report came
        self.machines = {h: Machine(h, group_cfg, address, now, self.ids, self.index, self.shared)
                         for group_hosts, group_cfg in [(hosts, cfg), *(machine_groups or [])] for h in group_hosts}

    def _lookup(self, n: int) -> tuple[Machine, Slot] | None:
        slot = self.index.get(n) if n else None
        machine = slot.machine if slot is not None else None
        if machine is None or machine.slots.get(slot.short_name) is not slot:   # (a deleted dynamic slot)
            return None
        return machine, slot

    def find_capability(self, capability: str) -> tuple[Machine, Slot] | None:
        n = self.ids.number(capability)
        found = self._lookup(n)
        return found if found is not None and found[1].cap == n else None

    def find_claim(self, claim_id: str) -> tuple[Machine, Slot] | None:
        """The slot a claim id belongs to: its current claim, or a preempting claim waiting for it."""
        return self.claim_numbered(self.ids.number(claim_id))

    def claim_numbered(self, n: int) -> tuple[Machine, Slot] | None:
        """find_claim by the number of the id (claimids.py)."""
        found = self._lookup(n)
        if found is None:
            return None
        s = found[1]
        if (s.claim is not None and s.claim.seq == n) or (s.pre is not None and s.pre.seq == n):
            return found
        return None

    def job_ends_at(self, n: int, pool_time: float) -> bool:
        """Does the claim numbered n still run a job that ends at `pool_time`? (Not once the
        claim is gone, its job evicted or cleared, or the claim runs another job.) What tells
        a job-end TimerQueue's current entries from stale ones."""
        found = self.claim_numbered(n)
        c = found[1].claim if found is not None else None
        return c is not None and c.seq == n and c.job_end == pool_time

    def claims(self) -> list[tuple[Machine, Slot]]:
        return [(m, s) for m in self.machines.values() for s in m.slots.values() if s.claim is not None]

    def keepalive(self, claim_ids: Iterable[str], schedd_address: str, now: float,
                  round_trip: float = 0.0, idle: list[str] | None = None) -> list[str]:
        """Renew leases; return the ids this startd does not hold. `round_trip`: the schedd's
        longest recent round trip to this startd, pool seconds (bounded: a schedd's word
        keeps an unnamed claim for at most MAX_ROUND_TRIP_LEASES more leases). `idle`
        collects the ids of the claims held that run no job."""
        unknown = []
        schedd_address = sys.intern(schedd_address)
        if schedd_address:
            bound = MAX_ROUND_TRIP_LEASES * self.cfg.claim_lease_s
            self.round_trips[schedd_address] = min(bound, round_trip) if round_trip > 0 else 0.0
            self._round_trip_heard[schedd_address] = now
        for cid in claim_ids:
            n = self.ids.number(cid)
            found = self.claim_numbered(n)
            if found is None:
                unknown.append(cid)
                continue
            s = found[1]
            c = s.claim if s.claim is not None and s.claim.seq == n else s.pre
            assert c is not None
            c.last_alive = now
            if schedd_address:
                c.schedd_address = schedd_address
            if idle is not None and c is s.claim and not c.job_id:
                idle.append(cid)
        return unknown

    def expire_leases(self, now: float, allowance_s: float = 0.0) -> list[JobEvent]:
        """Drop claims not kept alive for a lease. `allowance_s` stretches the lease by the
        pool's own lag (a schedd whose event loop runs behind renews late; it is not gone),
        and each claim's by its schedd's round trip (a claim granted is named in a
        keepalive only after the grant has reached the schedd and the keepalive come back)."""
        from daemons.startd.preemption import take_over, withdraw

        events = []
        lease = self.cfg.claim_lease_s
        allowance = max(0.0, allowance_s)
        for m, s in [(m, s) for m in self.machines.values() for s in list(m.slots.values()) if s.pre is not None]:
            pre = s.pre
            assert pre is not None
            if now - pre.last_alive > lease + allowance + self.round_trips.get(pre.schedd_address, 0.0):
                withdraw(m, s, now)
                events.append(JobEvent("claim_lost", pre.id, "", m.name_of(s), pre.schedd_address, now,
                                       f"claim lease expired (not kept alive for {lease:.0f} s)"))
        for m, s in self.claims():
            c = s.claim
            assert c is not None
            own = c.lease_s(lease)
            if now - c.last_alive > own + allowance + self.round_trips.get(c.schedd_address, 0.0):
                ev = m.release(s, now, f"claim lease expired (not kept alive for {own:.0f} s)", lost=True)
                if ev is not None:
                    events.append(ev)
                take_over(m, s, now)
        # A schedd not heard from for this long holds no claim here that its report could keep
        # (its claims that its last keepalive renewed have lapsed by then, round trip and all):
        # a schedd that is gone leaves no entry, and /metrics stops showing its round trip.
        forget = (1 + MAX_ROUND_TRIP_LEASES) * lease + allowance
        for a in [a for a, t in self._round_trip_heard.items() if now - t > forget]:
            del self.round_trips[a], self._round_trip_heard[a]
        return events

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for m in self.machines.values():
            for s in m.slots.values():
                k = f"{s.state}/{s.activity}"
                out[k] = out.get(k, 0) + 1
        return out
