"""HTCondor submit-description files -> job ads (attribute -> ClassAd expression text).

Pure. Follows condor_submit where it matters for scheduling: commands are
case-insensitive; `+Attr = expr` and `MY.Attr = expr` set job attributes; `$(name)`
expands earlier definitions and $(Cluster)/$(ClusterId)/$(Process)/$(ProcId)/$(Step);
each `queue [N]` adds N procs to the one cluster with the commands in force at that
point; request_memory and request_disk take unit suffixes; the job's Requirements
gets condor_submit's default clauses after the user's. Unlike condor_submit, a line
setting a name that is neither a submit command nor used as a macro is an error,
so a typo (`request_cpu = 4`) is not silently ignored.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from daemons.core import ads

JOB_STATUS = {1: "Idle", 2: "Running", 3: "Removed", 4: "Completed", 5: "Held", 6: "Transferring Output",
              7: "Suspended"}
IDLE, RUNNING, REMOVED, COMPLETED, HELD = 1, 2, 3, 4, 5
VANILLA_UNIVERSE = 5


class SubmitError(ValueError):
    def __init__(self, file: str, line: int | None, message: str) -> None:
        self.file, self.line, self.message = file, line, message
        where = f"{file}, line {line}" if line else file
        super().__init__(f"{where}: {message}")


@dataclass
class Statement:
    line: int
    key: str          # lower-cased command, or "+Attr" for job attributes
    value: str
    attr: str = ""    # for +Attr / MY.Attr: the attribute name as written


@dataclass
class QueueStatement:
    line: int
    count: int


@dataclass
class SubmitDescription:
    file: str
    items: list[Statement | QueueStatement] = field(default_factory=list)


# Submit commands we honour -> the job attribute they set (None: handled specially).
STRING_COMMANDS = {
    "executable": "Cmd", "cmd": "Cmd",
    "output": "Out", "error": "Err", "input": "In", "log": "UserLog",
    "initialdir": "Iwd", "iwd": "Iwd",
    "should_transfer_files": "ShouldTransferFiles",
    "when_to_transfer_output": "WhenToTransferOutput",
    "transfer_input_files": "TransferInput", "transfer_output_files": "TransferOutput",
    "environment": "Env", "env": "Env",
    "notification": "JobNotification", "notify_user": "NotifyUser",
    "batch_name": "JobBatchName", "concurrency_limits": "ConcurrencyLimits",
    "description": "JobDescription",
}
EXPR_COMMANDS = {
    "requirements": "Requirements", "rank": "Rank",
    "periodic_hold": "PeriodicHold", "periodic_release": "PeriodicRelease",
    "periodic_remove": "PeriodicRemove", "on_exit_remove": "OnExitRemove",
    "on_exit_hold": "OnExitHold", "max_retries": "MaxRetries",
    "job_max_vacate_time": "JobMaxVacateTime", "max_job_retirement_time": "MaxJobRetirementTime",
    "request_gpus": "RequestGPUs",
}
SPECIAL_COMMANDS = {
    "universe", "arguments", "args", "request_cpus", "request_memory", "request_disk",
    "accounting_group", "accounting_group_user", "priority", "prio", "hold", "leave_in_queue",
    "getenv", "transfer_executable", "stream_output", "stream_error", "copy_to_spool",
    "image_size", "job_lease_duration", "want_graceful_removal", "nice_user",
}
KNOWN_COMMANDS = set(STRING_COMMANDS) | set(EXPR_COMMANDS) | SPECIAL_COMMANDS

_MACRO = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.]*)\)")
_ATTR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_QUEUE = re.compile(r"^queue\b(.*)$", re.IGNORECASE)
_KEY_VALUE = re.compile(r"^([+A-Za-z_][A-Za-z0-9_.]*)\s*=\s*(.*)$")


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) with backslash continuations joined and comments dropped."""
    out: list[tuple[int, str]] = []
    buf: list[str] = []
    start = 0
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not buf:
            start = n
            if not line.strip() or line.lstrip().startswith("#"):
                continue
        if line.endswith("\\"):
            buf.append(line[:-1])
            continue
        buf.append(line)
        out.append((start, " ".join(part.strip() for part in buf).strip()))
        buf = []
    if buf:
        out.append((start, " ".join(part.strip() for part in buf).strip()))
    return out


