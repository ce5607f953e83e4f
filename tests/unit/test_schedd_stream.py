"""The negotiator's ScheddStream: messages written in order without the sender waiting, each
send-requests answered in the order asked, and a failure reaching whoever would have seen it."""
from __future__ import annotations

import asyncio

import grpc
import pytest

from daemons.negotiator.streams import ScheddError, ScheddStream, ask_prefetch, collect_prefetch, prefetch
from daemons.pb.htcpool import schedd_pb2


def start(name: str, **kw) -> schedd_pb2.NegotiatorMessage:
    return schedd_pb2.NegotiatorMessage(start=schedd_pb2.NegotiateStart(submitter=name, **kw))


ASK = schedd_pb2.NegotiatorMessage(send_requests=schedd_pb2.SendRequests(max_requests=5))


class FakeCall:
    """A Negotiate call whose schedd answers each send-requests with one batch naming the
    submitter of the session it belongs to (the last start before it), after a moment.
    A bundle's messages are taken one by one, as the schedd takes them."""

    def __init__(self, fail_write_at: int | None = None, delay: float = 0.001, answers: bool = True) -> None:
        self.delay = delay
        self.answering = answers      # False: a schedd that never answers a send-requests
        self.written: list = []
        self.answers: asyncio.Queue = asyncio.Queue()
        self.fail_write_at = fail_write_at
        self.ended = False
        self.cancelled = False
        self.session = ""
        self.writes = 0       # write calls (a bundle of messages is one)

    async def write(self, msg) -> None:
        await asyncio.sleep(0)          # a write takes a turn of the loop, as grpc's does
        inner = msg.bundle.messages if msg.WhichOneof("msg") == "bundle" else [msg]
        if self.fail_write_at is not None and len(self.written) + len(inner) > self.fail_write_at:
            # The write that would carry message number fail_write_at (from 0) fails whole.
            self.ended = True
            self.answers.put_nowait(grpc.aio.EOF)
            raise asyncio.InvalidStateError("write after the call ended")
        self.writes += 1
        for m in inner:
            self._take(m)

    def _take(self, msg) -> None:
        self.written.append(msg)
        kind = msg.WhichOneof("msg")
        if kind == "start":
            self.session = msg.start.submitter
        elif kind == "send_requests" and self.answering:
            reply = schedd_pb2.ScheddMessage(requests=schedd_pb2.ResourceRequests(
                requests=[schedd_pb2.ResourceRequest(request_id=self.session, count=1)], no_more=True))
            asyncio.get_running_loop().call_later(self.delay, self.answers.put_nowait, reply)
        elif kind == "end":
            self.answers.put_nowait(grpc.aio.EOF)

    async def read(self):
        return await self.answers.get()

    async def done_writing(self) -> None:
        pass

    def done(self) -> bool:
        return self.ended

    def cancel(self) -> bool:
        self.cancelled = True
        return True

    async def code(self):
        return grpc.StatusCode.UNAVAILABLE

    async def details(self):
        return "the schedd went away"


def kinds(call: FakeCall) -> list[str]:
    return [m.WhichOneof("msg") + (":" + m.start.submitter if m.HasField("start") else "") for m in call.written]


async def test_sends_do_not_wait_and_answers_come_in_the_order_asked():
    call = FakeCall()
    s = ScheddStream(call, 0.0)
    answers = []
    for name in ("ann", "bob", "cid"):
        s.send(start(name), name)
        answers.append(s.ask(ASK, name))
    assert call.written == []          # nothing written yet: the sender went straight on
    got = [(await a).requests.requests[0].request_id for a in reversed(answers)]
    assert got == ["cid", "bob", "ann"]
    assert kinds(call) == ["start:ann", "send_requests", "start:bob", "send_requests", "start:cid",
                           "send_requests"]
    await s.close()
    assert kinds(call)[-1] == "end" and s.failed is None


async def test_an_answer_given_up_on_is_read_and_dropped_not_given_to_the_next_asker():
    call = FakeCall()
    s = ScheddStream(call, 0.0)
    s.send(start("ann"), "ann")
    first = s.ask(ASK, "ann")
    s.send(start("bob"), "bob")
    second = s.ask(ASK, "bob")
    first.cancel()
    assert (await second).requests.requests[0].request_id == "bob"


async def test_a_failed_write_fails_the_answers_awaited_and_reports_a_session_nobody_awaits():
    reported = []
    call = FakeCall(fail_write_at=3)    # start:ann and ask written; bob's start and outcomes, one write, fail
    s = ScheddStream(call, 0.0, on_write_failed=lambda st, owner, e: reported.append((st, owner, e)))
    s.send(start("ann"), "ann")
    ann = s.ask(ASK, "ann")
    assert (await ann).requests.requests[0].request_id == "ann"
    s.send(start("bob"), "bob")
    s.send(schedd_pb2.NegotiatorMessage(outcomes=schedd_pb2.Outcomes()), "bob")
    await s.drain()
    # Nobody awaits an answer of bob's: his failure is reported as his, with the call's status.
    assert [(st, owner) for st, owner, _ in reported] == [(s, "bob")]
    assert isinstance(reported[0][2], grpc.aio.AioRpcError)
    assert reported[0][2].code() == grpc.StatusCode.UNAVAILABLE and s.failed is reported[0][2]
    # Later messages are dropped and a later ask fails at once, with the same error.
    s.send(start("cid"), "cid")
    with pytest.raises(grpc.aio.AioRpcError):
        await s.ask(ASK, "cid")
    assert len(call.written) == 2 and call.writes == 1


