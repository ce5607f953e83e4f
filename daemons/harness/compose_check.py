"""`scripts/compose-check`: the compose pool, end to end, with a startd container killed.

Builds the image (scripts/build-image), brings compose/docker-compose.yml up with 3
startd containers, submits 200 jobs from the schedd container, `docker kill`s one
startd container while they run (its jobs return to idle when their claims lapse:
compose/pool.conf keeps ALIVE_INTERVAL short), waits until every job has completed,
restarts the schedd container and checks its queue and history are intact, then tears
everything down. Security is on as the compose file sets it up: the `secrets` service
makes the pool key and the containers' token in a volume, the commands run in the schedd
container carry that token, and from the host the check mints a token in the pool and
queries the collector through its published port with it, and without it (refused).
The last line printed is one JSON object; the exit code is 1 if any job was lost or
completed twice, the queue changed, or a call without a token was not refused; 2 for a
usage or set-up error.

With --swarm the same file is deployed with `docker stack deploy` on a one-node swarm
(`swarm_stack` says what the stack's schema needs changed), and the same checks run.
Everything happens in a project of its own (unique name, free host ports, a free
subnet), so a user's own compose pool is left alone; every wait has a deadline.
"""
from __future__ import annotations

import argparse
import ipaddress
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from daemons.core.security.discovery import write_token_file

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "compose" / "docker-compose.yml"
JOBS = 200
STARTDS = 3
MACHINES = 4            # per startd container: 3 x 4 machines x 8 cores = 96 cores
JOB_SECONDS = 600       # pool seconds: 10 s of wall time at TIME_SCALE 60
TIME_SCALE = 60
VOLUMES = ("schedd-spool", "pool-secrets")    # the compose file's named volumes
HOST_USER = "compose-check"                   # the identity of the host's token


class CheckError(RuntimeError):
    pass


def say(msg: str) -> None:
    print(f"compose-check: {msg}", file=sys.stderr, flush=True)


# ---- the swarm variant of the compose file (pure) -----------------------------------------
def swarm_stack(text: str, config_dir: Path) -> str:
    """compose/docker-compose.yml as `docker stack deploy` accepts it.

    The stack's schema (Compose file format 3) differs in two places only: depends_on
    must be a list (a swarm starts services in any order anyway; the daemons retry the
    collector with backoff) and there are no profiles (services behind one are left
    out). Relative bind mounts are made absolute, since a stack file may live elsewhere.
    """
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    in_services = False
    block: list[str] = []

    def flush() -> None:
        if block and not any(re.match(r"^    profiles:", b) for b in block):
            out.extend(block)
        block.clear()

    while i < len(lines):
        line = lines[i]
        if re.match(r"^\S", line):           # a top-level key
            flush()
            in_services = line.startswith("services:")
            out.append(line)
            i += 1
            continue
        if in_services and re.match(r"^  [A-Za-z0-9_.-]+:\s*$", line):
            flush()
        target = block if in_services else out
        m = re.match(r"^(\s+)depends_on:\s*$", line)
        if m:
            indent = len(m.group(1))
            names = []
            i += 1
            while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent):
                sub = lines[i]
                if len(sub) - len(sub.lstrip()) == indent + 2 and sub.strip().endswith(":"):
                    names.append(sub.strip()[:-1])
                elif len(sub) - len(sub.lstrip()) == indent + 2 and sub.strip().startswith("- "):
                    names.append(sub.strip()[2:])
                i += 1
            target.append(f"{' ' * indent}depends_on: [{', '.join(names)}]")
            continue
        target.append(line.replace("- ./", f"- {config_dir}/"))
        i += 1
    flush()
    return "\n".join(out) + "\n"


# ---- what ran, from the schedd's queue and history (pure) -------------------------------------
@dataclass
class Outcome:
    jobs: int
    completed: int
    lost: int
    duplicated: int


def outcome(submitted: list[str], history_rows: list[str], queue_rows: list[str]) -> Outcome:
    """`history_rows`/`queue_rows`: "ClusterId ProcId JobStatus" lines (condor_history -af)."""
    done = Counter()
    for row in history_rows:
        parts = row.split()
        if len(parts) >= 3 and parts[2] == "4":
            done[f"{parts[0]}.{parts[1]}"] += 1
    wanted = set(submitted)
    completed = sum(1 for j in wanted if done[j] >= 1)
    return Outcome(jobs=len(wanted), completed=completed, lost=len(wanted) - completed,
                   duplicated=sum(1 for j in wanted if done[j] > 1))


