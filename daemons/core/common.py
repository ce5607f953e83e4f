"""Settings every daemon reads: where the collector is, ports, time, directories."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from daemons.core.config import ConfigError, Param
from daemons.core.lagpolicy import POLICIES, LagPolicy
from daemons.core.limits import DEPTH_CEILING, ClassAdLimits
from daemons.core.network import decide_addressing
from daemons.core.security.config import SecurityConfig, read_security

DEFAULT_COLLECTOR_PORT = 9618


class StateFileError(Exception):
    """A daemon's own state on disk that it cannot use (a damaged job queue log): a
    one-line error naming the file and line, and the daemon does not start."""


# HTCondor subsystem names, as used in knob names (SCHEDD_ARGS, STARTD_NAME, ...).
SUBSYS = {
    "collector": "COLLECTOR",
    "negotiator": "NEGOTIATOR",
    "schedd": "SCHEDD",
    "startd": "STARTD",
    "defrag": "DEFRAG",
    "drainboss": "DRAINBOSS",
}

# Pool time must stay a date the clock and the logs can print (before the year 9999)
# for years of running: these bound the epoch and the scale.
MAX_TIME_SCALE = 100_000.0
MAX_POOL_EPOCH = 4_102_444_800.0   # 2100-01-01

# How often each daemon re-advertises its own ad, with HTCondor's knob and default.
UPDATE_INTERVAL_KNOB = {
    "collector": ("COLLECTOR_UPDATE_INTERVAL", 900),
    "negotiator": ("NEGOTIATOR_UPDATE_INTERVAL", 300),
    "schedd": ("SCHEDD_INTERVAL", 300),
    "startd": ("UPDATE_INTERVAL", 300),
    "defrag": ("DEFRAG_UPDATE_INTERVAL", 300),
    "drainboss": ("DRAINBOSS_UPDATE_INTERVAL", 300),
}


@dataclass(frozen=True)
class CommonConfig:
    role: str
    collector_host: str | None  # "host:port"; None only for a collector that binds port 0
    bind_host: str              # what the servers bind (an address, or 0.0.0.0)
    grpc_port: int              # 0 = any free port
    status_port: int            # 0 = any free port
    time_scale: float
    pool_epoch: float | None    # None: learn from the collector's PoolEpoch
    local_dir: Path
    log_dir: Path
    spool_dir: Path
    full_hostname: str
    uid_domain: str
    update_interval_s: float
    name: str | None = None     # the daemon's Name; None: HTCondor's default for the role
    advertise_host: str = ""    # the address peers reach us at; "" = bind_host
    # Built in code (tests' in-process daemons) a daemon is open, and says so loudly;
    # read from a configuration it has htcpool's defaults (authentication REQUIRED).
    security: SecurityConfig = SecurityConfig()
    # What the pool does when a daemon cannot keep up with TIME_SCALE (the collector decides).
    lag_policy: LagPolicy = LagPolicy()
    classad_limits: ClassAdLimits = ClassAdLimits()
    fault_plan: str = ""        # <SUBSYS>_FAULT_PLAN or FAULT_PLAN: faults in force from the start
    fault_seed: int = 0         # FAULT_SEED: the seed of the faults' random choices

    @property
    def public_host(self) -> str:
        return self.advertise_host or self.bind_host

    @property
    def subsys(self) -> str:
        return SUBSYS[self.role]


def split_host_port(value: str, default_port: int = DEFAULT_COLLECTOR_PORT) -> tuple[str, int]:
    """'host', 'host:port', '<host:port>' or '<host:port?...>' -> (host, port)."""
    v = value.strip().strip("<>").split("?", 1)[0]
    if ":" in v:
        host, _, port = v.rpartition(":")
        if not port.isdigit():
            raise ValueError(f"port {port!r} is not a number")
        return host, int(port)
    return v, default_port


_PORT_ARG = re.compile(r"(?:^|\s)-p(?:ort)?\s+(\d+)(?:\s|$)")


def _port_from_args(param: Param, subsys: str) -> int | None:
    """HTCondor sets a daemon's fixed command port with <SUBSYS>_ARGS = -p <port>."""
    args = param.str(f"{subsys}_ARGS")
    if not args:
        return None
    m = _PORT_ARG.search(args)
    if not m:
        return None
    port = int(m.group(1)[:6])
    if port > 65535:
        knob = f"{subsys}_ARGS"
        raise ConfigError(f"{param.where(knob)}: {knob} = {args!r}: {m.group(1)[:12]} is not a port number "
                          "(0 to 65535)")
    return port


def _port(param: Param, knob: str) -> int:
    port = param.int(knob, 0, minimum=0) or 0
    if port > 65535:
        raise ConfigError(f"{param.where(knob)}: {knob} = {port} is not a port number (0 to 65535)")
    return port