def parse_submit(text: str, file: str = "<submit>") -> SubmitDescription:
    """Syntax only: statements and queue statements, each with its line."""
    desc = SubmitDescription(file)
    for line_no, line in _logical_lines(text):
        q = _QUEUE.match(line)
        if q and "=" not in line.split()[0]:
            rest = q.group(1).strip()
            if not rest:
                count = 1
            elif re.fullmatch(r"\d+", rest):
                count = int(rest)
            else:
                raise SubmitError(file, line_no, f"unsupported queue statement {line!r}: "
                                                 "htcpool takes 'queue' or 'queue N'")
            desc.items.append(QueueStatement(line_no, count))
            continue
        m = _KEY_VALUE.match(line)
        if not m:
            raise SubmitError(file, line_no, f"not a submit command: {line!r} (expected 'name = value' or 'queue N')")
        key, value = m.group(1), m.group(2).strip()
        if key.startswith("+"):
            attr = key[1:]
            if not _ATTR_NAME.match(attr):
                raise SubmitError(file, line_no, f"{key!r} is not a valid job attribute name")
            desc.items.append(Statement(line_no, "+" + attr.lower(), value, attr))
        elif key.lower().startswith("my."):
            attr = key[3:]
            if not _ATTR_NAME.match(attr):
                raise SubmitError(file, line_no, f"{key!r} is not a valid job attribute name")
            desc.items.append(Statement(line_no, "+" + attr.lower(), value, attr))
        else:
            if not _ATTR_NAME.match(key):
                raise SubmitError(file, line_no, f"{key!r} is not a valid submit command name")
            desc.items.append(Statement(line_no, key.lower(), value))
    if not any(isinstance(i, QueueStatement) for i in desc.items):
        raise SubmitError(file, None, "no 'queue' statement: nothing would be submitted")
    _check_unknown(desc)
    return desc


def _check_unknown(desc: SubmitDescription) -> None:
    used_macros = {m.lower() for st in desc.items if isinstance(st, Statement) for m in _MACRO.findall(st.value)}
    for st in desc.items:
        if isinstance(st, Statement) and not st.key.startswith("+"):
            if st.key not in KNOWN_COMMANDS and st.key not in used_macros:
                hint = _close_command(st.key)
                raise SubmitError(desc.file, st.line, f"unknown submit command {st.key!r}"
                                  + (f" (did you mean {hint!r}?)" if hint else
                                     "; a macro must be used as $(name) somewhere"))


def _close_command(key: str) -> str:
    import difflib
    close = difflib.get_close_matches(key, sorted(KNOWN_COMMANDS), n=1, cutoff=0.8)
    return close[0] if close else ""


_MEM_UNITS = {"": 1, "k": 1 / 1024, "kb": 1 / 1024, "m": 1, "mb": 1, "g": 1024, "gb": 1024, "t": 1024 ** 2,
              "tb": 1024 ** 2}
_DISK_UNITS = {"": 1, "k": 1, "kb": 1, "m": 1024, "mb": 1024, "g": 1024 ** 2, "gb": 1024 ** 2,
               "t": 1024 ** 3, "tb": 1024 ** 3}
_SIZE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")


@dataclass(frozen=True)
class SubmitContext:
    """What condor_submit would know: the submitter, the schedd, the pool's defaults."""
    owner: str
    uid_domain: str
    cluster_id: int
    now: int
    schedd_name: str = ""
    arch: str = "X86_64"
    opsys: str = "LINUX"
    default_request_memory: str = "128"
    default_request_disk: str = "MAX({1024, (TransferInputSizeMB+1) * 1.25}) * 1024"
    default_request_cpus: str = "1"
    first_proc: int = 0


