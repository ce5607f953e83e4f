"""The startd's typed configuration: machine size, slot types, policy expressions."""
from __future__ import annotations

import functools

import re
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Iterable, Mapping

from daemons.core.config import ConfigError, Param, parse_expr

MAX_SLOT_TYPES = 10
STANDARD = ("Cpus", "Memory", "Disk")


@dataclass(frozen=True)
class Resources:
    """Amounts of a machine's resources: the standard three and custom ones (MACHINE_RESOURCE_<name>).

    Memory is in MiB and Disk in KiB, as HTCondor advertises them.
    """
    cpus: int
    memory: int
    disk: int
    custom: tuple[tuple[str, int], ...] = ()   # (name, amount), sorted by name

    @classmethod
    def of(cls, amounts: Mapping[str, int]) -> "Resources":
        lower = {k.lower(): (k, int(v)) for k, v in amounts.items()}
        custom = tuple(sorted((name, v) for low, (name, v) in lower.items() if low not in ("cpus", "memory", "disk")))
        return cls(lower.get("cpus", ("", 0))[1], lower.get("memory", ("", 0))[1], lower.get("disk", ("", 0))[1],
                   custom)

    def as_dict(self) -> dict[str, int]:
        out = {"Cpus": self.cpus, "Memory": self.memory, "Disk": self.disk}
        out.update(self.custom)
        return out

    def get(self, name: str) -> int:
        for k, v in self.as_dict().items():
            if k.lower() == name.lower():
                return v
        return 0

    @property
    def names(self) -> tuple[str, ...]:
        return STANDARD + tuple(n for n, _ in self.custom)

    def describe(self) -> str:
        """'4 cpus, 8192 MiB memory, 1048576 KiB disk, 2 GPUs'"""
        return ", ".join([f"{self.cpus} cpus", f"{self.memory} MiB memory", f"{self.disk} KiB disk"]
                         + [f"{v} {k}" for k, v in self.custom])

    def fits(self, other: "Resources") -> bool:
        if not self.custom:   # the usual case, in every claim: three comparisons
            return self.cpus <= other.cpus and self.memory <= other.memory and self.disk <= other.disk
        theirs = {k.lower(): v for k, v in other.as_dict().items()}
        return all(v <= theirs.get(k.lower(), 0) for k, v in self.as_dict().items())

    def _combine(self, other: "Resources", sign: int) -> "Resources":
        # A claim splits and gives back a p-slot's resources several times: without custom
        # resources, or with the same ones spelled alike (both sorted by name), the sum is
        # taken field by field (about 1 µs, where the general way below takes 7).
        if self.custom or other.custom:
            if len(self.custom) != len(other.custom) or \
                    any(a[0] != b[0] for a, b in zip(self.custom, other.custom)):
                return self._combine_generally(other, sign)
            custom = tuple((a[0], a[1] + sign * b[1]) for a, b in zip(self.custom, other.custom))
        else:
            custom = ()
        return Resources(self.cpus + sign * other.cpus, self.memory + sign * other.memory,
                         self.disk + sign * other.disk, custom)

    def _combine_generally(self, other: "Resources", sign: int) -> "Resources":
        mine = self.as_dict()
        for k, v in other.as_dict().items():
            key = next((m for m in mine if m.lower() == k.lower()), k)
            mine[key] = mine.get(key, 0) + sign * v
        return Resources.of(mine)

    def __sub__(self, other: "Resources") -> "Resources":
        return self._combine(other, -1)

    def __add__(self, other: "Resources") -> "Resources":
        return self._combine(other, +1)


# HTCondor's defaults (htcondor2.param): CONSUMPTION_CPUS, CONSUMPTION_MEMORY, CONSUMPTION_DISK.
DEFAULT_CONSUMPTION = {
    "Cpus": "quantize(target.RequestCpus,{1})",
    "Memory": "quantize(target.RequestMemory,{128})",
    "Disk": "quantize(target.RequestDisk,{1024})",
}


def default_consumption(resource: str) -> str:
    """A custom resource is consumed as requested (none if the job does not ask)."""
    return DEFAULT_CONSUMPTION.get(resource, f"ifThenElse(target.Request{resource} is undefined, 0, "
                                             f"target.Request{resource})")


