"""Fuzzing a running pool: every RPC of every daemon (built from the protobuf
descriptors), submit files, job edits, and configurations a daemon is started with.

After each input the pool is held to the invariant: the answer is an acceptance or a
clean refusal, never INTERNAL/UNKNOWN (a handler that failed) nor a missed deadline;
a refused submission or ad update left nothing behind; every daemon still answers.
At the end, no daemon's log holds a traceback and /metrics counts no unexpected error.
"""
from __future__ import annotations

import asyncio
import importlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import descriptor as pbd

from daemons.cli.client import PoolClient
from daemons.cli.pool import LocalPool
from daemons.fuzz.strategies import build_message
from daemons.fuzz.targets import REFUSALS

RPC_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 60.0          # a daemon given SIGTERM has stopped by then, even on a loaded machine
MODULES = ("admin", "collector", "negotiator", "schedd", "startd")
SERVICE_ROLE = {"Collector": "collector", "Negotiator": "negotiator", "Schedd": "schedd", "Startd": "startd1"}
FUZZ_USER = "fuzzer"         # a plain user: WRITE and READ, no DAEMON, NEGOTIATOR or ADMINISTRATOR
# Not sent: they stop a daemon on purpose (or change the pool's faults), which is no bad input.
EXCLUDED = {"Admin.Shutdown", "Admin.SetFaultPlan", "Admin.ClearFaults"}

# What a fuzz pool looks like: a fast clock, jobs that can run, and a small per-submission limit.
FUZZ_POOL_CONFIG = """\
NETWORK_HOSTNAME = fuzzhost
TIME_SCALE = 100
NEGOTIATOR_INTERVAL = 20
NEGOTIATOR_MIN_INTERVAL = 1
NEGOTIATOR_CYCLE_DELAY = 5
UPDATE_INTERVAL = 60
SCHEDD_INTERVAL = 60
ALIVE_INTERVAL = 60
NUM_CPUS = 8
MACHINE_RESOURCE_fpga = 2
SLOT_TYPE_1 = 100%
SLOT_TYPE_1_PARTITIONABLE = True
NUM_SLOTS_TYPE_1 = 1
MAX_JOBS_PER_SUBMISSION = 50
MAX_JOBS_PER_OWNER = 2000
"""


@dataclass(frozen=True)
class RpcTarget:
    service: str                    # "Schedd"
    method: str                     # "Submit"
    request: pbd.Descriptor
    client_streaming: bool
    server_streaming: bool
    module: str                     # "schedd"

    @property
    def name(self) -> str:
        return f"{self.service}.{self.method}"


@dataclass(frozen=True)
class _Failed:
    """An RPC answered with an error status, and what the fuzzer noted before sending it."""
    code: grpc.StatusCode
    details: str
    address: str
    before: Any


# What grpc.aio's client reports when a daemon ended a client-streaming call (refused it)
# while the client was still writing: the client's write fails and overwrites the status
# the daemon sent (grpc/grpc#36066). The daemon's own count of the call's code says what
# it answered.
CLIENT_WRITE_AFTER_END = "Internal error from Core"


def rpc_targets() -> list[RpcTarget]:
    out = []
    for m in MODULES:
        pb2 = importlib.import_module(f"daemons.pb.htcpool.{m}_pb2")
        for service in pb2.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                t = RpcTarget(service.name, method.name, method.input_type, method.client_streaming,
                              method.server_streaming, m)
                if t.name not in EXCLUDED:
                    out.append(t)
    return out


def message_class(desc: pbd.Descriptor):
    module = importlib.import_module(desc.file.name.replace("htcpool/", "daemons.pb.htcpool.")
                                     .replace(".proto", "_pb2"))
    return getattr(module, desc.name)


