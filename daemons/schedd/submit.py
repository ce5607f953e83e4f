"""HTCondor submit-description files -> job ads (attribute -> ClassAd expression text).

Pure. Follows condor_submit where it matters for scheduling: commands are
case-insensitive; `+Attr = expr` and `MY.Attr = expr` set job attributes; `$(name)`
expands earlier definitions and $(Cluster)/$(ClusterId)/$(Process)/$(ProcId)/$(Step)/
$(ItemIndex)/$(Row); each queue statement (queue_statement.py) adds its jobs to the
one cluster with the commands in force at that point; request_memory and
request_disk take unit suffixes; request_<resource> asks for any machine resource;
the job's Requirements get condor_submit's default clauses after the user's.

Stricter than condor_submit, because a mistake should not pass silently: a line
setting a name that is neither a submit command nor used as a macro is an error;
commands whose meaning htcpool does not emulate are refused with the reason
(submit_commands.py); attributes the schedd owns cannot be set (protected.py);
requests must be numbers in range (submit_values.py), and the file must be text.
This module parses and counts; submit_build.py builds each job's ad.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

from daemons.core import ads, limits
from daemons.schedd import protected
from daemons.schedd import queue_statement as qs
from daemons.schedd import submit_commands as cmds
from daemons.schedd.queue_statement import QueueError, QueueStatement
from daemons.schedd.submit_values import integer_value

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
    key: str          # lower-cased command, or "+attr" (lower-cased) for job attributes
    value: str
    attr: str = ""    # for +Attr / MY.Attr: the attribute name as written
    name: str = ""    # the command as written (request_<Resource> keeps its case)


@dataclass
class SubmitDescription:
    file: str
    items: list[Statement | QueueStatement] = field(default_factory=list)

    @property
    def queues(self) -> list[QueueStatement]:
        return [i for i in self.items if isinstance(i, QueueStatement)]


# ---- text --------------------------------------------------------------------------------
_BAD_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")


def decode_submit(data: bytes, file: str) -> str:
    """The text of a submit file read as bytes; SubmitError naming the line if it is not UTF-8."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise SubmitError(file, line, f"not UTF-8 text (byte 0x{data[e.start]:02x} at column {column})") from None
    check_text(text, file)
    return text


def check_text(text: str, file: str) -> None:
    """Refuse control characters (a NUL byte, an escape): a submit file is text."""
    m = _BAD_CONTROL.search(text)
    if m is not None:
        line = text.count("\n", 0, m.start()) + 1
        column = m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1
        what = "a NUL byte" if m.group() == "\x00" else f"the control character U+{ord(m.group()):04X}"
        raise SubmitError(file, line, f"{what} at column {column}: a submit file must be text")


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


# ---- syntax ------------------------------------------------------------------------------
_MACRO = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.]*)\)")
_QUEUE = re.compile(r"^queue(?:\s+(.*)|\s*)$", re.IGNORECASE | re.DOTALL)
_KEY_VALUE = re.compile(r"^([^\s=]+?)\s*=\s*(.*)$", re.DOTALL)
_UNSUPPORTED_SYNTAX = re.compile(r"^(include|if|elif|else|endif|error|warning)\b", re.IGNORECASE)


def parse_submit(text: str, file: str = "<submit>", items: dict[int, list[str]] | None = None) -> SubmitDescription:
    """Syntax only: statements and queue statements, each with its line.

    `items`: the items the submitting client read for `queue ... from <file>` and
    `queue ... matching <globs>` statements, by the statement's line.
    """
    check_text(text, file)
    desc = SubmitDescription(file)
    lines = _logical_lines(text)
    i = 0
    while i < len(lines):
        line_no, line = lines[i]
        i += 1
        q = _QUEUE.match(line)
        if q:
            st = _queue(desc.file, line_no, q.group(1) or "")
            if st.open_list:
                while i < len(lines) and not lines[i][1].startswith(")"):
                    qs.add_list_line(st, lines[i][1])
                    i += 1
                if i >= len(lines):
                    raise SubmitError(file, line_no, "the item list of this queue statement has no closing ')' "
                                                     "(a line that begins with ')')")
                i += 1
            if st.mode == "matching" or (st.mode == "from" and st.source):
                st.items = None if items is None or line_no not in items else list(items[line_no])
            desc.items.append(st)
            continue
        desc.items.append(_statement(file, line_no, line))
    if not desc.queues:
        raise SubmitError(file, None, "no 'queue' statement: nothing would be submitted")
    _check_unknown(desc)
    return desc


