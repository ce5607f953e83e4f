"""Issue 12's table, row by row, on real pools: every bad input gets a clear one-line
error (exit code 2 for the CLI, INVALID_ARGUMENT for an RPC), changes nothing, and the
process that received it keeps answering, with no traceback in any log."""
from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

import grpc
import pytest

from daemons.cli.client import PoolClient, wait_for
from daemons.cli.pool import LocalPool
from daemons.core import ads
from daemons.pb.htcpool import collector_pb2, collector_pb2_grpc, common_pb2, schedd_pb2, schedd_pb2_grpc, startd_pb2

from .conftest import htcpool, wait_slots

DEEP = " + ".join(["1"] * 50_000)
DEEP_ARG = "+".join(["1"] * 20_000)     # one command-line argument may be at most 128 KiB


def logs_without_tracebacks(pool: LocalPool) -> None:
    for f in sorted((pool.state_dir / "log").iterdir()):
        text = f.read_text(errors="replace")
        assert "Traceback" not in text, (f.name, text[text.index("Traceback") - 300:][:2000])
        assert "unexpected error" not in text, f.name


async def all_answer(pool: LocalPool, c: PoolClient) -> None:
    for key, d in pool.daemons.items():
        assert d.alive(), key
        assert (await c.ping(d.address)).ready, key


async def refused(coro, says: str) -> str:
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await coro
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (e.value.code(), e.value.details())
    assert says in e.value.details(), e.value.details()
    return e.value.details()


def cli_refuses(args: list[str], says: str, pool: LocalPool, cwd: Path | None = None) -> None:
    where = ("--state-dir", str(pool.state_dir))      # where the CLI finds the pool and its token
    r = htcpool(*args, *where) if cwd is None else _in(cwd, *args, *where)
    assert r.returncode == 2, (args, r.stdout, r.stderr)
    assert says in r.stderr, (args, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "Traceback" not in r.stderr


def _in(cwd: Path, *args: str):
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "daemons.cli.main", *args], capture_output=True, text=True,
                          timeout=120, cwd=str(cwd), env=dict(os.environ, PYTHONPATH=str(Path.cwd())))


async def test_bad_submissions_and_edits_are_refused_whole(make_pool, tmp_path):
    pool = make_pool("NUM_CPUS = 1\nSTART = False\n")
    async with pool.client("condor") as c:
        await wait_slots(c, 1)
        await c.submit("executable = /bin/sleep\narguments = 5\nqueue 2\n", "good.sub", "alice")

        bad = tmp_path / "latin1.sub"
        bad.write_bytes(b"executable = /bin/sleep\narguments = caf\xe9\nqueue\n")
        cli_refuses(["submit", str(bad)], "latin1.sub, line 2: not UTF-8 text (byte 0xe9 at column 16)", pool)
        bad.write_bytes(b"executable = /bin/sleep\narguments = a\x00b\nqueue\n")
        cli_refuses(["submit", str(bad)], "line 2: a NUL byte at column 14", pool)
        for count in ("1e8", "10000000"):
            bad.write_text(f"executable = /bin/sleep\nqueue {count}\n")
            cli_refuses(["submit", str(bad)], "MAX_JOBS_PER_SUBMISSION is 20,000", pool)
        bad.write_text(f"executable = /bin/sleep\nrequirements = {DEEP}\nqueue\n")
        cli_refuses(["submit", str(bad)], "line 2: requirements: nested more than 1000 deep", pool)

        cases = {
            "request_cpus = 99999999999999999999\n": "request_cpus = '99999999999999999999' is out of range",
            'request_cpus = real("NaN")\n': "is not a finite number",
            "request_cpus = 1e400\n": "the number 1e400 is out of range",
            'request_cpus = "four"\n': "is a string, not a number",
            f"request_cpus = {'9' * 309}\n": "is out of range",
            "+ProcId = 0\n": "ProcId is set by the schedd",
            '+ProcId = "x"\n': "ProcId is set by the schedd",
            "+JobStatus = 2\n": "JobStatus is set by the schedd",
            "+JobStatus = 4\n": "JobStatus is set by the schedd",
            '+Owner = "root"\n': "Owner is set by the schedd",
            f"+Deep = {DEEP}\n": "+Deep: nested more than 1000 deep",
        }
        for line, says in cases.items():
            text = "executable = /bin/sleep\n" + line + "queue 5\n"
            details = await refused(c.submit(text, "bad.sub", "alice"), says)
            assert details.startswith("bad.sub, line 2: "), details
        await refused(c.submit("executable = /bin/sleep\nqueue\n", "x.sub", "bob\n01/01/70 forged"),
                      "is not a user name")

        cli_refuses(["qedit", "1.0", "é", "1"], "'é' is not an attribute name", pool)
        cli_refuses(["qedit", "1.0", "JobStatus", "2"], "attribute JobStatus cannot be edited", pool)
        cli_refuses(["qedit", "1.0", "Owner", '"root"'], "attribute Owner cannot be edited", pool)
        cli_refuses(["qedit", "2.0", "Foo", DEEP_ARG], "Foo: nested more than 1000 deep", pool)  # no such job either
        cli_refuses(["qedit", "1.0", "RequestCpus", '"four"'], "is a string, not a number", pool)

        jobs = await c.jobs()
        assert sorted((ads.get(j, "ClusterId"), ads.get(j, "ProcId")) for j in jobs) == [(1, 0), (1, 1)]
        # Every later query works (an unparsable attribute would have broken them all).
        assert len(await c.jobs("JobStatus == 1")) == 2
        assert (await c.submit("executable = /bin/sleep\nqueue\n", "next.sub", "alice"))[0] == 2
        await all_answer(pool, c)
    logs_without_tracebacks(pool)