class PoolFuzzer:
    """Sends fuzzed inputs to `pool` through `client` (the daemons' own identity, so inputs
    get past authorization to the handlers), and as other callers: a plain user (FUZZ_USER,
    who may submit, query and act on its own jobs, and is refused the rest) and a caller
    with no credentials of its own, which the `auth` class gives bad ones (auth.py)."""

    def __init__(self, pool: LocalPool, client: PoolClient) -> None:
        self.pool = pool
        self.c = client
        self.user = pool.client(FUZZ_USER)
        self.bare = pool.client(token="")
        self.last_cluster = 0
        self.restarts = 0

    async def close(self) -> None:
        await self.user.close()
        await self.bare.close()

    def auth_material(self) -> tuple[bytes, str, str]:
        """(the pool's HS256 key, its trust domain, a valid daemon token) for auth.py."""
        from daemons.core.security.keys import POOL_KEY_ID
        return (self.pool._keys().jwt_key(POOL_KEY_ID), str(self.pool.security["trust_domain"]),
                self.pool.token("condor"))

    # ---- the fuzzer's own bookkeeping, straight to the schedd ---------------------------
    # (A fuzzed InvalidateAds may rightly remove the schedd's ad until it re-advertises, so
    # the fuzzer does not find the schedd through the collector.)
    def _schedd(self):
        from daemons.pb.htcpool import schedd_pb2_grpc
        return schedd_pb2_grpc.ScheddStub(self.c.channels.get(self.pool.daemons["schedd"].address))

    async def jobs(self, constraint: str = "", projection: tuple[str, ...] = (), history: bool = False) -> list:
        from daemons.core import ads
        from daemons.pb.htcpool import schedd_pb2
        out = []
        async for chunk in self._schedd().Query(schedd_pb2.QueryJobsRequest(
                constraint=constraint, projection=list(projection), history=history), timeout=RPC_TIMEOUT_S):
            out.extend(ads.parse_ad(a.text) for a in chunk.ads)
        return out

    # ---- addresses ----------------------------------------------------------------------
    def address(self, target: RpcTarget, pick: int = 0) -> str:
        if target.service == "Admin":
            keys = sorted(self.pool.daemons)
            return self.pool.daemons[keys[pick % len(keys)]].address
        return self.pool.daemons[SERVICE_ROLE[target.service]].address

    def _stub_method(self, target: RpcTarget, address: str, client: PoolClient | None = None):
        grpc_mod = importlib.import_module(f"daemons.pb.htcpool.{target.module}_pb2_grpc")
        stub = getattr(grpc_mod, f"{target.service}Stub")((client or self.c).channels.get(address))
        return getattr(stub, target.method)

    # ---- one RPC --------------------------------------------------------------------------
    async def rpc(self, target: RpcTarget, values: Any, pick: int = 0, as_user: bool = False) -> tuple[str, str]:
        """One RPC as the daemons (or as FUZZ_USER): an acceptance or a clean refusal that
        changed nothing."""
        sent = await self._send(target, values, pick, self.user if as_user else self.c)
        if sent is None:
            return "accepted", ""
        if not isinstance(sent, _Failed):
            return sent
        return await self._classify(target, sent)

    async def rpc_bad_credentials(self, target: RpcTarget, values: Any, pick: int, what: str,
                                  metadata: list[tuple[str, Any]]) -> tuple[str, str]:
        """One RPC with bad credentials (auth.py): only the security layer's refusals are right."""
        from daemons.fuzz.auth import security_refusal
        sent = await self._send(target, values, pick, self.bare, metadata)
        if sent is None:
            return "error", f"{target.name} with {what}: accepted (bad credentials got past the security layer)"
        if not isinstance(sent, _Failed):
            return sent
        if security_refusal(sent.code, sent.details):
            problem = await self._changed_by_refusal(target, sent.before)
            if problem:
                return "error", f"{target.name} with {what}: {sent.code.name}, but {problem}"
            return "refused", ""
        if sent.code in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE):
            return await self._classify(target, sent)
        return "error", (f"{target.name} with {what}: {sent.code.name}: {sent.details} (bad credentials got past "
                         "the security layer, or it failed)")

    async def _send(self, target: RpcTarget, values: Any, pick: int, client: PoolClient,
                    metadata: list[tuple[str, Any]] | None = None) -> "_Failed | tuple[str, str] | None":
        """None (answered), _Failed, or an (outcome, detail) decided before sending."""
        cls = message_class(target.request)
        try:
            if target.client_streaming:
                messages = [build_message(cls, v) for v in values]
            else:
                request = build_message(cls, values)
                messages = [request]
            for m in messages:
                # Some values (lone surrogates in a repeated string) pass protobuf's setters and
                # fail only when serialized, which in a stream gRPC reports as INTERNAL.
                m.SerializeToString()
        except (ValueError, TypeError) as e:
            return "refused", f"not a valid message: {e}"   # protobuf itself refused the values
        address = self.address(target, pick)
        call = self._stub_method(target, address, client)
        before = await self._state_before(target, values)
        counted = await asyncio.to_thread(self.server_codes, target, address) if target.client_streaming else None
        extra = {"metadata": tuple(metadata)} if metadata is not None else {}
        try:
            if target.client_streaming:
                async def gen():
                    for m in messages:
                        yield m
                responses = call(gen(), timeout=RPC_TIMEOUT_S, **extra)
                async for _ in responses:
                    pass
            elif target.server_streaming:
                async for _ in call(request, timeout=RPC_TIMEOUT_S, **extra):
                    pass
            else:
                reply = await call(request, timeout=RPC_TIMEOUT_S, **extra)
                if target.name == "Schedd.Submit":
                    self.last_cluster = max(self.last_cluster, reply.cluster_id)
        except grpc.aio.AioRpcError as e:
            code, details = e.code(), e.details() or ""
            if counted is not None and code == grpc.StatusCode.INTERNAL and details == CLIENT_WRITE_AFTER_END:
                code, details = await self._server_answer(target, address, counted, code, details)
            return _Failed(code, details, address, before)
        return None

    async def _server_answer(self, target: RpcTarget, address: str, counted: tuple[Counter, Counter],
                             code: grpc.StatusCode, details: str) -> tuple[grpc.StatusCode, str]:
        """The code the daemon answered the call with, when the client saw CLIENT_WRITE_AFTER_END.
        A refusal by the security layer is exact (its own counter: the negotiator's calls to the
        schedd are never refused); otherwise the call's code among those the daemon counted
        meanwhile, where the negotiator's own Negotiate calls end OK. A daemon counts a call as
        it ends, which may be just after the client saw the end: hence the wait."""
        deadline = time.monotonic() + 10.0
        while True:
            calls, refused = await asyncio.to_thread(self.server_codes, target, address)
            by_security = refused - counted[1]
            if by_security:
                answered = next(iter(by_security))
                return grpc.StatusCode[answered], f"{details} (the security layer answered {answered})"
            new = calls - counted[0]
            other = {c: n for c, n in new.items() if c != "OK"}
            if len(other) == 1:
                answered = next(iter(other))
                return grpc.StatusCode[answered], f"{details} (the daemon answered {answered})"
            if time.monotonic() > deadline:
                if new and not other:
                    return grpc.StatusCode.OK, f"{details} (the daemon answered OK)"
                return code, f"{details} (the daemon counted {dict(new)})"
            await asyncio.sleep(0.05)

    def server_codes(self, target: RpcTarget, address: str) -> tuple[Counter, Counter]:
        """Calls of `target` the daemon at `address` answered, and those its security layer
        refused, by status code (from /metrics)."""
        key = next((k for k, d in self.pool.daemons.items() if d.address == address), None)
        url = self.pool.daemons[key].info.get("status_url", "") if key else ""
        calls: Counter = Counter()
        refused: Counter = Counter()
        if not url:
            return calls, refused
        try:
            text = urllib.request.urlopen(url.rstrip("/") + "/metrics", timeout=10).read().decode()
        except OSError:
            return calls, refused
        for line in text.splitlines():
            m = re.match(r'htcpool_\w+?_(rpc_calls_total|security_refused_total)\{(.*)\} (\S+)$', line)
            if m:
                labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2)))
                if labels.get("method") == target.method and labels.get("service", "").endswith(f".{target.service}"):
                    (calls if m.group(1) == "rpc_calls_total" else refused)[labels["code"]] += int(float(m.group(3)))
        return calls, refused

    async def _classify(self, target: RpcTarget, failed: _Failed) -> tuple[str, str]:
        code, address, before = failed.code, failed.address, failed.before
        detail = f"{target.name}: {code.name}: {failed.details}"
        if code == grpc.StatusCode.OK:
            return "accepted", ""
        if code in REFUSALS:
            try:
                problem = await self._changed_by_refusal(target, before)
            except grpc.aio.AioRpcError as e:
                # The pool cannot even say what it holds now: that is the input's doing too.
                return "error", f"{detail}; then the check of what it changed failed: {e.code().name}: {e.details()}"
            return ("error", f"{detail}; but {problem}") if problem else ("refused", "")
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return "hang", detail
        if code == grpc.StatusCode.UNAVAILABLE:
            if not await self._alive(address):
                await self.revive()
                return "crash", detail
            return "error", detail
        return "error", detail            # INTERNAL, UNKNOWN: a handler failed

    # ---- "a refused input changes nothing" ---------------------------------------------
    async def _state_before(self, target: RpcTarget, values: Any) -> Any:
        if target.name == "Collector.UpdateAds" and isinstance(values, dict):
            keys = set()
            for ad in values.get("ads", []):
                text = ad.get("text", "")
                name = re.search(r'\bName\s*=\s*"([^"\\]*)"', text)
                my_type = re.search(r'\bMyType\s*=\s*"([^"\\]*)"', text)
                if name and my_type:
                    keys.add((my_type.group(1), name.group(1)))
            present = set()
            for my_type, name in keys:
                if await self._ads_named(my_type, name):
                    present.add((my_type, name))
            return keys - present
        return None

    async def _changed_by_refusal(self, target: RpcTarget, before: Any) -> str:
        if target.name == "Schedd.Submit":
            found = await self.jobs(f"ClusterId > {self.last_cluster}")
            found += await self.jobs(f"ClusterId > {self.last_cluster}", history=True)
            if found:
                return f"{len(found)} job(s) of the refused submission are in the queue"
        if target.name == "Collector.UpdateAds" and before:
            for my_type, name in before:
                if await self._ads_named(my_type, name):
                    return f"the refused update stored {my_type} {name!r}"
        return ""

    async def _ads_named(self, my_type: str, name: str) -> bool:
        from daemons.core import ads
        try:
            return bool(await self.c.ads(my_type or "Any", f"Name == {ads.literal(name)}", ["Name"]))
        except grpc.aio.AioRpcError:
            return False

    # ---- health -----------------------------------------------------------------------------
    async def _alive(self, address: str) -> bool:
        try:
            await self.c.ping(address)
            return True
        except grpc.aio.AioRpcError:
            return False

    async def health(self) -> list[str]:
        """Daemons that died or stopped answering (each is restarted, so fuzzing goes on)."""
        problems = []
        for key, d in list(self.pool.daemons.items()):
            if not d.alive() or not await self._alive(d.address):
                problems.append(f"{key} is not answering (exit code {d.proc.poll() if d.proc else '?'})")
        if problems:
            await self.revive()
        return problems

    async def revive(self) -> None:
        for key, d in list(self.pool.daemons.items()):
            if not d.alive():
                self.restarts += 1
                await asyncio.to_thread(self.pool.restart, key)

    def log_problems(self) -> list[str]:
        """Tracebacks or unexpected errors in any daemon's log or output."""
        out = []
        for f in sorted((self.pool.state_dir / "log").iterdir()):
            text = f.read_text(errors="replace")
            for marker in ("Traceback", "unexpected error", "Segmentation fault"):
                i = text.find(marker)
                if i >= 0:
                    out.append(f"{f.name}: {text[max(0, i - 400):i + 1500]}")
                    break
        return out

    def metric_errors(self) -> dict[str, float]:
        """rpc_handler_errors_total + unexpected_errors_total, per daemon, from /metrics."""
        return self.metric_totals("rpc_handler_errors_total", "unexpected_errors_total")

    def metric_totals(self, *names: str) -> dict[str, float]:
        """The sum of the metrics `names` (over all their labels), per daemon, from /metrics."""
        out = {}
        pattern = re.compile(r"htcpool_\w+?_(%s)[{ ]" % "|".join(map(re.escape, names)))
        for key, d in self.pool.daemons.items():
            url = d.info.get("status_url", "")
            if not url:
                continue
            try:
                text = urllib.request.urlopen(url.rstrip("/") + "/metrics", timeout=10).read().decode()
            except OSError:
                continue
            out[key] = sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if pattern.match(line))
        return out

    async def live_values(self) -> tuple[str, ...]:
        """Names that exist in the pool now: job ids, claim ids, slot and machine names, submitters."""
        from daemons.core import ads
        out: set[str] = set()
        try:
            for j in await self.jobs(projection=("ClusterId", "ProcId", "ClaimId", "RemoteHost")):
                out.add(f"{ads.get(j, 'ClusterId')}.{ads.get(j, 'ProcId')}")
                out.update(str(ads.get(j, a)) for a in ("ClaimId", "RemoteHost") if ads.get(j, a))
            texts = await self.c.collector.query("Any", projection=["Name", "Machine", "ClaimId", "MyType"],
                                                 include_private=True)
            for t in texts:
                ad = ads.parse_ad(t)
                out.update(str(ads.get(ad, a)) for a in ("Name", "Machine", "ClaimId") if ads.get(ad, a))
        except (grpc.aio.AioRpcError, ads.AdError):
            pass
        return tuple(sorted(out))[:200]

    # ---- submit files and edits through the CLI's path ---------------------------------------
    async def submit_text(self, text: str) -> tuple[str, str]:
        target = next(t for t in rpc_targets() if t.name == "Schedd.Submit")
        return await self.rpc(target, {"submit_description": text, "submit_file": "fuzz.sub", "owner": "fuzz"})

    async def cleanup(self, keep: int = 300) -> None:
        """Keep the queue from growing without end (a legitimate remove of the fuzz jobs),
        while leaving enough jobs, idle and running, for RPCs to find."""
        from daemons.pb.htcpool import schedd_pb2
        try:
            if len(await self.jobs(projection=("ProcId",))) > keep:
                await self._schedd().Act(schedd_pb2.ActRequest(action=schedd_pb2.REMOVE, constraint="true",
                                                               reason="fuzz cleanup"), timeout=RPC_TIMEOUT_S)
        except grpc.aio.AioRpcError:
            pass


