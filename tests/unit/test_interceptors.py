"""The RPC pipeline: layers see every call, handler errors become INTERNAL and are logged."""
from __future__ import annotations

import asyncio
import logging

import grpc
import pytest

from daemons.core.interceptors import Call, ClientLayer, ServerLayer, ServerPipeline, StartingGate, current_call
from daemons.core.rpc import Channels, bind, new_server
from daemons.pb.htcpool import admin_pb2, admin_pb2_grpc, collector_pb2, collector_pb2_grpc, common_pb2


class _Admin(admin_pb2_grpc.AdminServicer):
    def __init__(self) -> None:
        self.seen: list[Call | None] = []

    async def Ping(self, request, context):
        call = current_call()
        self.seen.append(call)
        if call is not None and call.metadata.get("x-boom"):
            raise ValueError("boom")
        return admin_pb2.PingReply(role="test", name=call.identity if call else "")


class _Collector(collector_pb2_grpc.CollectorServicer):
    async def QueryAds(self, request, context):
        for i in range(3):
            yield collector_pb2.QueryAdsReply(ads=[common_pb2.ClassAd(text=f"[ N = {i} ]")])


async def _counted(pipeline: ServerPipeline, key: tuple[str, str], timeout_s: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while pipeline.calls[key] != 1:
        assert loop.time() < deadline, f"{key} counted {pipeline.calls[key]} times, not once"
        await asyncio.sleep(0.01)


class _Tag(ClientLayer):
    def __init__(self, key: str, value: str) -> None:
        self.key, self.value = key, value

    async def outgoing(self, method, metadata):
        metadata.append((self.key, self.value))


class _Who(ServerLayer):
    """Names the caller from a header, and records the stream's messages in order."""

    def __init__(self) -> None:
        self.responses: list[str] = []

    async def admit(self, call, context):
        who = call.metadata.get("x-who")
        if who == "bug":
            raise OverflowError("a layer's own bug")   # as the token check's int(inf) once was
        if who == "mallory":
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, "not you")
        call.identity = who or call.identity

    async def on_response(self, call, msg):  # type: ignore[override]
        self.responses.append(msg.ads[0].text)


@pytest.fixture
async def served():
    pipeline = ServerPipeline([_Who()], log=logging.getLogger("test.rpc"))
    server = new_server([pipeline])
    admin = _Admin()
    admin_pb2_grpc.add_AdminServicer_to_server(admin, server)
    collector_pb2_grpc.add_CollectorServicer_to_server(_Collector(), server)
    port = bind(server, "127.0.0.1", 0)
    await server.start()
    yield pipeline, admin, f"127.0.0.1:{port}"
    await server.stop(grace=None)


async def test_layers_see_the_call_and_the_service_sees_the_identity(served):
    pipeline, admin, address = served
    ch = Channels(layers=[_Tag("x-who", "alice@pool")])
    try:
        reply = await admin_pb2_grpc.AdminStub(ch.get(address)).Ping(common_pb2.Empty(), timeout=5)
        assert reply.name == "alice@pool"
        assert admin.seen[-1].short == "Admin.Ping"
        assert admin.seen[-1].peer_host == "127.0.0.1"
    finally:
        await ch.close()
    assert pipeline.calls[("/htcpool.v1.Admin/Ping", "OK")] == 1


async def test_a_layer_refuses_before_the_handler_runs(served):
    pipeline, admin, address = served
    ch = Channels(layers=[_Tag("x-who", "mallory")])
    try:
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await admin_pb2_grpc.AdminStub(ch.get(address)).Ping(common_pb2.Empty(), timeout=5)
        assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert admin.seen == []
    finally:
        await ch.close()
    # context.abort() sends the status before the pipeline's finally counts the call.
    await _counted(pipeline, ("/htcpool.v1.Admin/Ping", "PERMISSION_DENIED"))


async def test_the_starting_gate_refuses_every_call_until_it_opens_then_leaves_the_pipeline(served):
    pipeline, admin, address = served
    gate = StartingGate("the schedd")
    pipeline.layers.insert(0, gate)
    ch = Channels(layers=[_Tag("x-who", "alice@pool")])
    try:
        stub = admin_pb2_grpc.AdminStub(ch.get(address))
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await stub.Ping(common_pb2.Empty(), timeout=5)
        assert (e.value.code(), e.value.details()) == (grpc.StatusCode.UNAVAILABLE,
                                                       "the schedd is starting (its state is not restored yet)")
        assert admin.seen == []
        pipeline.drop(gate)
        assert gate not in pipeline.layers and len(pipeline.layers) == 1
        assert (await stub.Ping(common_pb2.Empty(), timeout=5)).name == "alice@pool"
    finally:
        await ch.close()


