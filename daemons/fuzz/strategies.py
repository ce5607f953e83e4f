"""Hypothesis strategies for what users and peers send htcpool: ClassAd texts, submit
files, configuration files, and every RPC message, built from the protobuf descriptors.

Each strategy mixes well-formed input (so the code past the parser is reached) with
mutations and the pathological cases that broke htcpool before: expressions tens of
thousands of operators deep, numbers beyond 64 bits or a double, NaN and infinity,
non-UTF-8 bytes and control characters, huge counts, circles of macros.
"""
from __future__ import annotations

import string

from google.protobuf import descriptor as pbd
from google.protobuf.message import Message
from hypothesis import strategies as st

# ---- small pieces ---------------------------------------------------------------------------
NAMES = ["Cpus", "Memory", "Disk", "RequestCpus", "RequestMemory", "Owner", "Machine", "Name", "MyType",
         "Requirements", "Rank", "START", "JobStatus", "ProcId", "ClusterId", "SlotWeight", "State", "Activity",
         "TARGET.Cpus", "MY.Memory", "Foo", "x", "_a1", "GPUs", "Duration", "AccountingGroup", "JobPrio"]
FUNCTIONS = ["int", "real", "string", "strcat", "ifThenElse", "isUndefined", "stringListMember", "regexp",
             "quantize", "size", "max", "min", "floor", "substr", "toUpper", "time", "member", "split", "join"]
OPERATORS = ["+", "-", "*", "/", "%", "&&", "||", "==", "!=", "<", "<=", ">", ">=", "=?=", "=!=", "is", "isnt",
             "&", "|", "^", "<<", ">>", ">>>"]
BOUNDARY_INTS = [0, 1, -1, 2 ** 31 - 1, 2 ** 31, -2 ** 31 - 1, 2 ** 63 - 1, 2 ** 63, -2 ** 63, 2 ** 64,
                 10 ** 20, 10 ** 400]
BOUNDARY_TEXT = ["99999999999999999999", "1e400", "-1e400", "2e-400", 'real("NaN")', 'real("inf")', "0x10", "1e",
                 "9223372036854775807", "9223372036854775808", "1" * 309, "-0", ".5", "5.", "1.2.3"]
WEIRD = ["", " ", "\x00", "\n", "\r\n", "\x1b[2J", "é", "\u2028", "\ufffd", "'", '"', "\\", "$(",
         "$(X)", "[", "]", "{", "}", ";", "//", "/*", "*/", "\t", "\x7f", "😀"]


def printable_text(max_size: int = 40) -> st.SearchStrategy[str]:
    return st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=max_size)


def deep_expression() -> st.SearchStrategy[str]:
    """The shapes that overflow classad2's stack: long left-associative chains, selections,
    subscripts, nested brackets and ads, at depths up to far beyond any limit; and the
    small expressions that cost classad2 its whole evaluation budget."""
    n = st.integers(min_value=500, max_value=60_000)
    return st.one_of(
        st.builds(lambda k, op: f" {op} ".join(["1"] * k), n, st.sampled_from(["+", "&&", "is", "*"])),
        st.builds(lambda k: "a" + ".b" * k, n),
        st.builds(lambda k: "x" + "[0]" * k, n),
        st.builds(lambda k: "(" * k + "1" + ")" * k, st.integers(100, 5_000)),
        st.builds(lambda k: "[a = " * k + "1" + "]" * k, st.integers(100, 3_000)),
        st.builds(lambda k: "!" * k + "true", n),
        st.builds(lambda k: "x ? 1 : " * k + "1", st.integers(100, 5_000)),
        # Small but costly: each attribute refers to the next twice (2^k steps to evaluate).
        st.builds(lambda k: "[" + "; ".join(f"a{i} = a{i + 1} + a{i + 1}" for i in range(k)) + f"; a{k} = 1 ].a0",
                  st.integers(10, 40)),
    )


