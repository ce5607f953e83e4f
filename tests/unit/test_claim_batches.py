"""The schedd's batched claim calls (schedd/claim_batches.py) against a scripted stub.

Each caller must get exactly the answer a single call would have given it: its own reply,
in its own order, or the error of the call that carried it.
"""
from __future__ import annotations

import asyncio
import logging

import grpc
import pytest

from daemons.pb.htcpool import common_pb2, startd_pb2
from daemons.schedd import claim_batches
from daemons.schedd.claim_batches import StartdCalls
from daemons.startd.reports import MAX_EVENTS_PER_REPORT, ReportsMixin, batches
from daemons.startd.slots import JobEvent


class _Error(grpc.aio.AioRpcError):
    def __init__(self, code: grpc.StatusCode) -> None:
        super().__init__(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details=code.name)


class _Stub:
    """A startd that grants every claim whose id does not start with "bad", and records
    each call it gets."""

    def __init__(self, *, batched: bool = True, fail: grpc.StatusCode | None = None, short: int = 0,
                 hold: asyncio.Event | None = None) -> None:
        self.batched, self.fail, self.short, self.hold = batched, fail, short, hold
        self.calls: list[tuple[str, list[str]]] = []

    @staticmethod
    def _answer(claim_id: str) -> startd_pb2.RequestClaimReply:
        if claim_id.startswith("bad"):
            return startd_pb2.RequestClaimReply(ok=False, reason=f"unknown claim id {claim_id}")
        return startd_pb2.RequestClaimReply(ok=True, claim_id=f"granted-{claim_id}",
                                            slot_ad=common_pb2.ClassAd(text=f'[ Name = "{claim_id}" ]'))

    async def RequestClaim(self, request, timeout=None):
        self.calls.append(("RequestClaim", [request.claim_id]))
        return self._answer(request.claim_id)

    async def RequestClaims(self, request, timeout=None):
        self.calls.append(("RequestClaims", [r.claim_id for r in request.claims]))
        if self.hold is not None:
            await self.hold.wait()
        if not self.batched:
            raise _Error(grpc.StatusCode.UNIMPLEMENTED)
        if self.fail is not None:
            raise _Error(self.fail)
        replies = [self._answer(r.claim_id) for r in request.claims]
        return startd_pb2.RequestClaimsReply(replies=replies[:len(replies) - self.short])

    async def ActivateClaims(self, request, timeout=None):
        self.calls.append(("ActivateClaims", [r.claim_id for r in request.activations]))
        return startd_pb2.ActivateClaimsReply(replies=[
            startd_pb2.ActivateClaimReply(ok=True, start_time=float(i)) for i, _ in enumerate(request.activations)])


def _calls(stub: _Stub, batching: bool = True) -> StartdCalls:
    return StartdCalls(lambda address: stub, logging.getLogger("test"), batching)


def _claim(cid: str) -> startd_pb2.RequestClaimRequest:
    return startd_pb2.RequestClaimRequest(claim_id=cid, job_ad=common_pb2.ClassAd(text="[]"))


async def test_claims_asked_for_together_go_in_one_call_and_each_gets_its_own_answer():
    stub = _Stub()
    calls = _calls(stub)
    ids = ["a", "bad-b", "c", "d"]
    replies = await asyncio.gather(*(calls.request_claim("startd:1", _claim(i)) for i in ids))
    assert stub.calls == [("RequestClaims", ids)]
    assert [(r.ok, r.claim_id, r.reason) for r in replies] == [
        (True, "granted-a", ""), (False, "", "unknown claim id bad-b"), (True, "granted-c", ""),
        (True, "granted-d", "")]
    assert replies == [_Stub._answer(i) for i in ids]     # what single calls would have answered
    assert calls.calls == {"single": 0, "batched": 1, "batched_items": 4}


async def test_activations_are_batched_apart_from_claims():
    stub = _Stub()
    calls = _calls(stub)
    acts = [startd_pb2.ActivateClaimRequest(claim_id=f"c{i}") for i in range(3)]
    replies = await asyncio.gather(*(calls.activate_claim("startd:1", a) for a in acts))
    assert stub.calls == [("ActivateClaims", ["c0", "c1", "c2"])]
    assert [r.start_time for r in replies] == [0.0, 1.0, 2.0]


