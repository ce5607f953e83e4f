"""Submit commands (issue 13, item 6) and submit-file hardening (issue 12).

The semantics are condor_submit's: HTCondor manual, condor_submit (the `queue`
command; request_<name>; job_machine_attrs and job_machine_attrs_history_length),
and HTCondor's submit code (submit_utils.cpp: SubmitForeachArgs::parse_queue_args,
split_item, SetRequestResources, SetConcurrencyLimits, SetRequirements).
"""
from __future__ import annotations

import pytest

from daemons.schedd.submit import (SubmitContext, SubmitError, build_jobs, count_jobs, decode_submit, parse_submit,
                                   resolve_external_items)

CTX = SubmitContext(owner="alice", uid_domain="example.org", cluster_id=7, now=1000)
HEAD = "executable = /bin/sleep\n"


def jobs_of(text, items=None, **kw):
    return build_jobs(parse_submit(HEAD + text, "job.sub", items), CTX, **kw)


def error_of(text, items=None, **kw) -> SubmitError:
    with pytest.raises(SubmitError) as e:
        jobs_of(text, items, **kw)
    return e.value


# ---- queue ---------------------------------------------------------------------------
def test_queue_n_var_in_list():
    """Manual, example 2: `queue 1 input in A, B, C` sets $(input) to each item."""
    jobs = jobs_of("arguments = $(input)\nqueue 1 input in A, B, C\n")
    assert [j["Args"] for j in jobs] == ['"A"', '"B"', '"C"']


def test_queue_count_multiplies_each_item_and_step_counts_within_it():
    """`<int expr>` jobs are queued for each item; $(Step) counts within an item, $(ItemIndex) the item."""
    jobs = jobs_of("arguments = $(Item) $(Step) $(ItemIndex) $(Process)\nqueue 2 in (x y)\n")
    assert [j["Args"] for j in jobs] == ['"x 0 0 0"', '"x 1 0 1"', '"y 0 1 2"', '"y 1 1 3"']


def test_queue_from_a_multiline_list_with_several_variables():
    """Manual, example 3: each line an item, split on commas/spaces, the last variable takes the rest;
    lines starting with # are skipped; a queue variable named like a command is that command."""
    text = ("queue input, arguments from (\n  file1, -a -b 26\n# a comment\n  file2, -c -d 92\n)\n")
    jobs = jobs_of(text)
    assert [(j["In"], j["Args"]) for j in jobs] == [('"file1"', '"-a -b 26"'), ('"file2"', '"-c -d 92"')]


def test_queue_in_a_multiline_list_and_a_slice():
    """A slice is Python's [start:stop:step] over the items."""
    jobs = jobs_of("arguments = $(x)\nqueue x in [1::2] (\n a b\n c d\n e\n)\n")
    assert [j["Args"] for j in jobs] == ['"b"', '"d"']


@pytest.mark.parametrize("bad", ["[::-]", "[1:x]", "[-]", "[1:x"])
def test_a_slice_that_is_not_whole_numbers_is_refused(bad):
    """Found by the fuzzer: '[::-]' raised ValueError (a traceback, not an error line)."""
    with pytest.raises(SubmitError, match=r"job\.sub, line 2: slice .*expected \[start:stop:step\]"):
        parse_submit(HEAD + f"queue x in {bad} (a b c)\n", "job.sub")


def test_queue_from_a_file_uses_the_items_the_client_read():
    desc = parse_submit(HEAD + "arguments = $(n)\nqueue n from numbers.txt\n", "job.sub")
    items = resolve_external_items(desc, lambda name: ["1", "", "2", "3"] if name == "numbers.txt" else [],
                                   lambda p, k: [])
    assert items == {3: ["1", "2", "3"]}
    jobs = build_jobs(parse_submit(HEAD + "arguments = $(n)\nqueue n from numbers.txt\n", "job.sub", items), CTX)
    assert [j["Args"] for j in jobs] == ['"1"', '"2"', '"3"']


def test_queue_matching_uses_the_names_the_client_found():
    """`queue filename matching files *.dat` (manual, example 1)."""
    desc = parse_submit(HEAD + "arguments = -infile $(filename)\nqueue filename matching files *.dat\n", "j.sub")
    items = resolve_external_items(desc, lambda n: [], lambda pattern, kind: ["a.dat", "b.dat"]
                                   if (pattern, kind) == ("*.dat", "files") else [])
    assert [j["Args"] for j in build_jobs(desc, CTX)] == ['"-infile a.dat"', '"-infile b.dat"']
    assert items == {3: ["a.dat", "b.dat"]}


