"""What the fuzzer feeds its inputs to, and how each answer is classified.

Every input ends in one outcome:
  accepted  a correct acceptance (checked where it can be: an accepted job ad is a
            valid ClassAd, an accepted expression prints and evaluates)
  refused   a clean error (SubmitError, AdError, ConfigError; an RPC status the
            client can act on, such as INVALID_ARGUMENT)
  error     anything else: an unexpected exception, an RPC answered INTERNAL or
            UNKNOWN (a handler that failed), a broken invariant
  hang      no answer before the deadline
  crash     the process died (an RPC answered UNAVAILABLE and the daemon no longer pings)
The invariant is that only the first two ever happen.
"""
from __future__ import annotations

import os
import tempfile
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

OUTCOMES = ("accepted", "refused", "error", "hang", "crash")
BAD = ("error", "hang", "crash")

REFUSALS = frozenset({grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
                      grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.UNIMPLEMENTED,
                      grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED,
                      grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.ALREADY_EXISTS,
                      grpc.StatusCode.OUT_OF_RANGE, grpc.StatusCode.CANCELLED, grpc.StatusCode.ABORTED})


@dataclass
class Tally:
    """Inputs tried and outcomes, by class; the bad ones kept for reproduction."""
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    failures: list[dict[str, str]] = field(default_factory=list)

    def add(self, cls: str, outcome: str, sample: Any = None, detail: str = "") -> None:
        c = self.counts.setdefault(cls, {o: 0 for o in OUTCOMES})
        c[outcome] = c.get(outcome, 0) + 1
        if outcome in BAD and len(self.failures) < 200:
            self.failures.append({"class": cls, "outcome": outcome, "input": _shown(sample), "detail": detail[-4000:]})

    def tried(self, cls: str | None = None) -> int:
        groups = [self.counts.get(cls, {})] if cls else list(self.counts.values())
        return sum(sum(c.values()) for c in groups)

    def bad(self) -> int:
        return sum(c.get(o, 0) for c in self.counts.values() for o in BAD)


def _shown(x: Any) -> str:
    text = repr(x)
    return text if len(text) <= 2000 else text[:1000] + f"... ({len(text):,} characters) ..." + text[-500:]


# ---- parsers, in this process --------------------------------------------------------------
def submit_parser(data: bytes) -> tuple[str, str]:
    """The CLI's and the schedd's submit path: decode, parse, resolve items, build."""
    from daemons.core import ads
    from daemons.schedd.submit import (SubmitContext, SubmitError, build_jobs, decode_submit, parse_submit,
                                       resolve_external_items)
    ctx = SubmitContext(owner="fuzz", uid_domain="fuzz.example", cluster_id=3, now=1000)
    try:
        text = decode_submit(data, "fuzz.sub")
        desc = parse_submit(text, "fuzz.sub")
        resolve_external_items(desc, lambda name: ["a, 1", "b, 2"], lambda pattern, kind: ["x.dat"])
        jobs = build_jobs(desc, ctx, max_jobs=200)
    except SubmitError:
        return "refused", ""
    except Exception:
        return "error", traceback.format_exc()
    for job in jobs:
        # An accepted job must be an ad every later query can read (the é bug broke them all).
        try:
            ad = ads.parse_ad(ads.text_of_exprs(job), "job ad")
        except ads.AdError as e:
            return "error", f"accepted job is not a ClassAd: {e}"
        if len(ad) != len(job):
            return "error", "accepted job lost attributes when parsed"
    return "accepted", ""


def classad_parser(text: str) -> tuple[str, str]:
    """What every daemon does with an expression or an ad it accepts: parse, print, evaluate."""
    import classad2

    from daemons.core import ads
    try:
        if text.lstrip().startswith("["):
            ad = ads.parse_ad(text, "ad")
            ads.split_ad_text(repr(ad))
            for k in list(ad.keys())[:20]:
                ads.get(ad, k)
            ads.exprs_of(ad)
        else:
            tree = ads.parse_expr(text, "expression")
            ads.one_line(str(tree))
            ads.evaluate(tree, classad2.ClassAd("[ Cpus = 4; Memory = 1024 ]"))
            ads.expr_text(text)
    except ads.AdError:
        return "refused", ""
    except Exception:
        return "error", traceback.format_exc()
    return "accepted", ""


def config_values(text: str) -> dict[str, str]:
    """`KNOB = value` lines of a configuration file (what Param.from_dict understands)."""
    out = {}
    for line in text.splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            k, _, v = line.partition("=")
            if k.strip():
                out[k.strip()] = v.strip()
    return out


def config_reader(text: str) -> tuple[str, str]:
    """Every daemon's typed reading of the knobs (no htcondor2: macros are not expanded)."""
    from daemons.core.config import ConfigError, Param
    from daemons.core.runner import ROLES, read_role_config
    values = {"COLLECTOR_HOST": "127.0.0.1:9618", **config_values(text)}
    try:
        param = Param.from_dict(values)
        for role in ROLES:
            read_role_config(role, param)
    except ConfigError:
        return "refused", ""
    except Exception:
        return "error", traceback.format_exc()
    return "accepted", ""


def config_file_check(text: str, timeout_s: float = 60.0) -> tuple[str, str]:
    """The real check `htcpool up` makes, in its throwaway interpreter: read, expand, type-check."""
    from daemons.core.config import ConfigError, check_config_file
    from daemons.core.runner import ROLES
    with tempfile.TemporaryDirectory(prefix="htcpool-fuzz-") as d:
        path = Path(d) / "fuzz.conf"
        path.write_text(text)
        env = {k: v for k, v in os.environ.items() if not k.startswith("_CONDOR_")}
        try:
            check_config_file(path, Path(d), timeout_s=timeout_s, roles=ROLES, env=env, stall_s=3.0)
        except ConfigError:
            # (Including "did not finish": the check bounded a configuration that loops.)
            return "refused", ""
        except Exception:
            return "error", traceback.format_exc()
    return "accepted", ""