async def test_an_exception_in_a_layer_is_internal_logged_and_counted_too(served, caplog):
    """A layer (the security layer checking a token) that fails is a handler error like any."""
    pipeline, admin, address = served
    ch = Channels(layers=[_Tag("x-who", "bug")])
    try:
        with caplog.at_level(logging.ERROR, logger="test.rpc"):
            with pytest.raises(grpc.aio.AioRpcError) as e:
                await admin_pb2_grpc.AdminStub(ch.get(address)).Ping(common_pb2.Empty(), timeout=5)
        assert (e.value.code(), e.value.details()) == (grpc.StatusCode.INTERNAL,
                                                       "internal error in Admin.Ping: OverflowError")
        assert admin.seen == [] and pipeline.handler_errors["/htcpool.v1.Admin/Ping"] == 1
        record = next(r for r in caplog.records if "unexpected error in Admin.Ping" in r.getMessage())
        assert record.exc_info is not None
    finally:
        await ch.close()


async def test_a_handler_exception_is_internal_logged_and_counted(served, caplog):
    pipeline, admin, address = served
    ch = Channels(layers=[_Tag("x-boom", "1")])
    try:
        with caplog.at_level(logging.ERROR, logger="test.rpc"):
            with pytest.raises(grpc.aio.AioRpcError) as e:
                await admin_pb2_grpc.AdminStub(ch.get(address)).Ping(common_pb2.Empty(), timeout=5)
        assert e.value.code() == grpc.StatusCode.INTERNAL
        assert "Admin.Ping" in e.value.details()
        assert pipeline.handler_errors["/htcpool.v1.Admin/Ping"] == 1
        record = next(r for r in caplog.records if "unexpected error in Admin.Ping" in r.getMessage())
        assert record.exc_info is not None and "boom" in str(record.exc_info[1])
    finally:
        await ch.close()


async def test_stream_responses_pass_the_layers_in_order(served):
    pipeline, _, address = served
    ch = Channels(layers=[])
    try:
        got = [c.ads[0].text async for c in
               collector_pb2_grpc.CollectorStub(ch.get(address)).QueryAds(collector_pb2.QueryAdsRequest(), timeout=5)]
    finally:
        await ch.close()
    assert got == ["[ N = 0 ]", "[ N = 1 ]", "[ N = 2 ]"]
    assert pipeline.layers[0].responses == got


async def test_an_unimplemented_method_is_unimplemented_not_an_error(served):
    pipeline, _, address = served
    ch = Channels(layers=[])
    try:
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await collector_pb2_grpc.CollectorStub(ch.get(address)).UpdateAds(collector_pb2.UpdateAdsRequest(),
                                                                              timeout=5)
        assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
        assert pipeline.handler_errors == {}
    finally:
        await ch.close()


# ---- every kind of handler: an exception is logged with its traceback and counted ------
from daemons.pb.htcpool import schedd_pb2, schedd_pb2_grpc  # noqa: E402


class _Failing(collector_pb2_grpc.CollectorServicer):
    async def QueryAds(self, request, context):
        yield collector_pb2.QueryAdsReply(ads=[common_pb2.ClassAd(text="[ N = 0 ]")])
        raise KeyError("mid-stream")


class _Negotiate(schedd_pb2_grpc.ScheddServicer):
    async def Negotiate(self, request_iterator, context):
        async for msg in request_iterator:
            if msg.WhichOneof("msg") == "end":
                raise RuntimeError("bidi boom")
            yield schedd_pb2.ScheddMessage(requests=schedd_pb2.ResourceRequests(no_more=True))


@pytest.fixture
async def failing():
    pipeline = ServerPipeline([], log=logging.getLogger("test.rpc.failing"))
    server = new_server([pipeline])
    collector_pb2_grpc.add_CollectorServicer_to_server(_Failing(), server)
    schedd_pb2_grpc.add_ScheddServicer_to_server(_Negotiate(), server)
    port = bind(server, "127.0.0.1", 0)
    await server.start()
    yield pipeline, f"127.0.0.1:{port}"
    await server.stop(grace=None)