async def test_a_write_failing_under_an_awaited_answer_is_left_to_its_asker():
    reported = []
    call = FakeCall(fail_write_at=1)
    s = ScheddStream(call, 0.0, on_write_failed=lambda st, owner, e: reported.append(owner))
    s.send(start("ann"), "ann")
    answer = s.ask(ASK, "ann")
    with pytest.raises(grpc.aio.AioRpcError):
        await answer
    assert reported == []               # ann's session sees it itself: not reported twice


async def test_prefetch_returns_what_arrived_before_its_time_ran_out():
    call = FakeCall()
    s = ScheddStream(call, 0.0)
    got, err = await prefetch(s, [start(n, prefetch=True) for n in ("ann", "bob")], 5, 10.0)
    assert err is None and {k: v.requests[0].request_id for k, v in got.items()} == {"ann": "ann", "bob": "bob"}

    slow = FakeCall(answers=False)
    s = ScheddStream(slow, 0.0)
    got, err = await prefetch(s, [start("ann", prefetch=True)], 5, 0.05)
    assert got == {} and isinstance(err, ScheddError) and "MAX_TIME" in str(err)
    s.abort()
    assert slow.cancelled and isinstance(s.failed, ScheddError)


async def test_a_prefetch_round_out_of_time_leaves_the_answers_to_the_sessions_awaiting_them():
    """The round's watcher gives up (NEGOTIATOR_PREFETCH_REQUESTS_MAX_TIME) but does not cancel
    the answer: a session awaiting the same future still gets its batch when it comes."""
    call = FakeCall(delay=0.2)
    s = ScheddStream(call, 0.0)
    starts = [start("ann", prefetch=True)]
    answers = ask_prefetch(s, starts, 5)
    got, err = await collect_prefetch(starts, answers, 0.01)
    assert got == {} and isinstance(err, ScheddError)
    assert not answers[0].cancelled()
    assert (await answers[0]).requests.requests[0].request_id == "ann"


async def test_a_session_waits_for_the_writer_only_past_the_unwritten_bound():
    from daemons.negotiator.streams import MAX_UNWRITTEN_BYTES
    call = FakeCall()
    s = ScheddStream(call, 0.0)
    small = schedd_pb2.NegotiatorMessage(outcomes=schedd_pb2.Outcomes())
    small.outcomes.outcomes.add().reject.reason = "x" * 100
    s.send(small, "ann")
    await s.make_room()
    assert s.unwritten > 0 and call.written == []      # under the bound: no waiting
    big = schedd_pb2.NegotiatorMessage(outcomes=schedd_pb2.Outcomes())
    big.outcomes.outcomes.add().match.slot_ad.text = "x" * MAX_UNWRITTEN_BYTES
    s.send(big, "ann")
    await s.make_room()
    assert s.unwritten == 0 and len(call.written) == 2


async def test_messages_waiting_for_the_writer_go_in_one_write_in_order():
    call = FakeCall()
    s = ScheddStream(call, 0.0)
    s.send(start("ann"), "ann")          # the writer first runs when this test awaits: all five wait
    outcomes = schedd_pb2.NegotiatorMessage(outcomes=schedd_pb2.Outcomes(outcomes=[
        schedd_pb2.Outcome(reject=schedd_pb2.RequestRejected(request_id="r1", reason="no"))]))
    s.send(outcomes, "ann")
    ann = s.ask(ASK, "ann")
    s.send(start("bob"), "bob")
    bob = s.ask(ASK, "bob")
    assert (await ann).requests.requests[0].request_id == "ann"
    assert (await bob).requests.requests[0].request_id == "bob"
    assert kinds(call) == ["start:ann", "outcomes", "send_requests", "start:bob", "send_requests"]
    assert call.written[1] == outcomes
    assert call.writes == 1 and s.writes == 1 and s.unwritten == 0
    s.send(start("cid"), "cid")
    assert (await s.ask(ASK, "cid")).requests.requests[0].request_id == "cid"
    assert call.writes == 2 and kinds(call)[-2:] == ["start:cid", "send_requests"]


async def test_a_bundle_is_bounded_and_a_larger_message_goes_alone(monkeypatch):
    from daemons.negotiator import streams
    monkeypatch.setattr(streams, "BUNDLE_MAX_BYTES", 200)
    call = FakeCall()
    s = ScheddStream(call, 0.0)

    def rejections(n: int) -> schedd_pb2.NegotiatorMessage:
        return schedd_pb2.NegotiatorMessage(outcomes=schedd_pb2.Outcomes(outcomes=[
            schedd_pb2.Outcome(reject=schedd_pb2.RequestRejected(request_id=f"r{i}", reason="x" * 20))
            for i in range(n)]))
    sent = [start("ann"), rejections(10), rejections(1), rejections(1), rejections(1)]
    assert sent[1].ByteSize() > 200 and sum(m.ByteSize() for m in sent[2:]) < 200
    for m in sent:
        s.send(m, "ann")
    await s.drain()
    assert call.written == sent
    # ann's start (the large one does not fit beside it), the large one alone, the three small ones.
    assert call.writes == 3