def test_the_schedd_refuses_external_items_that_did_not_come():
    e = error_of("queue x from data.txt\n")
    assert e.line == 2 and "needs the items read where the file is submitted" in e.message


def test_queue_from_a_command_is_refused():
    assert "does not run commands" in error_of("queue from seq 7 9 |\n").message


def test_an_unclosed_item_list_names_the_queue_line():
    e = error_of("queue x in (\n a\n b\n")
    assert e.line == 2 and "no closing ')'" in e.message


@pytest.mark.parametrize("count, says", [("1e8", None), ("2 * 3", None), ("-1", "out of range"),
                                         ("2147483647", "out of range"), ("many", "is not an integer")])
def test_queue_count_is_an_integer_expression_in_range(count, says):
    """condor_submit: an integer or an expression evaluating to one, 0 <= N < INT_MAX."""
    if says is None:
        assert count_jobs(parse_submit(HEAD + f"queue {count}\n")) in (100_000_000, 6)
    else:
        assert says in error_of(f"queue {count}\n").message


def test_max_jobs_per_submission_is_checked_before_building():
    e = error_of("queue 100000000\n", max_jobs=20_000)
    assert "100,000,000 jobs in one submission; MAX_JOBS_PER_SUBMISSION is 20,000" in e.message


def test_a_sample_build_checks_a_huge_queue_quickly():
    jobs = jobs_of("queue 100000000\n", sample=True)
    assert [j["ProcId"] for j in jobs] == ["0", "99999999"]


# ---- request_<resource> --------------------------------------------------------------
def test_request_any_machine_resource_adds_its_requirements_clause():
    """request_<name> sets Request<name>; condor_submit adds (TARGET.<name> >= Request<name>)."""
    ad = jobs_of("request_FPGA = 2\nrequest_gpus = 1\nqueue\n")[0]
    assert (ad["RequestFPGA"], ad["RequestGPUs"]) == ("2", "1")
    assert "(TARGET.FPGA >= RequestFPGA)" in ad["Requirements"]
    assert "(TARGET.GPUs >= RequestGPUs)" in ad["Requirements"]


def test_no_requirements_clause_for_a_zero_request_or_one_already_mentioned():
    ad = jobs_of("request_fpga = 0\nrequest_tpu = 1\nrequirements = TARGET.tpu > 2\nqueue\n")[0]
    assert "fpga >=" not in ad["Requirements"] and "TARGET.tpu >= Requesttpu" not in ad["Requirements"]


def test_request_cpu_is_a_misspelling_not_a_resource():
    assert "did you mean 'request_cpus'?" in error_of("request_cpu = 4\nqueue\n").message


@pytest.mark.parametrize("value, says", [
    ("99999999999999999999", "out of range"),
    ("1" * 309, "out of range"),
    ("1e400", "out of range"),
    ('real("NaN")', "is not a finite number"),
    ('"four"', "is a string, not a number"),
    ("true", "is a boolean, not a number"),
    ("-1", "must not be negative"),
    ("9223372036854775807 + 1", "must not be negative"),
])
def test_requests_out_of_range_are_refused_not_zero(value, says):
    e = error_of(f"request_cpus = {value}\nqueue\n")
    assert e.line == 2 and says in e.message


def test_request_memory_units_overflow_is_refused():
    assert "out of range" in error_of("request_memory = 99999999999999999 TB\nqueue\n").message


def test_a_request_that_depends_on_the_slot_is_kept():
    assert jobs_of("request_memory = ifThenElse(MemoryUsage > 0, MemoryUsage, 2048)\nqueue\n")[0]["RequestMemory"]


# ---- job_machine_attrs -----------------------------------------------------------------
def test_job_machine_attrs_and_history_length():
    ad = jobs_of("job_machine_attrs = Machine, SlotID\njob_machine_attrs_history_length = 3\nqueue\n")[0]
    assert (ad["JobMachineAttrs"], ad["JobMachineAttrsHistoryLength"]) == ('"Machine,SlotID"', "3")
    assert "out of bounds" in error_of("job_machine_attrs_history_length = -1\nqueue\n").message