def _queue(file: str, line_no: int, rest: str) -> QueueStatement:
    def count(text: str) -> int:
        v = integer_value(text)
        if v is None:
            raise QueueError(f"queue count {text!r} is not an integer")
        return v
    try:
        return qs.parse_queue(rest, line_no, count)
    except QueueError as e:
        raise SubmitError(file, line_no, str(e)) from None


def _statement(file: str, line_no: int, line: str) -> Statement:
    m = _KEY_VALUE.match(line)
    if not m:
        syntax = _UNSUPPORTED_SYNTAX.match(line)
        if syntax:
            raise SubmitError(file, line_no, f"'{syntax.group(1).lower()}' in a submit file is not supported by "
                                             "htcpool (write the commands out)")
        shown = line if len(line) <= 80 else line[:80] + "..."
        raise SubmitError(file, line_no, f"not a submit command: {shown!r} (expected 'name = value' or 'queue ...')")
    key, value = m.group(1), m.group(2).strip()
    if key.startswith("+") or key.lower().startswith("my."):
        attr = key[1:] if key.startswith("+") else key[3:]
        problem = protected.settable_problem(attr)
        if problem is not None:
            raise SubmitError(file, line_no, f"{key}: {problem}")
        return Statement(line_no, "+" + attr.lower(), value, attr, key)
    if "." in key or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
        raise SubmitError(file, line_no, f"{key!r} is not a valid submit command name")
    reason = cmds.refusal(key.lower())
    if reason is not None:
        raise SubmitError(file, line_no, f"{key}: {reason}")
    return Statement(line_no, key.lower(), value, "", key)


def _check_unknown(desc: SubmitDescription) -> None:
    used_macros = {m.lower() for st in desc.items if isinstance(st, Statement) for m in _MACRO.findall(st.value)}
    for q in desc.queues:
        used_macros.update(v.lower() for v in q.variables)
    for st in desc.items:
        if not isinstance(st, Statement) or st.key.startswith("+"):
            continue
        if st.key in cmds.KNOWN_COMMANDS or cmds.custom_resource(st.name) or st.key in used_macros:
            continue
        hint = _close_command(st.key)
        if hint:
            raise SubmitError(desc.file, st.line, f"{st.name!r} is not a submit command (did you mean {hint!r}?)")
        raise SubmitError(desc.file, st.line,
                          f"{st.name!r} is not a submit command, and no $({st.name}) uses it as a macro "
                          f"(a job attribute is set with +{st.name} = ...)")


def _close_command(key: str) -> str:
    import difflib
    close = difflib.get_close_matches(key, sorted(cmds.KNOWN_COMMANDS), n=1, cutoff=0.8)
    return close[0] if close else ""


# ---- the client's part: items from files and globs -----------------------------------------
def resolve_external_items(desc: SubmitDescription, read_lines: Callable[[str], list[str]],
                           glob: Callable[[str, str], list[str]]) -> dict[int, list[str]]:
    """Items of `queue ... from <file>` and `queue ... matching` statements, by line, read
    the way condor_submit reads them: every non-blank line of the file is an item;
    each pattern is expanded (`glob(pattern, kind)`, kind files | dirs | any)."""
    out: dict[int, list[str]] = {}
    for st in desc.queues:
        if st.mode == "from" and st.source and st.items is None:
            try:
                out[st.line] = [ln.strip() for ln in read_lines(st.source) if ln.strip()]
            except OSError as e:
                raise SubmitError(desc.file, st.line, f"queue ... from {st.source}: {e.strerror or e}") from None
        elif st.mode == "matching" and st.items is None:
            found: list[str] = []
            for pattern in qs.glob_patterns(st):
                found.extend(n for n in glob(pattern, st.match_kind) if n not in found)
            out[st.line] = found
        else:
            continue
        st.items = list(out[st.line])
    return out


