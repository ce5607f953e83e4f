"""The htcpool command against real pools, as a user runs it."""
from __future__ import annotations

import json
import os

from .conftest import FAST, PSLOT, htcpool, wait_until


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def test_up_status_submit_q_act_down(tmp_path):
    cfg = tmp_path / "pool.conf"
    cfg.write_text(FAST + "NUM_CPUS = 4\n" + PSLOT)
    state = str(tmp_path / "state")
    up = htcpool("up", "--config", str(cfg), "--state-dir", state, "--machines", "2")
    assert up.returncode == 0, up.stderr
    assert "collector" in up.stdout and "startd1" in up.stdout
    pids = [d["pid"] for d in json.loads((tmp_path / "state" / "pool.json").read_text())["daemons"].values()]
    try:
        status = htcpool("status", "--state-dir", state, "--json")
        assert status.returncode == 0, status.stderr
        assert sorted(s["Name"] for s in json.loads(status.stdout)) == ["slot1@testhost-001", "slot1@testhost-002"]

        sub = tmp_path / "job.sub"
        sub.write_text("executable = /bin/sleep\narguments = 100000\nrequest_cpus = 2\nqueue 5\n")
        submitted = htcpool("submit", str(sub), "--state-dir", state)
        assert submitted.returncode == 0, submitted.stderr
        assert submitted.stdout.strip() == "5 job(s) submitted to cluster 1."

        def jobs(*extra: str) -> list[dict]:
            return json.loads(htcpool("q", "--state-dir", state, "--json", *extra).stdout)

        wait_until(lambda: sum(j["JobStatus"] == 2 for j in jobs()) == 4, timeout_s=30, what="four running jobs")
        af = htcpool("q", "--state-dir", state, "-af", "ProcId", "JobStatus", "RequestCpus")
        assert af.stdout.splitlines() == ["0 2 2", "1 2 2", "2 2 2", "3 2 2", "4 1 2"]
        table = htcpool("q", "--state-dir", state)
        assert "5 jobs; 0 completed, 0 removed, 1 idle, 4 running, 0 held, 0 suspended" in table.stdout

        held = htcpool("hold", "1.4", "--reason", "testing", "--state-dir", state)
        assert held.returncode == 0 and "1.4" in held.stdout
        assert [j["HoldReason"] for j in jobs("1.4")] == ["testing"]
        edited = htcpool("qedit", "1.4", "Duration", "60", "--state-dir", state)
        assert edited.returncode == 0, edited.stderr
        assert jobs("1.4")[0]["Duration"] == 60
        assert htcpool("release", "1.4", "--state-dir", state).returncode == 0
        assert jobs("1.4")[0]["JobStatus"] == 1

        removed = htcpool("rm", "1.0", "--state-dir", state)
        assert removed.returncode == 0
        history = json.loads(htcpool("q", "--history", "--state-dir", state, "--json").stdout)
        # Removed: job 1.0 only (1.4 may already have run on the freed slot, 60 pool s = 0.6 s).
        assert [(h["ProcId"], h["JobStatus"]) for h in history if h["JobStatus"] == 3] == [(0, 3)]
        # The removed job's slot was released; the edited job (Duration 60) takes it and finishes.
        wait_until(lambda: any(h["ProcId"] == 4 and h["JobStatus"] == 4
                               for h in json.loads(htcpool("q", "--history", "--state-dir", state, "--json").stdout)),
                   timeout_s=30, what="job 1.4 to run on the freed slot and complete")
    finally:
        down = htcpool("down", "--state-dir", state)
    assert down.returncode == 0, down.stderr
    assert [p for p in pids if _alive(p)] == []


def _free_ports(n: int) -> list[int]:
    import socket
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def test_up_honours_collector_host_and_per_daemon_ports(tmp_path):
    collector, schedd, status = _free_ports(3)
    cfg = tmp_path / "ports.conf"
    cfg.write_text(FAST + f"COLLECTOR_HOST = 127.0.0.1:{collector}\nSCHEDD_ARGS = -p {schedd}\n"
                   f"NEGOTIATOR_STATUS_PORT = {status}\nNUM_CPUS = 1\n")
    state = str(tmp_path / "state")
    up = htcpool("up", "--config", str(cfg), "--state-dir", state)
    try:
        assert up.returncode == 0, up.stderr
        daemons = json.loads((tmp_path / "state" / "pool.json").read_text())["daemons"]
        assert daemons["collector"]["address"] == f"127.0.0.1:{collector}"
        assert daemons["schedd"]["address"] == f"127.0.0.1:{schedd}"
        assert daemons["negotiator"]["status_url"] == f"http://127.0.0.1:{status}"
        # Clients find the pool through the configured collector port alone.
        r = htcpool("status", "--pool", f"127.0.0.1:{collector}", "--state-dir", state, "--schedd", "-af", "MyAddress")
        assert r.stdout.strip() == f"<127.0.0.1:{schedd}>"
    finally:
        assert htcpool("down", "--state-dir", state).returncode == 0


def test_up_with_the_draining_daemons_and_their_status(tmp_path):
    cfg = tmp_path / "drain.conf"
    cfg.write_text(FAST + "NUM_CPUS = 8\n" + PSLOT + "DEFRAG_INTERVAL = 60\nDRAINBOSS_INTERVAL = 60\n"
                   "DRAINBOSS_SETPOINT = 2\n")
    state = str(tmp_path / "state")
    up = htcpool("up", "--config", str(cfg), "--state-dir", state, "--with", "defrag", "--with", "drainboss")
    try:
        assert up.returncode == 0, up.stderr
        daemons = json.loads((tmp_path / "state" / "pool.json").read_text())["daemons"]
        assert {"defrag", "drainboss"} <= set(daemons)
        pids = [d["pid"] for d in daemons.values()]

        def polled(kind: str, attr: str):
            r = htcpool("status", "--state-dir", state, f"--{kind}", "--json")
            found = json.loads(r.stdout) if r.returncode == 0 else []
            return found[0] if found and found[0].get(attr, 0) >= 1 else None
        defrag = wait_until(lambda: polled("defrag", "DefragPolls"), timeout_s=30, what="a defrag poll")
        assert defrag["MyType"] == "Defrag" and defrag["MachinesDraining"] == 0
        boss = wait_until(lambda: polled("drainboss", "DrainBossRuns"), timeout_s=30, what="a DrainBoss run")
        assert boss["Setpoint"] == 2
        table = htcpool("status", "--state-dir", state, "--drainboss")
        assert table.returncode == 0, table.stderr
        assert "  Setpoint             2" in table.stdout and "ControllerOutput" in table.stdout
        table = htcpool("status", "--state-dir", state, "--defrag")
        assert "  MachinesDraining     0" in table.stdout and "AvgDrainingBadput" in table.stdout
    finally:
        down = htcpool("down", "--state-dir", state)
    assert down.returncode == 0, down.stderr
    assert [p for p in pids if _alive(p)] == []