async def test_a_server_stream_that_fails_mid_stream_is_internal_logged_and_counted(failing, caplog):
    pipeline, address = failing
    ch = Channels(layers=[])
    got = []
    try:
        with caplog.at_level(logging.ERROR, logger="test.rpc.failing"):
            with pytest.raises(grpc.aio.AioRpcError) as e:
                async for chunk in collector_pb2_grpc.CollectorStub(ch.get(address)).QueryAds(
                        collector_pb2.QueryAdsRequest(), timeout=5):
                    got.append(chunk.ads[0].text)
    finally:
        await ch.close()
    assert got == ["[ N = 0 ]"]
    assert e.value.code() == grpc.StatusCode.INTERNAL and "Collector.QueryAds" in e.value.details()
    assert pipeline.handler_errors["/htcpool.v1.Collector/QueryAds"] == 1
    assert pipeline.metrics()["rpc_handler_errors_total"] == 1.0
    record = next(r for r in caplog.records if "unexpected error in Collector.QueryAds" in r.getMessage())
    assert isinstance(record.exc_info[1], KeyError)


async def test_a_bidi_stream_that_fails_is_internal_logged_and_counted(failing, caplog):
    pipeline, address = failing
    ch = Channels(layers=[])

    async def messages():
        yield schedd_pb2.NegotiatorMessage(start=schedd_pb2.NegotiateStart(submitter="a"))
        yield schedd_pb2.NegotiatorMessage(end=schedd_pb2.NegotiateEnd())
    try:
        with caplog.at_level(logging.ERROR, logger="test.rpc.failing"):
            with pytest.raises(grpc.aio.AioRpcError) as e:
                async for _ in schedd_pb2_grpc.ScheddStub(ch.get(address)).Negotiate(messages(), timeout=5):
                    pass
    finally:
        await ch.close()
    assert e.value.code() == grpc.StatusCode.INTERNAL and "Schedd.Negotiate" in e.value.details()
    assert pipeline.handler_errors["/htcpool.v1.Schedd/Negotiate"] == 1
    record = next(r for r in caplog.records if "unexpected error in Schedd.Negotiate" in r.getMessage())
    assert isinstance(record.exc_info[1], RuntimeError)


class _GoneContext:
    """A call whose client has gone: gRPC refuses to send its status (ExecuteBatchError)."""

    def __init__(self, gone: bool) -> None:
        self.gone = gone

    def invocation_metadata(self):
        return ()

    def peer(self):
        return "" if self.gone else "ipv4:127.0.0.1:1"

    def cancelled(self):
        return self.gone

    def done(self):
        return self.gone

    def code(self):
        return None

    async def abort(self, code, details):
        from grpc._cython import cygrpc
        if code != grpc.StatusCode.INTERNAL:
            raise cygrpc.ExecuteBatchError("Failed \"execute_batch\"")
        raise grpc.aio.AbortError(details)     # the pipeline's own INTERNAL goes out


class _Refuser(ServerLayer):
    async def admit(self, call, context):
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, "no token")


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_refusal_the_client_no_longer_waits_for_is_cancelled_not_an_error(streaming, caplog):
    """Seen fuzzing: the security layer refused a Negotiate stream as its client abandoned it;
    gRPC's refusal to send the status is not a bug of htcpool's (no traceback, not counted as
    one), while the same exception on a call still open is."""
    pipeline = ServerPipeline([_Refuser()], log=logging.getLogger("test.rpc"))

    async def unary(request, context):
        return common_pb2.Empty()

    async def stream(request_iterator, context):
        yield common_pb2.Empty()
    handler = (grpc.stream_stream_rpc_method_handler(stream) if streaming
               else grpc.unary_unary_rpc_method_handler(unary))
    wrapped = pipeline._wrap("/htcpool.v1.Schedd/Negotiate", handler)

    async def run(context):
        if streaming:
            return [m async for m in wrapped.stream_stream(iter(()), context)]
        return await wrapped.unary_unary(common_pb2.Empty(), context)
    with caplog.at_level(logging.INFO, logger="test.rpc"):
        await run(_GoneContext(gone=True))
    assert pipeline.handler_errors == {} and not any(r.exc_info for r in caplog.records)
    assert pipeline.calls[("/htcpool.v1.Schedd/Negotiate", "CANCELLED")] == 1
    # The call is still open: gRPC failing there is unexpected, logged and counted.
    with caplog.at_level(logging.ERROR, logger="test.rpc"):
        with pytest.raises(grpc.aio.AbortError):
            await run(_GoneContext(gone=False))
    assert pipeline.handler_errors["/htcpool.v1.Schedd/Negotiate"] == 1
    assert any(r.exc_info for r in caplog.records if "unexpected error in Schedd.Negotiate" in r.getMessage())
