"""A local pool of daemon processes: used by `htcpool up`, the demo, benchmarks and tests.

Each daemon is a fresh interpreter (never a fork of a process that loaded gRPC),
binds port 0 unless the configuration fixes a port, and reports its address in a
file under the state directory. The collector starts first; the others learn its
address through _CONDOR_COLLECTOR_HOST and share one POOL_EPOCH, so all their
pool clocks agree. A restarted collector binds its old port again, so the others
find it where they left it.

Process faults act on one daemon at a time: kill (any signal, SIGKILL by default),
pause (SIGSTOP) and resume (SIGCONT), a graceful stop (SIGTERM, as condor_off), and
start again with the same command line and environment. pool.json records each
daemon's command line, environment and state, so `htcpool kill|off|on|restart|pause|
resume` can do the same to a pool that `htcpool up` left running (`LocalPool.attach`).

Security as `htcpool up` sets it up: the collector creates the pool signing key
(`passwords.d/POOL` under the state directory unless the configuration says otherwise)
and each daemon mints its own token from it; once the collector serves, the invoking
user's token is written to `tokens.d/<user>` in the state directory, where the command
finds it. `client(user)` gives a client acting as any user (a token minted for it), and
`tls=True` makes a pool CA and one certificate and turns TLS on for every port.
"""
from __future__ import annotations

import getpass
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from daemons.cli.procs import is_daemon_process, peak_listeners, peak_rss_mb, stop_in_order, wait_gone
from daemons.core.common import SUBSYS
from daemons.core.config import check_config_file

STATE_FILE = "pool.json"
TOKENS_DIR = "tokens.d"
TLS_DIR = "tls"
# The environment a daemon needs to be started again exactly as before.
_POOL_ENV = ("_CONDOR_", "HTCPOOL_", "PYTHON")
class PoolError(RuntimeError):
    pass


@dataclass
class DaemonProc:
    key: str                  # "collector", "negotiator", "schedd", "startd1", ...
    role: str
    args: list[str]
    env: dict[str, str]
    address_file: Path
    output: Path
    extra_args: list[str] = field(default_factory=list)
    proc: subprocess.Popen | None = None
    info: dict = field(default_factory=dict)
    state: str = "running"    # running | paused | off (stopped or killed)

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc is not None else int(self.info.get("pid", 0))

    @property
    def address(self) -> str:
        return str(self.info.get("address", ""))

    def alive(self) -> bool:
        if self.proc is not None:
            return self.proc.poll() is None
        # A daemon of a pool we attached to (not our child): alive if its process is still ours.
        return self.pid > 0 and is_daemon_process(self.pid, self.role)


@dataclass(frozen=True)
class StartdSpec:
    """One startd process of a heterogeneous pool: its own configuration and machines, and
    machines of other configurations it emulates too (`also`, each with its host prefix)."""
    config_file: Path
    machines: int = 1
    host_prefix: str | None = None
    also: tuple["StartdSpec", ...] = ()