def read_common(param: Param, role: str, *, name: str | None = None) -> CommonConfig:
    if role not in SUBSYS:
        raise ConfigError(f"unknown daemon role {role!r}; one of {', '.join(SUBSYS)}")
    subsys = SUBSYS[role]
    collector_host = param.str("COLLECTOR_HOST")
    if collector_host:
        try:
            host, port = split_host_port(collector_host, param.int("COLLECTOR_PORT", DEFAULT_COLLECTOR_PORT))
            if not host or not 0 <= port <= 65535 or (port == 0 and role != "collector"):
                raise ValueError(f"{port} is not a port number (1 to 65535)" if host else "no host name")
        except ValueError as e:
            raise ConfigError(f"{param.where('COLLECTOR_HOST')}: COLLECTOR_HOST = {collector_host!r}: {e}") from None
        collector_host = f"{host}:{port}"
    grpc_port = _port_from_args(param, subsys)
    if grpc_port is None:
        grpc_port = 0
        if role == "collector" and collector_host:
            grpc_port = int(collector_host.rpartition(":")[2])
    if role != "collector" and not collector_host:
        raise ConfigError(f"{param.where('COLLECTOR_HOST')}: COLLECTOR_HOST is not set (nor CONDOR_HOST); "
                          f"the {role} needs to know where the collector is: set it in the configuration "
                          "or in the environment as _CONDOR_COLLECTOR_HOST=host:port (or _CONDOR_CONDOR_HOST=host)")
    local_dir = Path(param.str("LOCAL_DIR") or ".htcpool")
    knob, default_interval = UPDATE_INTERVAL_KNOB[role]
    plan_knob = f"{subsys}_FAULT_PLAN" if param.is_set(f"{subsys}_FAULT_PLAN") else "FAULT_PLAN"
    fault_plan = param.str(plan_knob) or ""
    if fault_plan:
        from daemons.core.faults import FaultError, parse_plan
        try:
            parse_plan(fault_plan, 0.0)
        except FaultError as e:
            raise ConfigError(f"{param.where(plan_knob)}: {plan_knob}: {e}") from None
    epoch = (param.float("POOL_EPOCH", minimum=0.0, maximum=MAX_POOL_EPOCH)
             if param.is_set("POOL_EPOCH") else None)
    hostname = param.str("FULL_HOSTNAME") or "localhost"
    uid_domain = param.str("UID_DOMAIN") or hostname
    interface = param.str("NETWORK_INTERFACE", "*") or "*"
    forwarding = param.str("TCP_FORWARDING_HOST")
    try:
        addressing = decide_addressing(interface, bool(param.bool("BIND_ALL_INTERFACES", True)), forwarding)
    except ValueError as e:
        knob = "TCP_FORWARDING_HOST" if forwarding and "resolve" in str(e) else "NETWORK_INTERFACE"
        value = forwarding if knob == "TCP_FORWARDING_HOST" else interface
        raise ConfigError(f"{param.where(knob)}: {knob} = {value!r}: {e}") from None
    return CommonConfig(
        role=role,
        collector_host=collector_host,
        bind_host=addressing.bind_host,
        advertise_host=addressing.advertise_host,
        grpc_port=grpc_port,
        status_port=_port(param, f"{subsys}_STATUS_PORT"),
        time_scale=param.float("TIME_SCALE", 1.0, positive=True, maximum=MAX_TIME_SCALE) or 1.0,
        pool_epoch=epoch,
        local_dir=local_dir,
        log_dir=Path(param.str("LOG") or local_dir / "log"),
        spool_dir=Path(param.str("SPOOL") or local_dir / "spool"),
        full_hostname=hostname,
        uid_domain=uid_domain,
        update_interval_s=float(param.int(knob, default_interval, minimum=1) or default_interval),
        classad_limits=read_classad_limits(param),
        # COLLECTOR_NAME names the pool, not the collector daemon.
        name=name or (param.str(f"{subsys}_NAME") if role != "collector" else None),
        security=read_security(param, subsys, uid_domain),
        fault_plan=fault_plan,
        fault_seed=param.int("FAULT_SEED", 0) or 0,
        lag_policy=read_lag_policy(param),
    )


def read_classad_limits(param: Param) -> ClassAdLimits:
    """CLASSAD_MAX_EXPR_LENGTH, CLASSAD_MAX_EXPR_DEPTH, CLASSAD_MAX_AD_SIZE (core/limits.py)."""
    d = ClassAdLimits()
    return ClassAdLimits(
        max_expr_length=param.int("CLASSAD_MAX_EXPR_LENGTH", d.max_expr_length, minimum=1024,
                                  maximum=64 * 1024 * 1024) or d.max_expr_length,
        max_depth=param.int("CLASSAD_MAX_EXPR_DEPTH", d.max_depth, minimum=10, maximum=DEPTH_CEILING) or d.max_depth,
        max_ad_size=param.int("CLASSAD_MAX_AD_SIZE", d.max_ad_size, minimum=1024,
                              maximum=64 * 1024 * 1024) or d.max_ad_size,
    )


def read_lag_policy(param: Param) -> LagPolicy:
    default = LagPolicy()
    policy = (param.str("HTCPOOL_LAG_POLICY", default.policy) or default.policy).lower()
    if policy not in POLICIES:
        raise ConfigError(f"{param.where('HTCPOOL_LAG_POLICY')}: HTCPOOL_LAG_POLICY = {policy!r} is not one of "
                          f"{', '.join(POLICIES)}")
    return LagPolicy(policy=policy,
                     max_lag_s=param.float("HTCPOOL_MAX_LAG", default.max_lag_s, positive=True) or default.max_lag_s,
                     min_time_scale=param.float("HTCPOOL_MIN_TIME_SCALE", default.min_time_scale,
                                                positive=True) or default.min_time_scale,
                     grace_s=param.float("HTCPOOL_LAG_GRACE", default.grace_s, minimum=0.0, maximum=3600.0))