async def test_deep_or_huge_input_never_reaches_classad2_in_any_daemon(make_pool):
    pool = make_pool("NUM_CPUS = 1\n")
    async with pool.client("condor") as c:
        await wait_slots(c, 1)
        stub = collector_pb2_grpc.CollectorStub(c.channels.get(pool.collector_address))
        before = len(await c.ads("Any"))

        def update(texts):
            return stub.UpdateAds(collector_pb2.UpdateAdsRequest(ads=[common_pb2.ClassAd(text=t) for t in texts]),
                                  timeout=30)
        await refused(update([f'[ MyType = "Generic"; Name = "deep"; X = {DEEP} ]']),
                      "ad 1 of 1: nested more than 1000 deep")
        await refused(update(['[ MyType = "Generic"; Name = "big"; X = "' + "x" * 10_000_000 + '" ]']),
                      "more than COLLECTOR_MAX_AD_SIZE (1,048,576)")
        await refused(update([f'[ MyType = "Generic"; Name = "n{i}" ]' for i in range(20_000)]),
                      "20,000 ads and 0 names in one update; COLLECTOR_MAX_ADS_PER_UPDATE is 1,000")
        await refused(update(['[ MyType = "Machine"; Name = "x"; Cpus = 99999999999999999999 ]']),
                      "out of range (ClassAd integers are 64-bit)")
        assert len(await c.ads("Any")) == before

        await refused(c.jobs(DEEP), "constraint: nested more than 1000 deep")
        await refused(c.ads("Machine", DEEP), "constraint: nested more than 1000 deep")
        host = str(ads.get((await c.ads("Machine"))[0], "Machine"))
        startd = await c.startd_of(host)
        await refused(startd.DrainJobs(startd_pb2.DrainJobsRequest(machine=host, check_expr=DEEP), timeout=10),
                      "nested more than 1000 deep")
        await refused(startd.RequestClaim(startd_pb2.RequestClaimRequest(
            claim_id="x", job_ad=common_pb2.ClassAd(text=f"[ Requirements = {DEEP} ]")), timeout=10),
            "job ad: nested more than 1000 deep")
        assert ads.get((await c.ads("Machine"))[0], "Draining") in (None, False)
        await all_answer(pool, c)
    logs_without_tracebacks(pool)


def test_deep_expressions_in_a_configuration_stop_the_daemon_with_one_line(tmp_path):
    for knob, role in (("START", "startd"), ("NEGOTIATOR_PRE_JOB_RANK", "negotiator")):
        cfg = tmp_path / f"{role}.conf"
        cfg.write_text(f"COLLECTOR_HOST = 127.0.0.1:1\n{knob} = {DEEP}\n")
        r = htcpool("daemon", role, "--config", str(cfg))
        assert r.returncode == 2, r.stderr
        assert r.stderr.strip() == (f"htcpool daemon {role}: config file {cfg}, line 2: {knob}: "
                                    "nested more than 1000 deep (see CLASSAD_MAX_EXPR_DEPTH)")