def build_jobs(desc: SubmitDescription, ctx: SubmitContext) -> list[dict[str, str]]:
    """Expand a parsed description into proc ads (attribute -> expression text)."""
    macros: dict[str, str] = {}
    current: dict[str, Statement] = {}
    jobs: list[dict[str, str]] = []
    proc = ctx.first_proc
    for item in desc.items:
        if isinstance(item, Statement):
            macros[item.key] = item.value
            current[item.key] = item
            continue
        for step in range(item.count):
            jobs.append(_one_job(desc.file, current, macros, ctx, proc, step, item.line))
            proc += 1
    return jobs


def _expand(value: str, macros: dict[str, str], builtins: dict[str, str], depth: int = 0) -> str:
    if depth > 20:
        return value

    def sub(m: re.Match) -> str:
        name = m.group(1).lower()
        if name in builtins:
            return builtins[name]
        if name in macros:
            return _expand(macros[name], macros, builtins, depth + 1)
        return ""  # condor_submit expands an undefined macro to nothing

    return _MACRO.sub(sub, value)


def _one_job(file: str, current: dict[str, Statement], macros: dict[str, str], ctx: SubmitContext,
             proc: int, step: int, queue_line: int) -> dict[str, str]:
    builtins = {"cluster": str(ctx.cluster_id), "clusterid": str(ctx.cluster_id),
                "process": str(proc), "procid": str(proc), "step": str(step), "node": str(proc)}

    def value(key: str) -> tuple[str, int] | None:
        st = current.get(key)
        if st is None:
            return None
        return _expand(st.value, macros, builtins), st.line

    def expr(text: str, line: int, what: str) -> str:
        try:
            return ads.expr_text(text, what)
        except ads.AdError:
            raise SubmitError(file, line, f"{what} = {text!r} is not a valid ClassAd expression") from None

    def string(text: str) -> str:
        return ads.literal(text)

    ad: dict[str, str] = {}
    universe = value("universe")
    if universe is not None and universe[0].strip().lower() not in ("vanilla", "container", "docker"):
        raise SubmitError(file, universe[1], f"universe {universe[0].strip()!r} is not emulated "
                                             "(htcpool runs vanilla-universe jobs)")
    exe = value("executable") or value("cmd")
    if exe is None or not exe[0].strip():
        raise SubmitError(file, queue_line, "no executable (set 'executable = ...' before 'queue')")

    owner = ctx.owner
    ad["MyType"] = string("Job")
    ad["TargetType"] = string("Machine")
    ad["ClusterId"] = str(ctx.cluster_id)
    ad["ProcId"] = str(proc)
    ad["Owner"] = string(owner)
    ad["User"] = string(f"{owner}@{ctx.uid_domain}")
    ad["JobUniverse"] = str(VANILLA_UNIVERSE)
    ad["JobStatus"] = str(IDLE)
    ad["QDate"] = str(ctx.now)
    ad["EnteredCurrentStatus"] = str(ctx.now)
    ad["JobPrio"] = "0"
    ad["NumJobStarts"] = "0"
    ad["NumJobMatches"] = "0"
    ad["JobRunCount"] = "0"
    ad["RemoteWallClockTime"] = "0.0"
    ad["CumulativeSlotTime"] = "0.0"
    ad["CompletionDate"] = "0"
    ad["ImageSize"] = "100"
    ad["DiskUsage"] = "1"
    ad["TransferInputSizeMB"] = "0"
    ad["LeaveJobInQueue"] = "false"
    ad["GlobalJobId"] = string(f"{ctx.schedd_name}#{ctx.cluster_id}.{proc}#{ctx.now}")

    for key, attr in STRING_COMMANDS.items():
        v = value(key)
        if v is not None:
            ad[attr] = string(v[0])

    args = value("arguments") or value("args")
    if args is not None:
        text = args[0].strip()
        if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
            ad["Arguments"] = string(text[1:-1].replace('""', '"'))
        else:
            ad["Args"] = string(text)

    for key, attr, units, default in (("request_cpus", "RequestCpus", None, ctx.default_request_cpus),
                                      ("request_memory", "RequestMemory", _MEM_UNITS, ctx.default_request_memory),
                                      ("request_disk", "RequestDisk", _DISK_UNITS, ctx.default_request_disk)):
        v = value(key)
        if v is None:
            ad[attr] = expr(default, queue_line, attr)
            continue
        text, line = v[0].strip(), v[1]
        m = _SIZE.match(text)
        if m and (units is not None or not m.group(2)):
            number, unit = float(m.group(1)), m.group(2).lower()
            if units is not None and unit not in units:
                raise SubmitError(file, line, f"{key} = {text!r}: unknown unit {m.group(2)!r}")
            if number < 0:
                raise SubmitError(file, line, f"{key} = {text!r}: a request must not be negative")
            scaled = number * (units[unit] if units is not None else 1)
            ad[attr] = str(int(-(-scaled // 1)))  # whole units, rounded up
        else:
            e = expr(text, line, key)
            n = ads.as_number(ads.evaluate(ads.parse_expr(e)))
            if n is not None and n < 0:
                raise SubmitError(file, line, f"{key} = {text!r}: a request must not be negative")
            ad[attr] = e

    for key, attr in EXPR_COMMANDS.items():
        v = value(key)
        if v is not None and key != "requirements":
            ad[attr] = expr(v[0], v[1], key)
    ad.setdefault("Rank", "0.0")

    prio = value("priority") or value("prio")
    if prio is not None:
        try:
            ad["JobPrio"] = str(int(prio[0].strip()))
        except ValueError:
            raise SubmitError(file, prio[1], f"priority = {prio[0].strip()!r} is not an integer") from None

    group = value("accounting_group")
    if group is not None and group[0].strip():
        g = group[0].strip()
        if not re.fullmatch(r"[A-Za-z0-9_.\-]+", g):
            raise SubmitError(file, group[1], f"accounting_group = {g!r} is not a valid group name")
        user = value("accounting_group_user")
        u = user[0].strip() if user is not None and user[0].strip() else owner
        ad["AcctGroup"] = string(g)
        ad["AcctGroupUser"] = string(u)
        ad["AccountingGroup"] = string(f"{g}.{u}")

    hold = value("hold")
    if hold is not None and hold[0].strip().lower() in ("true", "yes", "1"):
        ad["JobStatus"] = str(HELD)
        ad["HoldReason"] = string("submitted on hold at user's request")
        ad["HoldReasonCode"] = "15"

    for st in current.values():
        if st.key.startswith("+"):
            ad[st.attr] = expr(_expand(st.value, macros, builtins), st.line, "+" + st.attr)

    req = value("requirements")
    user_req = expr(req[0], req[1], "requirements") if req is not None else ""
    ad["Requirements"] = default_requirements(user_req, ctx.arch, ctx.opsys, "RequestCpus" in ad)
    return ad


def default_requirements(user: str, arch: str, opsys: str, has_cpus: bool = True) -> str:
    """condor_submit's Requirements: the user's expression, then the default clauses."""
    clauses = []
    if user:
        clauses.append(f"({user})")
    lowered = user.lower()
    if "arch" not in lowered:
        clauses.append(f'(TARGET.Arch == "{arch}")')
    if "opsys" not in lowered:
        clauses.append(f'(TARGET.OpSys == "{opsys}")')
    clauses.append("(TARGET.Disk >= RequestDisk)")
    clauses.append("(TARGET.Memory >= RequestMemory)")
    if has_cpus:
        clauses.append("(TARGET.Cpus >= RequestCpus)")
    clauses.append("(TARGET.HasFileTransfer)")
    return " && ".join(clauses)


def submitter_of(attrs: dict[str, str], uid_domain: str) -> str:
    """The submitter (negotiation principal): accounting group if any, else the owner."""
    group = attrs.get("AccountingGroup")
    who = ads.parse_expr(group).eval() if group else None
    if not isinstance(who, str) or not who:
        owner = attrs.get("Owner")
        who = ads.parse_expr(owner).eval() if owner else "nobody"
    return f"{who}@{uid_domain}"