# ---- counting ------------------------------------------------------------------------------
def count_jobs(desc: SubmitDescription) -> int:
    """How many jobs the description queues (before any is built)."""
    total = 0
    for st in desc.queues:
        if st.external and st.items is None:
            what = f"from {st.source}" if st.mode == "from" else f"matching {st.source}"
            raise SubmitError(desc.file, st.line, f"'queue ... {what}' needs the items read where the file is "
                                                  "submitted; submit with 'htcpool submit', which reads them")
        total += st.job_count()
    return total


# ---- building job ads ------------------------------------------------------------------------



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
    default_job_lease: str = "2400"       # JOB_DEFAULT_LEASE_DURATION ("": none)
    first_proc: int = 0


# Built-in macros whose value changes from one job of a queue item to the next.
_PER_PROC_MACRO = re.compile(r"\$\((?i:process|procid|step|node)\)")
# Attributes every job has its own value of, whatever the description says.
PER_JOB = frozenset(("ProcId", "GlobalJobId"))


def _global_job_id(ctx: SubmitContext, proc: int) -> str:
    return ads.literal(f"{ctx.schedd_name}#{ctx.cluster_id}.{proc}#{ctx.now}")


def _build(desc: SubmitDescription, ctx: SubmitContext, max_jobs: int | None,
           sample: bool) -> list[tuple[dict[str, str], int | None]]:
    """Each job as (its ad, None), or as (the ad of an earlier job, its own number) when
    nothing in force for its queue item refers to the job's number: then the jobs of one
    item differ in nothing but ProcId and GlobalJobId, and `queue 100000` builds one ad."""
    total = count_jobs(desc)
    if max_jobs is not None and total > max_jobs:
        raise SubmitError(desc.file, None, f"{total:,} jobs in one submission; MAX_JOBS_PER_SUBMISSION is "
                                           f"{max_jobs:,}")
    from daemons.schedd.submit_build import JobBuilder  # (it builds on this module's types)
    builder = JobBuilder(desc.file, ctx)
    macros: dict[str, str] = {}
    current: dict[str, Statement] = {}
    jobs: list[tuple[dict[str, str], int | None]] = []
    proc = ctx.first_proc
    max_size = limits.current().max_ad_size
    ad_budget = max_size * 256
    spent = 0
    # GlobalJobId's text but for the job's number (whose digits are never escaped).
    gji_base = len(_global_job_id(ctx, 0)) - 1

    def check(size: int, line: int) -> None:
        nonlocal spent
        if size > max_size:
            raise SubmitError(desc.file, line, f"the job ad would be {size:,} characters, more than "
                                               "the limit (see CLASSAD_MAX_AD_SIZE)")
        spent += size
        if spent > ad_budget:
            raise SubmitError(desc.file, line, f"the submission's job ads would be more than "
                                               f"{ad_budget:,} characters (256 x CLASSAD_MAX_AD_SIZE)")

    for item in desc.items:
        if isinstance(item, Statement):
            macros[item.key] = item.value
            current[item.key] = item
            continue
        for index, row in enumerate(item.rows()):
            values = {v.lower(): (v, row[k] if k < len(row) else "") for k, v in enumerate(item.variables)}
            steps = range(item.count)
            if sample and item.count > 2:
                steps = [0, item.count - 1]
            same = not sample and not any(_PER_PROC_MACRO.search(t) for t in
                                          [*macros.values(), *(v for _, v in values.values())])
            template: dict[str, str] | None = None
            rest = 0      # the template's size without its ProcId and GlobalJobId values
            for step in steps:
                number = proc + (step if sample else 0)
                if template is not None:
                    digits = len(str(number))
                    check(rest + digits + gji_base + digits, item.line)
                    jobs.append((template, number))
                else:
                    ad = builder.job(current, macros, values, number, step, index, item.line)
                    size = sum(len(k) + len(v) + 4 for k, v in ad.items())
                    check(size, item.line)
                    jobs.append((ad, None))
                    if same:
                        template = ad
                        rest = size - len(ad["ProcId"]) - len(ad["GlobalJobId"])
                if not sample:
                    proc += 1
            if sample:
                proc += item.count
    return jobs