async def test_a_large_burst_is_cut_into_bounded_calls_in_order():
    stub = _Stub()
    calls = _calls(stub)
    n = claim_batches.MAX_BATCH * 8 * 2 + 5
    ids = [f"c{i}" for i in range(n)]
    replies = await asyncio.gather(*(calls.request_claim("startd:1", _claim(i)) for i in ids))
    sizes = [len(c[1]) for c in stub.calls]
    # Full calls while the backlog is deep, smaller ones as it drains, never past MAX_BATCH.
    assert sizes[:2] == [claim_batches.MAX_BATCH] * 2
    assert max(sizes) == claim_batches.MAX_BATCH and sizes[-1] <= claim_batches.PIPELINE_BATCH
    assert sizes == sorted(sizes, reverse=True)
    assert [i for c in stub.calls for i in c[1]] == ids
    assert [r.claim_id for r in replies] == [f"granted-{i}" for i in ids]


async def test_a_small_burst_goes_in_pipelined_calls():
    """A cycle's hundred matches to one startd: the first claims go in a small call, so the
    startd answers them while the rest are still on their way."""
    hold = asyncio.Event()
    stub = _Stub(hold=hold)
    calls = _calls(stub)
    ids = [f"c{i}" for i in range(100)]
    pending = [asyncio.ensure_future(calls.request_claim("startd:1", _claim(i))) for i in ids]
    async with asyncio.timeout(5):
        while len(stub.calls) < 2:
            await asyncio.sleep(0)
    for _ in range(20):   # and no third call goes while those two are held
        await asyncio.sleep(0)
    # Two calls are out (MAX_IN_FLIGHT), each of PIPELINE_BATCH claims; the rest wait.
    assert [c[1] for c in stub.calls] == [ids[:claim_batches.PIPELINE_BATCH],
                                         ids[claim_batches.PIPELINE_BATCH:2 * claim_batches.PIPELINE_BATCH]]
    hold.set()
    replies = await asyncio.gather(*pending)
    assert [i for c in stub.calls for i in c[1]] == ids
    assert all(len(c[1]) <= claim_batches.PIPELINE_BATCH for c in stub.calls)
    assert [r.claim_id for r in replies] == [f"granted-{i}" for i in ids]


async def test_the_next_call_goes_before_a_batch_is_answered_and_its_answers_go_a_few_at_a_time():
    """The startd works on the next claims, and on the first activations, while the schedd
    digests a batch's answers: neither waits until every caller of the batch has run."""
    stub = _Stub()
    calls = _calls(stub)
    ids = [f"c{i}" for i in range(3 * claim_batches.PIPELINE_BATCH)]

    async def claim_then_activate(cid: str) -> startd_pb2.ActivateClaimReply:
        reply = await calls.request_claim("startd:1", _claim(cid))
        stub.calls.append(("answered", [cid]))   # the caller runs: the schedd's own work on it
        return await calls.activate_claim("startd:1", startd_pb2.ActivateClaimRequest(
            claim_id=reply.claim_id, job_ad=common_pb2.ClassAd(text="[]")))

    started = await asyncio.gather(*(claim_then_activate(i) for i in ids))
    assert all(r.ok for r in started)
    order = [(kind, tuple(items)) for kind, items in stub.calls]
    last_of_first_batch = order.index(("answered", (ids[claim_batches.PIPELINE_BATCH - 1],)))
    claim_calls = [n for n, (kind, _) in enumerate(order) if kind == "RequestClaims"]
    assert len(claim_calls) == 3
    assert claim_calls[2] < order.index(("answered", (ids[0],)))
    first_activations = next(n for n, (kind, _) in enumerate(order) if kind == "ActivateClaims")
    assert first_activations < last_of_first_batch
    assert order[first_activations][1][:claim_batches.ANSWER_CHUNK] == \
        tuple(f"granted-{i}" for i in ids[:claim_batches.ANSWER_CHUNK])
    # Every claim was asked for once, in order, and activated once.
    assert [i for kind, items in stub.calls if kind == "RequestClaims" for i in items] == ids
    assert sorted(i for kind, items in stub.calls if kind == "ActivateClaims" for i in items) == \
        sorted(f"granted-{i}" for i in ids)


def test_batch_size_bounds():
    assert claim_batches.batch_size(1) == claim_batches.PIPELINE_BATCH
    assert claim_batches.batch_size(100) == claim_batches.PIPELINE_BATCH
    assert claim_batches.batch_size(800) == 100
    assert claim_batches.batch_size(100_000) == claim_batches.MAX_BATCH


