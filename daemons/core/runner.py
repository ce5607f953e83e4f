"""Run one daemon in the foreground: what `htcpool daemon ROLE` and a container run.

Reads the configuration (refusing a bad one with a message that names the file and
line or the knob), builds the daemon, starts it, writes its address file once it
serves, and closes it on SIGTERM/SIGINT, on an Admin Shutdown, or when the process
that launched it (HTCPOOL_PARENT_PID) goes away, so no pool outlives its test.
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from daemons.core import config as configmod
from daemons.core import heap
from daemons.core import limits
from daemons.core import log as logmod
from daemons.core.common import SUBSYS, CommonConfig, StateFileError, read_common
from daemons.core.config import ConfigError
from daemons.core.daemon import Daemon
from daemons.core.rpc import BindError
from daemons.core.security.keys import KeyFileError
from daemons.core.security.config import TlsError

ROLES = ("collector", "negotiator", "schedd", "startd", "defrag", "drainboss")


def read_role_config(role: str, param: configmod.Param, *, name: str | None = None, machines: int = 1,
                     host_prefix: str | None = None, options: str = "") -> tuple[CommonConfig, Any]:
    """Every setting one daemon reads, typed and range-checked (ConfigError names the knob).

    The configuration check of `htcpool up` calls this for each role before any process starts.
    """
    common = read_common(param, role, name=name)
    if role == "collector":
        from daemons.collector.daemon import CollectorConfig
        return common, CollectorConfig.from_param(param)
    if role == "negotiator":
        from daemons.negotiator.daemon import NegotiatorConfig
        return common, NegotiatorConfig.from_param(param, common.spool_dir)
    if role == "schedd":
        from daemons.schedd.daemon import ScheddConfig
        return common, ScheddConfig.from_param(param, common.spool_dir)
    if role == "startd":
        from daemons.startd.config import read_startd_config
        if machines < 1:
            raise ConfigError(f"--machines {machines}: a startd emulates at least one machine")
        return common, read_startd_config(param)
    if role == "defrag":
        from daemons.defrag.config import DefragConfig
        return common, DefragConfig.from_param(param, common.spool_dir)
    if role == "drainboss":
        from daemons.drainboss.config import DrainBossConfig, SettingsError, with_options
        cfg = DrainBossConfig.from_param(param, common.spool_dir)
        if options:
            try:
                cfg = with_options(cfg, options)
            except SettingsError as e:
                raise ConfigError(f"drainboss option {e}") from None
        return common, cfg
    raise ConfigError(f"unknown daemon role {role!r}; one of {', '.join(ROLES)}")


def parse_machine_group(text: str) -> tuple[int, str, str]:
    """`--machine-group COUNT:PREFIX:CONFIG` -> (count, prefix, config file)."""
    parts = text.split(":", 2)
    if len(parts) != 3 or not parts[0].isdigit() or int(parts[0]) < 1 or not parts[1] or not parts[2]:
        raise ConfigError(f"--machine-group {text!r}: give COUNT:PREFIX:CONFIG, COUNT machines named PREFIX001, "
                          f"PREFIX002, ... configured by the file CONFIG")
    return int(parts[0]), parts[1], parts[2]


def read_machine_groups(groups: list[str]) -> list[tuple[int, str, Any]]:
    """Each --machine-group's StartdConfig, read from its own file before the daemon's own
    configuration is loaded (htcondor2 holds one configuration per process; what it reads
    is kept in frozen dataclasses, so the daemon's, loaded last, is the one that stays)."""
    from daemons.startd.config import read_startd_config
    out = []
    for text in groups:
        count, prefix, path = parse_machine_group(text)
        out.append((count, prefix, read_startd_config(configmod.load(path))))
    return out


def build_daemon(role: str, param: configmod.Param, *, name: str | None = None, machines: int = 1,
                 host_prefix: str | None = None, seed: int = 0, options: str = "",
                 machine_groups: list[tuple[int, str, Any]] | None = None) -> Daemon:
    common, cfg = read_role_config(role, param, name=name, machines=machines, host_prefix=host_prefix,
                                   options=options)
    if machine_groups and role != "startd":
        raise ConfigError(f"--machine-group: only a startd emulates machines, not the {role}")
    # Bounds on ClassAd text hold for everything this process parses from now on.
    limits.configure(common.classad_limits)
    if role == "collector":
        from daemons.collector.daemon import CollectorDaemon
        return CollectorDaemon(common, cfg)
    if role == "negotiator":
        from daemons.negotiator.daemon import NegotiatorDaemon
        return NegotiatorDaemon(common, cfg)
    if role == "schedd":
        from daemons.schedd.daemon import ScheddDaemon
        return ScheddDaemon(common, cfg)
    if role == "startd":
        from daemons.startd.daemon import StartdDaemon, host_names
        hosts = host_names(common.full_hostname, machines, host_prefix)
        groups = [(host_names(common.full_hostname, n, prefix), group_cfg)
                  for n, prefix, group_cfg in machine_groups or []]
        names = hosts + [h for group_hosts, _ in groups for h in group_hosts]
        if len(set(names)) < len(names):
            raise ConfigError("--machine-group: two groups of machines have the same host names; give each "
                              "its own PREFIX (and --host-prefix for the startd's own machines)")
        return StartdDaemon(common, cfg, hosts, seed=seed, machine_groups=groups)
    if role == "defrag":
        from daemons.defrag.daemon import DefragDaemon
        return DefragDaemon(common, cfg, seed=seed)
    from daemons.drainboss.daemon import DrainBossDaemon
    return DrainBossDaemon(common, cfg, seed=seed)


def write_address_file(path: Path, daemon: Daemon) -> None:
    sec = daemon.common.security
    # Where the pool's key is and whose tokens it accepts, for whoever started the pool
    # (LocalPool mints the invoking user's token with it); never the key itself.
    info = {"role": daemon.role, "name": daemon.name, "address": daemon.address,
            "status_url": daemon.status_url, "pid": os.getpid(),
            "security": {"pool_key_file": str(sec.pool_key_file.resolve()), "trust_domain": sec.trust_domain,
                         "tls": sec.tls is not None}}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(info))
    os.replace(tmp, path)


