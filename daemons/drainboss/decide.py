"""DrainBoss's conditional logic and node choice (seed 003). Pure: counts, nodes and the
controller's output in; the nodes to drain and to cancel out.

The truth table ("Queue state" in the seed):

    multicore queued   no    yes   no      yes
    single-core queued no    no    yes     yes
    start drains       no    yes   no      yes     (as many as the controller says)
    cancel drains      no    no    maybe   no      (all current drains, unless --keepgoing)

"If no multicores queued, then don't start any draining - no jobs to fill the slots";
"if there are no multicores but some singlecores queued, option to cancel on-going
drains, otherwise singlecores would be held back" — the option being --keepgoing,
added after DrainBoss threw a day's draining away in a short multicore drought.

Nodes, from the seed's "Each time drainBoss runs": starting drains, candidates are
nodes "not draining and [that] have no slot composed of 8 or more unislots"; stopping
drains, "each draining node that has any slot (used or free) composed of 8 or more
unislots is put back in use". Here the width (8) is a setting, a node's slots are its
slot ads (a p-slot's Cpus is what is free, a dynamic or static slot's Cpus what it
holds), and:
- a node that could never have such a slot (no partitionable slot of at least that
  many cpus) is never a candidate: draining it would free nothing usable;
- putting back in use happens on every run, whatever the queues: it is not a control
  decision but the end of a drain that has done its work;
- only drains DrainBoss started (DrainReason "DrainBoss <name>") are cancelled; a drain
  by hand or by a defrag daemon is left alone, but its node is not a candidate either.

Node choice: "random" (the seed's: shuffle, take the first n), and the seed's future
work "better selection of node to drain (largest is best)": "largest" (most cpus
first) and "fewest" (fewest busy cores to free before a wide slot appears first). Ties
keep the seeded shuffle, so every policy is reproducible from its seed.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Iterable

import classad2

from daemons.core import ads

POLICIES = ("random", "largest", "fewest")
START, CANCEL_ALL, NOTHING = "start", "cancel", "nothing"


def queue_action(queued_multicore: int, queued_singlecore: int, keepgoing: bool) -> str:
    """The truth table: START (drains may start), CANCEL_ALL (current drains end) or NOTHING."""
    if queued_multicore > 0:
        return START
    if queued_singlecore > 0 and not keepgoing:
        return CANCEL_ALL
    return NOTHING


@dataclass(frozen=True)
class JobCounts:
    running_multicore: int = 0
    queued_multicore: int = 0
    running_singlecore: int = 0
    queued_singlecore: int = 0


@dataclass(frozen=True)
class Node:
    name: str               # the machine (its slots' Machine)
    address: str            # the startd's address, host:port
    total_cpus: int
    largest_free: int       # most cpus free in one partitionable slot
    capacity: int           # most cpus any one partitionable slot has in all
    has_wide: bool          # some slot, used or free, of at least `wide` cpus
    draining: bool
    drain_reason: str = ""

    def to_free(self, wide: int) -> int:
        """Busy cores that must finish before a slot of `wide` cpus can appear."""
        return max(0, wide - self.largest_free)


def nodes_from_ads(slot_ads: Iterable[classad2.ClassAd], wide: int) -> list[Node]:
    """One Node per machine, from all of its slot ads."""
    by_machine: dict[str, dict] = {}
    for a in slot_ads:
        machine = ads.get(a, "Machine")
        if not isinstance(machine, str) or not machine:
            continue
        n = by_machine.setdefault(machine, {"address": "", "total": 0, "largest_free": 0, "capacity": 0,
                                            "wide": False, "draining": False, "reason": ""})
        cpus = int(ads.as_number(ads.get(a, "Cpus")) or 0)
        if not n["address"]:
            for attr in ("StartdIpAddr", "MyAddress"):
                v = ads.get(a, attr)
                if isinstance(v, str) and v:
                    n["address"] = v.strip().strip("<>").split("?", 1)[0]
                    break
        n["total"] = max(n["total"], int(ads.as_number(ads.get(a, "TotalCpus")) or 0))
        if cpus >= wide:
            n["wide"] = True
        if ads.get(a, "PartitionableSlot") is True:
            n["largest_free"] = max(n["largest_free"], cpus)
            n["capacity"] = max(n["capacity"], int(ads.as_number(ads.get(a, "TotalSlotCpus")) or 0))
        if ads.get(a, "Draining") is True:
            n["draining"] = True
            reason = ads.get(a, "DrainReason")
            if isinstance(reason, str):
                n["reason"] = reason
    return [Node(m, v["address"], v["total"], v["largest_free"], v["capacity"], v["wide"], v["draining"],
                 v["reason"]) for m, v in sorted(by_machine.items())]


@dataclass(frozen=True)
class Decision:
    action: str                       # START, CANCEL_ALL or NOTHING (the truth table's column)
    drain: tuple[Node, ...]           # nodes to start draining, in order
    cancel: tuple[tuple[Node, str], ...]  # (node, why) drains to end
    candidates: int                   # how many nodes could have been drained


def decide(counts: JobCounts, nodes: list[Node], nodes_wanted: int, *, keepgoing: bool, wide: int,
           policy: str, my_reason: str, rng: random.Random) -> Decision:
    action = queue_action(counts.queued_multicore, counts.queued_singlecore, keepgoing)
    mine = [n for n in nodes if n.draining and n.drain_reason == my_reason]
    cancel: list[tuple[Node, str]] = [(n, f"has a slot of {wide} or more cpus") for n in mine if n.has_wide]
    if action == CANCEL_ALL:
        cancel += [(n, "no multicore jobs queued, single-core jobs waiting") for n in mine if not n.has_wide]
    candidates = [n for n in nodes if not n.draining and not n.has_wide and n.capacity >= wide]
    drain: list[Node] = []
    if action == START and nodes_wanted > 0:
        drain = choose(candidates, nodes_wanted, policy, wide, rng)
    return Decision(action, tuple(drain), tuple(cancel), len(candidates))


def choose(candidates: list[Node], n: int, policy: str, wide: int, rng: random.Random) -> list[Node]:
    if policy not in POLICIES:
        raise ValueError(f"node choice {policy!r}: one of {', '.join(POLICIES)}")
    order = list(candidates)
    rng.shuffle(order)
    if policy == "largest":
        order.sort(key=lambda node: -node.total_cpus)
    elif policy == "fewest":
        order.sort(key=lambda node: node.to_free(wide))
    return order[:max(0, n)]


IDLE, RUNNING = 1, 2   # JobStatus


def count_jobs(job_ads: Iterable[classad2.ClassAd], multicore_cpus: int) -> JobCounts:
    """Running and queued (idle) jobs, multicore when RequestCpus >= `multicore_cpus`."""
    counts = {"rm": 0, "qm": 0, "rs": 0, "qs": 0}
    for a in job_ads:
        status = ads.get(a, "JobStatus")
        if status not in (IDLE, RUNNING):
            continue
        cpus = ads.as_number(ads.get(a, "RequestCpus"))
        multicore = (cpus if cpus is not None else 1) >= multicore_cpus
        key = ("r" if status == RUNNING else "q") + ("m" if multicore else "s")
        counts[key] += 1
    return JobCounts(counts["rm"], counts["qm"], counts["rs"], counts["qs"])