@st.composite
def expression(draw, depth: int = 0) -> str:
    """A ClassAd expression: usually well formed, sometimes broken on purpose."""
    leaf = st.one_of(
        st.integers(-10 ** 6, 10 ** 6).map(str),
        st.sampled_from(BOUNDARY_TEXT),
        st.floats(allow_nan=False, allow_infinity=False).map(repr),
        printable_text(12).map(lambda s: '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'),
        st.sampled_from(NAMES),
        st.sampled_from(["true", "false", "undefined", "error"]),
    )
    if depth >= 3:
        return draw(leaf)
    kind = draw(st.integers(0, 9))
    if kind <= 3:
        return draw(leaf)
    sub = expression(depth + 1)
    if kind <= 5:
        return f"{draw(sub)} {draw(st.sampled_from(OPERATORS))} {draw(sub)}"
    if kind == 6:
        args = draw(st.lists(sub, max_size=3))
        return f"{draw(st.sampled_from(FUNCTIONS))}({', '.join(args)})"
    if kind == 7:
        return "{" + ", ".join(draw(st.lists(sub, max_size=4))) + "}"
    if kind == 8:
        return f"({draw(sub)}) ? {draw(sub)} : {draw(sub)}"
    return f"[ {draw(st.sampled_from(NAMES[:18]))} = {draw(sub)} ]"


def mutated(base: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """`base` with a few characters inserted, deleted or replaced."""
    @st.composite
    def go(draw):
        text = draw(base)
        for _ in range(draw(st.integers(1, 3))):
            i = draw(st.integers(0, len(text)))
            op = draw(st.integers(0, 2))
            piece = draw(st.one_of(st.sampled_from(WEIRD), printable_text(3)))
            if op == 0:
                text = text[:i] + piece + text[i:]
            elif op == 1:
                text = text[:i] + text[i + 1:]
            else:
                text = text[:i] + piece + text[i + 1:]
        return text
    return go()


def weighted(*choices: tuple[int, st.SearchStrategy]) -> st.SearchStrategy:
    """One of the strategies, chosen with the given weights (percent)."""
    total = sum(w for w, _ in choices)

    def pick(k: int) -> st.SearchStrategy:
        for w, s in choices:
            if k < w:
                return s
            k -= w
        return choices[-1][1]
    return st.integers(0, total - 1).flatmap(pick)


def classad_expr() -> st.SearchStrategy[str]:
    """Mostly well formed, so that evaluation and matching are reached; some broken, some huge."""
    return weighted((70, expression()), (15, mutated(expression())), (8, st.sampled_from(BOUNDARY_TEXT)),
                    (7, deep_expression()))


@st.composite
def classad_text(draw) -> str:
    """A whole ad, `[ Name = expr; ... ]`, sometimes mutated or enormous."""
    attrs = draw(st.lists(st.tuples(st.one_of(st.sampled_from(NAMES), st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}",
                                                                                     fullmatch=True)),
                                    classad_expr()), max_size=6))
    text = "[ " + "; ".join(f"{k} = {v}" for k, v in attrs) + " ]"
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(mutated(st.just(text)))
    if kind == 1:
        return "[ Big = \"" + "x" * draw(st.integers(100_000, 2_000_000)) + "\" ]"
    return text


# ---- submit files ------------------------------------------------------------------------------
COMMANDS = ["executable", "arguments", "request_cpus", "request_memory", "request_disk", "request_gpus",
            "request_fpga", "requirements", "rank", "universe", "priority", "hold", "accounting_group",
            "accounting_group_user", "concurrency_limits", "job_machine_attrs", "job_machine_attrs_history_length",
            "output", "error", "log", "notification", "max_retries", "periodic_remove", "getenv", "environment",
            "should_transfer_files", "transfer_input_files", "image_size", "nice_user", "+Duration", "+JobPrio",
            "+ProcId", "+JobStatus", "+Owner", "MY.Foo", "+RequestCpus", "request_cpu", "grid_resource",
            "max_materialize", "frobnicate", "+é", "+true", "x.y"]
VALUES = ["1", "4", "-5", "2GB", "1.5", "0", "/bin/sleep", "60", "true", "vanilla", "grid", "$(Process)",
          "$(Cluster)", "$(item)", "$(undefined_macro)", "group_a", "never", "LIC:2, other", "Machine, SlotID"]


