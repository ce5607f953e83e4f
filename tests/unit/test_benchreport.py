"""daemons/cli/benchreport.py: figures, goals, baselines, and the JSON line kept last."""
import io
import json

import pytest

from daemons.cli import benchreport as br
from daemons.cli.base import CliError

RESULT = {"jobs": 100, "rows": [{"slots": 1000, "reschedule_to_record_s": 0.6, "peak_rss_mb": {"collector": 90.0},
                                 "collector_bytes_per_slot_ad": 2048, "lagged": False},
                                {"slots": 50000, "reschedule_to_record_s": 2.0, "error_count": None}]}


def test_flatten_names_rows_by_their_size():
    assert dict(br.flatten(RESULT)) == {"jobs": 100.0, "rows[slots=1000].reschedule_to_record_s": 0.6,
                                        "rows[slots=1000].peak_rss_mb.collector": 90.0,
                                        "rows[slots=1000].collector_bytes_per_slot_ad": 2048.0,
                                        "rows[slots=50000].reschedule_to_record_s": 2.0}


def test_goal_ratios_for_the_figures_present():
    got = {g["figure"]: (g["ratio"], g["met"]) for g in br.goal_ratios("negotiator", RESULT)}
    assert got == {"rows[slots=1000].reschedule_to_record_s": (2.0, False),
                   "rows[slots=1000].collector_bytes_per_slot_ad": (0.5, True),
                   "rows[slots=50000].reschedule_to_record_s": (0.5, True)}
    assert br.goal_ratios("throughput", {"jobs_per_s": 3000}) == [
        {"figure": "jobs_per_s", "what": "jobs per second (goal set for --jobs 10000 --machines 1000)",
         "value": 3000.0, "goal": 1500, "bound": "at least", "ratio": 2.0, "met": True}]
    assert br.goal_ratios("security", RESULT) == []


def test_baseline_ratios_of_figures_that_changed():
    before = {"jobs": 100, "rows": [{"slots": 1000, "reschedule_to_record_s": 1.2, "collector_bytes_per_slot_ad": 0},
                                    {"slots": 10000, "reschedule_to_record_s": 3.0}]}
    ratios, same = br.baseline_ratios(RESULT, before)
    assert same == 1     # jobs
    assert ratios == [{"figure": "rows[slots=1000].reschedule_to_record_s", "now": 0.6, "baseline": 1.2, "ratio": 0.5},
                      {"figure": "rows[slots=1000].collector_bytes_per_slot_ad", "now": 2048.0, "baseline": 0.0,
                       "ratio": None}]


def test_read_baseline_takes_the_last_line(tmp_path):
    f = tmp_path / "run.txt"
    f.write_text("a table\n  more\n" + json.dumps({"bench": "negotiator", "jobs": 1}) + "\n\n")
    assert br.read_baseline(str(f), "negotiator") == {"bench": "negotiator", "jobs": 1}


@pytest.mark.parametrize("text, message", [
    (None, "--baseline {f}: No such file or directory"),
    ("", "--baseline {f}: the file is empty"),
    ("a table\nnot json\n", "--baseline {f}, line 2: not a JSON object (give the output of a run with --json)"),
    ('[1, 2]\n', "--baseline {f}, line 1: not a JSON object"),
    ('{"bench": "throughput"}\n', "--baseline {f}: that is a run of bench throughput, not negotiator"),
])
def test_a_bad_baseline_is_one_line_naming_the_file(tmp_path, text, message):
    f = tmp_path / "base.json"
    if text is not None:
        f.write_text(text)
    with pytest.raises(CliError) as e:
        br.read_baseline(str(f), "negotiator")
    assert e.value.code == 2
    assert str(e.value).startswith(message.format(f=f))
    assert "\n" not in str(e.value)


def test_the_json_line_is_held_until_another_line_follows():
    out = io.StringIO()
    hold = br._HoldJson(out)
    hold.write('table\n{"a": 1}\n')
    assert out.getvalue() == "table\n"
    hold.write("more\n")
    assert out.getvalue() == 'table\n{"a": 1}\nmore\n'
    hold.write('{"b": ')
    hold.write('2}\n')
    assert hold.close_held() == {"b": 2}
    assert out.getvalue() == 'table\n{"a": 1}\nmore\n'


def test_run_adds_goals_baseline_and_keeps_json_last(tmp_path, capsys):
    base = tmp_path / "base.json"
    base.write_text(json.dumps({"bench": "throughput", "jobs_per_s": 1000.0, "wall_s": 10.0}) + "\n")

    def bench(args):
        print("the bench's table")
        if args.json:
            print(json.dumps({"jobs_per_s": 500.0, "wall_s": 10.0}))
        return 0

    class Args:
        json = True
        baseline = str(base)
    assert br.run("throughput", bench, Args) == 0
    lines = capsys.readouterr().out.splitlines()
    result = json.loads(lines[-1])
    assert lines[0] == "the bench's table"
    assert result["bench"] == "throughput"
    assert result["baseline_ratios"] == [{"figure": "jobs_per_s", "now": 500.0, "baseline": 1000.0, "ratio": 0.5}]
    assert result["baseline_unchanged"] == 1
    assert [g["ratio"] for g in result["goal_ratios"]] == [0.333]
    assert list(result["peak_rss_mb"]) == ["bench (this process)"]
    text = "\n".join(lines)
    assert "NOT MET" in text and "x0.5" in text

    Args.json, Args.baseline = False, None
    assert br.run("throughput", bench, Args) == 0
    out = capsys.readouterr().out
    assert "{" not in out and "against issue 14's goals" in out
    assert Args.json is False


def test_bench_negotiator_reports_the_median_run_of_repeats():
    from daemons.cli.bench_negotiator import median_run
    runs = [{"slots": 1000, "reschedule_to_record_s": t, "cycle_s": t - 0.001, "negotiator_cpu_s": c, "matches": m}
            for t, c, m in ((0.9, 0.7, 1), (0.5, 0.4, 2), (0.6, 0.5, 3), (0.7, 0.6, 4))]
    row = median_run(runs)
    # Of four, the slower of the middle two; every figure that run's own.
    assert (row["reschedule_to_record_s"], row["negotiator_cpu_s"], row["matches"]) == (0.7, 0.6, 4)
    assert row["repeats"] == {"runs": 4, "reschedule_to_record_s": [0.5, 0.6, 0.7, 0.9],
                              "cycle_s": [0.499, 0.599, 0.699, 0.899], "negotiator_cpu_s": [0.4, 0.5, 0.6, 0.7]}
    assert median_run(runs[:3])["matches"] == 3 and "repeats" not in median_run(runs[:1])
    failed = {"slots": 1000, "error": "the pool did not start"}
    assert median_run([runs[0], failed]) == failed
