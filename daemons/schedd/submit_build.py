"""Building one job ad from the submit commands in force, the macros and a queue item.

Pure; used by submit.build_jobs. Attribute names are HTCondor's (submit_commands.py);
values are checked as they are built (submit_values.py), and every expression goes
through the ClassAd bounds (core/limits.py) before classad2 sees it.
"""
from __future__ import annotations

import math
import re

from daemons.core import ads, limits
from daemons.schedd import protected
from daemons.schedd import submit_commands as cmds
from daemons.schedd.submit import HELD, IDLE, VANILLA_UNIVERSE, Statement, SubmitContext, SubmitError
from daemons.schedd.submit_values import (DISK_UNITS, INT64_MAX, INT_MAX, INT_MIN, MEM_UNITS, SIZE,
                                          attribute_value_problem, custom_requests, default_requirements,
                                          integer_value, request_problem)

_MACRO = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.]*)\)")


class JobBuilder:
    """One job ad from the commands in force, the macros and a queue item's values."""

    def __init__(self, file: str, ctx: SubmitContext) -> None:
        self.file, self.ctx = file, ctx
        self._checked: dict[tuple[str, str], str] = {}

    def fail(self, line: int, message: str) -> SubmitError:
        return SubmitError(self.file, line, message)

    def expr(self, text: str, line: int, what: str) -> str:
        try:
            return ads.expr_text(text, what)
        except ads.LimitError as e:
            raise self.fail(line, str(e)) from None
        except ads.AdError:
            shown = text if len(text) <= 200 else text[:200] + "..."
            raise self.fail(line, f"{what} = {shown!r} is not a valid ClassAd expression") from None

    def job(self, current: dict[str, Statement], macros: dict[str, str], values: dict[str, tuple[str, str]],
            proc: int, step: int, index: int, queue_line: int) -> dict[str, str]:
        ctx = self.ctx
        builtins = {"cluster": str(ctx.cluster_id), "clusterid": str(ctx.cluster_id),
                    "process": str(proc), "procid": str(proc), "step": str(step), "node": str(proc),
                    "itemindex": str(index), "row": str(index)}
        scope = dict(macros)
        scope.update({k: v for k, (_, v) in values.items()})

        def value(key: str) -> tuple[str, int] | None:
            if key in values:       # a queue variable named like a command is that command
                return expand(values[key][1], scope, builtins, queue_line, self.file), queue_line
            st = current.get(key)
            if st is None:
                return None
            return expand(st.value, scope, builtins, st.line, self.file), st.line

        ad: dict[str, str] = {}
        universe = value("universe")
        if universe is not None:
            u = universe[0].strip().lower()
            if u not in cmds.UNIVERSES:
                why = "is not emulated" if u in cmds.OTHER_UNIVERSES else "is not a universe"
                raise self.fail(universe[1], f"universe {universe[0].strip()!r} {why} "
                                             "(htcpool runs vanilla-universe jobs)")
        exe = value("executable") or value("cmd")
        if exe is None or not exe[0].strip():
            raise self.fail(queue_line, "no executable (set 'executable = ...' before 'queue')")

        owner = ctx.owner
        ad["MyType"] = '"Job"'
        ad["TargetType"] = '"Machine"'
        ad["ClusterId"] = str(ctx.cluster_id)
        ad["ProcId"] = str(proc)
        ad["Owner"] = ads.literal(owner)
        ad["User"] = ads.literal(f"{owner}@{ctx.uid_domain}")
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
        ad["GlobalJobId"] = ads.literal(f"{ctx.schedd_name}#{ctx.cluster_id}.{proc}#{ctx.now}")
        ad["Cmd"] = ads.literal(exe[0])

        self._simple(ad, value)
        self._arguments(ad, value)
        self._environment(ad, value)
        self._requests(ad, value, queue_line, current)
        self._special(ad, value, owner)

        for st in current.values():
            if st.key.startswith("+"):
                text = expand(st.value, scope, builtins, st.line, self.file)
                ad[st.attr] = self.expr(text, st.line, "+" + st.attr)
                key = (st.attr, ad[st.attr])
                if key not in self._checked:
                    self._checked[key] = attribute_value_problem(st.attr, ad[st.attr], "+" + st.attr) or ""
                if self._checked[key]:
                    raise self.fail(st.line, self._checked[key])
        ad.setdefault("Rank", "0.0")
        # condor_submit gives a job that can reconnect (vanilla, the universe emulated here)
        # the pool's default lease when its description sets none: how long its claim
        # outlives a silent schedd or startd once the job runs.
        if ctx.default_job_lease and "JobLeaseDuration" not in ad:
            ad["JobLeaseDuration"] = ctx.default_job_lease

        req = value("requirements")
        user_req = self.expr(req[0], req[1], "requirements") if req is not None else ""
        ad["Requirements"] = default_requirements(user_req, ctx.arch, ctx.opsys, "RequestCpus" in ad,
                                                  custom_requests(ad))
        return ad

    # ---- command families -------------------------------------------------------------
    def _simple(self, ad: dict[str, str], value) -> None:
        for key, (attr, kind) in cmds.SIMPLE.items():
            v = value(key)
            if v is None:
                continue
            text, line = v
            if kind == "string":
                s = text.strip()
                ad[attr] = ads.literal(s[1:-1] if len(s) >= 2 and s[0] == s[-1] == '"' else s)
            elif kind == "expr":
                ad[attr] = self.expr(text, line, key)
            elif kind == "bool":
                ad[attr] = self.boolean(text, line, key)
            else:
                ad[attr] = str(self.integer(text, line, key))

    def _arguments(self, ad: dict[str, str], value) -> None:
        args = value("arguments") or value("args")
        if args is None:
            return
        text = args[0].strip()
        if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
            ad["Arguments"] = ads.literal(text[1:-1].replace('""', '"'))
        else:
            ad["Args"] = ads.literal(text)

    def _environment(self, ad: dict[str, str], value) -> None:
        env = value("environment") or value("env")
        if env is not None:
            text = env[0].strip()
            if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
                ad["Environment"] = ads.literal(text[1:-1].replace('""', '"'))
            else:
                ad["Env"] = ads.literal(text)
        getenv = value("getenv") or value("get_env")
        if getenv is not None:
            ad["GetEnv"] = ads.literal(getenv[0].strip())

    def _requests(self, ad: dict[str, str], value, queue_line: int, current: dict[str, Statement]) -> None:
        ctx = self.ctx
        for key, attr, units, default in (("request_cpus", "RequestCpus", None, ctx.default_request_cpus),
                                          ("request_memory", "RequestMemory", MEM_UNITS, ctx.default_request_memory),
                                          ("request_disk", "RequestDisk", DISK_UNITS, ctx.default_request_disk),
                                          ("request_gpus", "RequestGPUs", None, None)):
            v = value(key)
            if v is None:
                if default is not None:
                    ad[attr] = self.expr(default, queue_line, attr)
                continue
            text, line = v[0].strip(), v[1]
            if text.lower() == "undefined":
                continue              # condor_submit: no request at all
            ad[attr] = self.request(key, text, line, units)
        for st in current.values():
            name = cmds.custom_resource(st.name) if not st.key.startswith("+") else None
            if name is None:
                continue
            v = value(st.key)
            assert v is not None
            if v[0].strip().lower() == "undefined":
                continue
            ad[f"Request{name}"] = self.request(st.name, v[0].strip(), v[1], None)

    def request(self, key: str, text: str, line: int, units: dict[str, float] | None) -> str:
        m = SIZE.match(text)
        if m and (units is not None or not m.group(2)):
            number, unit = float(m.group(1)), m.group(2).lower()
            if units is not None and unit not in units:
                raise self.fail(line, f"{key} = {text!r}: unknown unit {m.group(2)!r}")
            if number < 0:
                raise self.fail(line, f"{key} = {text!r}: a request must not be negative")
            scaled = number * (units[unit] if units is not None else 1)
            if not math.isfinite(scaled) or scaled > INT64_MAX:
                shown = text if len(text) <= 60 else text[:60] + "..."
                raise self.fail(line, f"{key} = {shown!r} is out of range")
            return str(math.ceil(scaled))  # whole units, rounded up
        e = self.expr(text, line, key)
        self.check_request(key, e, line, key)
        return e

    def check_request(self, key: str, expr: str, line: int, what: str) -> None:
        cached = self._checked.get((what, expr))
        if cached is None:
            cached = self._checked[(what, expr)] = request_problem(what, expr) or ""
        if cached:
            raise self.fail(line, cached)

    def _special(self, ad: dict[str, str], value, owner: str) -> None:
        prio = value("priority") or value("prio")
        if prio is not None:
            ad["JobPrio"] = str(self.integer(prio[0], prio[1], "priority"))
        group = value("accounting_group")
        if group is not None and group[0].strip():
            g = group[0].strip()
            if not re.fullmatch(r"[A-Za-z0-9_.\-]+", g):
                raise self.fail(group[1], f"accounting_group = {g!r} is not a valid group name")
            user = value("accounting_group_user")
            u = user[0].strip() if user is not None and user[0].strip() else owner
            if not re.fullmatch(r"[A-Za-z0-9_.\-@]+", u):
                raise self.fail(user[1] if user else group[1], f"accounting_group_user = {u!r} is not a valid user name")
            ad["AcctGroup"] = ads.literal(g)
            ad["AcctGroupUser"] = ads.literal(u)
            ad["AccountingGroup"] = ads.literal(f"{g}.{u}")
        nice = value("nice_user")
        if nice is not None:
            ad["NiceUser"] = self.boolean(nice[0], nice[1], "nice_user")
        hold = value("hold")
        if hold is not None and self.boolean(hold[0], hold[1], "hold") == "true":
            ad["JobStatus"] = str(HELD)
            ad["HoldReason"] = ads.literal("submitted on hold at user's request")
            ad["HoldReasonCode"] = "15"
        note = value("notification")
        if note is not None:
            word = note[0].strip().lower()
            if word not in cmds.NOTIFICATION:
                raise self.fail(note[1], f"notification = {note[0].strip()!r} is not one of "
                                         f"{', '.join(cmds.NOTIFICATION)}")
            ad["JobNotification"] = str(cmds.NOTIFICATION[word])
        limits_ = value("concurrency_limits")
        limits_expr = value("concurrency_limits_expr")
        if limits_ is not None and limits_[0].strip():
            if limits_expr is not None and limits_expr[0].strip():
                raise self.fail(limits_[1], "concurrency_limits and concurrency_limits_expr can't be used together")
            # condor_submit: lower case, each NAME or NAME:increment, sorted.
            names = sorted(n for n in re.split(r"[,\s]+", limits_[0].strip().lower()) if n)
            for n in names:
                if not re.fullmatch(r"[a-z_][a-z0-9_.]*(?::\d+(?:\.\d+)?)?", n):
                    raise self.fail(limits_[1], f"Invalid concurrency limit {n!r} (NAME or NAME:increment)")
            ad["ConcurrencyLimits"] = ads.literal(",".join(names))
        elif limits_expr is not None and limits_expr[0].strip():
            ad["ConcurrencyLimits"] = self.expr(limits_expr[0], limits_expr[1], "concurrency_limits_expr")
        size = value("image_size")
        if size is not None:
            ad["ImageSize"] = self.request("image_size", size[0].strip(), size[1], DISK_UNITS)
        rank = value("rank") or value("preferences")
        if rank is not None:
            ad["Rank"] = self.expr(rank[0], rank[1], "rank")
        attrs = value("job_machine_attrs")
        if attrs is not None:
            names = [n for n in re.split(r"[,\s]+", attrs[0].strip()) if n]
            for n in names:
                problem = protected.name_problem(n)
                if problem is not None:
                    raise self.fail(attrs[1], f"job_machine_attrs: {problem}")
            ad["JobMachineAttrs"] = ads.literal(",".join(names))
        length = value("job_machine_attrs_history_length")
        if length is not None:
            n = self.integer(length[0], length[1], "job_machine_attrs_history_length")
            if n < 0:
                raise self.fail(length[1], f"job_machine_attrs_history_length = {n} is out of bounds 0 to {INT_MAX}")
            ad["JobMachineAttrsHistoryLength"] = str(n)

    # ---- values -----------------------------------------------------------------------
    def boolean(self, text: str, line: int, key: str) -> str:
        t = text.strip().lower()
        if t in ("true", "yes", "t", "y", "1"):
            return "true"
        if t in ("false", "no", "f", "n", "0"):
            return "false"
        v = ads.evaluate(ads.parse_expr(self.expr(text, line, key)))
        if isinstance(v, bool):  # (classad2.Value is an IntEnum, never a bool)
            return "true" if v else "false"
        raise self.fail(line, f"{key} = {text.strip()!r} is invalid, must eval to a boolean")

    def integer(self, text: str, line: int, key: str) -> int:
        v = integer_value(text)
        if v is None:
            raise self.fail(line, f"{key} = {text.strip()!r} is invalid, must eval to an integer")
        if not INT_MIN <= v < INT_MAX:
            raise self.fail(line, f"{key} = {text.strip()!r} is out of range ({INT_MIN} to {INT_MAX - 1})")
        return v


def expand(value: str, macros: dict[str, str], builtins: dict[str, str], line: int, file: str) -> str:
    """$(name) macros, expanded recursively (a name undefined expands to nothing, as in
    condor_submit), with a bound on depth and size so no definition can grow without end."""
    if "$(" not in value:
        return value
    budget = limits.current().max_expr_length

    def go(text: str, depth: int) -> str:
        if depth > 20:
            return text

        def sub(m: re.Match) -> str:
            name = m.group(1).lower()
            if name in builtins:
                return builtins[name]
            if name in macros:
                return go(macros[name], depth + 1)
            return ""
        out = _MACRO.sub(sub, text)
        if len(out) > budget:
            raise SubmitError(file, line, f"expanding $(...) macros gives more than {budget:,} characters "
                                          "(see CLASSAD_MAX_EXPR_LENGTH)")
        return out

    return go(value, 0)