def test_configuration_rows_of_the_table(tmp_path):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    busy = listener.getsockname()[1]
    cases = {
        "circle": ("A = $(B)\nB = $(A)\nSTART = $(A)\n",
                   "line 2: A = '$(B)': the macros A -> B -> A refer to each other in a circle"),
        "epoch": ("POOL_EPOCH = 1e300\n", "line 2: POOL_EPOCH = 1e300 is above the maximum"),
        "scale": ("TIME_SCALE = 1e300\n", "line 2: TIME_SCALE = 1e300 is above the maximum 100000"),
        "interface": ("NETWORK_INTERFACE = 256.1.1.1\n", "NETWORK_INTERFACE = '256.1.1.1': 256.1.1.1 is not"),
        # (Security off: a daemon that gets as far as binding needs no pool key then.)
        "in_use": (f"SEC_DEFAULT_AUTHENTICATION = NEVER\nSTARTD_ARGS = -p {busy}\n",
                   f"cannot bind the startd's command port 127.0.0.1:{busy}"),
        "status_port": ("STARTD_STATUS_PORT = 70000\n", "STARTD_STATUS_PORT = 70000 is not a port number"),
        "args_port": ("STARTD_ARGS = -p 70000\n", "STARTD_ARGS = '-p 70000': 70000 is not a port number"),
        "interval": ("UPDATE_INTERVAL = 99999999999999999999\n", "is above the maximum 2147483647"),
        "nan": ("MEMORY = real(\"NaN\")\n", "MEMORY = 'real(\"NaN\")' is not a finite number"),
    }
    try:
        for name, (text, says) in cases.items():
            cfg = tmp_path / f"{name}.conf"
            cfg.write_text("COLLECTOR_HOST = 127.0.0.1:1\n" + text)
            # (Without HTCPOOL_LOG_STDERR=0 the daemon's log also goes to stderr, as a foreground daemon's does.)
            r = htcpool("daemon", "startd", "--config", str(cfg), timeout=60,
                        env={"HTCPOOL_LOG_STDERR": "0", "_CONDOR_LOCAL_DIR": str(tmp_path / name)})
            assert r.returncode == 2, (name, r.stderr)
            assert says in r.stderr, (name, r.stderr)
            assert len(r.stderr.strip().splitlines()) == 1, (name, r.stderr)
    finally:
        listener.close()
    # `up` checks every daemon's settings before it starts any process.
    cfg = tmp_path / "up.conf"
    cfg.write_text("NEGOTIATOR_INTERVAL = -5\n")
    up = htcpool("up", "--config", str(cfg), "--state-dir", str(tmp_path / "st"))
    assert up.returncode == 2, up.stderr
    assert "line 1: NEGOTIATOR_INTERVAL = -5 is below the minimum 1" in up.stderr
    assert not (tmp_path / "st" / "pool.json").exists() and not (tmp_path / "st" / "log").exists()


async def test_queue_limits(make_pool):
    """HTCondor's MAX_JOBS_PER_SUBMISSION, MAX_JOBS_PER_OWNER and MAX_JOBS_SUBMITTED (qmgmt.cpp,
    NewProc): a submission that would pass a limit is refused whole."""
    pool = make_pool("START = False\nMAX_JOBS_PER_SUBMISSION = 5\nMAX_JOBS_PER_OWNER = 8\nMAX_JOBS_SUBMITTED = 10\n")
    job = "executable = /bin/sleep\nqueue {}\n"
    async with pool.client("condor") as c:
        await wait_slots(c, 1)
        await refused(c.submit(job.format(6), "a.sub", "alice"), "6 jobs in one submission; MAX_JOBS_PER_SUBMISSION is 5")
        await c.submit(job.format(5), "a.sub", "alice")
        await refused(c.submit(job.format(4), "a.sub", "alice"),
                      "alice has 5 job(s) in the queue; 4 more would pass MAX_JOBS_PER_OWNER (8)")
        await c.submit(job.format(3), "a.sub", "alice")
        await refused(c.submit(job.format(3), "b.sub", "bob"),
                      "the queue holds 8 job(s); 3 more would pass MAX_JOBS_SUBMITTED (10)")
        await c.submit(job.format(2), "b.sub", "bob")
        assert len(await c.jobs()) == 10


