"""A fuzzing campaign: inputs of four classes (submit files, configurations, ClassAd
texts, RPC messages) against the parsers and against a running pool, for a time budget.

Hypothesis generates the inputs (strategies.py), in batches drawn with a seed, so a
campaign is repeatable; each input's outcome is tallied by class (targets.py). The
parsers run in a worker process (worker.py) watched by the campaign, so that a crash
(a signal) or a hang of the parsing code is seen and counted, not suffered.
"""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hseed
from hypothesis import strategies as st

from daemons.fuzz import strategies as S
from daemons.fuzz import targets as T

# Input classes; `auth` is RPCs with bad credentials, against the security layer (auth.py).
CLASSES = ("submit", "config", "classad", "rpc", "auth")
WORKER_STALL_S = 60.0          # a parser input that takes this long is a hang


def draw_batch(strategy: st.SearchStrategy, n: int, seed: int) -> list:
    """`n` inputs from `strategy` (fewer if it has fewer distinct ones), repeatably from `seed`."""
    out: list = []

    @hseed(seed)
    @settings(max_examples=n, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(x):
        out.append(x)

    collect()
    return out


PARSER_STRATEGIES: dict[str, tuple[Callable[[], st.SearchStrategy], Callable[[Any], tuple[str, str]]]] = {
    "submit": (S.submit_bytes, T.submit_parser),
    "classad": (lambda: st.one_of(S.classad_expr(), S.classad_text()), T.classad_parser),
    "config": (S.config_file, T.config_reader),
}


def run_parsers_here(tally: T.Tally, cls: str, budget_s: float, seed: int, batch: int = 50) -> None:
    """In this process (tests): a crash or hang here is the test's own failure."""
    make, target = PARSER_STRATEGIES[cls]
    deadline = time.monotonic() + budget_s
    while time.monotonic() < deadline:
        for x in draw_batch(make(), batch, seed):
            outcome, detail = target(x)
            tally.add(f"{cls}:parser", outcome, x, detail)
            if time.monotonic() >= deadline:
                break
        seed += 1


def run_parsers_watched(tally: T.Tally, cls: str, budget_s: float, seed: int, work: Path) -> None:
    """In a worker process, restarted after a crash or a hang (each counted with its input)."""
    deadline = time.monotonic() + budget_s
    while time.monotonic() < deadline - 1:
        current = work / f"{cls}.current"
        result = work / f"{cls}.result.json"
        for f in (current, result):
            f.unlink(missing_ok=True)
        proc = subprocess.Popen([sys.executable, "-m", "daemons.fuzz.worker", cls, str(deadline - time.monotonic()),
                                 str(seed), str(current), str(result)], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        os.set_blocking(fd, False)
        last = time.monotonic()
        while proc.poll() is None:
            try:
                if os.read(fd, 65536):
                    last = time.monotonic()          # a heartbeat: the worker moved to its next input
            except BlockingIOError:
                pass
            if time.monotonic() - last > WORKER_STALL_S:
                proc.kill()
                proc.wait()
                tally.add(f"{cls}:parser", "hang", _read(current),
                          f"no answer from the {cls} parser in {WORKER_STALL_S:.0f} s")
                break
            time.sleep(0.2)
        if result.exists():
            _merge(tally, json.loads(result.read_text()))
        if proc.returncode is not None and proc.returncode < 0:
            tally.add(f"{cls}:parser", "crash", _read(current),
                      f"the {cls} parser was killed by signal {-proc.returncode}")
        elif proc.returncode == 0:
            return
        seed += 1000


def _read(path: Path) -> Any:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _merge(tally: T.Tally, data: dict) -> None:
    for cls, counts in data["counts"].items():
        c = tally.counts.setdefault(cls, {o: 0 for o in T.OUTCOMES})
        for o, n in counts.items():
            c[o] = c.get(o, 0) + n
    tally.failures.extend(data["failures"][: max(0, 200 - len(tally.failures))])


# ---- against a pool -----------------------------------------------------------------------
async def run_pool(tally: T.Tally, fuzzer, cls: str, budget_s: float, seed: int,
                   daemon_starts: bool = True) -> None:
    from daemons.fuzz.pool_targets import rpc_targets, start_daemon_with
    deadline = time.monotonic() + budget_s
    targets = rpc_targets()
    n = 0
    # The whole first batch whatever the budget (of configurations, which each start a
    # daemon, the first one): drawing and trying it can take longer than a small budget on
    # a loaded machine, and a class tried on one input proves little either way.
    least = 1 if cls == "config" else None
    while n == 0 or time.monotonic() < deadline:
        if cls == "submit":
            batch = await asyncio.to_thread(draw_batch, S.submit_file(), 40, seed)
        elif cls == "classad":
            batch = await asyncio.to_thread(draw_batch, st.tuples(st.integers(0, 4), st.one_of(
                S.classad_expr(), S.classad_text())), 40, seed)
        elif cls == "rpc":
            live = await fuzzer.live_values()
            batch = await asyncio.to_thread(draw_batch, st.tuples(_rpc_inputs(targets, live), st.booleans()), 40,
                                            seed)
        elif cls == "auth":
            from daemons.fuzz.auth import bad_metadata
            key, domain, valid = fuzzer.auth_material()
            batch = await asyncio.to_thread(draw_batch, st.tuples(_rpc_inputs(targets), bad_metadata(
                key, domain, valid)), 40, seed)
        else:
            batch = await asyncio.to_thread(draw_batch, S.config_file(), 10, seed)
        seed += 1
        if least is None:
            least = len(batch)
        for x in batch:
            if n >= least and time.monotonic() >= deadline:
                break
            n += 1
            if cls == "submit":
                outcome, detail = await fuzzer.submit_text(x)
            elif cls == "classad":
                outcome, detail = await _classad_to_pool(fuzzer, targets, *x)
            elif cls == "rpc":
                (i, values, pick), as_user = x
                outcome, detail = await fuzzer.rpc(targets[i], values, pick, as_user=as_user)
            elif cls == "auth":
                (i, values, pick), (what, metadata) = x
                outcome, detail = await fuzzer.rpc_bad_credentials(targets[i], values, pick, what, metadata)
            else:
                # The check `htcpool up` makes; then a real daemon started with what it accepts.
                outcome, detail = await asyncio.to_thread(T.config_file_check, x)
                if outcome == "accepted" and daemon_starts:
                    outcome, detail = await asyncio.to_thread(start_daemon_with, fuzzer.pool, x,
                                                              ("startd", "negotiator", "schedd")[n % 3])
            tally.add(f"{cls}:pool", outcome, x, detail)
            if n % 25 == 0:
                for problem in await fuzzer.health():
                    tally.add(f"{cls}:pool", "crash", x, problem)
        await fuzzer.cleanup()
    for problem in await fuzzer.health():
        tally.add(f"{cls}:pool", "crash", None, problem)


def _rpc_inputs(targets, live: tuple[str, ...] = ()) -> st.SearchStrategy:
    """(target index, message values, pick): an RPC of any daemon, its message from the descriptors."""
    def one(i: int) -> st.SearchStrategy:
        t = targets[i]
        values = S.message_values(t.request, live=live)
        if t.client_streaming:
            values = st.lists(values, min_size=1, max_size=5)
        return st.tuples(st.just(i), values, st.integers(0, 3))
    return st.integers(0, len(targets) - 1).flatmap(one)


async def _classad_to_pool(fuzzer, targets, where: int, text: str) -> tuple[str, str]:
    """A ClassAd text where daemons take one: a collector update, a query constraint, a job
    edit, a drain's check expression, a job ad for a claim."""
    by = {t.name: t for t in targets}
    if where == 0:
        ad = text if text.lstrip().startswith("[") else f'[ MyType = "Generic"; Name = "fuzz"; X = {text} ]'
        return await fuzzer.rpc(by["Collector.UpdateAds"], {"ads": [{"text": ad}]})
    if where == 1:
        return await fuzzer.rpc(by["Schedd.Query"], {"constraint": text})
    if where == 2:
        return await fuzzer.rpc(by["Schedd.Act"], {"action": 4, "job_ids": ["1"], "edits": {"Fuzz": text}})
    if where == 3:
        return await fuzzer.rpc(by["Startd.DrainJobs"], {"machine": "fuzzhost", "check_expr": text,
                                                         "how": 1})
    return await fuzzer.rpc(by["Startd.RequestClaim"], {"claim_id": "fuzz", "job_ad": {"text": text}})


def final_checks(tally: T.Tally, fuzzer) -> None:
    """Whatever happened between inputs: a traceback in a log, an error counted on /metrics."""
    for problem in fuzzer.log_problems():
        tally.add("pool", "error", None, problem)
    for key, n in fuzzer.metric_errors().items():
        if n:
            tally.add("pool", "error", None, f"{key}: {n:.0f} unexpected error(s) counted on /metrics")


def by_class(tally: T.Tally) -> dict[str, dict[str, int]]:
    """Outcomes per input class (submit, config, classad, rpc, auth), parsers and pool together."""
    out: dict[str, dict[str, int]] = {}
    for key, counts in tally.counts.items():
        c = out.setdefault(key.split(":")[0], {o: 0 for o in T.OUTCOMES})
        for o, n in counts.items():
            c[o] += n
    return out


def summary(tally: T.Tally) -> dict:
    return {"classes": by_class(tally), "targets": tally.counts, "inputs": tally.tried(), "bad": tally.bad(),
            "crashes": sum(c.get("crash", 0) for c in tally.counts.values()),
            "hangs": sum(c.get("hang", 0) for c in tally.counts.values()),
            "errors": sum(c.get("error", 0) for c in tally.counts.values())}


def new_workdir() -> Path:
    return Path(tempfile.mkdtemp(prefix="htcpool-fuzz-"))
