"""DrainBoss's PI controller (seed 003, "DrainBoss: a drain rate controller"). Pure.

The controlled variable is the number of running multicore jobs; the output is the
number of nodes to start draining now. In the seed's words: "Proportional term (gain)
acts proportionally to the error ... Integral action sums the error over time; output
grows to offset error", with the options --setpoint, --propband ("a wide band, greatly
limiting effect of proportional term"), --reset ("the integral time ... used in
denominator, so bigger number makes accumulated error less important"), --lookback
("how far back to look at accumulated error, to avoid windup") and --maxtodrain
("extent of controller output; maximum size of correction (minimum is zero)").

Precisely (the textbook proportional-band form of a PI controller):

    e(t)   = setpoint − running multicore jobs
    P      = maxtodrain × e / propband
    I      = maxtodrain × (∫ e dt over the last `lookback` seconds / reset) / propband
    output = min(max(P + I, 0), maxtodrain)
    nodes  = floor(output + carry)     (nodes to start draining now)
    carry  = output + carry − nodes    (the fraction left for the next run)

so the output is at full scale (maxtodrain nodes) when the error equals the
proportional band, or when the error integrated over the window, divided by the reset
time, equals it. Units: e in jobs, ∫e dt in job-seconds, reset and lookback in
seconds, P and I in nodes.

The output is a real number of nodes per run and a run drains whole nodes: the
fraction is carried to the next run (as the defrag daemon carries its rate), so an
output of 0.25 drains one node every fourth run instead of never. The seed's script
had no memory between runs; without the carry a controller tuned gently enough for
drains that take hours (see the README) would never drain at all until its integral
had grown, and would then overshoot. The daemon drops the carry when the truth table
says not to start drains.

The integral: every run stores one sample (time, error). A sample stands for the time
since the sample before it, but for no more than one run period (`period_s`, the
daemon's interval): when the controller was not running, nothing was measured and
nothing is integrated. The very first sample stands for one period. Only the part of
each sample's span inside the window [now − lookback, now] counts, and samples wholly
outside it are dropped: the integral forgets old error, which is the seed's
anti-windup. The samples are the controller's whole state; the daemon saves them, so
a restarted controller resumes with its integral (the seed's "ramp up function").
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable


class SettingsError(ValueError):
    """Controller settings out of range; the message names the option."""


@dataclass(frozen=True)
class ControllerSettings:
    setpoint: float = 250.0      # --setpoint: running multicore jobs wanted
    propband: float = 200.0      # --propband: error (jobs) that gives full output
    reset_s: float = 10000.0     # --reset: integral (reset) time, seconds
    lookback_s: float = 86400.0  # --lookback: integration window, seconds
    maxtodrain: int = 9          # --maxtodrain: full-scale output, nodes per run
    period_s: float = 300.0      # the run interval: the longest span one sample stands for

    def validate(self) -> "ControllerSettings":
        checks = [
            (self.setpoint >= 0, f"--setpoint {self.setpoint:g}: must be 0 or more (running multicore jobs)"),
            (self.propband > 0, f"--propband {self.propband:g}: must be more than 0 (the error, in jobs, "
                                "that gives full output)"),
            (self.reset_s > 0, f"--reset {self.reset_s:g}: must be more than 0 seconds (it divides the "
                               "integral)"),
            (self.lookback_s > 0, f"--lookback {self.lookback_s:g}: must be more than 0 seconds"),
            (self.maxtodrain >= 0, f"--maxtodrain {self.maxtodrain}: must be 0 or more nodes"),
            (self.period_s > 0, f"interval {self.period_s:g}: must be more than 0 seconds"),
        ]
        for value in (self.setpoint, self.propband, self.reset_s, self.lookback_s, self.period_s):
            if not math.isfinite(value):
                raise SettingsError(f"{value}: settings must be finite numbers")
        for ok, message in checks:
            if not ok:
                raise SettingsError(message)
        return self


@dataclass(frozen=True)
class Sample:
    t: float        # pool time of the run
    error: float    # setpoint − running multicore jobs then


@dataclass(frozen=True)
class ControlOutput:
    error: float
    integral: float     # ∫ e dt over the window, job-seconds
    p_term: float       # nodes
    i_term: float       # nodes
    output: float       # P + I clamped to [0, maxtodrain]
    nodes: int          # nodes to start draining now: whole part of output + carry
    carry: float = 0.0  # the fraction left for the next run


@dataclass(frozen=True)
class ControllerState:
    """Everything the controller remembers between runs (what the state file holds)."""
    samples: tuple[Sample, ...] = ()
    carry: float = 0.0


def spans(samples: list[Sample], period_s: float) -> list[tuple[float, float, float]]:
    """(start, end, error) of the time each sample stands for."""
    out = []
    prev_t: float | None = None
    for s in samples:
        held = period_s if prev_t is None else min(max(s.t - prev_t, 0.0), period_s)
        out.append((s.t - held, s.t, s.error))
        prev_t = s.t
    return out


def integral(samples: list[Sample], now: float, lookback_s: float, period_s: float) -> float:
    """∫ e dt over [now − lookback, now], each sample holding its error over its span."""
    lo = now - lookback_s
    total = 0.0
    for start, end, error in spans(samples, period_s):
        overlap = min(end, now) - max(start, lo)
        if overlap > 0:
            total += error * overlap
    return total


def forget(samples: Iterable[Sample], now: float, lookback_s: float) -> list[Sample]:
    """Drop samples whose whole span lies before the window (a kept sample's predecessor
    still bounds its span, so keep the newest dropped one too)."""
    samples = sorted(samples, key=lambda s: s.t)
    lo = now - lookback_s
    first = 0
    for i, s in enumerate(samples):
        if s.t < lo:
            first = i
    return samples[first:] if samples and samples[first].t < lo else samples


def step(settings: ControllerSettings, state: ControllerState, now: float,
         running_multicore: int) -> tuple[ControlOutput, ControllerState]:
    """One run of the controller: the new sample joins the history, the output is computed."""
    error = settings.setpoint - running_multicore
    history = forget([s for s in state.samples if s.t < now] + [Sample(now, error)], now, settings.lookback_s)
    i_sum = integral(history, now, settings.lookback_s, settings.period_s)
    out = output_of(settings, error, i_sum, state.carry)
    return out, ControllerState(tuple(history), out.carry)


def output_of(settings: ControllerSettings, error: float, i_sum: float, carry: float = 0.0) -> ControlOutput:
    full = settings.maxtodrain
    p = full * error / settings.propband
    i = full * (i_sum / settings.reset_s) / settings.propband
    out = min(max(p + i, 0.0), float(full))
    # The epsilon keeps 0.1 + 0.2 + ... from missing a whole node by a rounding error.
    nodes = min(full, int(math.floor(out + carry + 1e-9)))
    return ControlOutput(error, i_sum, p, i, out, nodes, max(0.0, min(out + carry - nodes, 1.0 - 1e-9)))