async def test_claims_asked_for_while_calls_are_in_flight_wait_and_join_one_call():
    hold = asyncio.Event()
    stub = _Stub(hold=hold)
    calls = _calls(stub)
    first = [asyncio.ensure_future(calls.request_claim("startd:1", _claim(f"x{i}"))) for i in range(2)]
    await asyncio.sleep(0.01)
    # One call is out; a second may go; a third waits for one of them to end.
    second = asyncio.ensure_future(calls.request_claim("startd:1", _claim("y")))
    await asyncio.sleep(0.01)
    later = [asyncio.ensure_future(calls.request_claim("startd:1", _claim(f"z{i}"))) for i in range(3)]
    await asyncio.sleep(0.01)
    assert [c[1] for c in stub.calls] == [["x0", "x1"], ["y"]]
    hold.set()
    await asyncio.gather(*first, second, *later)
    assert [c[1] for c in stub.calls] == [["x0", "x1"], ["y"], ["z0", "z1", "z2"]]


async def test_each_startd_gets_its_own_call():
    stubs = {"s1": _Stub(), "s2": _Stub()}
    calls = StartdCalls(lambda a: stubs[a], logging.getLogger("test"))
    await asyncio.gather(calls.request_claim("s1", _claim("a")), calls.request_claim("s2", _claim("b")),
                         calls.request_claim("s1", _claim("c")))
    assert stubs["s1"].calls == [("RequestClaims", ["a", "c"])]
    assert stubs["s2"].calls == [("RequestClaims", ["b"])]


async def test_a_failed_call_fails_each_of_its_claims_with_its_error():
    calls = _calls(_Stub(fail=grpc.StatusCode.UNAVAILABLE))
    results = await asyncio.gather(*(calls.request_claim("startd:1", _claim(i)) for i in "ab"),
                                   return_exceptions=True)
    assert [r.code() for r in results] == [grpc.StatusCode.UNAVAILABLE] * 2


async def test_a_startd_without_batched_calls_gets_single_ones_from_then_on():
    stub = _Stub(batched=False)
    calls = _calls(stub)
    replies = await asyncio.gather(*(calls.request_claim("startd:1", _claim(i)) for i in ("a", "bad-b")))
    assert [r.ok for r in replies] == [True, False]
    assert stub.calls == [("RequestClaims", ["a", "bad-b"]), ("RequestClaim", ["a"]), ("RequestClaim", ["bad-b"])]
    await calls.request_claim("startd:1", _claim("c"))
    assert stub.calls[-1] == ("RequestClaim", ["c"])


async def test_batching_off_sends_single_calls():
    stub = _Stub()
    calls = _calls(stub, batching=False)
    await asyncio.gather(*(calls.request_claim("startd:1", _claim(i)) for i in "ab"))
    assert stub.calls == [("RequestClaim", ["a"]), ("RequestClaim", ["b"])]


async def test_a_short_batch_answer_refuses_the_claims_it_left_out():
    calls = _calls(_Stub(short=1))
    replies = await asyncio.gather(*(calls.request_claim("startd:1", _claim(i)) for i in "abc"))
    assert [r.ok for r in replies] == [True, True, False]
    assert replies[2].reason == "the startd answered 2 of the 3 claims of a batch"


async def test_a_caller_that_gives_up_does_not_break_the_others():
    hold = asyncio.Event()
    calls = _calls(_Stub(hold=hold))
    a = asyncio.ensure_future(calls.request_claim("startd:1", _claim("a")))
    b = asyncio.ensure_future(calls.request_claim("startd:1", _claim("b")))
    await asyncio.sleep(0.01)
    a.cancel()
    hold.set()
    assert (await b).claim_id == "granted-b"
    with pytest.raises(asyncio.CancelledError):
        await a


async def test_releases_for_the_same_reason_share_one_call():
    class _Releases(_Stub):
        async def ReleaseClaim(self, request, timeout=None):
            self.calls.append(("ReleaseClaim", [request.reason, *request.claim_ids]))
            return startd_pb2.ReleaseClaimReply(released=len(request.claim_ids))

    stub = _Releases()
    calls = _calls(stub)
    replies = await asyncio.gather(calls.release_claim("s", "a", "done"), calls.release_claim("s", "b", "done"),
                                   calls.release_claim("s", "c", "held"))
    assert sorted(stub.calls) == [("ReleaseClaim", ["done", "a", "b"]), ("ReleaseClaim", ["held", "c"])]
    assert [r.released for r in replies] == [2, 2, 1]
    single = _Releases()
    await _calls(single, batching=False).release_claim("s", "a", "done")
    assert single.calls == [("ReleaseClaim", ["done", "a"])]


def test_event_reports_are_cut_into_bounded_batches_in_order():
    assert batches(list(range(5)), 2) == [[0, 1], [2, 3], [4]]
    assert batches([], 3) == []
    assert batches(list(range(3)), 3) == [[0, 1, 2]]


