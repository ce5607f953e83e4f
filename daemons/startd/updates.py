"""The startd's collector updates after a change: coalesced, and held for a claim burst.

A change to a slot (a claim, an activation, a job's end, a release) makes its machine
due; a task then sends the due machines' changed slot ads to the collector, built one
machine at a time as the update takes them. Changes that come close together go in one
update, and a burst of claims goes in one update after it (update_due_at).
"""
from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Iterable, Iterator

from daemons.core.rpc import describe

if TYPE_CHECKING:
    from daemons.startd.slots import Machine

# A burst of claims and job ends becomes one collector update: it goes once no claim or
# activation has arrived for UPDATE_COALESCE_WALL_S, and at most UPDATE_COALESCE_MAX_WALL_S
# after the burst's first change. A negotiation's matches reach a startd as a burst of
# claims and then activations (about 100 ms of wall time for 100 matches); an update sent
# in its middle builds and sends the ads of the machines claimed so far while the rest of
# the burst waits, each wait delaying every job of the burst still to start.
# A change or two (one claim and its activation in a small pool) is not a burst: its
# update goes after UPDATE_COALESCE_WALL_S as before, so the collector, and the next
# cycle, see a claimed slot as claimed as soon as they did.
UPDATE_COALESCE_WALL_S = 0.02
UPDATE_COALESCE_MAX_WALL_S = 0.15
UPDATE_HOLD_MIN_CLAIMS = 8


def loop_time() -> float:
    return asyncio.get_running_loop().time()


def update_due_at(first_change: float, last_claim: float, claims: int) -> float:
    """When the collector update of changes that began at `first_change` goes (wall
    seconds, one clock): UPDATE_COALESCE_WALL_S after the first change, and, once
    `claims` (claims and activations since then) make a burst, after the last of them,
    but no later than UPDATE_COALESCE_MAX_WALL_S after the first change."""
    if claims < UPDATE_HOLD_MIN_CLAIMS:
        return first_change + UPDATE_COALESCE_WALL_S
    quiet = max(first_change, last_claim) + UPDATE_COALESCE_WALL_S
    return min(quiet, first_change + UPDATE_COALESCE_MAX_WALL_S)


def machine_ad_texts(machines: "Iterable[Machine]", now: float, deleted: list[str],
                     only_due: bool = False) -> Iterator[str]:
    """The slot ad texts of `machines` (`only_due`: only the slots changed since the last
    update), built one machine at a time as a collector update takes them: a full
    advertisement of tens of thousands of slots never has more than a chunk of texts (and
    one machine's ad dicts) alive. Each machine stops being due, and gives its deleted
    slots' names up into `deleted`, at the instant its ads are built, so an invalidation
    never follows the ad of a slot that came back under the same name."""
    for m in machines:
        built = m.due_ads(now, as_text=True) if only_due else m.all_ads(now, as_text=True)
        m.sent()
        deleted.extend(m.deleted)
        m.deleted = []
        yield from built


class UpdatesMixin:
    """The StartdDaemon's part that sends its changes to the collector."""

    def _init_updates(self) -> None:
        self._flush_task: asyncio.Task | None = None
        self._claim_call_at = 0.0     # loop time of the last claim or activation granted
        self._claim_calls = 0         # claims and activations granted, ever
        # Loop time of the first change no update has taken yet, and the claims before it.
        self._burst_from: tuple[float, int] | None = None
        # Machines whose changed ads are in an update on its way: not refreshed meanwhile (a
        # refresh stamps LastHeardFrom, which the negotiator reads as "this ad is current").
        self._hosts_sending: dict[str, int] = {}

    def _claim_call(self) -> None:
        """A claim or activation was granted: counted for the burst rule (update_due_at)."""
        self._claim_call_at = loop_time()
        self._claim_calls += 1
        self._changed(claim=True)

    def _changed(self, claim: bool = False) -> None:
        self._sync_preemption()
        if self._burst_from is None:
            # The first change no update has taken yet: the burst counts from it, the claim
            # that made it included (the flush task runs only when the call that made it
            # lets the loop run, a batch later; or it is still sending the last update).
            self._burst_from = (loop_time(), self._claim_calls - int(claim))
        if self._flush_task is None or self._flush_task.done():
            self._flush_task = self.spawn(self._flush_dirty(), "startd:flush")

    async def _flush_dirty(self) -> None:
        assert self.model is not None
        while True:
            # Each update waits for its burst: a burst that began while the last update was
            # on its way is held like any other, not sent in pieces as each update returns.
            await self._burst_settled()
            self._burst_from = None      # changes from here on are the next update's
            dirty = [m for m in self.model.machines.values() if m.due]
            if not dirty:
                return
            deleted: list[str] = []
            build_failed: list[Exception] = []

            def texts() -> Iterator[str]:
                try:
                    yield from machine_ad_texts(dirty, self.clock.now(), deleted, only_due=True)
                except Exception as e:
                    build_failed.append(e)   # a fault in building ads is not the collector's
                    raise

            try:
                assert self.collector is not None
                async with self._sending(dirty):
                    await self.collector.update(texts(), invalidate_type="Machine", invalidate_names=deleted,
                                                give_up_after_s=2.0)
            except Exception as e:
                if build_failed:
                    raise
                self.log.warning("collector update failed (%s); will resend", describe(e))
                for m in dirty:
                    m.dirty = True
                dirty[0].deleted.extend(deleted)
                await asyncio.sleep(1.0)

    async def _burst_settled(self) -> None:
        """Wait until the update is due (update_due_at): claims may keep coming meanwhile."""
        if self._burst_from is None:
            return
        first, counted = self._burst_from
        while (wait := update_due_at(first, self._claim_call_at, self._claim_calls - counted)
               - loop_time()) > 0:
            await asyncio.sleep(wait)

    @contextlib.asynccontextmanager
    async def _sending(self, machines: "list[Machine]"):
        hosts = [m.host for m in machines]
        for h in hosts:
            self._hosts_sending[h] = self._hosts_sending.get(h, 0) + 1
        try:
            yield
        finally:
            for h in hosts:
                n = self._hosts_sending.pop(h, 1) - 1
                if n > 0:
                    self._hosts_sending[h] = n