def build_jobs(desc: SubmitDescription, ctx: SubmitContext, *, max_jobs: int | None = None,
               sample: bool = False) -> list[dict[str, str]]:
    """Expand a parsed description into proc ads (attribute -> expression text).

    `max_jobs`: MAX_JOBS_PER_SUBMISSION, checked before anything is built. `sample`:
    build only the first and last job of each item (a client's check of a large
    submission; the schedd builds them all).
    """
    return [ad if n is None else {**ad, "ProcId": str(n), "GlobalJobId": _global_job_id(ctx, n)}
            for ad, n in _build(desc, ctx, max_jobs, sample)]


def common_attrs(procs: Iterable[dict[str, str]]) -> dict[str, str]:
    """The attributes every job ad of `procs` has with the same text (their cluster ad)."""
    common: dict[str, str] | None = None
    for attrs in procs:
        if common is None:
            common = {k: v for k, v in attrs.items() if k not in PER_JOB}
            continue
        for k in [k for k, v in common.items() if attrs.get(k) != v]:
            del common[k]
        if not common:
            break
    return common or {}


class ClusterBuild:
    """A cluster as HTCondor keeps it: the attributes its jobs share (the cluster ad), and
    for each job what differs (its ProcId at least), made as they are asked for, so a
    `queue 100000` never holds 100,000 ads, nor 100,000 dictionaries, at once."""

    def __init__(self, ctx: SubmitContext, built: list[tuple[dict[str, str], int | None]]) -> None:
        self.ctx = ctx
        self._built = built
        templates = list({id(ad): ad for ad, _ in built}.values())
        self.common = common_attrs(templates)
        self._diffs = {id(ad): {k: v for k, v in ad.items() if k in PER_JOB or self.common.get(k) != v}
                       for ad in templates}

    def __len__(self) -> int:
        return len(self._built)

    def numbers(self) -> Iterator[int]:
        for ad, n in self._built:
            yield int(ad["ProcId"]) if n is None else n

    def procs(self) -> Iterator[dict[str, str]]:
        """Each job's own attributes, in job order."""
        # GlobalJobId's text around the job's number (whose digits need no escaping).
        head, tail = _global_job_id(self.ctx, 0).rsplit("0#", 1)
        tail = "#" + tail
        for ad, n in self._built:
            diff = self._diffs[id(ad)]
            if n is None:
                yield diff
            else:
                number = str(n)
                yield {**diff, "ProcId": number, "GlobalJobId": head + number + tail}

    def distinct(self) -> Iterator[dict[str, str]]:
        """The own attributes of each distinct ad built (every value a job may have but its number)."""
        return iter(self._diffs.values())


def build_cluster(desc: SubmitDescription, ctx: SubmitContext, *, max_jobs: int | None = None) -> ClusterBuild:
    return ClusterBuild(ctx, _build(desc, ctx, max_jobs, False))


def submitter_of(attrs: dict[str, str], uid_domain: str) -> str:
    """The submitter (negotiation principal): accounting group if any, else the owner."""
    group = attrs.get("AccountingGroup")
    who = ads.parse_expr(group).eval() if group else None
    if not isinstance(who, str) or not who:
        owner = attrs.get("Owner")
        who = ads.parse_expr(owner).eval() if owner else "nobody"
    return f"{who}@{uid_domain}"