# ---- the startd's job-event reports (startd/reports.py) ----------------------------------
class _Model:
    def find_claim(self, claim_id):
        return None      # every claim gone: news of exits is kept (a day), so nothing is moot here


class _Clock:
    scale = 1000.0

    def wall(self) -> float:
        return 0.0


class _Cfg:
    claim_lease_s = 1800.0


class _Reporter(ReportsMixin):
    """The startd's report queue with a scripted schedd: `fail_at` call numbers fail."""

    def __init__(self, fail_at: set[int] = frozenset(), hold: asyncio.Event | None = None) -> None:
        self.model, self.clock, self.cfg = _Model(), _Clock(), _Cfg()
        self.log = logging.getLogger("test")
        self._init_reports()
        self.fail_at, self.hold = set(fail_at), hold
        self.calls: list[list[str]] = []

    async def _send_events(self, address, evs, wait_for_ready=False):
        n = len(self.calls)
        self.calls.append([e.job_id for e in evs])
        if self.hold is not None and n == 0:
            await self.hold.wait()
        if n in self.fail_at:
            raise _Error(grpc.StatusCode.DEADLINE_EXCEEDED)


def _event(i: int, claim: str = "") -> JobEvent:
    return JobEvent("exited", claim or f"claim{i}", f"1.{i}", f"slot1_{i}@vm", "schedd:1", float(i))


async def test_a_backlog_of_events_goes_in_bounded_reports_each_event_once():
    r = _Reporter()
    for i in range(2 * MAX_EVENTS_PER_REPORT + 50):
        r._queue_event(_event(i))
    assert await r._deliver_pending() == (True, 3)
    assert [len(c) for c in r.calls] == [MAX_EVENTS_PER_REPORT, MAX_EVENTS_PER_REPORT, 50]
    assert [j for c in r.calls for j in c] == [f"1.{i}" for i in range(2 * MAX_EVENTS_PER_REPORT + 50)]
    assert r._events == []


async def test_a_failed_report_keeps_its_events_and_those_behind_it_in_order():
    r = _Reporter(fail_at={1})
    n = 2 * MAX_EVENTS_PER_REPORT + 50
    for i in range(n):
        r._queue_event(_event(i))
    assert await r._deliver_pending() == (False, 1)
    assert [len(c) for c in r.calls] == [MAX_EVENTS_PER_REPORT, MAX_EVENTS_PER_REPORT]
    assert [e.job_id for e, _ in r._events] == [f"1.{i}" for i in range(MAX_EVENTS_PER_REPORT, n)]
    assert await r._deliver_pending() == (True, 2)
    delivered = r.calls[0] + r.calls[2] + r.calls[3]
    assert delivered == [f"1.{i}" for i in range(n)] and r._events == []


def test_news_of_a_job_outlives_its_claim_for_a_day_and_other_news_for_a_lease():
    # A schedd may be away for a job's whole lease (2400 s by default) and come back holding
    # the claim: the job's exit or eviction must still reach it, with the time it happened.
    r = _Reporter()
    lease, day = _Cfg.claim_lease_s / _Clock.scale, 86400.0 / _Clock.scale   # wall seconds
    evicted = JobEvent("evicted", "c1", "1.1", "slot1_1@vm", "schedd:1", 5.0)
    lost = JobEvent("claim_lost", "c2", "1.2", "slot1_2@vm", "schedd:1", 5.0)
    preempting = JobEvent("claim_lost", "c3", "", "slot1_3@vm", "schedd:1", 5.0)
    assert [r._moot(ev, -(lease + 1)) for ev in (evicted, lost, preempting)] == [False, False, True]
    assert [r._moot(ev, -(day + 1)) for ev in (evicted, lost, _event(1))] == [True, True, True]
    assert not r._moot(_event(1), -(day - 1))


async def test_a_keepalive_does_not_send_again_news_a_report_is_carrying():
    hold = asyncio.Event()
    r = _Reporter(hold=hold)
    r._queue_event(_event(1, "gone"))
    r._queue_event(_event(2, "other"))
    loop_pass = asyncio.ensure_future(r._deliver_pending())
    await asyncio.sleep(0.01)
    assert r.calls == [["1.1", "1.2"]]
    keepalive = asyncio.ensure_future(r._deliver_news_of({"gone"}, "schedd:1"))
    await asyncio.sleep(0.01)
    assert not keepalive.done()          # it waits for the report that carries the news
    hold.set()
    await asyncio.gather(loop_pass, keepalive)
    assert r.calls == [["1.1", "1.2"]] and r._events == []


