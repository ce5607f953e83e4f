"""`htcpool fault ...` and the process faults (kill, off, on, restart, pause, resume) on a pool
that `htcpool up` left running, as a user runs them."""
from __future__ import annotations

import json
import os

from daemons.cli.procs import is_daemon_process

from .conftest import FAST, PSLOT, htcpool, wait_until


def _state(state: str) -> dict:
    with open(os.path.join(state, "pool.json")) as f:
        return json.load(f)


def _process_state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def test_fault_commands_and_process_faults_on_a_detached_pool(tmp_path):
    cfg = tmp_path / "pool.conf"
    cfg.write_text(FAST + "NUM_CPUS = 2\n" + PSLOT)
    state = str(tmp_path / "state")
    up = htcpool("up", "--config", str(cfg), "--state-dir", state, "--startds", "2")
    assert up.returncode == 0, up.stderr
    try:
        def run(*args: str):
            return htcpool(*args, "--state-dir", state)

        # RPC faults: the example, by role and by pool.json key, then listed.
        r = run("fault", "inject", "schedd", "--rpc", "Negotiate", "--delay", "2s", "--jitter", "500ms",
                "--percent", "30", "--for", "600")
        assert r.returncode == 0, r.stderr
        assert "f1: delay 2 s +- 0.5 s on 30% of server calls Negotiate" in r.stdout
        r = run("fault", "inject", "startd2", "--from", "schedd", "--abort", "UNAVAILABLE", "--id", "no-schedd")
        assert r.returncode == 0, r.stderr
        r = run("fault", "inject", "negotiator", "--clock-offset", "10m")
        assert r.returncode == 0 and "clock +600 s" in r.stdout, r.stdout + r.stderr
        r = run("fault", "partition", "startd1", "--from", "schedd", "--for", "5m")
        assert r.returncode == 0, r.stderr
        listed = json.loads(run("fault", "list", "--json").stdout)
        by_role = {}
        for d in listed:
            by_role.setdefault(d["role"], []).extend(s["fault"]["id"] for s in d.get("faults", []))
        assert by_role["schedd"] == ["f1"] and by_role["negotiator"] == ["f1"]
        assert sorted(by_role["startd"]) == ["no-schedd", "part-schedd-in", "part-schedd-out"]

        # Bad input: exit 2, one line naming what is wrong, nothing changed.
        for bad, says in ((("fault", "inject", "schedd", "--delay", "soon"), "--delay 'soon' is not a duration"),
                          (("fault", "inject", "schedd", "--abort", "NOPE"), "abort code 'NOPE'"),
                          (("fault", "inject", "schedd"), "nothing to do"),
                          (("fault", "inject", "nosuchd", "--drop"), "no daemon 'nosuchd'"),
                          (("fault", "clear", "--id", "f99"), "no daemon has a fault f99"),
                          (("kill", "startd"), "2 daemons are startds: name one of startd1, startd2"),
                          (("pause", "nosuchd"), "no daemon 'nosuchd'"),
                          (("kill", "schedd", "--signal", "NOPE"), "unknown signal 'NOPE'")):
            r = run(*bad)
            assert r.returncode == 2, (bad, r.stdout, r.stderr)
            assert says in r.stderr and len(r.stderr.strip().splitlines()) == 1, (bad, r.stderr)
        assert sorted(s["fault"]["id"] for d in json.loads(run("fault", "list", "startd2", "--json").stdout)
                      for s in d.get("faults", [])) == ["no-schedd"]

        r = run("fault", "clear", "--id", "no-schedd")
        assert r.returncode == 0 and "no faults (cleared)" in r.stdout, r.stdout
        r = run("fault", "clear")
        assert r.returncode == 0
        assert all(not d.get("faults") for d in json.loads(run("fault", "list", "--json").stdout))
        assert "clock" not in run("fault", "list", "negotiator").stdout

        # Process faults.
        pid = _state(state)["daemons"]["schedd"]["pid"]
        r = run("kill", "schedd")
        assert r.returncode == 0 and "SIGKILL" in r.stdout
        assert not is_daemon_process(pid, "schedd")
        assert _state(state)["daemons"]["schedd"]["state"] == "off"
        r = run("on", "schedd")
        assert r.returncode == 0 and "started" in r.stdout, r.stderr
        new_pid = _state(state)["daemons"]["schedd"]["pid"]
        assert new_pid != pid and is_daemon_process(new_pid, "schedd")

        startd2 = _state(state)["daemons"]["startd2"]["pid"]
        assert run("pause", "startd2").returncode == 0
        assert _process_state(startd2) == "T"
        assert run("resume", "startd2").returncode == 0
        assert _process_state(startd2) in ("S", "R")

        collector = _state(state)["collector"]
        r = run("restart", "collector")
        assert r.returncode == 0, r.stderr
        assert _state(state)["collector"] == collector and collector in r.stdout   # same address

        neg = _state(state)["daemons"]["negotiator"]["pid"]
        assert run("off", "negotiator").returncode == 0
        wait_until(lambda: not is_daemon_process(neg, "negotiator"), timeout_s=20, what="the negotiator to stop")
        assert run("off", "negotiator").stdout.strip() == "negotiator: already off"
        assert run("on", "negotiator").returncode == 0
        r = run("kill", "startd1", "--signal", "TERM", "--restart")
        assert r.returncode == 0 and "SIGTERM" in r.stdout and "started" in r.stdout, r.stdout + r.stderr
        # A paused daemon still stops on 'down'.
        assert run("pause", "startd2").returncode == 0
    finally:
        down = htcpool("down", "--state-dir", state)
    assert down.returncode == 0, down.stderr
    assert "startd2" in down.stdout
    for pid in _state_after_down(tmp_path):
        wait_until(lambda: not any(is_daemon_process(pid, r) for r in ("startd", "schedd", "negotiator",
                                                                        "collector")),
                   timeout_s=20, what=f"daemon pid {pid} to exit")


def _state_after_down(tmp_path) -> list[int]:
    # pool.json is gone after 'down'; the daemons' address files still name their pids.
    pids = []
    for f in (tmp_path / "state" / "run").glob("*.address"):
        pids.append(json.loads(f.read_text())["pid"])
    return pids


def test_a_killed_process_another_parent_has_not_reaped_counts_as_gone():
    """Regression: `htcpool kill` on a pool whose daemons are another process's children (a
    test's, a shell's) waited 40 s per kill: their zombies still answer kill(pid, 0)."""
    import signal
    import subprocess
    import time

    from daemons.cli.procs import wait_gone as _wait_gone
    # sh starts a child and becomes `sleep` (exec), which never reaps it.
    parent = subprocess.Popen(["sh", "-c", "sleep 60 & echo $!; exec sleep 60"], stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        # Kill the child only once sh has become sleep: sh itself might still reap it.
        wait_until(lambda: open(f"/proc/{parent.pid}/comm").read().strip() == "sleep", timeout_s=10,
                   what="sh to exec sleep")
        os.kill(child, signal.SIGKILL)
        wait_until(lambda: _process_state(child) == "Z", timeout_s=10, what="the child a zombie")
        assert _wait_gone([child], time.monotonic() + 30) == []
        assert _wait_gone([parent.pid], time.monotonic() + 0.2) == [parent.pid]   # still running
    finally:
        parent.kill()
        parent.wait()
