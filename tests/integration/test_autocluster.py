"""Significant attributes and autoclustering across real negotiator, schedd and startd."""
from __future__ import annotations

import aiohttp

from daemons.cli.client import PoolClient, wait_for
from daemons.pb.htcpool import schedd_pb2

from .conftest import STATIC, PSLOT, attr, htcpool, wait_jobs, wait_slots


async def _autoclusters(c: PoolClient) -> dict[int, list[str]]:
    return {attr(a, "AutoClusterId"): attr(a, "JobIds").split(",") for a in await c.jobs(autoclusters=True)}


async def _schedd_status(pool) -> dict:
    async with aiohttp.ClientSession() as http:
        async with http.get(pool.daemons["schedd"].info["status_url"] + "/status") as r:
            return await r.json()


async def test_rank_on_a_custom_attribute_makes_five_autoclusters(make_pool):
    pool = make_pool(STATIC + "NUM_CPUS = 1\nSTART = False\n")
    async with pool.client() as c:
        await wait_slots(c, 1)
        await c.submit("executable = /bin/sleep\narguments = 10\nrank = TARGET.Memory * MY.Foo\n"
                       "+Foo = $(Process)\nqueue 5\n", "foo.sub", "alice")
        await c.submit("executable = /bin/sleep\narguments = 10\nqueue 4\n", "plain.sub", "alice")
        groups = await _autoclusters(c)
        assert sorted(groups.values()) == [["1.0"], ["1.1"], ["1.2"], ["1.3"], ["1.4"],
                                           ["2.0", "2.1", "2.2", "2.3"]]
        job = (await c.jobs("ClusterId == 1 && ProcId == 0"))[0]
        # The negotiator's list, then Requirements, Rank, ConcurrencyLimits, then what the
        # significant expressions reference (one level), alphabetically.
        listed = attr(job, "AutoClusterAttrs").split(",")
        fixed = listed.index("Requirements")
        assert listed[fixed:fixed + 3] == ["Requirements", "Rank", "ConcurrencyLimits"]
        expansion = listed[fixed + 3:]
        assert expansion == sorted(expansion, key=str.lower) and "Foo" in expansion
        assert {"RequestCpus", "RequestDisk", "RequestMemory"} <= set(listed)


async def test_editing_a_significant_attribute_moves_the_job(make_pool):
    pool = make_pool(STATIC + "NUM_CPUS = 1\nSTART = False\n")
    async with pool.client() as c:
        await wait_slots(c, 1)
        await c.submit("executable = /bin/sleep\narguments = 10\nrank = MY.Foo\n+Foo = 1\nqueue 3\n", "f.sub", "bob")
        before = await _autoclusters(c)
        assert sorted(before.values()) == [["1.0", "1.1", "1.2"]]
        await c.act(schedd_pb2.EDIT, ["1.1"], edits={"Foo": "2"})
        after = await _autoclusters(c)
        assert sorted(after.values()) == [["1.0", "1.2"], ["1.1"]]
        # Editing an attribute that is not significant changes nothing. (Ids themselves
        # may be renumbered meanwhile: a cycle that grows the significant list does that.)
        await c.act(schedd_pb2.EDIT, ["1.2"], edits={"Unrelated": "42"})
        assert sorted((await _autoclusters(c)).values()) == [["1.0", "1.2"], ["1.1"]]


async def test_a_rejected_autocluster_is_skipped_and_all_its_jobs_carry_the_reason(make_pool):
    pool = make_pool("NUM_CPUS = 2\n" + PSLOT)
    async with pool.client() as c:
        await wait_slots(c, 1)
        await c.submit("executable = /bin/sleep\narguments = 10\nrequest_cpus = 8\nqueue 6\n", "big.sub", "carol")

        async def rejected_cycle():
            return [r for r in await c.cycles() if r.rejections]
        cycles = await wait_for(rejected_cycle, timeout_s=30, what="a cycle with a rejection")
        # One request ad for the six jobs, considered once and rejected once.
        assert (cycles[0].requests, cycles[0].considered, cycles[0].rejections, cycles[0].matches) == (1, 1, 1, 0)
        jobs = await c.jobs()
        assert {attr(j, "LastRejMatchReason") for j in jobs} == {"no match found"}
        assert len({attr(j, "LastRejMatchTime") for j in jobs}) == 1
        log = (pool.state_dir / "log" / "NegotiatorLog").read_text()
        assert "autocluster" in log and "(request count 1 of 6)" in log
        assert "(request count 2 of 6)" not in log
        analysis = htcpool("q", "--analyze", "1.5", "--state-dir", str(pool.state_dir))
        assert analysis.returncode == 0, analysis.stderr
        assert "Reason for last match failure: no match found" in analysis.stdout
        assert "not yet considered" not in analysis.stdout
        assert "1 slots are rejected by your job's requirements" in analysis.stdout