@dataclass(frozen=True)
class SlotPolicy:
    """The policy expressions of one slot type (Resource.cpp publish_slot_config_overrides:
    each may be set per slot type as SLOT_TYPE_<N>_<KNOB>, else the machine-wide knob)."""
    start: str = "True"                       # START
    rank: str = "0"                           # RANK
    slot_weight: str = "Cpus"                 # SLOT_WEIGHT (or a SlotWeight macro)
    is_owner: str = "False"                   # IS_OWNER: true puts an unclaimed slot in the Owner state
    preempt: str = "False"                    # PREEMPT: true preempts the running job (after retirement)
    want_vacate: str = "True"                 # WANT_VACATE: vacate (MachineMaxVacateTime) rather than kill
    kill: str = "False"                       # KILL: true ends a vacate at once
    max_job_retirement_time: str = "0"        # MAXJOBRETIREMENTTIME (an expression; job is TARGET)
    machine_max_vacate_time: str = "10 * 60"  # MachineMaxVacateTime
    within_resource_limits: str = ""          # WithinResourceLimits override; "" = HTCondor's
    modify_request_exprs: tuple[tuple[str, str], ...] = (
        ("RequestCpus", "quantize(RequestCpus,{1})"),
        ("RequestMemory", "quantize(RequestMemory,{128})"),
        ("RequestDisk", "quantize(RequestDisk,{1024})"),
    )


# SlotPolicy field -> its knob (HTCondor's spelling).
POLICY_KNOBS = {
    "start": "START", "rank": "RANK", "slot_weight": "SLOT_WEIGHT", "is_owner": "IS_OWNER", "preempt": "PREEMPT",
    "want_vacate": "WANT_VACATE", "kill": "KILL", "max_job_retirement_time": "MAXJOBRETIREMENTTIME",
    "machine_max_vacate_time": "MachineMaxVacateTime", "within_resource_limits": "WithinResourceLimits",
}


@dataclass(frozen=True)
class SlotTypeSpec:
    type_id: int
    count: int
    partitionable: bool
    size: Resources
    # Negotiator-side p-slot splitting (seed 001): the slot advertises Consumption<Res>
    # expressions and NumClaims; the negotiator matches it up to that many times a cycle.
    consumption_policy: bool = False
    consumption: tuple[tuple[str, str], ...] = ()
    num_claims: int = 1
    policy: SlotPolicy | None = None          # None: the machine-wide policy (StartdConfig)


@dataclass(frozen=True)
class StartdConfig:
    machine: Resources
    slot_types: tuple[SlotTypeSpec, ...]
    start: str = "True"                       # START
    rank: str = "0"                           # RANK
    slot_weight: str = "Cpus"                 # SLOT_WEIGHT
    within_resource_limits: str = ""          # WithinResourceLimits override; "" = HTCondor's
    startd_attrs: tuple[tuple[str, str], ...] = ()  # STARTD_ATTRS / STARTD_EXPRS: name, expr
    modify_request_exprs: tuple[tuple[str, str], ...] = SlotPolicy.modify_request_exprs
    claim_partitionable_leftovers: bool = True
    alive_interval_s: float = 300.0          # ALIVE_INTERVAL
    max_claim_alives_missed: int = 6         # MAX_CLAIM_ALIVES_MISSED
    max_job_retirement_time: str = "0"       # MAXJOBRETIREMENTTIME (an expression; job is TARGET)
    machine_max_vacate_time: str = "10 * 60"  # MachineMaxVacateTime
    is_owner: str = "False"                  # IS_OWNER
    preempt: str = "False"                   # PREEMPT
    want_vacate: str = "True"                # WANT_VACATE
    kill: str = "False"                      # KILL
    polling_interval_s: float = 5.0          # POLLING_INTERVAL: how often PREEMPT and IS_OWNER are evaluated
    arch: str = "X86_64"
    opsys: str = "LINUX"
    opsys_and_ver: str = "Linux"
    uid_domain: str = "localhost"
    filesystem_domain: str = "localhost"
    extra_attrs: dict[str, str] = field(default_factory=dict)
    # STARTD_ATTRS as each slot resolves them (SLOT<N>_<attr>, SLOT_TYPE_<N>_<attr>, <attr>),
    # by slot id; a slot not listed publishes `startd_attrs`.
    slot_attrs: tuple[tuple[int, tuple[tuple[str, str], ...]], ...] = ()
    warnings: tuple[str, ...] = ()           # logged at start-up (HTCondor skips these with a log line)

    @property
    def claim_lease_s(self) -> float:
        """A claim not kept alive for this long is dropped by the startd."""
        return self.alive_interval_s * self.max_claim_alives_missed

    @property
    def custom_resources(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.machine.custom)

    def policy(self, spec: SlotTypeSpec) -> SlotPolicy:
        """The policy of a slot type: its SLOT_TYPE_<N>_ overrides, else the machine-wide knobs."""
        if spec.policy is not None:
            return spec.policy
        return self.machine_policy

    @functools.cached_property
    def static_slot_parts(self) -> dict:
        """The printed static parts of this configuration's slot ads (daemons/startd/slotad.py)."""
        return {}

    @functools.cached_property
    def machine_policy(self) -> SlotPolicy:
        # Made once: a slot ad asks for its policy several times, for every slot, every update.
        return SlotPolicy(self.start, self.rank, self.slot_weight, self.is_owner, self.preempt, self.want_vacate,
                          self.kill, self.max_job_retirement_time, self.machine_max_vacate_time,
                          self.within_resource_limits, self.modify_request_exprs)

    def attrs_of(self, slot_id: int) -> tuple[tuple[str, str], ...]:
        for sid, attrs in self.slot_attrs:
            if sid == slot_id:
                return attrs
        return self.startd_attrs


