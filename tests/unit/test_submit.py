"""daemons/schedd/submit.py: submit-description files -> job ads."""
import pytest

from daemons.schedd.submit import SubmitContext, SubmitError, build_jobs, parse_submit, submitter_of

CTX = SubmitContext(owner="alice", uid_domain="example.org", cluster_id=7, now=1000)

SEED_001 = """\
universe = vanilla
cmd = /bin/sleep
args = 60
should_transfer_files = if_needed
when_to_transfer_output = on_exit
queue 15
"""


def jobs_of(text, file="job.sub"):
    return build_jobs(parse_submit(text, file), CTX)


def one(text):
    jobs = jobs_of(text)
    assert len(jobs) == 1
    return jobs[0]


def error_of(text, file="job.sub"):
    with pytest.raises(SubmitError) as e:
        jobs_of(text, file)
    return e.value


def test_seed_001_gives_fifteen_procs():
    jobs = jobs_of(SEED_001)
    assert [j["ProcId"] for j in jobs] == [str(i) for i in range(15)]
    first = jobs[0]
    assert (first["ClusterId"], first["Cmd"], first["Args"]) == ("7", '"/bin/sleep"', '"60"')
    assert (first["RequestCpus"], first["RequestMemory"], first["JobStatus"]) == ("1", "128", "1")
    assert (first["Owner"], first["User"], first["QDate"]) == ('"alice"', '"alice@example.org"', "1000")
    assert (first["ShouldTransferFiles"], first["WhenToTransferOutput"]) == ('"if_needed"', '"on_exit"')


def test_request_memory_with_unit():
    assert one("cmd = /bin/true\nrequest_memory = 2GB\nqueue\n")["RequestMemory"] == "2048"


def test_request_disk_with_unit_is_in_kib():
    assert one("cmd = /bin/true\nrequest_disk = 1G\nqueue\n")["RequestDisk"] == "1048576"


def test_request_memory_rounds_up_to_whole_mib():
    assert one("cmd = /bin/true\nrequest_memory = 1.5\nqueue\n")["RequestMemory"] == "2"


def test_request_as_expression_is_kept():
    assert one("cmd = /bin/true\nrequest_cpus = 2 * 2\nqueue\n")["RequestCpus"] == "2 * 2"


def test_negative_request_names_the_line():
    e = error_of("cmd = /bin/true\n\nrequest_memory = -5\nqueue\n")
    assert (e.file, e.line) == ("job.sub", 3)
    assert "must not be negative" in e.message


def test_unparsable_requirements_names_file_and_line():
    e = error_of("cmd = /bin/true\nrequirements = (TARGET.Memory >\nqueue\n", "bad.sub")
    assert (e.file, e.line) == ("bad.sub", 2)
    assert str(e).startswith("bad.sub, line 2: requirements = ")


def test_unknown_command_hints_the_right_one():
    with pytest.raises(SubmitError) as e:
        parse_submit("cmd = /bin/true\nrequest_cpu = 4\nqueue\n", "job.sub")
    assert e.value.line == 2
    assert "did you mean 'request_cpus'?" in e.value.message


def test_a_key_used_as_a_macro_is_accepted():
    assert one("foo = 42\ncmd = /bin/sleep\nargs = $(foo)\nqueue\n")["Args"] == '"42"'


def test_cluster_and_process_expand_per_proc():
    jobs = jobs_of("cmd = /bin/echo\nargs = $(Cluster).$(Process)\nqueue 2\n")
    assert [j["Args"] for j in jobs] == ['"7.0"', '"7.1"']


def test_plus_and_my_set_job_attributes():
    ad = one('cmd = /bin/true\n+Duration = 30\nMY.Foo = "x"\nqueue\n')
    assert (ad["Duration"], ad["Foo"]) == ("30", '"x"')


def test_accounting_group_makes_the_submitter():
    ad = one("cmd = /bin/true\naccounting_group = a\nqueue\n")
    assert (ad["AcctGroup"], ad["AcctGroupUser"], ad["AccountingGroup"]) == ('"a"', '"alice"', '"a.alice"')
    assert submitter_of(ad, "example.org") == "a.alice@example.org"


def test_submitter_without_a_group_is_the_owner():
    assert submitter_of(one("cmd = /bin/true\nqueue\n"), "example.org") == "alice@example.org"