# ---- commands: recorded, refused, unknown ------------------------------------------------
def test_common_commands_are_recorded_with_htcondor_attribute_names():
    ad = jobs_of("output = o.txt\nerror = e.txt\nlog = l.log\nmax_retries = 3\nnotification = never\n"
                 "concurrency_limits = Lic_B, lic_a:2\nstream_output = true\nqueue\n")[0]
    assert (ad["Out"], ad["Err"], ad["UserLog"], ad["JobMaxRetries"]) == ('"o.txt"', '"e.txt"', '"l.log"', "3")
    assert (ad["JobNotification"], ad["ConcurrencyLimits"], ad["StreamOut"]) == ("0", '"lic_a:2,lic_b"', "true")


@pytest.mark.parametrize("line, says", [
    ("universe = grid", "'grid' is not emulated"),
    ("universe = nonsense", "is not a universe"),
    ("grid_resource = batch slurm", "grid universe jobs are not emulated"),
    ("machine_count = 4", "parallel universe jobs are not emulated"),
    ("deferral_time = 100", "job deferral"),
    ("max_materialize = 10", "late materialization is not emulated"),
    ("cron_minute = 5", "job deferral"),
    ("request_gpus_memory = 100", "use gpus_minimum_memory"),
])
def test_commands_htcpool_does_not_emulate_are_refused_with_the_reason(line, says):
    e = error_of(f"{line}\nqueue\n")
    assert e.line == 2 and says in e.message


def test_an_unknown_command_says_what_it_is_not():
    e = error_of("frobnicate = 3\nqueue\n")
    assert e.message == ("'frobnicate' is not a submit command, and no $(frobnicate) uses it as a macro "
                         "(a job attribute is set with +frobnicate = ...)")


# ---- protected attributes and names --------------------------------------------------------
@pytest.mark.parametrize("line", ["+ProcId = 0", '+ProcId = "x"', "+JobStatus = 2", "+JobStatus = 4",
                                  'MY.Owner = "root"', '+ClusterId = 9', '+ClaimId = "x"', "+RemoteHost = 1",
                                  "+QDate = 0", "+NumJobStarts = 5", "+EnteredCurrentStatus = 0",
                                  "+MachineAttrCpus0 = 64"])
def test_attributes_the_schedd_owns_cannot_be_set(line):
    e = error_of(f"{line}\nqueue 5\n")
    assert e.line == 2 and "is set by the schedd and cannot be set by a user" in e.message


@pytest.mark.parametrize("line, says", [("+é = 1", "'é' is not an attribute name"),
                                        ("+true = 1", "a word ClassAd reserves"),
                                        ("+1abc = 1", "'1abc' is not an attribute name"),
                                        ("MY.a.b = 1", "'a.b' is not an attribute name")])
def test_attribute_names_follow_the_classad_grammar(line, says):
    assert says in error_of(f"{line}\nqueue\n").message


def test_job_prio_must_be_an_integer():
    assert "must be an integer" in error_of("+JobPrio = 1e30\nqueue\n").message
    assert "must eval to an integer" in error_of("priority = high\nqueue\n").message
    assert "out of range" in error_of("priority = 99999999999\nqueue\n").message


# ---- text ------------------------------------------------------------------------------------
def test_bytes_that_are_not_utf8_name_the_line_and_column():
    with pytest.raises(SubmitError) as e:
        decode_submit(b"executable = /bin/true\narguments = caf\xe9\nqueue\n", "bad.sub")
    assert str(e.value) == "bad.sub, line 2: not UTF-8 text (byte 0xe9 at column 16)"


def test_a_nul_byte_or_an_escape_is_refused():
    with pytest.raises(SubmitError) as e:
        parse_submit("executable = /bin/true\narguments = a\x00b\nqueue\n", "nul.sub")
    assert str(e.value) == "nul.sub, line 2: a NUL byte at column 14: a submit file must be text"
    with pytest.raises(SubmitError) as e:
        parse_submit("executable = /bin/true\n\x1b[2J\nqueue\n", "esc.sub")
    assert "control character U+001B" in str(e.value)


def test_a_deep_expression_is_refused_by_line_not_by_a_crash():
    e = error_of("requirements = " + " + ".join(["1"] * 50_000) + "\nqueue\n")
    assert e.line == 2 and "nested more than 1000 deep" in e.message


def test_macros_that_double_themselves_are_bounded():
    text = "a0 = xxxxxxxxxx\n" + "".join(f"a{i + 1} = $(a{i})$(a{i})\n" for i in range(19)) + \
        "arguments = $(a19)\nqueue\n"
    assert "see CLASSAD_MAX_EXPR_LENGTH" in error_of(text).message
