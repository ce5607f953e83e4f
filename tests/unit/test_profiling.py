"""The summary of py-spy's collapsed stacks (pure)."""
from daemons.cli.profiling import Row, format_top, top_functions

FOLDED = """\
_run_module_as_main (<frozen runpy>:198);run_forever (/usr/lib/python3.11/asyncio/base_events.py:607);\
select (/usr/lib/python3.11/selectors.py:468) 50
_run_module_as_main (<frozen runpy>:198);run_forever (/usr/lib/python3.11/asyncio/base_events.py:607);\
idle_jobs (/work/x/daemons/schedd/scheduling.py:52);status (/work/x/daemons/schedd/jobqueue.py:80) 30
_run_module_as_main (<frozen runpy>:198);run_forever (/usr/lib/python3.11/asyncio/base_events.py:607);\
idle_jobs (/work/x/daemons/schedd/scheduling.py:53) 20
Thread._bootstrap (threading.py:1002);_worker (concurrent/futures/thread.py:81) 500
not a sample line
"""


def test_top_functions_counts_the_main_thread_self_and_inclusive():
    total, rows = top_functions(FOLDED, n=3)
    assert total == 100
    assert rows == [
        Row("select (selectors.py)", 50.0, 50.0),
        Row("status (daemons/schedd/jobqueue.py)", 30.0, 30.0),
        Row("idle_jobs (daemons/schedd/scheduling.py)", 20.0, 50.0),
    ]


def test_format_top_and_an_empty_profile():
    lines = format_top("schedd", FOLDED, n=1)
    assert lines[0].startswith("schedd: 100 samples")
    assert lines[1].split() == ["50.0", "50.0", "select", "(selectors.py)"]
    assert top_functions("") == (0, [])


def test_the_sampling_rate_can_be_set(monkeypatch):
    from daemons.cli import profiling
    for text, want in (("", profiling.RATE_HZ), ("200", 200), ("0", profiling.RATE_HZ), ("x", profiling.RATE_HZ),
                       ("5000", profiling.RATE_HZ)):
        monkeypatch.setenv(profiling.RATE_ENV, text)
        assert profiling.rate_hz() == want
    assert format_top("s", FOLDED, n=1, hz=200)[0].endswith("at 200 Hz (self % / inclusive %)")
