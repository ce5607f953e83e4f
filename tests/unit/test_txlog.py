"""daemons/schedd/txlog.py: HTCondor job_queue.log format, commit and replay."""
import pytest

from daemons.schedd import txlog
from daemons.schedd.jobqueue import JobQueue
from daemons.schedd.txlog import LogCorrupt, TxLog, read_log


def replay(path):
    ops, seq, cut = read_log(path)
    q = JobQueue("example.org")
    for op in ops:
        q.apply_op(op)
    return q, seq, cut


async def test_committed_transactions_replay(tmp_path):
    path = tmp_path / "job_queue.log"
    log = TxLog(path)
    log.append([txlog.op_new("1.0"), txlog.op_set("1.0", "JobStatus", "1"),
                txlog.op_set("1.0", "Owner", '"alice"')])
    n = log.append([txlog.op_set("1.0", "JobStatus", "2")])
    await log.commit(n)
    log.close()
    q, seq, cut = replay(path)
    assert (seq, cut) == (0, False)
    assert list(q.jobs) == [(1, 0)]
    assert q.jobs[(1, 0)].attrs == {"JobStatus": "2", "Owner": '"alice"'}
    assert q.jobs[(1, 0)].submitter == "alice@example.org"
    assert (log.commits, log.fsyncs) == (2, 1)


async def test_file_uses_htcondor_op_codes(tmp_path):
    path = tmp_path / "job_queue.log"
    log = TxLog(path)
    log.append([txlog.op_new("1.0"), txlog.op_set("1.0", "JobStatus", "1"),
                txlog.op_delete_attr("1.0", "Foo"), txlog.op_destroy("1.0")])
    await log.commit()
    log.close()
    assert path.read_text().split("\n") == [
        "105 ", "101 1.0 Job Machine", "103 1.0 JobStatus 1", "104 1.0 Foo", "102 1.0", "106 ", ""]


def test_unterminated_trailing_transaction_is_dropped(tmp_path):
    path = tmp_path / "job_queue.log"
    path.write_text("105 \n101 1.0 Job Machine\n103 1.0 JobStatus 1\n106 \n"
                    "105 \n103 1.0 JobStatus 2\n")
    q, _, cut = replay(path)
    assert cut is True
    assert q.jobs[(1, 0)].attrs == {"JobStatus": "1"}


def test_torn_last_line_is_ignored(tmp_path):
    path = tmp_path / "job_queue.log"
    path.write_text("105 \n101 1.0 Job Machine\n103 1.0 JobStatus 1\n106 \n103 1.0 JobSt")
    q, _, cut = replay(path)
    assert cut is False
    assert q.jobs[(1, 0)].attrs == {"JobStatus": "1"}


def test_corrupt_line_in_the_middle_names_its_line(tmp_path):
    path = tmp_path / "job_queue.log"
    path.write_text("105 \n101 1.0 Job Machine\ngarbage here\n106 \n")
    with pytest.raises(LogCorrupt) as e:
        read_log(path)
    assert f"{path}, line 3: not a log entry" in str(e.value)


def test_unknown_op_code_is_corrupt(tmp_path):
    path = tmp_path / "job_queue.log"
    path.write_text("105 \n199 1.0 x\n106 \n")
    with pytest.raises(LogCorrupt) as e:
        read_log(path)
    assert "line 2: unknown log op 199" in str(e.value)


def test_end_without_begin_is_corrupt(tmp_path):
    path = tmp_path / "job_queue.log"
    path.write_text("106 \n")
    with pytest.raises(LogCorrupt) as e:
        read_log(path)
    assert "line 1: a transaction ends that never began" in str(e.value)


def test_missing_log_is_empty(tmp_path):
    assert read_log(tmp_path / "none.log") == ([], 0, False)


def test_rewrite_writes_header_and_state(tmp_path):
    path = tmp_path / "job_queue.log"
    log = TxLog(path)
    log.rewrite([txlog.op_new("2.0"), txlog.op_set("2.0", "JobStatus", "5")], seq=3)
    log.close()
    lines = path.read_text().split("\n")
    assert lines[0].startswith("107 3 CreationTimestamp ")
    q, seq, cut = replay(path)
    assert (seq, cut) == (3, False)
    assert q.jobs[(2, 0)].attrs == {"JobStatus": "5"}


def test_set_value_spanning_lines_is_refused():
    with pytest.raises(ValueError):
        txlog.op_set("1.0", "Foo", '"a\nb"')


def test_parse_set_keeps_spaces_in_the_value(tmp_path):
    op = txlog.parse_op('103 1.0 Requirements (TARGET.Cpus >= 1) && true', 1, tmp_path)
    assert op == txlog.Op(txlog.SET, "1.0", "Requirements", "(TARGET.Cpus >= 1) && true")


async def test_write_soon_hands_a_transaction_to_the_os_before_its_commit(tmp_path):
    """What write_soon() wrote is in the file at once (a process killed now loses nothing),
    while the fsync runs behind; a later commit counts it once."""
    path = tmp_path / "job_queue.log"
    log = TxLog(path)
    log.append([txlog.op_new("1.0"), txlog.op_set("1.0", "JobStatus", "1")])
    n = log.append([txlog.op_set("1.0", "JobStatus", "2")])
    assert "JobStatus 2" not in (path.read_text() if path.exists() else "")
    log.write_soon()
    assert "103 1.0 JobStatus 2" in path.read_text()      # no await in between
    m = log.append([txlog.op_set("1.0", "JobStatus", "4")])
    await log.commit(m)
    assert log.synced == m == n + 1 and log.commits == 3 and log.quiet
    q, _, cut = replay(path)
    assert not cut and q.jobs[(1, 0)].attrs["JobStatus"] == "4"


async def test_a_write_soon_that_fails_fails_the_next_commit(tmp_path):
    path = tmp_path / "job_queue.log"
    log = TxLog(path)
    log.append([txlog.op_new("1.0")])

    class Broken:
        def write(self, text):
            raise OSError(28, "No space left on device")

        def flush(self):
            pass

        def fileno(self):
            return -1

        def close(self):
            pass
    log._file = Broken()
    log.write_soon()
    with pytest.raises(OSError, match="No space"):
        await log.commit()
    # Raised once; the log goes on with the next transactions.
    log._file = None
    n = log.append([txlog.op_new("2.0")])
    await log.commit(n)
    assert log.synced == n and "101 2.0" in path.read_text()