def submit_value() -> st.SearchStrategy[str]:
    return weighted((60, st.sampled_from(VALUES)), (20, expression()), (8, st.sampled_from(BOUNDARY_TEXT)),
                    (7, classad_expr()), (5, printable_text(20)))


GOOD_VALUES = {
    "executable": ["/bin/sleep", "/bin/true"], "arguments": ["60", "$(Process)", '"a ""b"" c"', "-x $(Item)"],
    "request_cpus": ["1", "2", "4"], "request_memory": ["128", "2GB", "1.5", "512M"], "request_disk": ["1G", "100"],
    "request_gpus": ["0", "1"], "request_fpga": ["1", "2"], "requirements": ["TARGET.Cpus > 0", "Memory >= 64"],
    "rank": ["Memory", "0"], "universe": ["vanilla", "container"], "priority": ["0", "5", "-3"],
    "hold": ["false", "true"], "accounting_group": ["group_a", "physics"], "accounting_group_user": ["bob"],
    "concurrency_limits": ["lic", "a:2, b"], "job_machine_attrs": ["Machine", "Cpus, SlotID"],
    "job_machine_attrs_history_length": ["1", "3"], "output": ["out.$(Process)"], "error": ["err"],
    "log": ["job.log"], "notification": ["never", "error"], "max_retries": ["3"],
    "periodic_remove": ["JobStatus == 5"], "getenv": ["true"], "environment": ['"A=1 B=2"'],
    "should_transfer_files": ["if_needed"], "transfer_input_files": ["a, b"], "image_size": ["1000", "2 MB"],
    "nice_user": ["false"], "+Duration": ["30", "$(Step) * 10"], "+JobPrio": ["3"],
}


@st.composite
def queue_statement(draw) -> str:
    count = draw(weighted((50, st.just("")), (30, st.sampled_from(["1", "3", "2 * 3"])),
                          (20, st.sampled_from(["0", "1e8", "10000000", "-1", "2147483647", "many",
                                                "99999999999999999999"]))))
    form = draw(st.integers(0, 6))
    if form <= 2:
        return f"queue {count}".rstrip()
    var = draw(weighted((90, st.sampled_from(["", "x", "a, b", "item"])), (10, st.just("1bad"))))
    items = draw(st.lists(st.one_of(st.sampled_from(["A", "B", "c d", "1"]), printable_text(6)), max_size=4))
    if form == 3:
        return f"queue {count} {var} in {', '.join(items)}"
    if form == 4:
        return f"queue {count} {var} from (\n" + "\n".join(items) + "\n)"
    if form == 5:
        return f"queue {count} {var} in [{draw(st.sampled_from(['1:', '::2', ':-1', '::-1', 'x']))}] (" + \
            " ".join(items) + ")"
    return f"queue {count} {var} {draw(st.sampled_from(['from data.txt', 'matching *.dat', 'from seq 1 3 |']))}"


@st.composite
def submit_file(draw) -> str:
    lines = ["executable = /bin/sleep"] if draw(st.integers(0, 9)) else []
    for _ in range(draw(st.integers(0, 6))):
        cmd = draw(weighted((85, st.sampled_from(COMMANDS[:28])), (10, st.sampled_from(COMMANDS[28:])),
                            (5, st.from_regex(r"[a-z_]{1,12}", fullmatch=True))))
        good = GOOD_VALUES.get(cmd)
        value = draw(weighted((70, st.sampled_from(good)), (30, submit_value()))) if good else draw(submit_value())
        lines.append(f"{cmd} = {value}")
    lines.append(draw(queue_statement()))
    if draw(st.integers(0, 4)) == 0:
        lines.append(draw(queue_statement()))
    text = "\n".join(lines) + "\n"
    if draw(st.integers(0, 5)) == 0:
        text = draw(mutated(st.just(text)))
    return text