async def test_start_expression_makes_a_job_attribute_significant(make_pool):
    # Three slots for two physics jobs: the chemistry jobs are considered, and START refuses them.
    pool = make_pool(STATIC + 'NUM_CPUS = 3\nSTART = TARGET.Department =?= "physics"\nNEGOTIATOR_INTERVAL = 1000000\n')
    async with pool.client() as c:
        await wait_slots(c, 3)
        await c.submit('executable = /bin/sleep\narguments = 1000\n+Department = "physics"\nqueue 2\n', "p.sub", "dan")
        await c.submit('executable = /bin/sleep\narguments = 1000\n+Department = "chemistry"\nqueue 2\n', "c.sub", "dan")
        running = await wait_jobs(c, "JobStatus == 2", 2)
        assert {attr(j, "Department") for j in running} == {"physics"}
        status = await _schedd_status(pool)
        assert "Department" in status["autoclustering"]["significant_attributes"]
        groups = await _autoclusters(c)
        assert sorted(sorted(v) for v in groups.values()) == [["1.0", "1.1"], ["2.0", "2.1"]]
        assert status["autoclustering"]["id_cost_us_mean"] > 0
        assert status["autoclustering"]["active_autoclusters"] >= 1
        async with aiohttp.ClientSession() as http:
            async with http.get(pool.daemons["schedd"].info["status_url"] + "/metrics") as r:
                metrics = await r.text()
        lines = {line.split(" ")[0]: float(line.split(" ")[1]) for line in metrics.splitlines()
                 if line and not line.startswith("#")}
        assert lines["htcpool_schedd_autoclusters"] >= 1
        assert lines["htcpool_schedd_autocluster_id_microseconds_mean"] > 0
        histogram = [v for k, v in lines.items() if k.startswith("htcpool_schedd_autocluster_id_cost_jobs{")]
        assert len(histogram) == 11 and sum(histogram) >= 2  # the two physics jobs were negotiated
        async def chemistry_rejected():
            idle = await c.jobs("JobStatus == 1")
            return {attr(j, "LastRejMatchReason") for j in idle} == {"no match found"}
        await c.reschedule()
        await wait_for(chemistry_rejected, timeout_s=30, what="the chemistry jobs' shared rejection")


async def test_switching_autoclustering_off_gives_every_job_its_own_cluster(make_pool):
    pool = make_pool(STATIC + "NUM_CPUS = 1\nSTART = False\nSCHEDD_AUTOCLUSTERING = False\n")
    async with pool.client() as c:
        await wait_slots(c, 1)
        await c.submit("executable = /bin/sleep\narguments = 10\nqueue 4\n", "four.sub", "erin")
        assert len(await _autoclusters(c)) == 4

        async def rejections():
            return [r for r in await c.cycles() if r.rejections]
        cycle = (await wait_for(rejections, timeout_s=30, what="a cycle with rejections"))[0]
        assert (cycle.requests, cycle.considered, cycle.rejections) == (4, 4, 4)


def test_bad_autocluster_knobs_stop_the_schedd(tmp_path):
    for text, message in (("SIGNIFICANT_ATTRIBUTES = Owner, 9lives\n",
                           "SIGNIFICANT_ATTRIBUTES names '9lives', which are not ClassAd attribute names"),
                          ("ADD_SIGNIFICANT_ATTRIBUTES = a-b\n", "ADD_SIGNIFICANT_ATTRIBUTES names 'a-b'"),
                          ("SCHEDD_ROUND_ATTR_ImageSize = lots\n",
                           "SCHEDD_ROUND_ATTR_ImageSize = 'lots': 'lots' is neither a percentage"),
                          ("SCHEDD_ROUND_ATTR_DiskUsage = 250%\n", "the percentage must be above 0 and at most 100")):
        cfg = tmp_path / "ac.conf"
        cfg.write_text("COLLECTOR_HOST = 127.0.0.1:1\n" + text)
        r = htcpool("daemon", "schedd", "--config", str(cfg))
        assert r.returncode == 2, r.stderr
        assert message in r.stderr, r.stderr
        assert "ac.conf, line 2" in r.stderr


async def test_a_partly_matched_request_counts_every_job_considered(make_pool):
    """HTCondor's negotiator counts every job it is asked about (num_jobs_considered): a
    request for three jobs of one autocluster on a pool of two slots is three considered,
    two matched and one rejected, and the rejection's reason reaches the third job."""
    pool = make_pool(STATIC + "NUM_CPUS = 2\nNEGOTIATOR_CONSIDER_PREEMPTION = False\n")
    async with pool.client() as c:
        await wait_slots(c, 2)
        await c.submit("executable = /bin/sleep\narguments = 100000\nqueue 3\n", "three.sub", "pat")

        async def matching_cycle():
            return next((r for r in await c.cycles() if r.matches), None)
        cycle = await wait_for(matching_cycle, timeout_s=30, what="the cycle that matches")
        assert (cycle.requests, cycle.considered, cycle.matches, cycle.rejections) == (1, 3, 2, 1)
        idle = await wait_jobs(c, "JobStatus == 1 && LastRejMatchReason =!= undefined", 1)
        assert attr(idle[0], "LastRejMatchReason") == "no match found"
