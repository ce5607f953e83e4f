"""Faults on a compose pool (compose/docker-compose.yml): its containers, found by their labels.

A daemon is named as on a local pool: `schedd`, `collector`, `negotiator`, or `startd2`
(the startd service's container number 2; `startd` when there is one). Process faults
are Docker's own: kill (SIGKILL by default), stop and start (a graceful stop, as
condor_off / condor_on), restart, pause and unpause (the cgroup freezer: every process
of the container stops, as SIGSTOP). Network faults act in the container's network
namespace with the host's own iptables and tc (`nsenter -t PID -n`), so the image needs
neither and the container no capability; netfaults.py builds the rules. The pool
network's gateway (the host) is spared, so the operator still reaches every container.
"""
from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from typing import Sequence

from daemons.harness.netfaults import NetFaultError

PROJECT_LABEL = "com.docker.compose.project"
SERVICE_LABEL = "com.docker.compose.service"
NUMBER_LABEL = "com.docker.compose.container-number"
# What each process fault asks of Docker.
DOCKER_VERB = {"kill": "kill", "off": "stop", "on": "start", "restart": "restart", "pause": "pause",
               "resume": "unpause"}


class ComposeError(RuntimeError):
    pass


class UnknownDaemon(ComposeError):
    """A daemon name the project has no (single) container for: the user's mistake."""


def _docker(*args: str, timeout: float = 60.0) -> str:
    try:
        r = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise ComposeError("docker is not installed") from None
    if r.returncode != 0:
        raise ComposeError(f"docker {' '.join(args)}: {r.stderr.strip() or 'exit ' + str(r.returncode)}")
    return r.stdout


@dataclass(frozen=True)
class Container:
    id: str
    service: str
    number: int
    state: str            # running, paused, exited, ...

    @property
    def key(self) -> str:
        """The daemon's name as a local pool would give it (startd2)."""
        return f"{self.service}{self.number}" if self.service == "startd" else self.service


def parse_ps(text: str) -> list[Container]:
    """`docker ps -a --format '{{.ID}} {{.Label "...service"}} {{.Label "...container-number"}} {{.State}}'`."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2].isdigit():
            out.append(Container(parts[0], parts[1], int(parts[2]), parts[3]))
    return sorted(out, key=lambda c: (c.service, c.number))


def pick(containers: Sequence[Container], name: str, project: str) -> Container:
    """The container of daemon `name`: a service (when it has one container) or startdN."""
    exact = [c for c in containers if c.key == name]
    if exact:
        return exact[0]
    of_service = [c for c in containers if c.service == name]
    if len(of_service) == 1:
        return of_service[0]
    if of_service:
        raise UnknownDaemon(f"{len(of_service)} {name} containers in project {project}: name one of "
                           f"{', '.join(c.key for c in of_service)}")
    known = ", ".join(c.key for c in containers) or "none"
    raise UnknownDaemon(f"no {name!r} container in compose project {project!r} (containers: {known})")


def containers(project: str) -> list[Container]:
    fmt = f'{{{{.ID}}}} {{{{.Label "{SERVICE_LABEL}"}}}} {{{{.Label "{NUMBER_LABEL}"}}}} {{{{.State}}}}'
    return parse_ps(_docker("ps", "-a", "--filter", f"label={PROJECT_LABEL}={project}", "--format", fmt))


def act(project: str, name: str, what: str, signal: str = "KILL") -> Container:
    """A process fault on daemon `name`'s container; returns the container acted on."""
    c = pick(containers(project), name, project)
    verb = DOCKER_VERB[what]
    args = [verb, "--signal", signal, c.id] if verb == "kill" else [verb, c.id]
    if verb in ("stop", "restart"):
        args = [verb, "-t", "10", c.id]
    _docker(*args, timeout=120.0)
    return c


def addresses(container_id: str) -> list[str]:
    """The container's addresses on its networks."""
    text = _docker("inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", container_id)
    return text.split()


def gateways(container_id: str) -> list[str]:
    text = _docker("inspect", "-f", "{{range .NetworkSettings.Networks}}{{.Gateway}} {{end}}", container_id)
    return text.split()


@dataclass(frozen=True)
class ContainerNamespace:
    """A container's network namespace, entered through its main process (netfaults' runner)."""
    pid: int
    inner: str = "eth0"

    @classmethod
    def of(cls, container_id: str) -> "ContainerNamespace":
        pid = _docker("inspect", "-f", "{{.State.Pid}}", container_id).strip()
        if not pid.isdigit() or pid == "0":
            raise ComposeError(f"container {container_id} is not running")
        return cls(int(pid))

    def run(self, argv: Sequence[str]) -> str:
        r = subprocess.run(["nsenter", "-t", str(self.pid), "-n", *argv], capture_output=True, text=True,
                           timeout=30)
        if r.returncode != 0:
            raise NetFaultError(f"{' '.join(argv)} in the network of pid {self.pid}: "
                                f"{r.stderr.strip() or 'exit ' + str(r.returncode)}")
        return r.stdout

    def outer(self) -> str:
        """The host's end of the container's veth."""
        m = re.search(rf"{self.inner}@if(\d+)", self.run(["ip", "-o", "link", "show", self.inner]))
        if m is None:
            raise NetFaultError(f"the container of pid {self.pid} has no {self.inner} with a peer")
        r = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, timeout=30)
        for line in r.stdout.splitlines():
            index, _, rest = line.partition(": ")
            if index.strip() == m.group(1):
                return rest.split(":", 1)[0].split("@", 1)[0]
        raise NetFaultError(f"no host link {m.group(1)} (the peer of pid {self.pid}'s {self.inner})")