@st.composite
def submit_bytes(draw) -> bytes:
    """What the CLI reads: mostly UTF-8, sometimes not."""
    text = draw(submit_file())
    data = text.encode("utf-8", "surrogatepass")
    if draw(st.integers(0, 3)) == 0:
        i = draw(st.integers(0, len(data)))
        data = data[:i] + draw(st.binary(min_size=1, max_size=4)) + data[i:]
    return data


# ---- configuration files ------------------------------------------------------------------------
KNOBS = ["NUM_CPUS", "MEMORY", "DISK", "TIME_SCALE", "POOL_EPOCH", "NEGOTIATOR_INTERVAL", "UPDATE_INTERVAL",
         "START", "RANK", "SLOT_WEIGHT", "SLOT_TYPE_1", "SLOT_TYPE_1_PARTITIONABLE", "NUM_SLOTS_TYPE_1",
         "NUM_SLOTS", "CLAIM_WORKLIFE", "NEGOTIATOR_PRE_JOB_RANK", "GROUP_NAMES", "GROUP_QUOTA_a",
         "PRIORITY_HALFLIFE", "DEFAULT_PRIO_FACTOR", "MACHINE_RESOURCE_fpga", "SCHEDD_STATUS_PORT",
         "STARTD_ARGS", "NETWORK_INTERFACE", "COLLECTOR_HOST", "CLASSAD_MAX_EXPR_DEPTH", "MAX_JOBS_PER_SUBMISSION",
         "COLLECTOR_MAX_ADS_PER_UPDATE", "SIGNIFICANT_ATTRIBUTES", "SCHEDD_ROUND_ATTR_ImageSize",
         "CONSUMPTION_POLICY", "STARTD_ATTRS", "A", "B", "C"]
KNOB_VALUES = ["1", "0", "-1", "4", "300", "True", "false", "maybe", "1e300", "1e-300", "real(\"NaN\")", "3600 * 24",
               "99999999999999999999", "$(A)", "$(B)", "$(C)", "$(A)$(A)", "100%", "cpus=2, mem=1024", "auto",
               "127.0.0.1:1", "256.1.1.1", "-p 70000", "a, b", "Cpus > 1", "* 2"]


@st.composite
def config_file(draw) -> str:
    lines = []
    for _ in range(draw(st.integers(0, 8))):
        knob = draw(st.sampled_from(KNOBS))
        value = draw(st.one_of(st.sampled_from(KNOB_VALUES), st.sampled_from(BOUNDARY_TEXT), expression(),
                               printable_text(16)))
        lines.append(f"{knob} = {value}")
    if draw(st.integers(0, 5)) == 0:
        lines.append(draw(st.sampled_from(["use FEATURE : PartitionableSlot", "use FEATURE : NoSuch",
                                           "include : /nonexistent", "if $(A)", "else", "endif",
                                           "this line is wrong", "@=end", "A @=x\n1\n@x"])))
    text = "\n".join(lines) + "\n"
    if draw(st.integers(0, 5)) == 0:
        text = draw(mutated(st.just(text)))
    return text.replace("\x00", "")


# ---- RPC messages from the descriptors ------------------------------------------------------------
def fuzz_string(field_name: str = "", live: tuple[str, ...] = ()) -> st.SearchStrategy[str]:
    """Strings for an RPC field: names that exist in the pool (`live`: claim ids, job ids,
    slot and machine names) often enough to reach the code past the lookups, and junk."""
    known = ["1.0", "1", "2.1", "testhost", "slot1@testhost", "slot1_1@testhost", "alice", "alice@testhost",
             "Machine", "Submitter", "Scheduler", "Any", "Generic", "<127.0.0.1:1>", "127.0.0.1:1", "true",
             "JobStatus == 1", "Name", "Requirements"]
    strategies = [st.sampled_from(known), printable_text(30), st.sampled_from(WEIRD), classad_expr()]
    if live:
        strategies += [st.sampled_from(live)] * 3
    if "ad" in field_name or field_name == "text":
        strategies.append(classad_text())
    return st.one_of(*strategies)