_UNIT = {"": 1, "k": 1, "m": 1, "g": 1024, "t": 1024 * 1024}


def _amount(text: str, total: int, what: str, unit_scale: dict[str, int] | None = None) -> int | str:
    """An absolute amount, a fraction ("1/4", "0.25"), a percentage ("25%") or "auto"."""
    t = text.strip().lower()
    if t == "auto":
        return "auto"
    if t.endswith("%"):
        return int(total * Fraction(t[:-1].strip()) / 100)
    if "/" in t:
        return int(total * Fraction(t))
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmgt]?)b?", t)
    if not m:
        raise ValueError(f"{what} amount {text.strip()!r} is not a number, fraction, percentage or auto")
    number, unit = m.groups()
    value = float(number)
    if "." in number and value < 1:
        return int(total * value)  # HTCondor reads a bare fraction as a share of the machine
    scale = (unit_scale or _UNIT).get(unit, 1)
    return int(value * scale)


_RES_NAMES = {"c": "Cpus", "cpu": "Cpus", "cpus": "Cpus",
              "m": "Memory", "mem": "Memory", "memory": "Memory", "ram": "Memory",
              "d": "Disk", "disk": "Disk",
              "s": "swap", "swap": "swap", "v": "swap", "virtualmemory": "swap"}
_MEM_UNITS = {"": 1, "k": 1, "m": 1, "g": 1024, "t": 1024 * 1024}  # MiB
_DISK_UNITS = {"": 1, "k": 1, "m": 1024, "g": 1024 * 1024, "t": 1024 ** 3}  # KiB


def _units(resource: str) -> dict[str, int]:
    return _MEM_UNITS if resource == "Memory" else _DISK_UNITS if resource == "Disk" else _UNIT


def parse_slot_type(text: str, machine: Resources, what: str) -> dict[str, int | str]:
    """HTCondor SLOT_TYPE_<N> syntax -> {Cpus, Memory, Disk, <custom>...} (ints or 'auto')."""
    t = text.strip()
    if not t:
        raise ConfigError(f"{what} is empty")
    totals = machine.as_dict()
    if "=" not in t:
        # One share for every resource: "100%", "1/4", "0.25", "auto".
        try:
            return {r: _amount(t, total, r, _units(r)) for r, total in totals.items()}
        except (ValueError, ZeroDivisionError) as e:
            raise ConfigError(f"{what} = {t!r}: {e}") from None
    # Resources a slot type does not name: an equal share of what is left ("auto"),
    # except custom resources, which HTCondor gives a slot only when asked.
    out: dict[str, int | str] = {r: ("auto" if r in STANDARD else 0) for r in totals}
    custom = {n.lower(): n for n in totals if n not in STANDARD}
    for part in re.split(r"\s*,\s*", t):
        if not part:
            continue
        if "=" not in part:
            raise ConfigError(f"{what} = {t!r}: expected name=value, got {part!r}")
        name, value = (x.strip() for x in part.split("=", 1))
        res = _RES_NAMES.get(name.lower()) or custom.get(name.lower())
        if res is None:
            known = ", ".join(["cpus", "memory", "disk", "swap"] + sorted(custom.values()))
            raise ConfigError(f"{what} = {t!r}: unknown resource {name!r} ({known})")
        if res == "swap":
            continue
        try:
            out[res] = _amount(value, totals[res], res, _units(res))
        except (ValueError, ZeroDivisionError) as e:
            raise ConfigError(f"{what} = {t!r}: {e}") from None
    return out


