"""History records: numbered in the job queue log, appended once, repaired after a torn write."""
from __future__ import annotations

from daemons.schedd import txlog
from daemons.schedd.history import SEQ_ATTR, HistoryFile, Record, record_text
from daemons.schedd.jobqueue import JobQueue


def _queue_with_jobs(n: int) -> JobQueue:
    q = JobQueue("pool")
    procs = [{"ProcId": str(i), "ClusterId": "1", "Owner": '"alice"', "JobStatus": "2"} for i in range(n)]
    q.apply(q.submit_lines(procs, 1))
    return q


def test_retiring_numbers_records_and_replay_yields_the_same_records():
    q = _queue_with_jobs(3)
    jobs = sorted(q.jobs.values(), key=lambda j: j.key)
    lines = q.retire_lines([(jobs[0], {"JobStatus": "4"}), (jobs[2], {"JobStatus": "3"})])
    q.apply(lines)
    assert [r.seq for r in q.retired] == [1, 2]
    assert sorted(q.jobs) == [(1, 1)]
    assert "JobStatus = 4" in q.retired[0].text and f"{SEQ_ATTR} = 1" in q.retired[0].text

    # Replaying the same log from scratch decides the same records, and a compacted log
    # remembers the last number so the next one continues from it.
    again = JobQueue("pool")
    procs = [{"ProcId": str(i), "ClusterId": "1", "Owner": '"alice"', "JobStatus": "2"} for i in range(3)]
    for line in again.submit_lines(procs, 1) + lines:
        again.apply_op(txlog.parse_op(line, 0, None))
    assert again.retired == q.retired
    compact = JobQueue("pool")
    compact.apply(q.state_lines())
    assert compact.history_seq == 2 and compact.retired == []
    [left] = compact.jobs.values()
    compact.apply(compact.retire_lines([(left, {})]))
    assert [r.seq for r in compact.retired] == [3]


def test_the_history_file_appends_each_record_once_in_order(tmp_path):
    h = HistoryFile(tmp_path / "history")
    recs = [Record(i, record_text(f"[ ProcId = {i} ]", i)) for i in (1, 2, 3)]
    assert h.append([recs[1], recs[0]]) == 2
    assert h.append(recs) == 1          # 1 and 2 are there already
    assert HistoryFile(h.path).last_seq() == 3
    assert [line.strip() for line in h.lines()] == [r.text for r in recs]


def test_a_torn_last_line_is_cut_and_an_old_file_counts_as_unnumbered(tmp_path):
    path = tmp_path / "history"
    path.write_text(record_text("[ ProcId = 0 ]", 7) + "\n" + "[ ProcId = 1; Own")
    h = HistoryFile(path)
    h.repair()
    assert path.read_text().endswith(f"{SEQ_ATTR} = 7 ]\n") and h.last_seq() == 7
    old = tmp_path / "old"
    old.write_text("[ ProcId = 0 ]\n")
    assert HistoryFile(old).last_seq() == 0