# ---- docker ---------------------------------------------------------------------------------
def run(argv: list[str], *, env: dict | None = None, input: str | None = None, timeout: float = 300,
        check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(argv, env=env, input=input, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise CheckError(f"{' '.join(argv[:4])}... failed (exit {r.returncode}): "
                         f"{(r.stderr or r.stdout).strip()[-800:]}")
    return r


def compose_command() -> list[str]:
    """`docker compose` (v2) where it works, else `docker-compose` (1.29)."""
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    raise CheckError("neither `docker compose` nor `docker-compose` is installed")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def free_subnet() -> ipaddress.IPv4Network:
    """A /24 in 10.201.0.0/16 that no route of this host (and so no docker network) uses."""
    routes = subprocess.run(["ip", "-4", "route"], capture_output=True, text=True).stdout
    used = []
    for line in routes.splitlines():
        try:
            used.append(ipaddress.IPv4Network(line.split()[0], strict=False))
        except (ValueError, IndexError):
            continue
    start = os.getpid() % 256
    for k in range(256):
        net = ipaddress.IPv4Network(f"10.201.{(start + k) % 256}.0/24")
        if not any(net.overlaps(u) for u in used):
            return net
    raise CheckError("no free /24 in 10.201.0.0/16")


@dataclass
class Pool:
    project: str
    swarm: bool
    env: dict[str, str]
    compose: list[str] = field(default_factory=list)
    stack_file: Path | None = None
    made_swarm: bool = False

    def _labels(self, service: str) -> list[str]:
        if self.swarm:
            return ["--filter", f"label=com.docker.swarm.service.name={self.project}_{service}"]
        return ["--filter", f"label=com.docker.compose.project={self.project}",
                "--filter", f"label=com.docker.compose.service={service}"]

    def containers(self, service: str) -> list[str]:
        return run(["docker", "ps", "-q", *self._labels(service)]).stdout.split()

    def up(self) -> None:
        if self.swarm:
            state = run(["docker", "info", "--format", "{{.Swarm.LocalNodeState}}"]).stdout.strip()
            if state != "active":
                run(["docker", "swarm", "init", "--advertise-addr", "127.0.0.1"])
                self.made_swarm = True
            run(["docker", "stack", "deploy", "-c", str(self.stack_file), self.project], env=self.env)
        else:
            run([*self.compose, "-f", str(COMPOSE_FILE), "-p", self.project, "up", "-d",
                 "--scale", f"startd={STARTDS}"], env=self.env, timeout=600)

    def down(self) -> None:
        if self.swarm:
            run(["docker", "stack", "rm", self.project], check=False)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and run(
                    ["docker", "ps", "-aq", "--filter", f"label=com.docker.stack.namespace={self.project}"],
                    check=False).stdout.split():
                time.sleep(0.5)
            for volume in VOLUMES:
                run(["docker", "volume", "rm", f"{self.project}_{volume}"], check=False)
            if self.made_swarm:
                run(["docker", "swarm", "leave", "--force"], check=False)
                run(["docker", "network", "rm", "docker_gwbridge"], check=False)
            if self.stack_file is not None:
                self.stack_file.unlink(missing_ok=True)
        else:
            run([*self.compose, "-f", str(COMPOSE_FILE), "-p", self.project, "down", "-v",
                 "--remove-orphans", "-t", "10"], env=self.env, check=False, timeout=300)

    def schedd(self, *args: str, input: str | None = None, check: bool = True,
               timeout: float = 60) -> subprocess.CompletedProcess:
        """`htcpool ARGS` inside the schedd container."""
        found = self.containers("schedd")
        if not found:
            raise CheckError("no schedd container is running")
        return run(["docker", "exec", "-i", found[0], "htcpool", *args], input=input, check=check,
                   timeout=timeout)


def host_cli(pool: Pool, token_dir: Path, *args: str) -> subprocess.CompletedProcess:
    """`htcpool --pool 127.0.0.1:<published port> ARGS` on the host, with the tokens in
    `token_dir` only (HTCondor's SEC_TOKEN_DIRECTORY), as a user outside the pool runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("_CONDOR_")}
    env["_CONDOR_SEC_TOKEN_DIRECTORY"] = str(token_dir)
    return run([sys.executable, "-m", "daemons.cli.main", "--pool", f"127.0.0.1:{pool.env['COLLECTOR_PORT']}",
                *args], env=env, check=False, timeout=60)


def check_from_host(pool: Pool, slots: int) -> dict:
    """The pool from the host through the published port: with a token minted in the pool
    (`htcpool token create` in the schedd container, which has the key), every slot; with
    no token, a refusal."""
    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="htcpool-check-tokens-") as d:
        tokens, empty = Path(d) / "tokens.d", Path(d) / "empty"
        empty.mkdir(mode=0o700)
        made = pool.schedd("token", "create", "--identity", HOST_USER)
        write_token_file(tokens, "pool", made.stdout.strip().splitlines()[-1])

        def listed():
            r = host_cli(pool, tokens, "status", "--constraint", "PartitionableSlot", "-af", "Name")
            return len(rows(r)) if r.returncode == 0 and len(rows(r)) >= slots else 0
        out["host_cli_slots"] = wait("the slots through the published port, with a token", listed, 60)
        r = host_cli(pool, empty, "status", "-af", "Name")
        out["host_refused_without_token"] = r.returncode == 2 and "AUTHENTICATE" in r.stderr
        if not out["host_refused_without_token"]:
            say(f"a query without a token was not refused: exit {r.returncode}, {r.stderr.strip()[-300:]!r}")
    return out


def wait(what: str, check, timeout_s: float, interval_s: float = 1.0):
    deadline = time.monotonic() + timeout_s
    last = ""
    while True:
        try:
            result = check()
            if result:
                return result
        except (CheckError, subprocess.TimeoutExpired) as e:
            last = f" (last: {e})"
        if time.monotonic() >= deadline:
            raise CheckError(f"timed out after {timeout_s:.0f} s waiting for {what}{last}")
        time.sleep(interval_s)


def rows(r: subprocess.CompletedProcess) -> list[str]:
    return [line for line in r.stdout.splitlines() if line.strip()]


# ---- the check ------------------------------------------------------------------------------
def check(args: argparse.Namespace) -> dict:
    t0 = time.monotonic()
    result: dict = {"mode": "swarm" if args.swarm else "compose"}
    if args.build:
        b = subprocess.run([str(ROOT / "scripts" / "build-image"), "--json"], capture_output=True, text=True)
        sys.stderr.write(b.stderr)
        if b.returncode != 0:
            raise CheckError("scripts/build-image failed")
        built = json.loads(b.stdout.strip().splitlines()[-1])
        result["image_build_s"] = built["total_s"]
        result["image_base"] = built["base"]
    else:
        result["image_build_s"] = 0.0
    subnet = free_subnet()
    project = f"htcpcheck{os.getpid()}"
    env = dict(os.environ, POOL_EPOCH=f"{time.time():.3f}", TIME_SCALE=str(TIME_SCALE),
               STARTD_MACHINES=str(MACHINES), COLLECTOR_PORT=str(free_port()),
               STATUS_PORT_COLLECTOR=str(free_port()), STATUS_PORT_NEGOTIATOR=str(free_port()),
               STATUS_PORT_SCHEDD=str(free_port()), POOL_SUBNET=str(subnet),
               POOL_INTERFACE=str(subnet.network_address).rsplit(".", 1)[0] + ".*")
    pool = Pool(project, args.swarm, env)
    if args.swarm:
        fd, name = tempfile.mkstemp(prefix=f"{project}-", suffix=".yml")
        with os.fdopen(fd, "w") as f:
            f.write(swarm_stack(COMPOSE_FILE.read_text(), COMPOSE_FILE.parent))
        pool.stack_file = Path(name)
    else:
        pool.compose = compose_command()
        result["compose"] = " ".join(pool.compose)
    try:
        say(f"bringing up {project} ({result['mode']}, {STARTDS} startd containers x {MACHINES} machines)")
        t_up = time.monotonic()
        pool.up()
        slots = STARTDS * MACHINES

        def all_slots():
            return len(rows(pool.schedd("status", "--constraint", "PartitionableSlot", "-af", "Name",
                                        check=False))) >= slots
        wait(f"{slots} partitionable slots advertised", all_slots, 240)
        result["up_s"] = round(time.monotonic() - t_up, 1)
        result["services"] = len([s for s in ("collector", "negotiator", "schedd", "startd")
                                  if pool.containers(s)])
        startds = pool.containers("startd")
        result["startd_containers"] = len(startds)
        result["slots"] = slots
        say(f"pool up in {result['up_s']} s: {result['services']} services, {len(startds)} startd containers")
        result.update(check_from_host(pool, slots))
        say(f"from the host: {result['host_cli_slots']} slots with a token; without one "
            f"{'refused' if result['host_refused_without_token'] else 'NOT REFUSED'}")

        sub = (f"universe = vanilla\nexecutable = /bin/sleep\narguments = {JOB_SECONDS}\n"
               f"request_cpus = 1\nrequest_memory = 128\nqueue {JOBS}\n")
        r = pool.schedd("submit", "-", input=sub)
        m = re.search(r"cluster (\d+)", r.stdout)
        if not m:
            raise CheckError(f"cannot read the cluster id from {r.stdout!r}")
        cluster = int(m.group(1))
        submitted = [f"{cluster}.{p}" for p in range(JOBS)]
        # The jobs belong to the identity of the containers' token, whatever the file says.
        result["job_owner"] = " ".join(sorted(set(rows(pool.schedd("q", "-af", "Owner", check=False)))))
        say(f"submitted {JOBS} jobs as cluster {cluster}, owned by {result['job_owner']}")

        def running():
            n = len([x for x in rows(pool.schedd("q", "-af", "JobStatus", check=False)) if x.strip() == "2"])
            return n if n >= STARTDS * MACHINES * 2 else 0
        wait("jobs running on every startd", running, 120)
        victim = startds[0]
        host = run(["docker", "inspect", "--format", "{{.Config.Hostname}}", victim]).stdout.strip()
        on_victim = len([x for x in rows(pool.schedd("q", "-af", "RemoteHost", check=False)) if host in x])
        run(["docker", "kill", victim])
        result["killed_container"] = victim[:12]
        result["killed_running_jobs"] = on_victim
        say(f"killed startd container {victim[:12]} with {on_victim} running job(s)")

        def finished():
            hist = rows(pool.schedd("q", "--history", "-af", "ClusterId", "ProcId", "JobStatus", timeout=120))
            o = outcome(submitted, hist, [])
            return o if o.completed >= JOBS else None
        try:
            o = wait(f"{JOBS} jobs completed", finished, args.timeout, interval_s=2.0)
        except CheckError as e:
            say(str(e))
            hist = rows(pool.schedd("q", "--history", "-af", "ClusterId", "ProcId", "JobStatus", check=False))
            o = outcome(submitted, hist, [])
        result.update(jobs=o.jobs, completed=o.completed, lost=o.lost, duplicated=o.duplicated)
        say(f"{o.completed} of {o.jobs} completed, {o.duplicated} completed twice")

        # The durable queue across a restart of the schedd container: held jobs stay, history stays.
        pool.schedd("submit", "-", input="executable = /bin/sleep\narguments = 60\nhold = true\nqueue 5\n")
        before_q = sorted(rows(pool.schedd("q", "-af", "ClusterId", "ProcId", "JobStatus")))
        before_h = sorted(rows(pool.schedd("q", "--history", "-af", "ClusterId", "ProcId", "JobStatus")))
        t_r = time.monotonic()
        old = pool.containers("schedd")[0]
        run(["docker", "restart", "-t", "10", old])

        def back():
            r = pool.schedd("q", "-af", "ClusterId", "ProcId", "JobStatus", check=False)
            return r.returncode == 0 and rows(r)
        wait("the schedd back after its restart", back, 120)
        result["schedd_restart_s"] = round(time.monotonic() - t_r, 1)
        after_q = sorted(rows(pool.schedd("q", "-af", "ClusterId", "ProcId", "JobStatus")))
        after_h = sorted(rows(pool.schedd("q", "--history", "-af", "ClusterId", "ProcId", "JobStatus")))
        result["queue_intact"] = before_q == after_q and before_h == after_h and len(before_q) == 5
        say(f"schedd restarted in {result['schedd_restart_s']} s; queue "
            f"{'intact' if result['queue_intact'] else 'CHANGED'} ({len(after_q)} jobs, {len(after_h)} in history)")
    finally:
        say(f"tearing down {project}")
        pool.down()
    result["wall_s"] = round(time.monotonic() - t0, 1)
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="compose-check", description=__doc__.splitlines()[0])
    p.add_argument("--json", action="store_true", help="end with one JSON object on the last line")
    p.add_argument("--swarm", action="store_true", help="deploy with docker stack deploy on a one-node swarm")
    p.add_argument("--no-build", dest="build", action="store_false", help="use the htcpool image as it is")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for every job to complete")
    args = p.parse_args(argv)
    try:
        if subprocess.run(["docker", "version"], capture_output=True).returncode != 0:
            raise CheckError("no Docker engine answers (scripts/docker-engine start)")
        result = check(args)
    except CheckError as e:
        say(str(e))
        if args.json:
            print(json.dumps({"error": str(e)}))
        return 2
    ok = (result.get("lost", 1) == 0 and result.get("duplicated", 1) == 0 and result.get("queue_intact", False)
          and result.get("completed") == JOBS and result.get("host_refused_without_token", False))
    result["ok"] = ok
    if args.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k:>20}: {v}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
