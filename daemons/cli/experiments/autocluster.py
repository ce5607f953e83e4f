"""`htcpool experiment autocluster`: seed 000's table, reproduced on a pool of processes.

Seed 000: in the CS pool "an average of 85 active users had 5831 jobs submitted",
"distilled down into an average of just 372 autoclusters"; the fraction of job ads
the negotiator considered that resulted in a match rose "from 10.0% to 64.3%" with
autoclustering.

The workload (seeded, see `workload`) mirrors those sizes: 85 users, 5,831 jobs,
each user drawing 4 or 5 job kinds from a dozen templates (request sizes, a
department, a GPU wish, an architecture, some that no machine can run), 372 kinds
in all. The 372 autoclusters are there by construction: the generator emits exactly
372 job kinds, and jobs of one kind differ only in what matchmaking ignores
(arguments, duration) and in ImageSize, which varies within one 25% rounding bucket
so that SCHEDD_ROUND_ATTR_ImageSize keeps them together. The machines (see
`MACHINE_CLASSES`: 210 machines with 850 static slots) are heterogeneous: desktops
whose START looks at the job's ImageSize, department servers that START only their
department's jobs, GPU nodes, ARM nodes, small old nodes. The same workload runs twice
on fresh pools, with autoclustering on and off (SCHEDD_AUTOCLUSTERING = False: every
job its own cluster); each run lasts a number of negotiation cycles and records, per
cycle, the job ads the negotiator considered, as HTCondor's negotiator counts them
(num_jobs_considered: every job it was asked about, whether it matched or was
rejected, in every pie spin) and how many of those produced a match.

Calibration: the seed reports fractions, not its pool's size or its jobs' lengths,
and the fractions depend on how many slots free up per cycle against how many jobs
wait. The seed's 10% without autoclustering says about a tenth of the idle jobs
matched per cycle, some 580 of 5,831; the pool's 850 slots running jobs of 600 s on
average (300 s cycles) free about 425 per cycle.
The first cycle after release fills an empty pool and is left out as warm-up.

Lag: a negotiation cycle works from the slot ads it read when it started. While it
runs, pool time runs on (TIME_SCALE pool seconds per wall second) and jobs end that
it cannot see; a cycle that starts late, or lasts a good part of the interval, makes
the pool look busier than a real one whose cycles take seconds. Each run reports its
cycles' start lag (start minus when the cadence said it should start) and their pool
duration, and is flagged as distorted when either passes DISTORTION_FRACTION of the
interval.
"""
from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daemons.cli.client import wait_for
from daemons.cli.experiments.common import json_line, out_dir, print_table, pyplot, write_csv
from daemons.cli.pool import LocalPool, StartdSpec
from daemons.core import ads
from daemons.pb.htcpool import schedd_pb2

SEED_FIGURES = {"jobs": 5831, "users": 85, "autoclusters": 372, "match_fraction_off": 0.100,
                "match_fraction_on": 0.643}


@dataclass(frozen=True)
class MachineClass:
    name: str
    machines: int
    config: str


MACHINE_CLASSES = (
    MachineClass("desktop", 100, """\
NUM_CPUS = 4
MEMORY = 8192
SLOT_TYPE_1 = cpus=1, mem=2048
NUM_SLOTS_TYPE_1 = 2
SLOT_TYPE_2 = cpus=2, mem=4096
NUM_SLOTS_TYPE_2 = 1
# desktops take any job whose image fits in a quarter of their memory,
# and prefer their owner's jobs (which makes Owner significant, as in the CS pool)
START = (TARGET.ImageSize <= MY.TotalMemory * 256) && (KeyboardIdle > 15 * 60)
RANK = TARGET.Owner =?= "u01"
"""),
    MachineClass("cs-server", 30, """\
NUM_CPUS = 16
MEMORY = 65536
SLOT_TYPE_1 = cpus=1, mem=4096
NUM_SLOTS_TYPE_1 = 8
SLOT_TYPE_2 = cpus=8, mem=32768
NUM_SLOTS_TYPE_2 = 1
Department = "cs"
STARTD_ATTRS = Department
START = TARGET.Department =?= MY.Department
"""),
    MachineClass("physics", 30, """\
NUM_CPUS = 8
MEMORY = 32768
SLOT_TYPE_1 = cpus=1, mem=4096
NUM_SLOTS_TYPE_1 = 4
SLOT_TYPE_2 = cpus=4, mem=16384
NUM_SLOTS_TYPE_2 = 1
Department = "physics"
STARTD_ATTRS = Department
START = TARGET.Department =?= MY.Department
"""),
    MachineClass("gpu", 10, """\
NUM_CPUS = 8
MEMORY = 65536
SLOT_TYPE_1 = cpus=4, mem=32768
NUM_SLOTS_TYPE_1 = 2
HasGPU = True
STARTD_ATTRS = HasGPU
START = TARGET.WantGPU =?= True
"""),
    MachineClass("arm", 15, """\
NUM_CPUS = 4
MEMORY = 8192
ARCH = ARM64
SLOT_TYPE_1 = cpus=1, mem=2048
NUM_SLOTS_TYPE_1 = 4
"""),
    MachineClass("old", 25, """\
NUM_CPUS = 2
MEMORY = 2048
SLOT_TYPE_1 = cpus=1, mem=1024
NUM_SLOTS_TYPE_1 = 2
START = TARGET.RequestMemory <= 1024
"""),
)

