"""daemons/cli/bench.py: the warnings and errors a bench finds in its pool's logs."""
from daemons.cli.benchkit import log_problem_lines, log_problems


def test_log_problems_counts_warnings_errors_and_tracebacks_and_prints_the_first(tmp_path):
    log = tmp_path / "log"
    log.mkdir()
    (log / "SchedLog").write_text("11/28/26 INFO: fine\n11/28/26 WARNING: one\n11/28/26 ERROR: two\n"
                                  "Traceback (most recent call last):\n11/28/26 WARNING: " + "x" * 300 + "\n")
    (log / "StartLog").write_text("11/28/26 INFO: nothing wrong\n")
    found = log_problems(tmp_path, show=2)
    assert found == {"SchedLog": (4, ["11/28/26 WARNING: one", "11/28/26 ERROR: two"])}
    assert log_problem_lines(found, indent="    ") == ["    SchedLog: 4 line(s)", "      11/28/26 WARNING: one",
                                                       "      11/28/26 ERROR: two"]
    long = log_problems(tmp_path, show=4)["SchedLog"][1][-1]
    assert log_problem_lines({"SchedLog": (4, [long])})[1] == "    " + long[:200]
    assert log_problems(tmp_path / "nowhere") == {}
