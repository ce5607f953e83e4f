"""The fault layers on a real grpc.aio server and channel in this process.

No test times anything: a delay shows as a deadline that passes (or not), a drop as a
call that never answers until its deadline or until its fault is cleared.
"""
from __future__ import annotations

import asyncio
import logging

import grpc
import pytest

from daemons.core.clock import PoolClock
from daemons.core.fault_layer import DAEMON_HEADER, FaultClientLayer, FaultInjector
from daemons.core.faults import Fault, FaultError
from daemons.core.interceptors import ServerPipeline, current_call
from daemons.core.rpc import Channels, bind, new_server
from daemons.pb.htcpool import admin_pb2, admin_pb2_grpc, collector_pb2, collector_pb2_grpc, common_pb2

SCALE = 100.0   # pool seconds per wall second: a 1000 s pool delay is 10 s of wall time


class _Collector(collector_pb2_grpc.CollectorServicer):
    def __init__(self) -> None:
        self.callers: list[str] = []

    async def UpdateAds(self, request, context):
        call = current_call()
        self.callers.append(call.metadata.get(DAEMON_HEADER, "") if call else "")
        return collector_pb2.UpdateAdsReply()

    async def QueryAds(self, request, context):
        for i in range(6):
            yield collector_pb2.QueryAdsReply(ads=[common_pb2.ClassAd(text=f"[ N = {i} ]")])


class _Admin(admin_pb2_grpc.AdminServicer):
    async def Ping(self, request, context):
        return admin_pb2.PingReply(role="test")


@pytest.fixture
async def server():
    clock = PoolClock(scale=SCALE, epoch=0.0)
    inj = FaultInjector(clock, logging.getLogger("test.faults"), role="collector", name="c", seed=1)
    srv = new_server([ServerPipeline([inj.layer], log=logging.getLogger("test.rpc"))])
    coll = _Collector()
    collector_pb2_grpc.add_CollectorServicer_to_server(coll, srv)
    admin_pb2_grpc.add_AdminServicer_to_server(_Admin(), srv)
    port = bind(srv, "127.0.0.1", 0)
    await srv.start()
    yield inj, coll, f"127.0.0.1:{port}"
    await srv.stop(grace=None)


@pytest.fixture
async def client():
    clock = PoolClock(scale=SCALE, epoch=0.0)
    inj = FaultInjector(clock, logging.getLogger("test.faults.client"), role="schedd", name="schedd@h", seed=2)
    ch = Channels(layers=[], extra_layers=[FaultClientLayer(inj)])
    yield inj, ch
    await ch.close()


def _update(ch: Channels, address: str, timeout: float | None = 5.0):
    return collector_pb2_grpc.CollectorStub(ch.get(address)).UpdateAds(collector_pb2.UpdateAdsRequest(),
                                                                       timeout=timeout)


async def test_a_server_abort_returns_the_chosen_status_and_is_counted_and_logged(server, client, caplog):
    inj, coll, address = server
    _, ch = client
    inj.set_plan([Fault("a1", method="UpdateAds", abort="RESOURCE_EXHAUSTED")])
    with caplog.at_level(logging.WARNING, logger="test.faults"):
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await _update(ch, address)
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "fault a1" in e.value.details()
    assert coll.callers == []          # the handler never ran
    assert "FAULT a1 fired on call Collector.UpdateAds (server, peer schedd schedd@h)" in caplog.text
    assert inj.metrics()["faults_fired_total"] == {
        (("fault", "a1"), ("kind", "abort"), ("side", "server"), ("method", "Collector.UpdateAds")): 1.0}
    # The admin service is never faulted, even by a fault on every method.
    inj.set_plan([Fault("all", abort="UNAVAILABLE")], replace_all=True)
    reply = await admin_pb2_grpc.AdminStub(ch.get(address)).Ping(common_pb2.Empty(), timeout=5)
    assert reply.role == "test"
    inj.clear()
    await _update(ch, address)
    assert coll.callers == ["schedd schedd@h"]


async def test_a_server_fault_picks_its_peer_by_the_callers_role(server, client):
    inj, coll, address = server
    _, ch = client
    inj.set_plan([Fault("n", abort="UNAVAILABLE", peer="negotiator")])
    await _update(ch, address)                         # the schedd is not the negotiator
    inj.set_plan([Fault("n", abort="UNAVAILABLE", peer="schedd")])
    with pytest.raises(grpc.aio.AioRpcError):
        await _update(ch, address)


async def test_a_server_delay_longer_than_the_deadline_fails_the_call_and_a_short_one_does_not(server, client):
    inj, _, address = server
    _, ch = client
    inj.set_plan([Fault("slow", method="UpdateAds", delay_s=1000.0)])   # 10 s of wall time
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await _update(ch, address, timeout=0.3)
    assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    inj.set_plan([Fault("slow", method="UpdateAds", delay_s=1.0)])      # replaces it: 10 ms
    await _update(ch, address, timeout=5.0)


async def test_delayed_stream_messages_keep_their_order(server, client):
    inj, _, address = server
    _, ch = client
    inj.set_plan([Fault("j", method="QueryAds", delay_s=2.0, jitter_s=2.0, percent=60)])
    texts = []
    async for chunk in collector_pb2_grpc.CollectorStub(ch.get(address)).QueryAds(
            collector_pb2.QueryAdsRequest(my_type="Any"), timeout=10):
        texts.extend(a.text for a in chunk.ads)
    assert texts == [f"[ N = {i} ]" for i in range(6)]
    assert inj.fired_by_fault["j"] >= 1