# Job kinds: submit commands, and the request_memory variants a user may pick (MB).
TEMPLATES: dict[str, tuple[str, tuple[int, ...]]] = {
    "small": ("request_cpus = 1\n", (512, 1024)),
    "cs": ('request_cpus = 1\n+Department = "cs"\n', (1024, 2048, 4096)),
    "cs-multi": ('request_cpus = 8\n+Department = "cs"\n', (8192, 16384)),
    "cs-bigmem": ('request_cpus = 1\n+Department = "cs"\n', (30000,)),
    "physics": ('request_cpus = 1\n+Department = "physics"\n', (1024, 2048)),
    "physics-multi": ('request_cpus = 4\n+Department = "physics"\n', (16384,)),
    "gpu": ("request_cpus = 1\n+WantGPU = true\nrequirements = TARGET.HasGPU =?= true\n", (4096, 8192)),
    "arm": ('request_cpus = 1\nrequirements = TARGET.Arch == "ARM64"\n', (512,)),
    "medium": ("request_cpus = 2\n", (2048, 4096)),
    "huge": ("request_cpus = 32\n", (131072,)),        # no machine is this big
    "chemistry": ('request_cpus = 1\n+Department = "chemistry"\n', (1024,)),  # no machine starts it
    "desktop-heavy": ("request_cpus = 2\n", (3072,)),
}
TEMPLATE_WEIGHTS = {"small": 6, "cs": 5, "cs-multi": 2, "cs-bigmem": 1, "physics": 4, "physics-multi": 2,
                    "gpu": 2, "arm": 1, "medium": 4, "huge": 1, "chemistry": 1, "desktop-heavy": 2}

# Calibration (see the module docstring): the seed's 10% without autoclustering means
# about a tenth of the idle jobs matched per cycle, some 580 of 5,831. The pool's
# 850 static slots running jobs of 600 s on average free about 425 per 300 s cycle.
MEAN_DURATION_S = 600
# A run whose cycles start this late, or last this long, as a fraction of the interval, is flagged.
DISTORTION_FRACTION = 0.1


@dataclass(frozen=True)
class UserWorkload:
    user: str
    submit: str
    jobs: int
    kinds: int


def _split(total: int, parts: int, rng: random.Random) -> list[int]:
    """`total` as `parts` positive sizes with a long tail (a few big clusters, many small)."""
    weights = [rng.lognormvariate(0, 1.2) for _ in range(parts)]
    scale = (total - parts) / sum(weights)
    sizes = [1 + int(w * scale) for w in weights]
    for i in range(total - sum(sizes)):
        sizes[i % parts] += 1
    return sizes