def test_commands_change_between_queue_statements():
    jobs = jobs_of("cmd = /bin/sleep\nargs = 10\nqueue\nargs = 20\nqueue 2\n")
    assert [(j["ProcId"], j["Args"]) for j in jobs] == [("0", '"10"'), ("1", '"20"'), ("2", '"20"')]


def test_no_queue_statement_is_an_error():
    with pytest.raises(SubmitError) as e:
        parse_submit("cmd = /bin/true\n", "job.sub")
    assert (e.value.line, str(e.value)) == (None, "job.sub: no 'queue' statement: nothing would be submitted")


def test_grid_universe_is_refused():
    e = error_of("universe = grid\ncmd = /bin/true\nqueue\n")
    assert e.line == 1
    assert "'grid' is not emulated" in e.message


def test_missing_executable_names_the_queue_line():
    e = error_of("args = 1\nqueue\n")
    assert e.line == 2


def test_default_requirements():
    ad = one("cmd = /bin/true\nqueue\n")
    assert ad["Requirements"] == (
        '(TARGET.Arch == "X86_64") && (TARGET.OpSys == "LINUX") && (TARGET.Disk >= RequestDisk) && '
        "(TARGET.Memory >= RequestMemory) && (TARGET.Cpus >= RequestCpus) && (TARGET.HasFileTransfer)")


def test_a_job_gets_the_default_lease_unless_it_sets_its_own():
    # condor_submit: JobLeaseDuration = $(JOB_DEFAULT_LEASE_DURATION) (2400) for a job that
    # can reconnect and sets none; the description's job_lease_duration or +JobLeaseDuration wins.
    assert one("cmd = /bin/true\nqueue\n")["JobLeaseDuration"] == "2400"
    assert one("cmd = /bin/true\njob_lease_duration = 600\nqueue\n")["JobLeaseDuration"] == "600"
    assert one("cmd = /bin/true\n+JobLeaseDuration = 2 * 60\nqueue\n")["JobLeaseDuration"] == "2 * 60"
    pool = SubmitContext(owner="alice", uid_domain="example.org", cluster_id=7, now=1000, default_job_lease="300")
    assert build_jobs(parse_submit("cmd = /bin/true\nqueue\n", "j.sub"), pool)[0]["JobLeaseDuration"] == "300"
    none = SubmitContext(owner="alice", uid_domain="example.org", cluster_id=7, now=1000, default_job_lease="")
    assert "JobLeaseDuration" not in build_jobs(parse_submit("cmd = /bin/true\nqueue\n", "j.sub"), none)[0]


def test_the_schedd_reads_job_default_lease_duration():
    from pathlib import Path

    from daemons.core.config import Param
    from daemons.schedd.daemon import ScheddConfig
    lease = [ScheddConfig.from_param(Param.from_dict(d), Path("/tmp")).default_job_lease
             for d in ({}, {"JOB_DEFAULT_LEASE_DURATION": "300"}, {"JOB_DEFAULT_LEASE_DURATION": "undefined"})]
    assert lease == ["2400", "300", "undefined"]


def test_user_requirements_come_first():
    ad = one("cmd = /bin/true\nrequirements = TARGET.Memory > 4096\nqueue\n")
    clauses = ad["Requirements"].split(" && ")
    assert clauses[0] == "(TARGET.Memory > 4096)"
    assert "(TARGET.Cpus >= RequestCpus)" in clauses


def test_backslash_continues_a_line():
    ad = one("cmd = /bin/echo\nargs = one \\\n  two\nqueue\n")
    assert ad["Args"] == '"one two"'


def test_comments_and_case_insensitive_commands():
    ad = one("# a comment\nExecutable = /bin/sleep\nArguments = 5\nQUEUE\n")
    assert (ad["Cmd"], ad["Args"]) == ('"/bin/sleep"', '"5"')


def test_quoted_arguments_use_the_new_syntax():
    ad = one('cmd = /bin/echo\narguments = "a ""b"" c"\nqueue\n')
    assert ad["Arguments"] == '"a \\"b\\" c"'
    assert "Args" not in ad


def test_priority_sets_job_prio():
    assert one("cmd = /bin/true\npriority = 5\nqueue\n")["JobPrio"] == "5"