async def test_each_calls_round_trip_is_recorded_per_startd_batched_or_single():
    # What the schedd's keepalives tell each startd: the longest recent round trip there,
    # from sending a call to its last answer handed over, on the pool clock, or the age of
    # a call still out there.
    from daemons.core.lag import RecentMax
    now = [100.0]
    hold = asyncio.Event()
    stub, single = _Stub(hold=hold), _Stub(batched=False)
    trips = RecentMax(window_s=1000.0)
    calls = StartdCalls(lambda a: {"slow:1": stub, "old:1": single}[a], logging.getLogger("test"),
                        clock=lambda: now[0], round_trips=trips)
    waiting = asyncio.gather(*(calls.request_claim("slow:1", _claim(i)) for i in "ab"))
    while not stub.calls:
        await asyncio.sleep(0)
    now[0] = 340.0                          # the startd answers 240 pool s later
    assert calls.oldest_out_s("slow:1", now[0]) == 240.0 and calls.oldest_out_s("old:1", now[0]) == 0.0
    hold.set()
    await waiting
    assert calls.oldest_out_s("slow:1", now[0]) == 0.0 and calls._out == {}
    assert trips.get("slow:1", now[0]) == 240.0
    await calls.request_claim("old:1", _claim("c"))   # UNIMPLEMENTED, then one by one: no time passes
    assert trips.get("old:1", now[0]) == 0.0 and "old:1" in trips._by_key
    assert trips.most(now[0]) == 240.0
    assert trips.get("slow:1", 100.0 + 240.0 + 1001.0) == 0.0     # out of the window


class _Unreachable(grpc.aio.AioRpcError):
    def __init__(self) -> None:
        super().__init__(grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(), "gone")


def _keepalive_schedd(n: int, fail_at: int | None = None):
    """What ClaimsMixin._keepalive_one uses of a schedd, with `n` claims on one startd."""
    from types import SimpleNamespace
    from daemons.core.lag import RecentMax
    claims = [SimpleNamespace(id=f"c{i}", last_alive_ok=0.0) for i in range(n)]
    calls: list[list[str]] = []
    lost: list[str] = []
    given_up: list[list[str]] = []

    class Stub:
        async def KeepAlive(self, req, timeout):
            if len(calls) == fail_at:
                calls.append([])
                raise _Unreachable()
            calls.append(list(req.claim_ids))
            return startd_pb2.KeepAliveReply(unknown_claim_ids=[c for c in req.claim_ids if c == "c5"])

    async def claim_lost(c, why):
        lost.append(c.id)

    async def give_up_silent(address, cs, now, why):
        given_up.append([c.id for c in cs])

    schedd = SimpleNamespace(_startd=lambda a: Stub(), address="schedd:1", clock=SimpleNamespace(now=lambda: 50.0),
                             round_trips=RecentMax(window_s=100.0), _heard=lambda a, t: None,
                             claims={c.id: c for c in claims}, _claim_lost=claim_lost, _give_up_silent=give_up_silent)
    return schedd, claims, calls, lost, given_up


async def test_a_keepalive_names_a_bounded_number_of_claims_per_call_and_every_claim_once():
    from daemons.schedd.claims import KEEPALIVE_CLAIMS_PER_CALL as K, ClaimsMixin
    schedd, claims, calls, lost, given_up = _keepalive_schedd(2 * K + 7)
    await ClaimsMixin._keepalive_one(schedd, "startd:1", claims, 0.0)
    assert [len(c) for c in calls] == [K, K, 7]
    assert [x for c in calls for x in c] == [c.id for c in claims]
    assert lost == ["c5"] and given_up == []
    assert all(c.last_alive_ok == 50.0 for c in claims if c.id != "c5")


async def test_a_keepalive_call_that_fails_leaves_its_claims_and_those_after_to_the_silence_rule():
    from daemons.schedd.claims import KEEPALIVE_CLAIMS_PER_CALL as K, ClaimsMixin
    schedd, claims, calls, lost, given_up = _keepalive_schedd(2 * K + 7, fail_at=1)
    await ClaimsMixin._keepalive_one(schedd, "startd:1", claims, 0.0)
    assert [len(c) for c in calls] == [K, 0]
    assert given_up == [[c.id for c in claims[K:]]]
    assert [c.last_alive_ok for c in claims[:K] if c.id != "c5"] == [50.0] * (K - 1)
    assert all(c.last_alive_ok == 0.0 for c in claims[K:])
