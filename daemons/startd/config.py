"""The startd's typed configuration: machine size, slot types, policy expressions."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction

from daemons.core.config import ConfigError, Param

MAX_SLOT_TYPES = 10


@dataclass(frozen=True)
class Resources:
    cpus: int
    memory: int  # MiB
    disk: int    # KiB

    def fits(self, other: "Resources") -> bool:
        return self.cpus <= other.cpus and self.memory <= other.memory and self.disk <= other.disk

    def __sub__(self, other: "Resources") -> "Resources":
        return Resources(self.cpus - other.cpus, self.memory - other.memory, self.disk - other.disk)

    def __add__(self, other: "Resources") -> "Resources":
        return Resources(self.cpus + other.cpus, self.memory + other.memory, self.disk + other.disk)


@dataclass(frozen=True)
class SlotTypeSpec:
    type_id: int
    count: int
    partitionable: bool
    size: Resources


@dataclass(frozen=True)
class StartdConfig:
    machine: Resources
    slot_types: tuple[SlotTypeSpec, ...]
    start: str = "True"                       # START
    rank: str = "0"                           # RANK
    slot_weight: str = "Cpus"                 # SLOT_WEIGHT
    within_resource_limits: str = ""          # WithinResourceLimits override; "" = HTCondor's
    startd_attrs: tuple[tuple[str, str], ...] = ()  # STARTD_ATTRS / STARTD_EXPRS: name, expr
    modify_request_exprs: tuple[tuple[str, str], ...] = (
        ("RequestCpus", "quantize(RequestCpus,{1})"),
        ("RequestMemory", "quantize(RequestMemory,{128})"),
        ("RequestDisk", "quantize(RequestDisk,{1024})"),
    )
    claim_partitionable_leftovers: bool = True
    alive_interval_s: float = 300.0          # ALIVE_INTERVAL
    max_claim_alives_missed: int = 6         # MAX_CLAIM_ALIVES_MISSED
    arch: str = "X86_64"
    opsys: str = "LINUX"
    opsys_and_ver: str = "Linux"
    uid_domain: str = "localhost"
    filesystem_domain: str = "localhost"
    extra_attrs: dict[str, str] = field(default_factory=dict)

    @property
    def claim_lease_s(self) -> float:
        """A claim not kept alive for this long is dropped by the startd."""
        return self.alive_interval_s * self.max_claim_alives_missed


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


_RES_NAMES = {"c": "cpus", "cpu": "cpus", "cpus": "cpus",
              "m": "memory", "mem": "memory", "memory": "memory", "ram": "memory",
              "d": "disk", "disk": "disk",
              "s": "swap", "swap": "swap", "v": "swap", "virtualmemory": "swap"}
_MEM_UNITS = {"": 1, "k": 1, "m": 1, "g": 1024, "t": 1024 * 1024}  # MiB
_DISK_UNITS = {"": 1, "k": 1, "m": 1024, "g": 1024 * 1024, "t": 1024 ** 3}  # KiB


def parse_slot_type(text: str, machine: Resources, what: str) -> dict[str, int | str]:
    """HTCondor SLOT_TYPE_<N> syntax -> {cpus, memory, disk} (ints or 'auto')."""
    t = text.strip()
    if not t:
        raise ConfigError(f"{what} is empty")
    if "=" not in t:
        # One share for every resource: "100%", "1/4", "0.25", "auto".
        try:
            return {
                "cpus": _amount(t, machine.cpus, "cpus"),
                "memory": _amount(t, machine.memory, "memory", _MEM_UNITS),
                "disk": _amount(t, machine.disk, "disk", _DISK_UNITS),
            }
        except (ValueError, ZeroDivisionError) as e:
            raise ConfigError(f"{what} = {t!r}: {e}") from None
    out: dict[str, int | str] = {"cpus": "auto", "memory": "auto", "disk": "auto"}
    for part in re.split(r"\s*,\s*", t):
        if not part:
            continue
        if "=" not in part:
            raise ConfigError(f"{what} = {t!r}: expected name=value, got {part!r}")
        name, value = (x.strip() for x in part.split("=", 1))
        res = _RES_NAMES.get(name.lower())
        if res is None:
            raise ConfigError(f"{what} = {t!r}: unknown resource {name!r} (cpus, memory, disk, swap)")
        if res == "swap":
            continue
        total = getattr(machine, res)
        units = _MEM_UNITS if res == "memory" else _DISK_UNITS if res == "disk" else _UNIT
        try:
            out[res] = _amount(value, total, res, units)
        except (ValueError, ZeroDivisionError) as e:
            raise ConfigError(f"{what} = {t!r}: {e}") from None
    return out


def _resolve_auto(requested: list[tuple[int, dict[str, int | str]]], machine: Resources) -> dict[int, Resources]:
    """Divide what is left of each resource equally among the slots that asked for 'auto'."""
    sizes: dict[int, dict[str, int]] = {}
    for res in ("cpus", "memory", "disk"):
        fixed = sum(int(spec[res]) * count for count, spec in requested if spec[res] != "auto")
        autos = sum(count for count, spec in requested if spec[res] == "auto")
        left = getattr(machine, res) - fixed
        share = left // autos if autos else 0
        for i, (_count, spec) in enumerate(requested):
            sizes.setdefault(i, {})[res] = share if spec[res] == "auto" else int(spec[res])
    return {i: Resources(**s) for i, s in sizes.items()}


def read_slot_types(p: Param, machine: Resources) -> tuple[SlotTypeSpec, ...]:
    requested: list[tuple[int, dict[str, int | str]]] = []
    meta: list[tuple[int, int, bool]] = []
    for n in range(1, MAX_SLOT_TYPES + 1):
        text = p.str(f"SLOT_TYPE_{n}")
        if text is None:
            continue
        count = p.int(f"NUM_SLOTS_TYPE_{n}", 0, minimum=0) or 0
        partitionable = bool(p.bool(f"SLOT_TYPE_{n}_PARTITIONABLE", False))
        spec = parse_slot_type(text, machine, f"{p.where(f'SLOT_TYPE_{n}')}: SLOT_TYPE_{n}")
        requested.append((count, spec))
        meta.append((n, count, partitionable))
    if not requested:
        # HTCondor's default: NUM_SLOTS static slots (NUM_CPUS of them), an equal share each.
        num = p.int("NUM_SLOTS", machine.cpus, minimum=1) or machine.cpus
        share = Resources(max(1, machine.cpus // num), machine.memory // num, machine.disk // num)
        return (SlotTypeSpec(1, num, False, share),)
    sizes = _resolve_auto(requested, machine)
    types = tuple(SlotTypeSpec(n, count, part, sizes[i]) for i, (n, count, part) in enumerate(meta) if count > 0)
    used = Resources(0, 0, 0)
    for t in types:
        for _ in range(t.count):
            used = used + t.size
    if not used.fits(machine):
        raise ConfigError(
            f"slot types need {used.cpus} cpus, {used.memory} MiB memory, {used.disk} KiB disk; "
            f"the machine has {machine.cpus}, {machine.memory}, {machine.disk} "
            "(NUM_CPUS, MEMORY, DISK)")
    if not types:
        raise ConfigError("no slots: every NUM_SLOTS_TYPE_<N> is 0 (set NUM_SLOTS_TYPE_1 = 1)")
    return types


def read_startd_config(p: Param) -> StartdConfig:
    machine = Resources(
        cpus=p.int("NUM_CPUS", 8, minimum=1) or 8,
        memory=p.int("MEMORY", 16384, minimum=1) or 16384,
        disk=p.int("DISK", 104857600, minimum=1) or 104857600,
    )
    attrs: list[tuple[str, str]] = []
    for knob in ("STARTD_ATTRS", "STARTD_EXPRS"):
        for name in p.list(knob):
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise ConfigError(f"{p.where(knob)}: {knob} names {name!r}, which is not an attribute name")
            value = p.expr(name)
            if value is None:
                raise ConfigError(f"{p.where(knob)}: {knob} names {name}, but {name} is not defined")
            attrs.append((name, value))
    defaults = dict(StartdConfig.modify_request_exprs)
    modify = []
    for attr in ("RequestCpus", "RequestMemory", "RequestDisk"):
        knob = f"MODIFY_REQUEST_EXPR_{attr.upper()}"
        modify.append((attr, p.expr(knob, defaults[attr]) or defaults[attr]))
    return StartdConfig(
        machine=machine,
        slot_types=read_slot_types(p, machine),
        start=p.expr("START", "True") or "True",
        rank=p.expr("RANK", "0") or "0",
        slot_weight=p.expr("SLOT_WEIGHT", "Cpus") or "Cpus",
        within_resource_limits=p.expr("WithinResourceLimits", "") or "",
        startd_attrs=tuple(attrs),
        modify_request_exprs=tuple(modify),
        claim_partitionable_leftovers=bool(p.bool("CLAIM_PARTITIONABLE_LEFTOVERS", True)),
        alive_interval_s=float(p.int("ALIVE_INTERVAL", 300, minimum=1) or 300),
        max_claim_alives_missed=p.int("MAX_CLAIM_ALIVES_MISSED", 6, minimum=1) or 6,
        arch=p.str("ARCH", "X86_64") or "X86_64",
        opsys=p.str("OPSYS", "LINUX") or "LINUX",
        opsys_and_ver=p.str("OPSYSANDVER", "Linux") or "Linux",
        uid_domain=p.str("UID_DOMAIN", "localhost") or "localhost",
        filesystem_domain=p.str("FILESYSTEM_DOMAIN", "localhost") or "localhost",
    )
