"""Bad input gets a clear error naming the file, line or attribute, and loses nothing."""
from __future__ import annotations

import grpc
import pytest

from daemons.core import ads
from daemons.pb.htcpool import collector_pb2, collector_pb2_grpc, common_pb2, schedd_pb2

from .conftest import STATIC, htcpool, wait_slots

BAD_SUBMITS = {
    "badexpr.sub": ("executable = /bin/sleep\nrequirements = (TARGET.Cpus > \nqueue\n",
                    "badexpr.sub, line 2: requirements = '(TARGET.Cpus >' is not a valid ClassAd expression"),
    "unknown.sub": ("executable = /bin/sleep\nrequest_cpu = 4\nqueue\n",
                    "unknown.sub, line 2: 'request_cpu' is not a submit command (did you mean 'request_cpus'?)"),
    "negative.sub": ("executable = /bin/sleep\n\nrequest_memory = -5\nqueue\n",
                     "negative.sub, line 3: request_memory = '-5': a request must not be negative"),
    "noqueue.sub": ("executable = /bin/sleep\n", "noqueue.sub: no 'queue' statement"),
}


async def test_bad_submit_files_are_refused_and_the_queue_is_intact(make_pool, tmp_path):
    pool = make_pool(STATIC + "NUM_CPUS = 1\nSTART = False\n")
    async with pool.client() as c:
        await wait_slots(c, 1)
        await c.submit("executable = /bin/sleep\narguments = 5\nqueue 3\n", "good.sub", "alice")
        for name, (text, message) in BAD_SUBMITS.items():
            path = tmp_path / name
            path.write_text(text)
            # The CLI refuses before contacting the schedd...
            r = htcpool("submit", str(path), "--state-dir", str(pool.state_dir))
            assert r.returncode == 2, name
            assert message in r.stderr, (name, r.stderr)
            # ...and the schedd refuses the same text on its own, naming the same line.
            with pytest.raises(grpc.aio.AioRpcError) as e:
                await c.submit(text, name, "mallory")
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert message in e.value.details()
        jobs = await c.jobs()
        assert sorted(ads.get(j, "ProcId") for j in jobs) == [0, 1, 2]
        assert {ads.get(j, "ClusterId") for j in jobs} == {1}
        # The refused submissions did not consume cluster ids.
        cluster, _ = await c.submit("executable = /bin/sleep\nqueue\n", "next.sub", "alice")
        assert cluster == 2


async def test_bad_constraints_and_edits_are_refused(make_pool):
    pool = make_pool(STATIC + "NUM_CPUS = 1\nSTART = False\n")
    async with pool.client() as c:
        await wait_slots(c, 1)
        await c.submit("executable = /bin/sleep\nqueue\n", "one.sub", "alice")
    r = htcpool("q", "--constraint", "JobStatus ==", "--state-dir", str(pool.state_dir))
    assert r.returncode == 2 and "constraint: cannot parse 'JobStatus =='" in r.stderr
    r = htcpool("status", "--constraint", "Cpus >", "--state-dir", str(pool.state_dir))
    assert r.returncode == 2 and "constraint: cannot parse 'Cpus >'" in r.stderr
    r = htcpool("qedit", "1.0", "JobStatus", "2", "--state-dir", str(pool.state_dir))
    assert r.returncode == 2 and "attribute JobStatus cannot be edited" in r.stderr
    r = htcpool("qedit", "1.0", "Foo", "(1 +", "--state-dir", str(pool.state_dir))
    assert r.returncode == 2 and "Foo: cannot parse '(1 +'" in r.stderr
    q = htcpool("q", "-af", "ProcId", "JobStatus", "--state-dir", str(pool.state_dir))
    assert q.stdout.splitlines() == ["0 1"]


