"""`htcpool kill|off|on|restart|pause|resume DAEMON`: process faults on a pool `htcpool up` started,
or (`--compose PROJECT`) on a compose pool's containers (docker kill|stop|start|restart|pause|unpause).

As HTCondor's condor_off / condor_on / condor_restart, plus the faults an experiment
needs: kill (SIGKILL by default, a crash: no ads withdrawn, nothing flushed) and
pause / resume (SIGSTOP / SIGCONT: the daemon holds its connections and answers
nothing). A daemon is named by its key in pool.json (collector, negotiator, schedd,
startd1, startd2, ...) or by its role when the pool has one of it.
"""
from __future__ import annotations

import argparse
import signal

from daemons.cli.base import EXIT_OK, EXIT_USAGE, CliError, state_dir


def _compose(args: argparse.Namespace, what: str) -> int:
    """The same process faults on a compose pool's containers, through Docker."""
    from daemons.harness.compose_faults import ComposeError, UnknownDaemon, act, containers, pick
    done = {"kill": "killed", "off": "stopped", "on": "started", "restart": "restarted", "pause": "paused",
            "resume": "resumed"}[what]
    again = what == "kill" and getattr(args, "restart", False)
    sig = _signal(getattr(args, "signal", "KILL")).name[3:]
    try:
        # Every name is found before any container is touched: a bad one changes nothing.
        found = containers(args.compose)
        chosen = [pick(found, name, args.compose) for name in args.daemons]
        for c in chosen:
            act(args.compose, c.key, what, sig)
            if again:
                act(args.compose, c.key, "on")
            print(f"{c.key}: container {c.id} {done}" + (" and started again" if again else ""))
    except ComposeError as e:
        raise CliError(str(e), EXIT_USAGE if isinstance(e, UnknownDaemon) else 1) from None
    return EXIT_OK


def _pool(args: argparse.Namespace):
    from daemons.cli.pool import LocalPool, PoolError
    if getattr(args, "pool", None):
        raise CliError("process faults act on a pool this host started with 'htcpool up' (its pool.json); "
                       "--pool names only a collector", EXIT_USAGE)
    try:
        return LocalPool.attach(state_dir(args))
    except PoolError as e:
        raise CliError(str(e)) from None


def _keys(pool, targets: list[str]) -> list[str]:
    from daemons.cli.pool import PoolError
    try:
        return [pool.key_of(t) for t in targets]
    except PoolError as e:
        raise CliError(str(e), EXIT_USAGE) from None


def _signal(text: str) -> signal.Signals:
    name = text.upper()
    name = name if name.startswith("SIG") else f"SIG{name}"
    try:
        return signal.Signals[name] if not text.isdigit() else signal.Signals(int(text))
    except (KeyError, ValueError):
        raise CliError(f"unknown signal {text!r} (e.g. KILL, TERM, 9)", EXIT_USAGE) from None


def _start(pool, key: str) -> str:
    from daemons.cli.pool import PoolError
    try:
        d = pool.restart(key)
    except PoolError as e:
        raise CliError(f"{key}: {e}") from None
    return f"{key}: started, pid {d.pid}, {d.address}"


def cmd_kill(args: argparse.Namespace) -> int:
    if args.compose:
        return _compose(args, "kill")
    sig = _signal(args.signal)
    pool = _pool(args)
    for key in _keys(pool, args.daemons):
        d = pool.daemons[key]
        if not d.alive():
            print(f"{key}: not running")
        else:
            pid = d.pid
            pool.kill(key, sig)
            print(f"{key}: {sig.name} sent to pid {pid}; it is gone")
        if args.restart:
            print(_start(pool, key))
    return EXIT_OK


def cmd_off(args: argparse.Namespace) -> int:
    if args.compose:
        return _compose(args, "off")
    pool = _pool(args)
    for key in _keys(pool, args.daemons):
        if not pool.daemons[key].alive():
            print(f"{key}: already off")
            continue
        pool.kill(key, signal.SIGTERM)
        print(f"{key}: stopped gracefully (its ads withdrawn)")
    return EXIT_OK


def cmd_on(args: argparse.Namespace) -> int:
    if args.compose:
        return _compose(args, "on")
    pool = _pool(args)
    for key in _keys(pool, args.daemons):
        if pool.daemons[key].alive():
            print(f"{key}: already running, pid {pool.daemons[key].pid}")
            continue
        print(_start(pool, key))
    return EXIT_OK


def cmd_restart(args: argparse.Namespace) -> int:
    if args.compose:
        return _compose(args, "restart")
    pool = _pool(args)
    for key in _keys(pool, args.daemons):
        if pool.daemons[key].alive():
            pool.kill(key, signal.SIGTERM)
        print(_start(pool, key))
    return EXIT_OK


def cmd_pause(args: argparse.Namespace) -> int:
    from daemons.cli.pool import PoolError
    if args.compose:
        return _compose(args, args.command)
    pool = _pool(args)
    for key in _keys(pool, args.daemons):
        try:
            (pool.pause if args.command == "pause" else pool.resume)(key)
        except PoolError as e:
            raise CliError(str(e)) from None
        print(f"{key}: {'paused (SIGSTOP)' if args.command == 'pause' else 'resumed (SIGCONT)'}, "
              f"pid {pool.daemons[key].pid}")
    return EXIT_OK


def register(sub) -> None:
    def add(name: str, fn, help_text: str):
        s = sub.add_parser(name, help=help_text)
        s.add_argument("daemons", nargs="+", metavar="DAEMON",
                       help="a key in pool.json (schedd, startd2, ...) or a role the pool has one of")
        s.add_argument("--compose", metavar="PROJECT",
                       help="a compose pool: act on the daemon's container through Docker")
        s.set_defaults(fn=fn)
        return s

    s = add("kill", cmd_kill, "kill a daemon (SIGKILL: a crash), like kill -9")
    s.add_argument("--signal", default="KILL", help="the signal (default KILL)")
    s.add_argument("--restart", action="store_true", help="start it again at once")
    add("off", cmd_off, "stop a daemon gracefully, like condor_off")
    add("on", cmd_on, "start a daemon that is off, like condor_on")
    add("restart", cmd_restart, "stop a daemon gracefully and start it again, like condor_restart")
    add("pause", cmd_pause, "freeze a daemon (SIGSTOP)")
    add("resume", cmd_pause, "unfreeze a paused daemon (SIGCONT)")