def _scalar(f: pbd.FieldDescriptor, live: tuple[str, ...] = ()) -> st.SearchStrategy:
    t = f.type
    if t == pbd.FieldDescriptor.TYPE_STRING:
        return fuzz_string(f.name, live)
    if t == pbd.FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=64)
    if t == pbd.FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if t in (pbd.FieldDescriptor.TYPE_DOUBLE, pbd.FieldDescriptor.TYPE_FLOAT):
        return st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=64 if t == pbd.FieldDescriptor.TYPE_DOUBLE
                                   else 32), st.sampled_from([0.0, -1.0, 1e300, -1e300, 1e9]))
    if t == pbd.FieldDescriptor.TYPE_ENUM:
        return st.one_of(st.sampled_from([v.number for v in f.enum_type.values]), st.integers(-3, 50))
    bits = 64 if t in (pbd.FieldDescriptor.TYPE_INT64, pbd.FieldDescriptor.TYPE_UINT64, pbd.FieldDescriptor.TYPE_SINT64,
                       pbd.FieldDescriptor.TYPE_FIXED64, pbd.FieldDescriptor.TYPE_SFIXED64) else 32
    unsigned = t in (pbd.FieldDescriptor.TYPE_UINT32, pbd.FieldDescriptor.TYPE_UINT64,
                     pbd.FieldDescriptor.TYPE_FIXED32, pbd.FieldDescriptor.TYPE_FIXED64)
    lo, hi = (0, 2 ** bits - 1) if unsigned else (-2 ** (bits - 1), 2 ** (bits - 1) - 1)
    return st.one_of(st.integers(lo, hi), st.sampled_from([v for v in (0, 1, -1, 5, 1000, lo, hi) if lo <= v <= hi]))


def message_values(desc: pbd.Descriptor, depth: int = 0, live: tuple[str, ...] = ()) -> st.SearchStrategy[dict]:
    """Field values for a message of type `desc` (a dict the caller builds the message from)."""
    fields: dict[str, st.SearchStrategy] = {}
    for f in desc.fields:
        if f.type == pbd.FieldDescriptor.TYPE_MESSAGE:
            if f.message_type.GetOptions().map_entry:
                key_f, value_f = f.message_type.fields_by_name["key"], f.message_type.fields_by_name["value"]
                fields[f.name] = st.dictionaries(_scalar(key_f, live), _value_of(value_f, depth, live), max_size=4)
                continue
            if depth >= 3:
                continue
            inner = message_values(f.message_type, depth + 1, live)
        else:
            inner = _scalar(f, live)
        if f.is_repeated:
            fields[f.name] = st.lists(inner, max_size=4)
        else:
            fields[f.name] = inner
    return st.fixed_dictionaries({}, optional=fields)


def _value_of(f: pbd.FieldDescriptor, depth: int, live: tuple[str, ...] = ()) -> st.SearchStrategy:
    if f.type == pbd.FieldDescriptor.TYPE_MESSAGE:
        return message_values(f.message_type, depth + 1, live)
    return _scalar(f, live)


def build_message(cls: type[Message], values: dict) -> Message:
    """A message of class `cls` from `message_values` output (oneof fields: the last set wins)."""
    msg = cls()
    _fill(msg, values)
    return msg


def _fill(msg: Message, values: dict) -> None:
    desc = msg.DESCRIPTOR
    for name, v in values.items():
        f = desc.fields_by_name[name]
        if f.type == pbd.FieldDescriptor.TYPE_MESSAGE:
            if f.message_type.GetOptions().map_entry:
                target = getattr(msg, name)
                vf = f.message_type.fields_by_name["value"]
                for k, val in v.items():
                    if vf.type == pbd.FieldDescriptor.TYPE_MESSAGE:
                        _fill(target[k], val)
                    else:
                        target[k] = val
            elif f.is_repeated:
                for item in v:
                    _fill(getattr(msg, name).add(), item)
            else:
                _fill(getattr(msg, name), v)
                getattr(msg, name).SetInParent()
        elif f.is_repeated:
            getattr(msg, name).extend(v)
        else:
            setattr(msg, name, v)


ASCII_NAME = st.text(alphabet=string.ascii_letters + string.digits + "_", min_size=1, max_size=12)