def workload(seed: int = 0, users: int = 85, jobs: int = 5831, kinds: int = 372) -> list[UserWorkload]:
    """Per user, one submit description with one `queue 1` per job (ImageSize varies per job)."""
    rng = random.Random(seed)
    combos = [(t, m) for t, (_, mems) in TEMPLATES.items() for m in mems]
    per_user = [kinds // users + (1 if i < kinds % users else 0) for i in range(users)]
    if max(per_user) > len(combos) or kinds < users or jobs < kinds:
        raise ValueError(f"cannot draw {kinds} job kinds for {users} users from {len(combos)} template "
                         f"variants with {jobs} jobs")
    sizes = _split(jobs, kinds, rng)
    out: list[UserWorkload] = []
    k = 0
    for u in range(users):
        weights = [TEMPLATE_WEIGHTS[t] for t, _ in combos]
        chosen: list[tuple[str, int]] = []
        while len(chosen) < per_user[u]:
            c = rng.choices(combos, weights)[0]
            if c not in chosen:
                chosen.append(c)
        # Held at submission so the autoclusters can be counted before anything runs.
        lines = ["universe = vanilla", "executable = /bin/sleep", "hold = true"]
        n_jobs = 0
        for template, memory in chosen:
            body, _ = TEMPLATES[template]
            lines.append(body.rstrip("\n"))
            lines.append(f"request_memory = {memory}")
            for _ in range(sizes[k]):
                duration = max(60, int(rng.expovariate(1 / MEAN_DURATION_S)))
                # 101 MB .. 124 MB: one 25% rounding bucket (ImageSize rounds to 125000 KB)
                lines.append(f"+ImageSize = {rng.randint(101_000, 124_000)}")
                lines.append(f"+Duration = {duration}")
                lines.append(f"arguments = {duration}")
                lines.append("queue")
                n_jobs += 1
            k += 1
            # Reset the template's own settings before the next kind.
            lines.append('requirements = true\n+Department = undefined\n+WantGPU = undefined\nrequest_cpus = 1')
        out.append(UserWorkload(f"u{u + 1:02d}", "\n".join(lines) + "\n", n_jobs, len(chosen)))
    return out


POOL_CONFIG = """\
NETWORK_HOSTNAME = cspool
TIME_SCALE = {time_scale:g}
NEGOTIATOR_INTERVAL = {interval}
NEGOTIATOR_CYCLE_DELAY = 0
UPDATE_INTERVAL = 300
SCHEDD_INTERVAL = 300
# Every job needs the negotiator: no claim reuse.
CLAIM_WORKLIFE = 0
SCHEDD_AUTOCLUSTERING = {autoclustering}
"""


async def _run_mode(mode: str, args: argparse.Namespace, users: list[UserWorkload], state: Path,
                    emit) -> dict[str, Any]:
    base = state / f"{mode}.conf"
    base.write_text(POOL_CONFIG.format(time_scale=args.time_scale, interval=args.interval,
                                       autoclustering="True" if mode == "on" else "False"))
    specs = []
    for mc in MACHINE_CLASSES:
        f = state / f"{mode}-{mc.name}.conf"
        f.write_text(f"include : {base}\n{mc.config}")
        specs.append(StartdSpec(f, _scaled(mc.machines, args.machine_scale), f"{mc.name}-"))
    pool = LocalPool(state / mode, base, startd_specs=specs)
    machines = sum(spec.machines for spec in specs)
    try:
        pool.start(timeout_s=120)
        async with pool.client() as c:
            async def all_machines():
                return len({ads.get(a, "Machine") for a in await c.ads("Machine", projection=["Machine"])}) >= machines
            await wait_for(all_machines, timeout_s=120, what=f"{machines} machines")
            t0 = time.monotonic()
            for u in users:
                await c.submit(u.submit, f"{u.user}.sub", u.user)
            emit(f"  [{mode}] submitted {sum(u.jobs for u in users)} jobs (held) for {len(users)} users "
                 f"in {time.monotonic() - t0:.1f} s; releasing them")
            start = await c.pool_now()
            await c.act(schedd_pb2.RELEASE, constraint="true")

            async def measured_cycles():
                done = [r for r in await c.cycles() if r.start >= start and r.end > 0]
                filled = next((i for i, r in enumerate(done) if r.matches), None)
                if filled is None:
                    return None
                # Warm-up: up to the first cycle that matched anything (it fills an empty pool).
                skip = filled + 1 + args.warmup
                window = done[skip:]
                return (done[:skip], window) if len(window) >= args.cycles else None
            warmup, cycles = await wait_for(measured_cycles, timeout_s=(args.warmup + args.cycles + 2) * 600,
                                            interval_s=0.5, what=f"{args.cycles} negotiation cycles")
            cycles = cycles[:args.cycles]
            # Ids are stable once the negotiator's significant list has arrived (the fill cycle):
            # count those of the jobs still queued and of those already finished.
            queued = {ads.get(a, "AutoClusterId") for a in await c.jobs(autoclusters=True)}
            finished = {ads.get(h, "AutoClusterId") for h in await c.jobs("true", ["AutoClusterId"], history=True)}
            autoclusters = len((queued | finished) - {None})
            emit(f"  [{mode}] {autoclusters} autoclusters; warm-up cycle(s) filled the pool with "
                 f"{sum(r.matches for r in warmup)} matches; measured {len(cycles)} more")
    finally:
        pool.stop()
    considered = sum(r.considered for r in cycles)
    matched = sum(r.matches for r in cycles)
    lag = cycle_lag(warmup[-1:] + cycles, args.interval)
    return {
        "jobs": sum(u.jobs for u in users),
        "users": len(users),
        "autoclusters": autoclusters,
        "cycles": len(cycles),
        "considered": considered,
        "matched": matched,
        "match_fraction": round(matched / considered, 4) if considered else 0.0,
        "considered_per_cycle": round(considered / len(cycles), 1),
        "matched_per_cycle": round(matched / len(cycles), 1),
        "requests_per_cycle": round(sum(r.requests for r in cycles) / len(cycles), 1),
        "cycle_wall_s_mean": round(sum(r.wall_duration for r in cycles) / len(cycles), 3),
        # The negotiator's own CPU: what the cycle costs whatever else the machine is doing.
        "cycle_cpu_s_mean": round(sum(r.cpu_duration for r in cycles) / len(cycles), 3),
        "cycle_pool_s_mean": round(sum(r.duration for r in cycles) / len(cycles), 1),
        "cycle_pool_s_max": round(max(r.duration for r in cycles), 1),
        "start_lag_s_mean": lag["mean"], "start_lag_s_max": lag["max"],
        "distorted": max(lag["max"], max(r.duration for r in cycles)) > DISTORTION_FRACTION * args.interval,
        "per_cycle": [{"cycle": r.cycle, "requests": r.requests, "considered": r.considered,
                       "matches": r.matches, "rejections": r.rejections,
                       "wall_duration_s": round(r.wall_duration, 3), "cpu_s": round(r.cpu_duration, 3),
                       "pool_duration_s": round(r.duration, 1), "spins_sessions": len(r.order)} for r in cycles],
    }


def cycle_lag(cycles: list[Any], interval_s: float) -> dict[str, float]:
    """How late each cycle started after the one before, against HTCondor's cadence with
    NEGOTIATOR_CYCLE_DELAY = 0: NEGOTIATOR_INTERVAL after the last start, or at its end if
    it ran longer. In pool seconds: the negotiator's lag behind pool time."""
    lags = [max(0.0, b.start - max(a.start + interval_s, a.end)) for a, b in zip(cycles, cycles[1:])]
    return {"mean": round(sum(lags) / len(lags), 1) if lags else 0.0, "max": round(max(lags, default=0.0), 1)}


def _scaled(n: int, scale: float) -> int:
    return max(1, round(n * scale))


def run(args: argparse.Namespace) -> int:
    out = out_dir(args.out, "autocluster")
    try:
        users = workload(args.seed, users=args.users, jobs=args.jobs, kinds=args.kinds)
    except ValueError as e:
        print(f"htcpool experiment autocluster: {e}", file=sys.stderr)
        return 2
    state = Path(tempfile.mkdtemp(prefix="htcpool-exp-autocluster-"))
    results: dict[str, dict[str, Any]] = {}

    def emit(line: str) -> None:
        print(line, flush=True)

    emit(f"experiment autocluster: {sum(u.jobs for u in users)} jobs, {len(users)} users, "
         f"{sum(u.kinds for u in users)} job kinds; "
         f"{sum(_scaled(m.machines, args.machine_scale) for m in MACHINE_CLASSES)} machines in "
         f"{len(MACHINE_CLASSES)} classes "
         f"({', '.join(f'{_scaled(m.machines, args.machine_scale)} {m.name}' for m in MACHINE_CLASSES)}); "
         f"{args.cycles} cycles of {args.interval} pool s at TIME_SCALE {args.time_scale:g}, seed {args.seed}")
    try:
        for mode in ("on", "off"):
            results[mode] = asyncio.run(_run_mode(mode, args, users, state, emit))
    finally:
        shutil.rmtree(state, ignore_errors=True)

    rows = [[mode, r["jobs"], r["autoclusters"], r["considered_per_cycle"], r["matched_per_cycle"],
             f"{100 * r['match_fraction']:.1f}%", r["cycle_wall_s_mean"], r["cycle_cpu_s_mean"],
             r["cycle_pool_s_mean"], r["start_lag_s_max"], "yes" if r["distorted"] else "no"]
            for mode, r in results.items()]
    write_csv(out / "cycles.csv", ["mode", "cycle", "requests", "considered", "matches", "rejections",
                                   "wall_duration_s", "cpu_s", "pool_duration_s", "sessions"],
              [[mode, c["cycle"], c["requests"], c["considered"], c["matches"], c["rejections"], c["wall_duration_s"],
                c["cpu_s"], c["pool_duration_s"], c["spins_sessions"]]
               for mode, r in results.items() for c in r["per_cycle"]])
    write_csv(out / "summary.csv", ["mode", "jobs", "autoclusters", "considered_per_cycle", "matched_per_cycle",
                                    "match_fraction", "cycle_wall_s_mean", "cycle_pool_s_mean", "start_lag_s_max",
                                    "distorted"],
              [[mode, r["jobs"], r["autoclusters"], r["considered_per_cycle"], r["matched_per_cycle"],
                r["match_fraction"], r["cycle_wall_s_mean"], r["cycle_pool_s_mean"], r["start_lag_s_max"],
                r["distorted"]] for mode, r in results.items()])
    _plot(results, out / "autocluster.png")
    emit("")
    print_table(["autoclustering", "jobs", "autoclusters", "considered/cycle", "matched/cycle",
                 "match fraction", "cycle wall s", "negotiator cpu s", "cycle pool s", "start lag s", "distorted"],
                rows)
    for mode, r in results.items():
        if r["distorted"]:
            emit(f"warning: the '{mode}' run is distorted by lag: its cycles lasted up to {r['cycle_pool_s_max']:g} "
                 f"and started up to {r['start_lag_s_max']:g} pool s late (interval {args.interval} s); "
                 "a lower --time-scale gives a faithful run")
    emit("seed 000 (CS pool, six days): 5831 jobs into 372 autoclusters; match fraction 10.0% without, "
         "64.3% with")
    on, off = results["on"], results["off"]
    if off["considered_per_cycle"]:
        emit(f"autoclustering cut the ads considered per cycle {off['considered_per_cycle'] / max(1, on['considered_per_cycle']):.1f}x "
             f"and the cycle's wall time {off['cycle_wall_s_mean'] / max(1e-9, on['cycle_wall_s_mean']):.1f}x")
    emit(f"wrote {out / 'cycles.csv'}, {out / 'summary.csv'}, {out / 'autocluster.png'}")
    if args.json:
        json_line({mode: {k: r[k] for k in ("jobs", "autoclusters", "considered", "matched", "match_fraction",
                                            "considered_per_cycle", "matched_per_cycle", "cycle_wall_s_mean",
                                            "cycle_cpu_s_mean", "cycle_pool_s_mean", "cycle_pool_s_max",
                                            "start_lag_s_mean",
                                            "start_lag_s_max", "distorted")}
                   for mode, r in results.items()})
    return 0


def _plot(results: dict[str, dict[str, Any]], path: Path) -> None:
    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    modes = list(results)
    fractions = [100 * results[m]["match_fraction"] for m in modes]
    ax1.bar([f"autoclustering {m}" for m in modes], fractions, color=["tab:blue", "tab:gray"][:len(modes)])
    for x, (m, seed_value) in enumerate(zip(modes, (64.3, 10.0))):
        ax1.plot([x - 0.4, x + 0.4], [seed_value] * 2, "r--", lw=1)
    ax1.set_ylabel("considered request ads that matched (%)")
    ax1.set_title("match fraction (red: seed 000's CS pool)")
    for m in modes:
        per = results[m]["per_cycle"]
        ax2.plot([c["cycle"] - per[0]["cycle"] + 1 for c in per], [c["considered"] for c in per], marker="o",
                 label=f"considered, autoclustering {m}")
        ax2.plot([c["cycle"] - per[0]["cycle"] + 1 for c in per], [c["matches"] for c in per], ls=":", marker="x",
                 label=f"matched, autoclustering {m}")
    ax2.set_yscale("log")
    from matplotlib.ticker import MaxNLocator
    ax2.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax2.set_xlabel("negotiation cycle after submission")
    ax2.set_ylabel("request ads per cycle")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