class LocalPool:
    def __init__(self, state_dir: str | Path, config_file: str | Path | None = None, *,
                 machines: int = 1, startds: int = 1, host_prefix: str | None = None,
                 env: dict[str, str] | None = None, tie_to_parent: bool = True,
                 roles: tuple[str, ...] = ("collector", "negotiator", "schedd", "startd"),
                 startd_specs: list[StartdSpec] | None = None,
                 daemon_args: dict[str, list[str]] | None = None, tls: bool | str = False,
                 launch_prefix: Callable[[str], list[str]] | None = None,
                 daemon_env: dict[str, dict[str, str]] | None = None, check_roles: bool = False) -> None:
        self.state_dir = Path(state_dir).resolve()
        self.config_file = Path(config_file).resolve() if config_file else None
        self.machines = machines
        self.startd_specs = list(startd_specs or [])
        self.startds = len(self.startd_specs) or startds
        self.host_prefix = host_prefix
        self.extra_env = dict(env or {})
        self.tie_to_parent = tie_to_parent
        self.roles = roles
        self.daemon_args = dict(daemon_args or {})   # extra command-line arguments by role
        # Where a daemon runs: a command prefix by key (e.g. `ip netns exec NS` to put each
        # daemon on its own host, daemons/harness/netns.py), and environment by key.
        self.launch_prefix = launch_prefix
        self.daemon_env = dict(daemon_env or {})
        # Check every daemon's settings (types, ranges) before starting any (`htcpool up`);
        # otherwise each daemon checks its own as it starts.
        self.check_roles = check_roles
        self.daemons: dict[str, DaemonProc] = {}
        self.epoch = time.time()
        self.collector_address = ""
        self.tls = tls                      # False, True, or "mutual" (client certificates too)
        self.security: dict = {}            # from the collector: pool_key_file, trust_domain
        self.user = getpass.getuser()
        self.attached = False      # True: built from pool.json by attach(), not started here
        self._save_lock = threading.Lock()

    # ---- starting ---------------------------------------------------------------
    def _base_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update({
            "_CONDOR_LOCAL_DIR": str(self.state_dir),
            "_CONDOR_POOL_EPOCH": repr(self.epoch),
            "HTCPOOL_LOG_STDERR": "0",
            "PYTHONUNBUFFERED": "1",
        })
        if self.tie_to_parent:
            env["HTCPOOL_PARENT_PID"] = str(os.getpid())
        env.update(self._tls_env())
        if "collector" not in self.roles and self.security:
            # Daemons joining another LocalPool's collector use that pool's key and domain.
            env["_CONDOR_SEC_TOKEN_POOL_SIGNING_KEY_FILE"] = str(self.security["pool_key_file"])
            env["_CONDOR_TRUST_DOMAIN"] = str(self.security["trust_domain"])
        env.update(self.extra_env)
        return env

    def join(self, other: "LocalPool") -> "LocalPool":
        """Make this pool's daemons (a pool without a collector) part of `other`'s pool:
        its collector, its pool clock, its signing key and trust domain, its TLS."""
        self.epoch = other.epoch
        self.collector_address = other.collector_address
        self.security = dict(other.security)
        self.tls = other.tls
        if other.tls:
            self.state_dir.mkdir(parents=True, exist_ok=True)
            for name, path in other._tls_files().items():
                mine = self._tls_files()[name]
                mine.parent.mkdir(parents=True, exist_ok=True)
                if not mine.exists():
                    mine.write_bytes(path.read_bytes())
                    os.chmod(mine, 0o600)
        return self

    # ---- security -----------------------------------------------------------------
    @property
    def tokens_dir(self) -> Path:
        return self.state_dir / TOKENS_DIR

    def _tls_files(self) -> dict[str, Path]:
        d = self.state_dir / TLS_DIR
        return {"ca": d / "ca.crt", "cert": d / "pool.crt", "key": d / "pool.key"}

    def _make_tls(self) -> None:
        from daemons.core.security.tls import issue, make_ca
        files = self._tls_files()
        if not files["ca"].exists():
            make_ca(files["ca"].parent)
        if not files["cert"].exists():
            issue(files["ca"].parent, files["cert"].parent, "pool", ["127.0.0.1", "localhost", "::1"])

    def _tls_env(self) -> dict[str, str]:
        if not self.tls:
            return {}
        f = self._tls_files()
        env = {"_CONDOR_SEC_DEFAULT_ENCRYPTION": "REQUIRED", "_CONDOR_AUTH_SSL_SERVER_CERTFILE": str(f["cert"]),
               "_CONDOR_AUTH_SSL_SERVER_KEYFILE": str(f["key"]), "_CONDOR_AUTH_SSL_SERVER_CAFILE": str(f["ca"])}
        if self.tls == "mutual":
            env.update({"_CONDOR_AUTH_SSL_REQUIRE_CLIENT_CERTIFICATE": "True",
                        "_CONDOR_AUTH_SSL_CLIENT_CAFILE": str(f["ca"]),
                        "_CONDOR_AUTH_SSL_CLIENT_CERTFILE": str(f["cert"]),
                        "_CONDOR_AUTH_SSL_CLIENT_KEYFILE": str(f["key"])})
        return env

    def tls_state(self) -> dict[str, str] | None:
        """What a client needs to reach this pool over TLS (recorded in pool.json)."""
        if not self.tls:
            return None
        f = self._tls_files()
        out = {"ca": str(f["ca"])}
        if self.tls == "mutual":
            out.update({"cert": str(f["cert"]), "key": str(f["key"])})
        return out

    def _keys(self):
        from daemons.core.security.keys import KeyRing
        if not self.security:
            raise PoolError("the pool's collector has not reported its signing key yet")
        key_file = Path(self.security["pool_key_file"])
        return KeyRing(key_file, key_file.parent)

    def token(self, identity: str, scopes: Iterable[str] = (), lifetime_s: float | None = None) -> str:
        """A token for `identity` (user or user@domain) signed with this pool's key."""
        from daemons.core.security.keys import POOL_KEY_ID
        from daemons.core.security.tokens import mint
        domain = self.security.get("trust_domain", "")
        full = identity if "@" in identity else f"{identity}@{domain}"
        return mint(self._keys().jwt_key(POOL_KEY_ID), identity=full, issuer=domain, scopes=scopes,
                    lifetime_s=lifetime_s)

    def _write_user_token(self) -> Path:
        """The invoking user's token in the state directory (kept if one is already there
        and still verifies with this pool's key)."""
        from daemons.core.security.discovery import ensure_token_file
        domain = self.security.get("trust_domain", "")
        ensure_token_file(self.tokens_dir, self.user, self._keys(), trust_domain=domain,
                          identity=f"{self.user}@{domain}")
        return self.tokens_dir / self.user

    def user_token(self) -> str:
        return (self.tokens_dir / self.user).read_text().strip()

    def client(self, user: str | None = None, *, token: str | None = None, scopes: Iterable[str] = ()):
        """A PoolClient acting as `user` (a token minted for it), as the invoking user (None:
        the token `htcpool up` wrote), or with exactly `token`."""
        from daemons.cli.client import PoolClient
        from daemons.core.security.tls import channel_credentials
        if token is None:
            token = self.user_token() if user is None and not scopes else self.token(user or self.user, scopes)
        creds = None
        tls = self.tls_state()
        if tls is not None:
            creds = channel_credentials(Path(tls["ca"]), Path(tls["cert"]) if "cert" in tls else None,
                                        Path(tls["key"]) if "key" in tls else None)
        return PoolClient(self.collector_address, tokens=[token] if token else [], credentials=creds)

    def _spec(self, key: str, role: str, extra_args: list[str] | None = None,
              config_file: Path | None = None) -> DaemonProc:
        addr_file = self.state_dir / "run" / f"{key}.address"
        out = self.state_dir / "log" / f"{key}.out"
        args = [*(self.launch_prefix(key) if self.launch_prefix else []),
                sys.executable, "-m", "daemons.cli.main", "daemon", role, "--address-file", str(addr_file)]
        config = config_file or self.config_file
        if config:
            args += ["--config", str(config)]
        args += extra_args or []
        env = self._base_env()
        if self.collector_address:
            # The others find the collector there; a restarted collector binds it again.
            env["_CONDOR_COLLECTOR_HOST"] = self.collector_address
        env.update(self.daemon_env.get(key, {}))
        return DaemonProc(key, role, args, env, addr_file, out, list(extra_args or []))

    def _launch(self, d: DaemonProc) -> None:
        d.address_file.parent.mkdir(parents=True, exist_ok=True)
        d.output.parent.mkdir(parents=True, exist_ok=True)
        if d.address_file.exists():
            d.address_file.unlink()
        with open(d.output, "ab") as out:
            d.proc = subprocess.Popen(d.args, env=d.env, stdout=out, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, start_new_session=True,
                                      cwd=str(self.state_dir))
        self.daemons[d.key] = d

    def _await_address(self, d: DaemonProc, deadline: float) -> None:
        while time.monotonic() < deadline:
            if d.address_file.exists():
                try:
                    d.info = json.loads(d.address_file.read_text())
                    return
                except (json.JSONDecodeError, OSError):
                    pass
            if d.proc is not None and d.proc.poll() is not None:
                raise PoolError(f"{d.key} exited with code {d.proc.returncode} during start-up:\n"
                                f"{self._tail(d.output)}")
            time.sleep(0.02)
        raise PoolError(f"{d.key} did not report its address in time:\n{self._tail(d.output)}")

    @staticmethod
    def _tail(path: Path, lines: int = 20) -> str:
        try:
            return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no output)"

    def startd_keys(self) -> list[str]:
        return [f"startd{i}" for i in range(1, self.startds + 1)]

    def _startd_args(self, index: int) -> list[str]:
        if self.startd_specs:
            spec = self.startd_specs[index - 1]
            args = ["--machines", str(spec.machines), "--seed", str(index),
                    "--host-prefix", spec.host_prefix or f"exec{index}-"]
            for j, group in enumerate(spec.also, 1):
                prefix = group.host_prefix or f"exec{index}g{j}-"
                args += ["--machine-group", f"{group.machines}:{prefix}:{Path(group.config_file).resolve()}"]
            return args
        args = ["--machines", str(self.machines), "--seed", str(index)]
        if self.startds > 1 or self.host_prefix is not None:
            prefix = self.host_prefix if self.host_prefix is not None else "exec"
            args += ["--host-prefix", f"{prefix}{index}-" if self.startds > 1 else prefix]
        return args

    def start(self, timeout_s: float = 60.0) -> "LocalPool":
        """Start every daemon and wait until each has reported its address (it serves)."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        if self.tls:
            self._make_tls()     # (first: the settings checked below name its files)
        # One check up front: a bad configuration fails here, before any process starts.
        roles = tuple(r for r in self.roles if r != "startd" or not self.startd_specs) if self.check_roles else ()
        check_config_file(self.config_file, self.state_dir, roles=roles, env=self._base_env())
        for spec in self.startd_specs:
            for one in (spec, *spec.also):
                check_config_file(one.config_file, self.state_dir, roles=("startd",) if self.check_roles else (),
                                  env=self._base_env())
        deadline = time.monotonic() + timeout_s
        if "collector" in self.roles:
            d = self._spec("collector", "collector")
            self._launch(d)
            self._await_address(d, deadline)
            self.collector_address = d.address
            self.security = dict(d.info.get("security") or {})
            if self.security:
                self._write_user_token()
        pending = []
        for role in self.roles:
            if role == "collector":
                continue
            if role == "startd":
                for i, key in enumerate(self.startd_keys(), 1):
                    config = self.startd_specs[i - 1].config_file.resolve() if self.startd_specs else None
                    pending.append(self._spec(key, "startd", self._startd_args(i), config))
            else:
                pending.append(self._spec(role, role, self.daemon_args.get(role)))
        for d in pending:
            self._launch(d)
        for d in pending:
            self._await_address(d, deadline)
        self.save()
        return self

    def save(self) -> None:
        with self._save_lock:      # a fault experiment restarts daemons from several threads
            self._save()

    def _save(self) -> None:
        state = {
            "collector": self.collector_address,
            "epoch": self.epoch,
            "config": str(self.config_file) if self.config_file else None,
            "tokens": str(self.tokens_dir),
            "tls": self.tls_state(),
            "security": self.security,
            "daemons": {k: {"role": d.role, "pid": d.pid, "address": d.address,
                            "status_url": d.info.get("status_url", ""), "output": str(d.output),
                            "args": d.args, "extra_args": d.extra_args, "state": d.state,
                            "env": {e: v for e, v in d.env.items() if e.startswith(_POOL_ENV)}}
                        for k, d in self.daemons.items()},
        }
        path = self.state_dir / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=1))
        os.replace(tmp, path)

    @classmethod
    def attach(cls, state_dir: str | Path) -> "LocalPool":
        """The pool recorded in `state_dir`/pool.json (started by `htcpool up`), to act on its daemons."""
        state = load_state(state_dir)
        pool = cls(state_dir, state.get("config"), tie_to_parent=False)
        pool.attached = True
        pool.epoch = float(state.get("epoch", pool.epoch))
        pool.collector_address = state.get("collector", "")
        pool.security = dict(state.get("security") or {})
        for key, v in state.get("daemons", {}).items():
            args = list(v.get("args") or [])
            d = DaemonProc(key, v["role"], args, dict(os.environ, **v.get("env", {})),
                           pool.state_dir / "run" / f"{key}.address", Path(v.get("output", "")),
                           list(v.get("extra_args") or []), None,
                           {"pid": v.get("pid", 0), "address": v.get("address", ""),
                            "status_url": v.get("status_url", "")}, v.get("state", "running"))
            pool.daemons[key] = d
        return pool

    def key_of(self, target: str) -> str:
        """A daemon's key from its key ("startd2") or its role when only one daemon has it."""
        if target in self.daemons:
            return target
        keys = [k for k, d in self.daemons.items() if d.role == target]
        if len(keys) == 1:
            return keys[0]
        if keys:
            raise PoolError(f"{len(keys)} daemons are {target}s: name one of {', '.join(keys)}")
        raise PoolError(f"no daemon {target!r} in this pool (daemons: {', '.join(self.daemons)})")

    # ---- crash, pause and restart -----------------------------------------------------
    def kill(self, key: str, sig: int = signal.SIGKILL, timeout_s: float = 30.0) -> None:
        """Send `sig` (SIGKILL: a crash; SIGTERM: a graceful stop) and wait until the daemon is gone."""
        d = self.daemons[key]
        if not d.alive():
            d.state = "off"
            return
        if d.state == "paused" and sig != signal.SIGKILL:
            os.kill(d.pid, signal.SIGCONT)   # a stopped process cannot handle SIGTERM
        if d.proc is not None:
            d.proc.send_signal(sig)
            try:
                d.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                d.proc.kill()
                d.proc.wait(timeout=10)
        else:
            os.kill(d.pid, sig)
            if wait_gone([d.pid], time.monotonic() + timeout_s):
                os.kill(d.pid, signal.SIGKILL)
                wait_gone([d.pid], time.monotonic() + 10)
        d.state = "off"
        self._save_if_recorded()

    def pause(self, key: str) -> None:
        """SIGSTOP: the daemon keeps its sockets but answers nothing until resumed."""
        d = self.daemons[key]
        if not d.alive():
            raise PoolError(f"{key} is not running")
        os.kill(d.pid, signal.SIGSTOP)
        d.state = "paused"
        self._save_if_recorded()

    def resume(self, key: str) -> None:
        d = self.daemons[key]
        if not d.alive():
            raise PoolError(f"{key} is not running")
        os.kill(d.pid, signal.SIGCONT)
        d.state = "running"
        self._save_if_recorded()

    def restart(self, key: str, timeout_s: float = 30.0) -> DaemonProc:
        """Start `key` again with the same arguments and environment (after kill()), on the
        same command port when it is free, as a daemon with a fixed port comes back: its
        peers (a schedd keeping claims alive, a partition aimed at its address) find it
        where they left it, and learn at once that it lost its state."""
        old = self.daemons[key]
        if old.alive():
            raise PoolError(f"{key} is still running")
        if self.attached:
            # Not started by this object: the recorded command line and environment.
            d = DaemonProc(key, old.role, list(old.args), dict(old.env), old.address_file, old.output,
                           list(old.extra_args))
            if self.collector_address:
                d.env["_CONDOR_COLLECTOR_HOST"] = self.collector_address
        else:
            # The environment as this pool has it now (a test may have changed extra_env).
            config = Path(old.args[old.args.index("--config") + 1]) if "--config" in old.args else None
            d = self._spec(key, old.role, old.extra_args, config)
        port = old.address.rpartition(":")[2]
        knob = f"_CONDOR_{SUBSYS.get(old.role, old.role.upper())}_ARGS"
        pinned = old.role != "collector" and port.isdigit() and knob not in d.env
        if pinned:
            d.env[knob] = f"-p {port}"
        self._launch(d)
        try:
            self._await_address(d, time.monotonic() + timeout_s)
        except PoolError:
            if not pinned or d.alive():
                raise
            # The old port is taken: any port will do.
            d.env.pop(knob)
            self._launch(d)
            self._await_address(d, time.monotonic() + timeout_s)
        if old.role == "collector" and d.address != self.collector_address:
            raise PoolError("the collector came back on a different address; fix its port with COLLECTOR_HOST")
        self.save()
        return d

    def _save_if_recorded(self) -> None:
        if (self.state_dir / STATE_FILE).exists():
            self.save()

    # ---- stopping ----------------------------------------------------------------------
    def stop(self, timeout_s: float = 15.0) -> None:
        """Stop every daemon, the collector last so the others can withdraw their ads."""
        if peak_listeners:
            for k, d in self.daemons.items():
                mb = peak_rss_mb(d.pid) if d.alive() else None
                if mb is not None:
                    for into in peak_listeners:
                        key = f"{self.state_dir.name}/{k}"
                        into[key] = max(mb, into.get(key, 0.0))
        stop_in_order({k: d.pid for k, d in self.daemons.items() if d.alive()}, timeout_s)
        for d in self.daemons.values():
            if d.proc is not None:
                d.proc.wait(timeout=10)

    def __enter__(self) -> "LocalPool":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def load_state(state_dir: str | Path) -> dict:
    path = Path(state_dir) / STATE_FILE
    if not path.exists():
        raise PoolError(f"no pool at {Path(state_dir).resolve()} (no {STATE_FILE}; start one with 'htcpool up')")
    return json.loads(path.read_text())


def stop_detached(state_dir: str | Path, timeout_s: float = 15.0) -> list[str]:
    """Stop a pool started by `htcpool up` (its processes are not our children)."""
    state = load_state(state_dir)
    pids = {k: int(v.get("pid", 0)) for k, v in state.get("daemons", {}).items()
            if int(v.get("pid", 0)) > 0 and is_daemon_process(int(v.get("pid", 0)), v.get("role", ""))}
    stopped = stop_in_order(pids, timeout_s)
    (Path(state_dir) / STATE_FILE).unlink(missing_ok=True)
    return stopped