async def test_collector_refuses_garbage_updates_whole(make_pool):
    pool = make_pool(STATIC + "NUM_CPUS = 1\n")
    # Advertising is for daemons (DAEMON level): act as one, so the refusals are the ads'.
    async with pool.client("condor") as c:
        await wait_slots(c, 1)
        stub = collector_pb2_grpc.CollectorStub(c.channels.get(pool.collector_address))
        good = common_pb2.ClassAd(text='[ MyType = "Generic"; Name = "good" ]')
        for bad, message in ((common_pb2.ClassAd(text="[ Name = ; ]"), "ad 2 of 2: cannot parse as a ClassAd"),
                             (common_pb2.ClassAd(text="not an ad"), "ad 2 of 2: a ClassAd must be written"),
                             (common_pb2.ClassAd(text='[ MyType = "Generic" ]'), "ad 2 of 2: Name is missing")):
            with pytest.raises(grpc.aio.AioRpcError) as e:
                await stub.UpdateAds(collector_pb2.UpdateAdsRequest(ads=[good, bad]), timeout=5)
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert message in e.value.details()
        assert await c.ads("Generic") == []
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await stub.InvalidateAds(collector_pb2.InvalidateAdsRequest(my_type="Machine", constraint="Name =="),
                                     timeout=5)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert len(await c.ads("Machine")) == 1
        # The schedd refuses an action without a target rather than acting on every job.
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await c.act(schedd_pb2.REMOVE)
        assert "name jobs" in e.value.details()


def test_bad_configuration_stops_a_daemon_with_the_file_and_line(tmp_path):
    cases = {
        "syntax.conf": ("NUM_CPUS = 4\nthis line is wrong\n", "syntax.conf, line 2: cannot parse 'this line is wrong'"),
        "type.conf": ("COLLECTOR_HOST = 127.0.0.1:1\n\nNEGOTIATOR_INTERVAL = soon\n",
                      "type.conf, line 3: NEGOTIATOR_INTERVAL = 'soon' is not an integer"),
        "expr.conf": ("COLLECTOR_HOST = 127.0.0.1:1\nSTART = (Cpus > \n",
                      "expr.conf, line 2: START = '(Cpus >' is not a valid ClassAd expression"),
        "slots.conf": ("COLLECTOR_HOST = 127.0.0.1:1\nSLOT_TYPE_1 = gpus=2\nNUM_SLOTS_TYPE_1 = 1\n",
                       "unknown resource 'gpus'"),
    }
    # Bytes that are not UTF-8, in the file or in one it includes (htcondor2 reads them; the
    # daemon failed with a traceback when it expanded the knob).
    (tmp_path / "latin1.inc").write_bytes(b"# included\nMEMORY = 4096\nNUM_CPUS = \xff\xfe\n")
    cases["bytes.conf"] = ("COLLECTOR_HOST = 127.0.0.1:1\ninclude : latin1.inc\n",
                           "latin1.inc, line 3: not UTF-8 text ('NUM_CPUS = \ufffd\ufffd')")
    for name, (text, message) in cases.items():
        path = tmp_path / name
        path.write_text(text)
        role = "negotiator" if name == "type.conf" else "startd"
        r = htcpool("daemon", role, "--config", str(path))
        assert r.returncode == 2, (name, r.stderr)
        assert message in r.stderr, (name, r.stderr)
    up = htcpool("up", "--config", str(tmp_path / "syntax.conf"), "--state-dir", str(tmp_path / "st"))
    assert up.returncode == 2
    assert "syntax.conf, line 2" in up.stderr
    assert not (tmp_path / "st" / "pool.json").exists()
    missing = htcpool("daemon", "collector", "--config", str(tmp_path / "nope.conf"))
    assert missing.returncode == 2 and "nope.conf: no such file" in missing.stderr


def test_a_pool_address_that_does_not_resolve_is_bad_input(tmp_path):
    # ".invalid" never resolves (RFC 6761): an unknown host is the user's error (2), with one
    # line naming it; a pool that is down is not (1).
    r = htcpool("--pool", "nosuchhost.invalid:9618", "q")
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "unknown host" in lines[0] and "nosuchhost.invalid" in lines[0], r.stderr
    down = htcpool("--pool", "127.0.0.1:1", "q")
    assert down.returncode == 1 and "did not answer" in down.stderr, down.stderr
    # A port out of range is the user's error too (gRPC took 99999 modulo 65536 and dialled
    # another port).
    for address, why in (("127.0.0.1:99999", "port 99999 is not between 1 and 65535"),
                         ("127.0.0.1:0", "port 0 is not between 1 and 65535"), (":9618", "no host"),
                         ("127.0.0.1:x", "port 'x' is not a number")):
        r = htcpool("--pool", address, "q")
        assert r.returncode == 2 and r.stderr.strip().splitlines() == [f"htcpool q: pool address {address!r}: {why}"], \
            (address, r.stderr)