async def test_no_input_forges_a_log_line(make_pool):
    pool = make_pool("NUM_CPUS = 1\n")
    forged = "01/01/70 00:00:00 forged line"
    async with pool.client("condor") as c:
        await wait_slots(c, 1)
        stub = collector_pb2_grpc.CollectorStub(c.channels.get(pool.collector_address))
        # An ad that expires: the collector logs its Name when it removes it.
        await stub.UpdateAds(collector_pb2.UpdateAdsRequest(ads=[common_pb2.ClassAd(
            text=f'[ MyType = "Generic"; Name = "evil\\n{forged}"; ClassAdLifetime = 1 ]')]), timeout=10)
        log = pool.state_dir / "log" / "CollectorLog"
        await wait_for(lambda: _async(lambda: "Removing stale ad" in log.read_text()), timeout_s=60,
                       what="the expired ad's removal in the CollectorLog")
        # A submitter name with a newline reaches the negotiator's log through the collector.
        await stub.UpdateAds(collector_pb2.UpdateAdsRequest(ads=[common_pb2.ClassAd(
            text=f'[ MyType = "Submitter"; Name = "x\\n{forged}"; ScheddName = "s"; ScheddIpAddr = "<127.0.0.1:1>"; '
                 'IdleJobs = 1 ]')]), timeout=10)
        await c.reschedule()
        neg = pool.state_dir / "log" / "NegotiatorLog"
        await wait_for(lambda: _async(lambda: forged in neg.read_text()), timeout_s=60,
                       what="the submitter's name in the NegotiatorLog")
    for f in (log, neg):
        lines = f.read_text().splitlines()
        assert not any(line.startswith(forged) for line in lines), f.name
        assert any(f"\\n{forged}" in line for line in lines), f.name


async def _async(fn):
    return fn()


async def test_job_machine_attrs_are_recorded_when_a_job_starts_and_rotate_when_it_leaves(make_pool):
    """HTCondor manual (condor_submit: job_machine_attrs, job_machine_attrs_history_length) and
    schedd.cpp (InsertMachineAttrs): MachineAttr<X>0 from the slot at each start, the history
    shifted when the job goes back to the queue; SYSTEM_JOB_MACHINE_ATTRS adds Cpus and SlotWeight."""
    from .conftest import PSLOT
    pool = make_pool("NUM_CPUS = 2\n" + PSLOT)
    async with pool.client("condor") as c:
        await wait_slots(c, 1)
        await c.submit("executable = /bin/sleep\narguments = 100000\njob_machine_attrs = Machine, DynamicSlot, NoSuchAttr\n"
                       "job_machine_attrs_history_length = 2\nqueue\n", "m.sub", "alice")
        job = (await wait_for(lambda: c.jobs("JobStatus == 2"), timeout_s=60, what="the job running"))[0]
        assert ads.get(job, "MachineAttrMachine0") == "testhost"
        assert ads.get(job, "MachineAttrDynamicSlot0") is True       # the dynamic slot it runs on
        assert str(job.lookup("MachineAttrNoSuchAttr0")) == "error"  # as HTCondor records a missing one
        assert ads.get(job, "MachineAttrCpus0") == 1 and "MachineAttrSlotWeight0" in job
        assert "MachineAttrMachine1" not in job
        await c.drain("testhost", "fast", reason="evict the job")
        back = await wait_for(lambda: c.jobs("JobStatus == 1 && NumJobStarts == 1"), timeout_s=60,
                              what="the evicted job back in the queue")
        assert ads.get(back[0], "MachineAttrMachine1") == "testhost"
        assert ads.get(back[0], "MachineAttrMachine0") == "testhost"


async def test_queue_from_a_file_and_matching_files_read_where_the_submit_runs(make_pool, tmp_path):
    """condor_submit: `queue var from <file>` and `queue var matching files <glob>` read the
    submitter's files; the schedd gets the items with the description."""
    pool = make_pool("START = False\n")
    work = tmp_path / "work"
    work.mkdir()
    (work / "inputs.txt").write_text("alpha, 1\nbeta, 2\n\n")
    for n in ("b.dat", "a.dat", "skip.txt"):
        (work / n).write_text("x")
    (work / "c.dat").mkdir()
    (work / "job.sub").write_text("executable = /bin/sleep\narguments = $(name) $(n)\nqueue name, n from inputs.txt\n"
                                  "arguments = $(f)\nqueue f matching files *.dat\n")
    r = _in(work, "submit", "job.sub", "--state-dir", str(pool.state_dir))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "4 job(s) submitted to cluster 1."
    async with pool.client("condor") as c:
        args = [ads.get(j, "Args") for j in sorted(await c.jobs(), key=lambda j: ads.get(j, "ProcId"))]
    assert args == ["alpha 1", "beta 2", "a.dat", "b.dat"]
    (work / "missing.sub").write_text("executable = /bin/sleep\nqueue x from nope.txt\n")
    cli_refuses(["submit", "missing.sub"], "missing.sub, line 2: queue ... from nope.txt: No such file", pool, work)


