"""A client of a running pool: what the CLI, the demo, benchmarks and tests use."""
from __future__ import annotations

import asyncio
import time
from typing import Awaitable, Callable, Sequence, TypeVar

import classad2
import grpc

from daemons.core import ads
from daemons.core.clock import CLOCK_SEGMENT_ATTRS, PoolClock, segment_from
from daemons.core.collector_client import CollectorClient
from daemons.core.rpc import Channels
from daemons.core.security.layer import TokenLayer
from daemons.pb.htcpool import admin_pb2, admin_pb2_grpc, common_pb2
from daemons.pb.htcpool import negotiator_pb2, negotiator_pb2_grpc, schedd_pb2, schedd_pb2_grpc, startd_pb2
from daemons.pb.htcpool import startd_pb2_grpc

T = TypeVar("T")


class ClientError(RuntimeError):
    pass


# A daemon's role and the MyType of its own ad.
DAEMON_TYPES = {"collector": "Collector", "negotiator": "Negotiator", "schedd": "Scheduler",
                "startd": "StartDaemon", "defrag": "Defrag", "drainboss": "DrainBoss"}


def strip_addr(text: str) -> str:
    return text.strip().strip("<>").split("?", 1)[0]


class PoolClient:
    """Calls a pool's daemons, sending `tokens` (the candidates, best first) with every call
    and using TLS when given `credentials`."""

    def __init__(self, collector_address: str, tokens: Sequence[str] = (),
                 credentials: grpc.ChannelCredentials | None = None, server_name: str | None = None) -> None:
        self.channels = Channels(extra_layers=[TokenLayer(list(tokens))] if tokens else [],
                                 credentials=credentials, server_name=server_name)
        self.collector = CollectorClient(self.channels, collector_address, named_by="--pool")

    async def __aenter__(self) -> "PoolClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        await self.channels.close()

    # ---- collector ----------------------------------------------------------
    async def ads(self, my_type: str, constraint: str = "", projection: Sequence[str] = ()) -> list[classad2.ClassAd]:
        texts = await self.collector.query(my_type, constraint, projection, give_up_after_s=5.0)
        return [ads.parse_ad(t) for t in texts]

    async def _clock_ad(self) -> classad2.ClassAd | None:
        found = await self.ads("Collector", projection=["PoolEpoch", "TimeScale", *CLOCK_SEGMENT_ATTRS])
        return found[0] if found else None

    async def pool_now(self) -> float:
        """The pool's clock, from the collector's: the segment it runs on now (the lag policy
        may have changed the scale), else its PoolEpoch and TimeScale."""
        a = await self._clock_ad()
        if a is not None:
            seg = segment_from(lambda k: ads.get(a, k))
            now = time.time()
            current = ads.get(a, "TimeScale")
            if seg is not None and isinstance(current, (int, float)):
                # Before an announced switch the clock still runs at the current scale.
                return seg.pool + (now - seg.wall) * (seg.scale if now >= seg.wall else current)
            epoch, scale = ads.get(a, "PoolEpoch"), current
            if isinstance(epoch, (int, float)) and isinstance(scale, (int, float)):
                return epoch + (now - epoch) * scale
        return time.time()

    async def follow_clock(self, clock: PoolClock) -> None:
        """Adopt the collector's clock segment: when the lag policy slows the pool, a clock
        kept here (an experiment's sampler) must slow with it, or it would sample the pool
        at pool times the pool has not reached."""
        a = await self._clock_ad()
        seg = segment_from(lambda k: ads.get(a, k)) if a is not None else None
        if seg is not None and clock.is_newer(seg):
            clock.follow(seg)

    async def keep_following(self, clock: PoolClock, every_s: float = 0.3) -> None:
        """follow_clock until cancelled (a task beside the sampler); a sleep on `clock` that
        woke early because the scale fell re-arms itself from the new segment."""
        while True:
            try:
                await self.follow_clock(clock)
            except Exception:
                pass              # a collector outage is the experiment's to notice, not this task's
            await asyncio.sleep(every_s)

    async def daemon_address(self, my_type: str, name: str | None = None) -> str:
        constraint = f"Name == {ads.literal(name)}" if name else ""
        found = await self.ads(my_type, constraint, ["Name", "MyAddress"])
        if not found:
            what = f"{my_type} {name}" if name else f"any {my_type}"
            raise ClientError(f"no {what} ad in the collector at {self.collector.address}")
        return strip_addr(str(ads.get(found[0], "MyAddress", "")))

    # ---- schedd -------------------------------------------------------------
    async def schedd(self, name: str | None = None) -> schedd_pb2_grpc.ScheddStub:
        return schedd_pb2_grpc.ScheddStub(self.channels.get(await self.daemon_address("Scheduler", name)))

    async def submit(self, text: str, file: str, owner: str = "", schedd: str | None = None,
                     queue_items: dict[int, list[str]] | None = None) -> tuple[int, int]:
        """Submit as the caller (the token's user); `owner` names another user, which only a
        queue super user may do. `queue_items`: the items of `queue ... from FILE` and
        `queue ... matching` statements, by line, read where the submit file is."""
        stub = await self.schedd(schedd)
        items = [schedd_pb2.QueueItems(line=line, items=values) for line, values in (queue_items or {}).items()]
        reply = await stub.Submit(schedd_pb2.SubmitRequest(submit_description=text, submit_file=file, owner=owner,
                                                           queue_items=items), timeout=60.0)
        return reply.cluster_id, reply.count

    async def jobs(self, constraint: str = "", projection: Sequence[str] = (), history: bool = False,
                   limit: int = 0, schedd: str | None = None, autoclusters: bool = False) -> list[classad2.ClassAd]:
        stub = await self.schedd(schedd)
        out = []
        async for chunk in stub.Query(schedd_pb2.QueryJobsRequest(
                constraint=constraint, projection=list(projection), history=history, limit=limit,
                autoclusters=autoclusters), timeout=60.0):
            out.extend(ads.parse_ad(a.text) for a in chunk.ads)
        return out

    async def act(self, action: int, job_ids: Sequence[str] = (), constraint: str = "", reason: str = "",
                  edits: dict[str, str] | None = None, schedd: str | None = None) -> list[str]:
        return list((await self.act_reply(action, job_ids, constraint, reason, edits, schedd)).job_ids)

    async def act_reply(self, action: int, job_ids: Sequence[str] = (), constraint: str = "", reason: str = "",
                        edits: dict[str, str] | None = None, schedd: str | None = None) -> schedd_pb2.ActReply:
        stub = await self.schedd(schedd)
        return await stub.Act(schedd_pb2.ActRequest(action=action, job_ids=list(job_ids), constraint=constraint,
                                                    reason=reason, edits=edits or {}), timeout=30.0)

    # ---- negotiator ---------------------------------------------------------
    async def negotiator(self) -> negotiator_pb2_grpc.NegotiatorStub:
        return negotiator_pb2_grpc.NegotiatorStub(self.channels.get(await self.daemon_address("Negotiator")))

    async def reschedule(self) -> int:
        reply = await (await self.negotiator()).Reschedule(common_pb2.Empty(), timeout=10.0)
        return reply.next_cycle

    async def cycles(self, last: int = 0) -> list[negotiator_pb2.CycleRecord]:
        reply = await (await self.negotiator()).CycleHistory(negotiator_pb2.CycleHistoryRequest(last=last),
                                                             timeout=10.0)
        return list(reply.cycles)

    async def userprio(self, all_users: bool = False) -> negotiator_pb2.UserPrioReply:
        return await (await self.negotiator()).UserPrio(negotiator_pb2.UserPrioRequest(all_users=all_users),
                                                       timeout=10.0)

    async def set_userprio(self, name: str, factor: float = 0.0, priority: float = 0.0) -> negotiator_pb2.UserPrioEntry:
        return await (await self.negotiator()).SetUserPrio(
            negotiator_pb2.SetUserPrioRequest(name=name, factor=factor, priority=priority), timeout=10.0)

    # ---- startd --------------------------------------------------------------
    async def startd_of(self, host: str) -> startd_pb2_grpc.StartdStub:
        """The startd that emulates machine `host` (found through its slot ads)."""
        found = await self.ads("Machine", f"Machine == {ads.literal(host)}", ["StartdIpAddr", "Machine"])
        if not found:
            raise ClientError(f"no machine {host!r} in the pool (see 'htcpool status')")
        return startd_pb2_grpc.StartdStub(self.channels.get(strip_addr(str(ads.get(found[0], "StartdIpAddr")))))

    async def drain(self, host: str, how: str = "graceful", resume_on_completion: bool = False, check: str = "",
                    start: str = "", reason: str = "", request_id: str = "") -> str:
        stub = await self.startd_of(host)
        hows = {"graceful": startd_pb2.GRACEFUL, "quick": startd_pb2.QUICK, "fast": startd_pb2.FAST}
        reply = await stub.DrainJobs(startd_pb2.DrainJobsRequest(
            machine=host, how=hows[how], resume_on_completion=resume_on_completion, check_expr=check,
            start_expr=start, reason=reason, request_id=request_id), timeout=10.0)
        return reply.request_id

    async def cancel_drain(self, host: str, request_id: str = "") -> None:
        stub = await self.startd_of(host)
        await stub.CancelDrainJobs(startd_pb2.CancelDrainJobsRequest(machine=host, request_id=request_id),
                                   timeout=10.0)

    # ---- any daemon ---------------------------------------------------------
    async def ping(self, address: str) -> admin_pb2.PingReply:
        return await admin_pb2_grpc.AdminStub(self.channels.get(strip_addr(address))).Ping(common_pb2.Empty(),
                                                                                           timeout=5.0)

    def admin(self, address: str) -> admin_pb2_grpc.AdminStub:
        return admin_pb2_grpc.AdminStub(self.channels.get(strip_addr(address)))

    async def daemons(self) -> list[classad2.ClassAd]:
        """Every daemon's own ad (not slot or submitter ads)."""
        found = []
        for my_type in DAEMON_TYPES.values():
            found.extend(await self.ads(my_type, projection=["MyType", "Name", "MyAddress"]))
        return found

    async def set_faults(self, address: str, faults: Sequence[admin_pb2.Fault], replace: bool = False
                         ) -> admin_pb2.FaultList:
        return await self.admin(address).SetFaultPlan(admin_pb2.FaultPlan(faults=list(faults), replace=replace),
                                                      timeout=10.0)

    async def clear_faults(self, address: str, ids: Sequence[str] = ()) -> admin_pb2.FaultList:
        return await self.admin(address).ClearFaults(admin_pb2.ClearFaultsRequest(ids=list(ids)), timeout=10.0)

    async def list_faults(self, address: str) -> admin_pb2.FaultList:
        return await self.admin(address).ListFaults(common_pb2.Empty(), timeout=10.0)

    async def shutdown(self, address: str, fast: bool = False) -> None:
        await admin_pb2_grpc.AdminStub(self.channels.get(strip_addr(address))).Shutdown(
            admin_pb2.ShutdownRequest(fast=fast), timeout=5.0)


async def wait_for(check: Callable[[], Awaitable[T]], *, timeout_s: float, what: str,
                   interval_s: float = 0.05) -> T:
    """Poll `check` until it returns something truthy; fail after `timeout_s` naming `what`.

    Transient RPC failures while a pool is starting count as "not yet".
    """
    deadline = time.monotonic() + timeout_s
    last_error = ""
    while True:
        try:
            result = await check()
            if result:
                return result
        except grpc.aio.AioRpcError as e:
            last_error = f" (last error: {e.code().name})"
        except ClientError as e:
            last_error = f" (last error: {e})"
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}{last_error}")
        await asyncio.sleep(interval_s)
