"""Tuning DrainBoss's PI terms from the drain time (the seed's future work: "tuning guidelines").

Seen from the controller the pool is an integrator with a dead time: a node that
starts draining now adds one running multicore job (on nodes one multicore job wide)
only when its last single-core job has ended, a drain time θ later, and stays added.
For such a process Skogestad's SIMC rules (J. Process Control 13 (2003) 291) give a
PI controller with a closed-loop time constant τc:

    Kc = 1 / (k′ (τc + θ)),    Ti = 4 (τc + θ)

Here k′ = 1 job per node started per run, i.e. 1/Δ per second with Δ the run
interval, so Kc = Δ / (τc + θ) nodes per run per job of error. DrainBoss's P term is
maxtodrain × e / propband, so propband = maxtodrain / Kc; its I term is
maxtodrain × ∫e dt / (reset × propband), so reset = Ti. With τc = θ (as fast as the
dead time allows without hunting):

    propband = 2 θ / Δ × maxtodrain,    reset = 8 θ

θ, for nodes of n cores full of single-core jobs whose lengths are exponential with
mean m, is the expected longest of n remaining lengths: m × (1 + 1/2 + ... + 1/n)
(about 2.7 m for 8 cores). The README works an example through.
"""
from __future__ import annotations

from dataclasses import dataclass


def harmonic(n: int) -> float:
    return sum(1.0 / k for k in range(1, n + 1))


def expected_drain_time_s(mean_job_s: float, cores: int) -> float:
    """Expected time until the last of `cores` exponential jobs of mean `mean_job_s` ends."""
    return mean_job_s * harmonic(cores)


@dataclass(frozen=True)
class Tuning:
    drain_time_s: float
    runs_per_drain: float     # θ / Δ
    propband: float
    reset_s: float


def simc(drain_time_s: float, interval_s: float, maxtodrain: int, tau_c_s: float | None = None) -> Tuning:
    """propband and reset for a drain time θ, run interval Δ and maxtodrain (τc = θ unless given)."""
    if drain_time_s <= 0 or interval_s <= 0 or maxtodrain < 1:
        raise ValueError("drain time and interval must be positive and maxtodrain at least 1")
    tau_c = drain_time_s if tau_c_s is None else tau_c_s
    kc = interval_s / (tau_c + drain_time_s)
    return Tuning(drain_time_s, drain_time_s / interval_s, maxtodrain / kc, 4 * (tau_c + drain_time_s))