async def test_a_custom_resource_request_matches_only_slots_that_have_enough(make_pool):
    """request_<name> asks for a machine resource (MACHINE_RESOURCE_<name>); condor_submit adds
    (TARGET.<name> >= Request<name>) to Requirements."""
    from .conftest import PSLOT
    pool = make_pool("NUM_CPUS = 4\nMACHINE_RESOURCE_fpga = 2\n" + PSLOT)
    async with pool.client("condor") as c:
        await wait_slots(c, 1)
        await c.submit("executable = /bin/sleep\narguments = 100000\nrequest_FPGA = 1\nqueue\n", "ok.sub", "alice")
        await c.submit("executable = /bin/sleep\narguments = 100000\nrequest_FPGA = 3\nqueue\n", "no.sub", "alice")
        running = await wait_for(lambda: c.jobs("JobStatus == 2"), timeout_s=60, what="the fpga job running")
        assert [ads.get(j, "ClusterId") for j in running] == [1]
        rejected = await wait_for(lambda: c.jobs("ClusterId == 2 && LastRejMatchReason =!= undefined"),
                                  timeout_s=60, what="the 3-fpga job rejected")
        assert "TARGET.FPGA >= RequestFPGA" in ads.one_line(str(rejected[0].lookup("Requirements")))
        await asyncio.sleep(0)


async def test_what_the_fuzzer_found(make_pool):
    """Regressions from `htcpool bench fuzz`: a projection naming a NUL (classad2 raised
    ValueError: INTERNAL), and a negotiation stream that goes on after its `end` (the
    call reached the client as INTERNAL)."""
    from daemons.pb.htcpool import collector_pb2, schedd_pb2, schedd_pb2_grpc
    pool = make_pool("NUM_CPUS = 1\nSTART = False\n")
    async with pool.client("condor") as c:
        await wait_slots(c, 1)
        await c.submit("executable = /bin/sleep\nqueue\n", "one.sub", "alice")
        jobs = await c.jobs(projection=["r\u00bc", "", "4\x00", "\\", "ProcId"])
        assert [ads.get(j, "ProcId") for j in jobs] == [0]
        stub = collector_pb2_grpc.CollectorStub(c.channels.get(pool.collector_address))
        async for _ in stub.QueryAds(collector_pb2.QueryAdsRequest(my_type="Machine", projection=["a\x00b"]),
                                     timeout=10):
            pass
        schedd = schedd_pb2_grpc.ScheddStub(c.channels.get(pool.daemons["schedd"].address))

        async def messages():
            yield schedd_pb2.NegotiatorMessage(start=schedd_pb2.NegotiateStart(submitter="alice@testhost"))
            yield schedd_pb2.NegotiatorMessage(end=schedd_pb2.NegotiateEnd())
            for _ in range(5):
                yield schedd_pb2.NegotiatorMessage(reject=schedd_pb2.RequestRejected(request_id="x"))
        async for _ in schedd.Negotiate(messages(), timeout=10):
            pass
        await all_answer(pool, c)
    logs_without_tracebacks(pool)


async def test_a_constraint_that_costs_seconds_per_ad_is_stopped_by_its_budget(make_pool):
    """Small text, huge cost: an ad literal whose attributes refer to each other twice over
    costs classad2 a large step budget (0.3 s to over a second, by the machine's speed) on
    every ad a query looks at. COLLECTOR_QUERY_MAX_WORKTIME (HTCondor's knob) and
    SCHEDD_QUERY_MAX_WORKTIME stop it. Sixteen slots and sixteen jobs: the budget of 1 s is
    spent well before the last ad even on a machine several times faster than a loaded one
    (the check runs between ads, so four ads at 0.3 s each would not reach it)."""
    pool = make_pool("NUM_CPUS = 16\nNUM_SLOTS = 16\nSTART = False\nCOLLECTOR_QUERY_MAX_WORKTIME = 1\nSCHEDD_QUERY_MAX_WORKTIME = 1\n")
    costly = "[" + "; ".join(f"a{i} = a{i + 1} + a{i + 1}" for i in range(40)) + "; a40 = 1 ].a0 > 0"
    async with pool.client("condor") as c:
        await wait_slots(c, 16)
        await c.submit("executable = /bin/sleep\nqueue 16\n", "sixteen.sub", "alice")
        stub = collector_pb2_grpc.CollectorStub(c.channels.get(pool.collector_address))
        for call in (c.ads("Any", costly), c.jobs(costly),
                     stub.InvalidateAds(collector_pb2.InvalidateAdsRequest(my_type="Machine", constraint=costly),
                                        timeout=60)):
            with pytest.raises(grpc.aio.AioRpcError) as e:
                await call
            assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e.value.details()
            assert "_QUERY_MAX_WORKTIME" in e.value.details()
        assert len(await c.ads("Machine")) == 16 and len(await c.jobs()) == 16
        await all_answer(pool, c)