async def _watch_parent(daemon: Daemon, parent_pid: int) -> None:
    while True:
        await asyncio.sleep(1.0)
        try:
            os.kill(parent_pid, 0)
        except ProcessLookupError:
            daemon.log.warning("the process that started this daemon (pid %d) is gone; shutting down", parent_pid)
            daemon.request_shutdown()
            return
        except PermissionError:
            pass


async def serve(daemon: Daemon, address_file: Path | None) -> int:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, daemon.request_shutdown)
    watcher = None
    parent = os.environ.get("HTCPOOL_PARENT_PID")
    if parent and parent.isdigit():
        watcher = asyncio.create_task(_watch_parent(daemon, int(parent)))
    start = asyncio.create_task(daemon.start())
    stop = asyncio.create_task(daemon.shutdown_requested.wait())
    rc = 0
    try:
        done, _ = await asyncio.wait({start, stop}, return_when=asyncio.FIRST_COMPLETED)
        if start in done:
            start.result()
            # What a daemon holds once started (modules, its configuration, a startd's
            # machines, a restored job queue) lives as long as the process: out of the
            # cyclic collector's reach, a full collection no longer walks it (one of a
            # startd's 1,000 slots paused its loop for 20 ms, in whatever burst of claims
            # it fell).
            heap.settle()
            if address_file is not None:
                write_address_file(address_file, daemon)
            await stop
        else:
            start.cancel()
            try:
                await start
            except (asyncio.CancelledError, Exception):
                pass
        if daemon.lag_stop_reason:
            # HTCPOOL_LAG_POLICY = stop: the run ends, and says why.
            print(f"htcpool daemon {daemon.role}: stopped: the pool cannot keep up with its time scale: "
                  f"{daemon.lag_stop_reason}", file=sys.stderr)
            rc = 3
    except BindError as e:
        # A port in use or an address not on this host: the configuration's fault, one line.
        msg = (f"{daemon.role} cannot start: {e} (see NETWORK_INTERFACE, {daemon.common.subsys}_ARGS, "
               f"{daemon.common.subsys}_STATUS_PORT)")
        daemon.log.error("%s", msg)
        print(f"htcpool daemon {daemon.role}: {msg}", file=sys.stderr)
        rc = 2
    except (KeyFileError, TlsError, StateFileError) as e:
        # A signing key, certificate or state file it cannot use: one line naming the file.
        daemon.log.error("%s cannot start: %s", daemon.role, e)
        print(f"htcpool daemon {daemon.role}: cannot start: {e}", file=sys.stderr)
        rc = 2
    except Exception:
        daemon.log.exception("%s failed", daemon.role)
        rc = 1
    finally:
        if watcher is not None:
            watcher.cancel()
        stop.cancel()
        await daemon.close()
    return rc


def run(role: str, config_path: str | None, *, address_file: str | None = None, machines: int = 1,
        host_prefix: str | None = None, name: str | None = None, seed: int = 0, options: str = "",
        machine_groups: list[str] | None = None) -> int:
    if role not in SUBSYS or role not in ROLES:
        print(f"htcpool daemon: unknown role {role!r}; one of {', '.join(ROLES)}", file=sys.stderr)
        return 2
    try:
        if role == "startd":
            # A startd lives long with a large steady state between bursts of claims and
            # updates: what a burst frees goes back to the system (core/memory.py).
            from daemons.core.memory import fix_mmap_threshold
            fix_mmap_threshold()
        groups = read_machine_groups(machine_groups or [])
        param = configmod.load(config_path)
        daemon = build_daemon(role, param, name=name, machines=machines, host_prefix=host_prefix, seed=seed,
                              options=options, machine_groups=groups)
    except (ConfigError, TlsError) as e:
        print(f"htcpool daemon {role}: {e}", file=sys.stderr)
        return 2
    logmod.setup(role, daemon.common.log_dir, daemon.clock,
                 stderr=os.environ.get("HTCPOOL_LOG_STDERR", "1") != "0")
    slow_ms = os.environ.get("HTCPOOL_SLOW_CALLBACK_MS", "")
    if slow_ms:
        _log_slow_callbacks(daemon.log, float(slow_ms) / 1000.0)
    return asyncio.run(serve(daemon, Path(address_file) if address_file else None))


def _log_slow_callbacks(log, threshold_s: float) -> None:
    """A diagnostic (HTCPOOL_SLOW_CALLBACK_MS): log every event-loop callback that runs
    longer than the threshold, naming it, which is what makes the loop lag. asyncio's own
    debug mode does the same at a cost that changes what is measured; this times each
    callback and nothing else."""
    import time as _time
    from asyncio import events

    run_handle = events.Handle._run

    def timed(handle):
        t0 = _time.perf_counter()
        run_handle(handle)
        took = _time.perf_counter() - t0
        if took > threshold_s:
            cb = handle._callback
            task = getattr(cb, "__self__", None)
            what = task.get_name() if isinstance(task, asyncio.Task) else repr(cb)
            log.warning("slow callback: %s took %.0f ms", what, took * 1000.0)

    events.Handle._run = timed
