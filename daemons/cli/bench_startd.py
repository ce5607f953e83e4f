"""`htcpool bench startd`: a startd's memory per emulated slot, in one process per size.

For each size a fresh Python process imports what a startd process imports, loads the
configuration `bench negotiator` gives its startds (8-core machines of static 1-core
slots; `--class` picks std, bigmem or dept), and then, reading its own /proc/self/status:

1. builds the startd's machines for the slots (the model a startd holds);
2. sends a full advertisement the way the daemon does, the ads' texts taken chunk by
   chunk into the collector's UpdateAds requests (serialized, not sent);
3. claims every slot and starts a job on it, the job ad the bench negotiator's submit
   description gives (through the schedd's submit builder), parsed from its text as
   the startd's RPC service parses it, its end waiting in a TimerQueue as the daemon's;
4. sends every busy slot's ad again (a collector update after the claims).

Then, in this process, the CPU per match of the startd's claim path as its service runs
it (bench_startd_claims.py).

It reports the RSS after imports (the interpreter and its libraries, the same for any
slot count; the part of it that is mapped files, shared with a pool's other processes,
and the process's own), the growth per slot after (1) and (3), and the peak (VmHWM)
over the slot count: `startd_bytes_per_slot` is what `bench negotiator` reports for its startd
processes (there, 10,000 slots in each), with issue 14's goal of 2 KB.
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SLOTS_PER_MACHINE = 8    # bench_negotiator's, which this module imports only where it measures
CHILD_TIMEOUT_S = 1800.0


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def measure(slots: int, cls: str) -> dict[str, Any]:
    """The figures of one size, in this process (which should have done nothing else)."""
    from daemons.cli import bench_negotiator as bn
    from daemons.core import ads
    from daemons.core import config as configmod
    from daemons.core.clock import PoolClock, TimerQueue
    from daemons.core.collector_client import iter_update_chunks
    from daemons.pb.htcpool import collector_pb2, common_pb2
    from daemons.startd import service  # noqa: F401  (what a startd process imports)
    from daemons.startd.config import read_startd_config
    from daemons.startd.daemon import host_names
    from daemons.startd.updates import machine_ad_texts
    from daemons.startd.machines import Startd

    from daemons.core.memory import fix_mmap_threshold
    fix_mmap_threshold()    # as the runner does for a startd process
    machines = max(1, slots // SLOTS_PER_MACHINE)
    slots = machines * SLOTS_PER_MACHINE
    with tempfile.TemporaryDirectory(prefix="htcpool-bench-startd-") as d:
        path = Path(d) / "startd.conf"
        path.write_text(bn.machine_config_text(cls))
        cfg = read_startd_config(configmod.load(path, local_dir=Path(d)))
    job_text = bn.job_ad_text(cls)
    gc.collect()
    base_kb = _status_kb("VmRSS")
    out: dict[str, Any] = {"slots": slots, "class": cls, "baseline_mb": round(base_kb / 1024, 1),
                           # of which mapped files (the interpreter's and libraries' code, which
                           # the processes of a pool share) and the process's own memory
                           "baseline_file_mb": round(_status_kb("RssFile") / 1024, 1),
                           "baseline_anon_mb": round(_status_kb("RssAnon") / 1024, 1)}

    def grown(since_kb: int) -> int:
        gc.collect()
        return round((_status_kb("VmRSS") - since_kb) * 1024 / slots)

    def update(model: Startd, now: float) -> int:
        deleted: list[str] = []
        sent = 0
        for part, names in iter_update_chunks(machine_ad_texts(list(model.machines.values()), now, deleted),
                                              deleted):
            req = collector_pb2.UpdateAdsRequest(ads=[common_pb2.ClassAd(text=t) for t in part],
                                                 invalidate_type="Machine", invalidate_names=names)
            sent += len(req.SerializeToString())
        return sent

    t = time.perf_counter()
    clock = PoolClock()   # TIME_SCALE 1: the jobs (a day long) are still running at the end
    now = clock.now()
    model = Startd(host_names("benchhost", machines), cfg, "127.0.0.1:9618", now)
    out["model_bytes_per_slot"] = grown(base_kb)
    out["model_s"] = round(time.perf_counter() - t, 3)
    t = time.perf_counter()
    sent = update(model, now)
    out["advertise_s"] = round(time.perf_counter() - t, 3)
    out["advertise_bytes_per_slot"] = round(sent / slots)
    before_kb = _status_kb("VmRSS")
    t = time.perf_counter()

    async def claim_all() -> TimerQueue:
        # As the daemon does: each running job's end waits in one TimerQueue, keyed by its
        # claim's number, current while that claim runs a job that ends then.
        job_ends = TimerQueue(clock, lambda claim_number: None, current=model.job_ends_at)
        for m in model.machines.values():
            for s in list(m.slots.values()):
                claimed = m.request_claim(s, ads.parse_ad(job_text, "job ad"), "schedd@benchhost", "127.0.0.1:1",
                                          "u001@benchhost", now)
                if not claimed.ok:
                    raise RuntimeError(f"claim refused: {claimed.reason}")
                ok, why, end = m.activate(s, ads.parse_ad(job_text, "job ad"), now)
                if not ok:
                    raise RuntimeError(f"activation refused: {why}")
                assert s.claim is not None
                job_ends.set(s.claim.seq, end)
        return job_ends

    asyncio.run(claim_all())
    out["claim_and_activate_s"] = round(time.perf_counter() - t, 3)
    out["busy_bytes_per_slot"] = grown(before_kb)
    t = time.perf_counter()
    update(model, now + 60)
    out["update_busy_s"] = round(time.perf_counter() - t, 3)
    # (Counted from the slots: the queue's own count walks its heap into a set, a copy that
    # would be the process's peak.)
    out["jobs_running"] = sum(len(m.running()) for m in model.machines.values())
    peak_kb = _status_kb("VmHWM")
    out["peak_rss_mb"] = {f"startd ({slots:,} slots)": round(peak_kb / 1024, 1)}
    out["peak_above_baseline_bytes_per_slot"] = round((peak_kb - base_kb) * 1024 / slots)
    out["startd_bytes_per_slot"] = round(peak_kb * 1024 / slots)
    return out


def bench_startd(args: argparse.Namespace) -> int:
    try:
        sizes = [int(x) for x in str(args.sizes).split(",") if x.strip()]
    except ValueError:
        print(f"htcpool bench startd: --sizes {args.sizes!r}: slot counts separated by commas", file=sys.stderr)
        return 2
    if args.claim_machines < 1:
        print("htcpool bench startd: --claim-machines: at least 1", file=sys.stderr)
        return 2
    if not sizes or min(sizes) < SLOTS_PER_MACHINE:
        print(f"htcpool bench startd: --sizes: each size at least {SLOTS_PER_MACHINE} slots", file=sys.stderr)
        return 2
    print(f"htcpool bench startd: one process per size, {SLOTS_PER_MACHINE} static slots per machine, "
          f"{args.machine_class} machines (bench negotiator's)", flush=True)
    rows = []
    for slots in sizes:
        # A process of its own: its peak RSS is this size's alone.
        proc = subprocess.run([sys.executable, "-m", "daemons.cli.bench_startd", str(slots), args.machine_class],
                              capture_output=True, text=True, timeout=CHILD_TIMEOUT_S,
                              cwd=Path(__file__).resolve().parents[2], env=os.environ.copy())
        if proc.returncode != 0 or not proc.stdout.strip():
            print(f"htcpool bench startd: the {slots}-slot run failed: "
                  f"{(proc.stderr.strip().splitlines() or ['no output'])[-1]}", file=sys.stderr)
            return 1
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        rows.append(r)
        print(f"  {r['slots']:>7,} slots: baseline {r['baseline_mb']} MB ({r['baseline_file_mb']} MB of it "
              f"mapped files); model {r['model_bytes_per_slot']:,} B/slot; "
              f"busy +{r['busy_bytes_per_slot']:,} B/slot; peak {r['peak_above_baseline_bytes_per_slot']:,} B/slot "
              f"above baseline; startd_bytes_per_slot {r['startd_bytes_per_slot']:,} "
              f"(advertise {r['advertise_s']} s, claims {r['claim_and_activate_s']} s)", flush=True)
    from daemons.cli import bench_startd_claims
    claims = bench_startd_claims.measure(args.machine_class, args.claim_machines)
    print(f"  claim path: {claims['claim_path_us_per_match']:,} µs of CPU per match "
          f"({claims['claim_path_matches']:,} matches through the startd's service in batches of "
          f"{claims['claim_path_batch']}, the update after them included; best of {bench_startd_claims.REPEATS})",
          flush=True)
    if args.json:
        print(json.dumps({"machine_class": args.machine_class, "rows": rows, **claims}))
    return 0


if __name__ == "__main__":
    print(json.dumps(measure(int(sys.argv[1]), sys.argv[2])))