async def test_a_significant_attribute_that_is_not_a_name_is_refused(make_pool):
    """Found by a 30-minute fuzz run: a Negotiate stream (as the pool's own identity) whose
    start named a significant attribute with a NUL in it was taken into every job's
    AutoClusterAttrs, and from then on no job ad could be printed: every query and every
    negotiation failed INTERNAL. The schedd refuses such a start and changes nothing."""
    pool = make_pool("NUM_CPUS = 1\nSTART = False\n")
    async with pool.client("condor") as c:
        await c.submit("executable = /bin/sleep\nqueue 2\n", "two.sub", "alice")
        stub = schedd_pb2_grpc.ScheddStub(c.channels.get(pool.daemons["schedd"].address))
        for bad in ("Bad\0Name", "Not A Name", "x" * 300):
            call = stub.Negotiate(timeout=30)
            await call.write(schedd_pb2.NegotiatorMessage(start=schedd_pb2.NegotiateStart(
                submitter="alice@testhost", cycle=1, significant_attrs=["RequestCpus", bad])))
            await call.done_writing()
            with pytest.raises(grpc.aio.AioRpcError) as e:
                while await call.read() is not grpc.aio.EOF:
                    pass
                pytest.fail(f"a start naming {bad!r} was accepted")
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (bad, e.value.details())
            assert "is not a ClassAd attribute name" in e.value.details()
        jobs = await c.jobs()
        assert len(jobs) == 2 and all("\0" not in str(j.get("AutoClusterAttrs", "")) for j in jobs)


async def test_a_bundle_of_negotiation_messages_is_read_as_its_messages_and_may_not_hold_one(make_pool):
    """The negotiator writes what waits for its stream as one Bundle; the schedd reads it as
    the messages one by one (here a start and a send-requests, answered with the queue's
    requests). A bundle inside a bundle is refused, and nothing changes."""
    pool = make_pool("NUM_CPUS = 1\nSTART = False\n")
    async with pool.client("condor") as c:
        await c.submit("executable = /bin/sleep\nqueue 2\n", "two.sub", "alice")
        stub = schedd_pb2_grpc.ScheddStub(c.channels.get(pool.daemons["schedd"].address))
        start = schedd_pb2.NegotiatorMessage(start=schedd_pb2.NegotiateStart(submitter="alice@testhost", cycle=1))
        ask = schedd_pb2.NegotiatorMessage(send_requests=schedd_pb2.SendRequests(max_requests=10))

        def bundle(*msgs) -> schedd_pb2.NegotiatorMessage:
            return schedd_pb2.NegotiatorMessage(bundle=schedd_pb2.Bundle(messages=list(msgs)))

        call = stub.Negotiate(timeout=30)
        await call.write(bundle(start, ask))
        answer = await call.read()
        assert answer.WhichOneof("msg") == "requests"
        assert sum(r.count for r in answer.requests.requests) == 2 and answer.requests.no_more
        await call.write(schedd_pb2.NegotiatorMessage(end=schedd_pb2.NegotiateEnd()))
        await call.done_writing()
        assert await call.read() is grpc.aio.EOF

        call = stub.Negotiate(timeout=30)
        await call.write(bundle(start, bundle(ask)))
        await call.done_writing()
        with pytest.raises(grpc.aio.AioRpcError) as e:
            while await call.read() is not grpc.aio.EOF:
                pass
            pytest.fail("a bundle inside a bundle was accepted")
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "another bundle" in e.value.details()
        assert len(await c.jobs()) == 2
    logs_without_tracebacks(pool)