def _resolve_auto(requested: list[tuple[int, dict[str, int | str]]], machine: Resources) -> dict[int, Resources]:
    """Divide what is left of each resource equally among the slots that asked for 'auto'."""
    sizes: dict[int, dict[str, int]] = {}
    for res, total in machine.as_dict().items():
        fixed = sum(int(spec[res]) * count for count, spec in requested if spec[res] != "auto")
        autos = sum(count for count, spec in requested if spec[res] == "auto")
        left = total - fixed
        share = left // autos if autos else 0
        for i, (_count, spec) in enumerate(requested):
            sizes.setdefault(i, {})[res] = share if spec[res] == "auto" else int(spec[res])
    return {i: Resources.of(s) for i, s in sizes.items()}


def _consumption(p: Param, n: int, resources: Iterable[str]) -> tuple[tuple[str, str], ...]:
    out = []
    for r in resources:
        knob_type = f"SLOT_TYPE_{n}_CONSUMPTION_{r.upper()}"
        knob = f"CONSUMPTION_{r.upper()}"
        expr = p.expr(knob_type) or p.expr(knob) or default_consumption(r)
        out.append((r, expr))
    return tuple(out)


def read_slot_types(p: Param, machine: Resources) -> tuple[SlotTypeSpec, ...]:
    """The slot types (slot_builder.cpp countTypes / initTypes).

    Without any NUM_SLOTS_TYPE_<N>, HTCondor builds slot type 0: since HTCondor 23 one
    partitionable slot with the whole machine (SLOT_TYPE_0_PARTITIONABLE defaults to
    true), or with SLOT_TYPE_0_PARTITIONABLE = False NUM_SLOTS static slots, one per cpu
    by default; NUM_SLOTS divides the machine evenly either way.
    """
    requested: list[tuple[int, dict[str, int | str]]] = []
    meta: list[tuple[int, int, bool]] = []
    for n in range(1, MAX_SLOT_TYPES + 1):
        text = p.str(f"SLOT_TYPE_{n}")
        count_set = p.is_set(f"NUM_SLOTS_TYPE_{n}")
        if text is None and not count_set:
            continue
        count = p.int(f"NUM_SLOTS_TYPE_{n}", 0, minimum=0) or 0
        partitionable = bool(p.bool(f"SLOT_TYPE_{n}_PARTITIONABLE", False))
        # A type with slots but no SLOT_TYPE_<N> takes an equal share of what is left.
        spec = parse_slot_type(text if text is not None else "auto", machine,
                               f"{p.where(f'SLOT_TYPE_{n}')}: SLOT_TYPE_{n}")
        requested.append((count, spec))
        meta.append((n, count, partitionable))
    if not any(count for count, _ in requested) and not any(t is not None for t in (
            p.str(f"SLOT_TYPE_{n}") for n in range(1, MAX_SLOT_TYPES + 1))):
        partitionable = bool(p.bool("SLOT_TYPE_0_PARTITIONABLE", True))
        num = p.int("NUM_SLOTS", 1 if partitionable else machine.cpus, minimum=1) or 1
        _check_slot_count(num, "NUM_SLOTS")
        requested = [(num, {r: "auto" for r in machine.as_dict()})]
        meta = [(0, num, partitionable)]
    sizes = _resolve_auto(requested, machine)
    if meta[0][0] == 0 and not meta[0][2]:
        sizes[0] = Resources.of({r: (max(1, v) if r == "Cpus" else v) for r, v in sizes[0].as_dict().items()})
    default_policy = bool(p.bool("CONSUMPTION_POLICY", False))
    types = []
    for i, (n, count, part) in enumerate(meta):
        if count <= 0:
            continue
        policy = part and bool(p.bool(f"SLOT_TYPE_{n}_CONSUMPTION_POLICY", default_policy))
        num_claims = p.int(f"SLOT_TYPE_{n}_NUM_CLAIMS", None, minimum=1)
        if num_claims is None:
            num_claims = p.int("NUM_CLAIMS", None, minimum=1)
        if num_claims is None:
            # HTCondor's default: as many claims as the slot has cpus.
            num_claims = max(1, sizes[i].cpus) if policy else 1
        types.append(SlotTypeSpec(n, count, part, sizes[i], policy,
                                  _consumption(p, n, machine.names) if policy else (), num_claims))
    _check_slot_count(sum(t.count for t in types), "NUM_SLOTS_TYPE_<N>")
    used = Resources.of({})
    for t in types:
        for _ in range(t.count):
            used = used + t.size
    if not used.fits(machine):
        raise ConfigError(f"slot types need {used.describe()}; the machine has {machine.describe()} "
                          "(NUM_CPUS, MEMORY, DISK, MACHINE_RESOURCE_<name>)")
    if not types:
        raise ConfigError("no slots: every NUM_SLOTS_TYPE_<N> is 0 (set NUM_SLOTS_TYPE_1 = 1)")
    return tuple(types)