# ---- configurations a real daemon is started with ---------------------------------------------
def start_daemon_with(pool: LocalPool, text: str, role: str = "startd", timeout_s: float = 30.0) -> tuple[str, str]:
    """Start one daemon of `role` with configuration `text` against the pool: it must stop with
    one line and exit code 2, or become ready, serve, and stop cleanly on SIGTERM."""
    with tempfile.TemporaryDirectory(prefix="htcpool-fuzz-daemon-") as d:
        cfg = Path(d) / "fuzz.conf"
        cfg.write_text(text)
        addr = Path(d) / "address"
        env = {k: v for k, v in os.environ.items() if not k.startswith("_CONDOR_")}
        if pool.security:
            # It joins the pool: the pool's signing key and trust domain, as LocalPool.join gives.
            env.update({"_CONDOR_SEC_TOKEN_POOL_SIGNING_KEY_FILE": str(pool.security["pool_key_file"]),
                        "_CONDOR_TRUST_DOMAIN": str(pool.security["trust_domain"])})
        env.update({"_CONDOR_COLLECTOR_HOST": pool.collector_address, "_CONDOR_POOL_EPOCH": repr(pool.epoch),
                    "_CONDOR_LOCAL_DIR": d, "_CONDOR_NETWORK_HOSTNAME": "fuzzextra",
                    "HTCPOOL_LOG_STDERR": "0", "HTCPOOL_PARENT_PID": str(os.getpid())})
        args = [sys.executable, "-m", "daemons.cli.main", "daemon", role, "--config", str(cfg),
                "--address-file", str(addr)]
        if role == "startd":
            args += ["--host-prefix", "fuzzextra-"]
        proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and proc.poll() is None and not addr.exists():
            time.sleep(0.05)
        if proc.poll() is not None:
            out, err = proc.communicate()
            if proc.returncode == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err + out:
                return "refused", ""
            return "error", f"exit code {proc.returncode}: {err[-3000:]}{out[-1000:]}"
        if not addr.exists():
            proc.kill()
            proc.communicate()
            return "hang", f"{role} did not become ready in {timeout_s:.0f} s"
        proc.send_signal(signal.SIGTERM)

        def logs() -> str:
            return "".join(p.read_text(errors="replace") for p in (Path(d) / "log").glob("*") if p.is_file())
        try:
            out, err = proc.communicate(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return "hang", f"{role} did not stop within {STOP_TIMEOUT_S:.0f} s of SIGTERM; its log ends:\n{logs()[-3000:]}"
        logs = logs()
        if proc.returncode != 0 or "Traceback" in logs + err + out or "unexpected error" in logs:
            return "error", f"exit code {proc.returncode}: {err[-2000:]}{logs[-3000:]}"
        return "accepted", ""