async def test_a_dropped_call_waits_for_its_deadline(server, client):
    inj, coll, address = server
    _, ch = client
    inj.set_plan([Fault("d", method="UpdateAds", drop=True)])
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await _update(ch, address, timeout=0.3)
    assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert coll.callers == []


async def test_clearing_a_drop_answers_the_held_call_unavailable(server, client):
    inj, coll, address = server
    _, ch = client
    inj.set_plan([Fault("d", method="UpdateAds", drop=True)])
    call = asyncio.ensure_future(_update(ch, address, timeout=None))
    async def held():
        while inj.active["d"] == 0:
            await asyncio.sleep(0.01)
    await asyncio.wait_for(held(), 10)
    assert not call.done()
    assert inj.clear(["d"]) == ["d"]
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await asyncio.wait_for(call, 10)
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE
    # The server's handler lets go of its count after the status is on its way: the client
    # may hear first (on a loaded machine it does).
    async def let_go():
        while inj.active["d"] != 0:
            await asyncio.sleep(0.01)
    await asyncio.wait_for(let_go(), 10)


async def test_a_drop_whose_window_closes_lets_go_of_the_call(server, client):
    inj, _, address = server
    _, ch = client
    inj.set_plan([Fault("d", method="UpdateAds", drop=True, stop=inj.clock.true_now() + 30.0)])  # 0.3 s
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await _update(ch, address, timeout=30)
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE
    await _update(ch, address)                  # the window is over: calls go through
    assert inj.faults[0].active_at(inj.clock.true_now()) is False


async def test_max_active_lets_other_calls_through_while_one_is_held(server, client):
    inj, coll, address = server
    _, ch = client
    inj.set_plan([Fault("d", method="UpdateAds", drop=True, max_active=1)])
    held = asyncio.ensure_future(_update(ch, address, timeout=None))
    while inj.active["d"] == 0:
        await asyncio.sleep(0.01)
    await _update(ch, address, timeout=5)        # the fault is busy with the first call
    assert len(coll.callers) == 1
    inj.clear()
    with pytest.raises(grpc.aio.AioRpcError):
        await held


async def test_client_faults_abort_drop_and_use_up_the_deadline(server, client):
    _, coll, address = server
    inj, ch = client
    inj.set_plan([Fault("c", side="client", method="Collector.*", abort="UNAVAILABLE", peer=address)])
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await _update(ch, address)
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE and "fault c" in e.value.details()
    inj.set_plan([Fault("c", side="client", drop=True)], replace_all=True)
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await _update(ch, address, timeout=0.2)
    assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    inj.set_plan([Fault("c", side="client", delay_s=1000.0)], replace_all=True)
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await _update(ch, address, timeout=0.2)
    assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert coll.callers == []                  # nothing left this process
    # A client fault aimed at another peer leaves this one alone.
    inj.set_plan([Fault("c", side="client", abort="UNAVAILABLE", peer="10.9.9.9:*")], replace_all=True)
    await _update(ch, address)
    assert len(coll.callers) == 1


async def test_clock_faults_skew_the_daemons_clock_until_cleared(server):
    inj, _, _ = server
    clock = inj.clock
    inj.set_plan([Fault("jump", clock_offset_s=3600.0)])
    assert 3599.0 < clock.skew_now() < 3601.0
    assert inj.metrics()["clock_skew_seconds"] > 3599.0
    inj.clear(["jump"])
    assert abs(clock.skew_now()) < 1e-6


def test_clearing_an_unknown_fault_changes_nothing():
    inj = FaultInjector(PoolClock(), logging.getLogger("test.faults"))
    inj.set_plan([Fault("a", delay_s=1)])
    with pytest.raises(FaultError, match="no fault 'b'"):
        inj.clear(["a", "b"])
    assert [f.id for f in inj.faults] == ["a"]
    with pytest.raises(FaultError, match="used twice"):
        inj.set_plan([Fault("x", delay_s=1), Fault("x", delay_s=2)])
    with pytest.raises(FaultError):
        inj.set_plan([Fault("y", delay_s=-1)])
    assert [f.id for f in inj.faults] == ["a"]


async def test_a_dropped_call_whose_deadline_passes_ends_quietly(server, client, caplog):
    """Regression (a campaign's collector log): the server's own deadline ends a held call
    at the moment the drop lets go of it; aborting the finished call logged a traceback
    (ExecuteBatchError). Many calls, so the two orders both happen."""
    inj, _, address = server
    _, ch = client
    inj.set_plan([Fault("d", method="UpdateAds", drop=True)])
    with caplog.at_level(logging.INFO, logger="test.rpc"):
        results = await asyncio.gather(*(_update(ch, address, timeout=0.05 + 0.002 * (i % 10)) for i in range(200)),
                                       return_exceptions=True)
        async def settled():
            while inj.active["d"]:
                await asyncio.sleep(0.01)
        await asyncio.wait_for(settled(), 10)
    assert {r.code() for r in results} == {grpc.StatusCode.DEADLINE_EXCEEDED}
    assert not [r for r in caplog.records if r.exc_info or "unexpected" in r.getMessage()]