def type_knob(p: Param, type_id: int, knob: str) -> str:
    """The knob a slot type reads: SLOT_TYPE_<N>_<KNOB> if set, else <KNOB> (Resource::param)."""
    typed = f"SLOT_TYPE_{type_id}_{knob}"
    return typed if p.is_set(typed) else knob


def _read_policy(p: Param, type_id: int | None) -> SlotPolicy:
    """A slot type's policy expressions; type None reads only the machine-wide knobs."""
    defaults = SlotPolicy()
    values: dict[str, object] = {}
    for name, knob in POLICY_KNOBS.items():
        k = knob if type_id is None else type_knob(p, type_id, knob)
        if name == "slot_weight" and not p.is_set(k):
            # HTCondor falls back to a SlotWeight macro (seed 001 sets one), then Cpus.
            k = "SlotWeight" if type_id is None else type_knob(p, type_id, "SlotWeight")
        default = getattr(defaults, name)
        values[name] = p.expr(k, default) or default
    modify = []
    for attr, default in defaults.modify_request_exprs:
        knob = f"MODIFY_REQUEST_EXPR_{attr.upper()}"
        k = knob if type_id is None else type_knob(p, type_id, knob)
        modify.append((attr, p.expr(k, default) or default))
    values["modify_request_exprs"] = tuple(modify)
    return SlotPolicy(**values)  # type: ignore[arg-type]


def _type_overrides(p: Param, type_id: int) -> bool:
    """True if some policy knob is set for this slot type alone."""
    knobs = list(POLICY_KNOBS.values()) + ["SlotWeight"] + [f"MODIFY_REQUEST_EXPR_{a.upper()}" for a, _ in
                                                              SlotPolicy.modify_request_exprs]
    return any(p.is_set(f"SLOT_TYPE_{type_id}_{k}") for k in knobs)


_ATTR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _startd_attrs(p: Param, slot_id: int | None, type_id: int | None,
                  skipped: dict[tuple[str, str], list[int]]) -> tuple[tuple[str, str], ...]:
    """STARTD_ATTRS (and the obsolete STARTD_EXPRS) as one slot publishes them
    (Resource.cpp init_classad): the list is STARTD_ATTRS plus SLOT<N>_STARTD_ATTRS, and
    each name's value is SLOT<N>_<name>, else SLOT_TYPE_<T>_<name>, else <name>; a name
    defined nowhere is skipped, and an empty value leaves the attribute out."""
    def knob(name: str) -> str:
        return name if type_id is None else type_knob(p, type_id, name)

    names: list[tuple[str, str]] = []
    lists = [knob("STARTD_ATTRS"), knob("STARTD_EXPRS")]
    if slot_id is not None:
        lists += [knob(f"SLOT{slot_id}_STARTD_ATTRS"), knob(f"SLOT{slot_id}_STARTD_EXPRS")]
    for lst in lists:
        for name in p.list(lst):
            if not _ATTR_NAME.fullmatch(name):
                raise ConfigError(f"{p.where(lst)}: {lst} names {name!r}, which is not an attribute name")
            if name.lower() not in {n.lower() for n, _ in names}:
                names.append((name, lst))
    out = []
    for name, lst in names:
        candidates = ([f"SLOT{slot_id}_{name}"] if slot_id is not None else []) + [knob(name)]
        where = next((c for c in candidates if p.raw(c) is not None), None)
        if where is None:
            if slot_id is not None:
                skipped.setdefault((name, lst), []).append(slot_id)
            continue
        text = p.raw(where) or ""
        if not text.strip():
            continue
        out.append((name, parse_expr(text, f"{p.where(where)}: {where}")))
    return tuple(out)


# One emulated machine holds at most this many slots at start (its slots' ads are
# advertised together); a pool of more slots is more machines (--machines).
MAX_SLOTS_PER_MACHINE = 10_000


