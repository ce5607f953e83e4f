"""daemons/schedd/queue_ops.py: a history query answers with the records of completed jobs
whose transaction is not yet on disk, once each, whenever the file catches up."""
from types import SimpleNamespace

from daemons.core import ads
from daemons.schedd.history import HistoryFile, Record, record_text
from daemons.schedd.queue_ops import QueueOpsMixin


def rec(seq: int, txn: int = 0) -> Record:
    return Record(seq, record_text(f'[ ClusterId = 1; ProcId = {seq}; JobStatus = 4 ]', seq), txn)


def query(schedd) -> list[int]:
    texts = QueueOpsMixin._history_texts(schedd, None, [], True, lambda: None)
    return [ads.get(ads.parse_ad(t), "ProcId") for t in texts]


def test_waiting_records_are_answered_once_whether_or_not_the_file_has_them_yet(tmp_path):
    history = HistoryFile(tmp_path / "history")
    history.append([rec(1), rec(2)])
    retired = [rec(3, txn=7), rec(4, txn=7)]     # out of the queue; their transaction not yet synced
    schedd = SimpleNamespace(clock=SimpleNamespace(now=lambda: 0.0), history=history,
                             queue=SimpleNamespace(retired=retired))
    assert query(schedd) == [1, 2, 3, 4]
    # The file catches up while a query reads it: nothing twice, nothing missed.
    texts = QueueOpsMixin._history_texts(schedd, None, [], True, lambda: None)
    first = next(texts)
    history.append(retired)
    assert [ads.get(ads.parse_ad(t), "ProcId") for t in [first, *texts]] == [1, 2, 3, 4]
    schedd.queue.retired = []
    assert query(schedd) == [1, 2, 3, 4]