def _check_slot_count(n: int, knobs: str) -> None:
    if n > MAX_SLOTS_PER_MACHINE:
        raise ConfigError(f"{knobs}: {n} slots on one machine; an emulated machine has at most "
                          f"{MAX_SLOTS_PER_MACHINE} (use a partitionable slot, or more machines with --machines)")


_RESOURCE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


def read_machine_resources(p: Param) -> dict[str, int]:
    """MACHINE_RESOURCE_<name> = N (a count) or a list of ids (its length)."""
    out: dict[str, int] = {}
    for knob in p.with_prefix("MACHINE_RESOURCE_"):
        name = knob[len("MACHINE_RESOURCE_"):]
        if name.upper() in ("NAMES", "INVENTORY") or name.upper().startswith("INVENTORY_"):
            continue
        text = p.str(knob)
        if not text:
            continue
        if not _RESOURCE_NAME.match(name) or name.lower() in ("cpus", "memory", "disk", "swap"):
            raise ConfigError(f"{p.where(knob)}: {knob}: {name!r} cannot name a custom machine resource")
        if re.fullmatch(r"\d+", text.strip()):
            out[name] = p.int(knob, 0, minimum=0) or 0
        else:
            ids = [x for x in re.split(r"[,\s]+", text.strip()) if x]
            out[name] = len(ids)
    return out


def read_startd_config(p: Param) -> StartdConfig:
    amounts = {"Cpus": p.int("NUM_CPUS", 8, minimum=1) or 8,
               "Memory": p.int("MEMORY", 16384, minimum=1) or 16384,
               "Disk": p.int("DISK", 104857600, minimum=1) or 104857600}
    amounts.update(read_machine_resources(p))
    machine = Resources.of(amounts)
    machine_wide = _read_policy(p, None)
    types = []
    for t in read_slot_types(p, machine):
        policy = _read_policy(p, t.type_id) if _type_overrides(p, t.type_id) else None
        types.append(replace(t, policy=policy) if policy is not None and policy != machine_wide else t)
    default_attrs = _startd_attrs(p, None, None, {})
    slot_attrs = []
    skipped: dict[tuple[str, str], list[int]] = {}
    slot_id = 0
    for t in types:
        for _ in range(t.count):
            slot_id += 1
            attrs = _startd_attrs(p, slot_id, t.type_id, skipped)
            if attrs != default_attrs:
                slot_attrs.append((slot_id, attrs))
    warnings = [f"{p.where(lst)}: {lst} names {name}, which is not defined for "
                f"{', '.join(f'slot{i}' for i in ids)}; not advertised there"
                for (name, lst), ids in skipped.items()]
    modify = list(machine_wide.modify_request_exprs)
    for r in machine.names[3:]:
        knob = f"MODIFY_REQUEST_EXPR_REQUEST{r.upper()}"
        if p.is_set(knob):
            modify.append((f"Request{r}", p.expr(knob) or f"Request{r}"))
    mw = machine_wide
    return StartdConfig(
        machine=machine,
        slot_types=tuple(types),
        start=mw.start, rank=mw.rank, slot_weight=mw.slot_weight, within_resource_limits=mw.within_resource_limits,
        startd_attrs=default_attrs,
        modify_request_exprs=tuple(modify),
        claim_partitionable_leftovers=bool(p.bool("CLAIM_PARTITIONABLE_LEFTOVERS", True)),
        alive_interval_s=float(p.int("ALIVE_INTERVAL", 300, minimum=1) or 300),
        max_claim_alives_missed=p.int("MAX_CLAIM_ALIVES_MISSED", 6, minimum=1) or 6,
        max_job_retirement_time=mw.max_job_retirement_time,
        machine_max_vacate_time=mw.machine_max_vacate_time,
        is_owner=mw.is_owner, preempt=mw.preempt, want_vacate=mw.want_vacate, kill=mw.kill,
        polling_interval_s=float(p.int("POLLING_INTERVAL", 5, minimum=1) or 5),
        arch=p.str("ARCH", "X86_64") or "X86_64",
        opsys=p.str("OPSYS", "LINUX") or "LINUX",
        opsys_and_ver=p.str("OPSYSANDVER", "Linux") or "Linux",
        uid_domain=p.str("UID_DOMAIN", "localhost") or "localhost",
        filesystem_domain=p.str("FILESYSTEM_DOMAIN", "localhost") or "localhost",
        slot_attrs=tuple(slot_attrs),
        warnings=tuple(warnings),
    )
