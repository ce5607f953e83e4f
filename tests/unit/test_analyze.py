"""daemons/cli/analyze.py: condor_q -analyze style slot counts and match history."""
import classad2

from daemons.cli.analyze import SlotCounts, analyze, count_slots

NOW = 1_700_000_000.0


def job_ad(extra=""):
    return classad2.ClassAd(
        '[ ClusterId = 12; ProcId = 3; Owner = "alice"; User = "alice@example.org"; JobStatus = 1; '
        'RequestMemory = 1024; Requirements = TARGET.Memory >= RequestMemory' + (f"; {extra}" if extra else "")
        + " ]")


def slot_ad(name="slot1@h1", machine="h1", memory=4096, start="true", state="Unclaimed", extra=""):
    return classad2.ClassAd(
        f'[ Name = "{name}"; Machine = "{machine}"; Memory = {memory}; Start = {start}; Requirements = START; '
        f'State = "{state}"' + (f"; {extra}" if extra else "") + " ]")


def test_count_slots_every_category():
    slots = [
        slot_ad("s1@h1", "h1", memory=512),                                       # too small for the job
        slot_ad("s2@h1", "h1", start='TARGET.Owner == "bob"'),                     # rejects alice
        slot_ad("s3@h2", "h2", state="Claimed", extra='RemoteOwner = "alice@example.org"'),
        slot_ad("s4@h2", "h2", state="Claimed", extra='RemoteOwner = "carol@example.org"'),
        slot_ad("s5@h3", "h3"),
        slot_ad("s6@h3", "h3"),
    ]
    assert count_slots(job_ad(), slots, NOW) == SlotCounts(
        slots=6, machines=3, rejected_by_job=1, rejecting_job=1, running_your_jobs=1, serving_others=1, willing=2)


def test_no_slot_meets_the_job_requirements():
    slots = [slot_ad("s1@h1", memory=100), slot_ad("s2@h1", memory=200)]
    out = analyze(job_ad(), slots, NOW)
    assert "\n012.003:  Run analysis summary ignoring user priority.  Of 2 slots on 1 machines,\n" in out
    assert "      2 slots are rejected by your job's requirements\n" in out
    assert "      0 slots match and are willing to run your job\n" in out
    assert out.endswith("\nWARNING:  Be advised:\n   No machines matched the jobs's constraints\n")


def test_slot_start_rejects_the_job():
    slots = [slot_ad(start='TARGET.Owner =!= "alice"'), slot_ad("s2@h1", memory=10)]
    c = count_slots(job_ad(), slots, NOW)
    assert (c.rejected_by_job, c.rejecting_job, c.willing) == (1, 1, 0)
    out = analyze(job_ad(), slots, NOW)
    assert "      1 slots reject your job because of their own requirements\n" in out
    assert "No machines matched" not in out
    assert out.endswith("\nWARNING:  Be advised:\n   Job did not match any machines's constraints\n")


def test_slot_start_sees_the_current_time():
    slots = [slot_ad(start=f"CurrentTime > {int(NOW) - 10}"), slot_ad("s2@h1", start=f"CurrentTime > {int(NOW)}")]
    c = count_slots(job_ad(), slots, NOW)
    assert (c.willing, c.rejecting_job) == (1, 1)


def test_never_considered_job():
    out = analyze(job_ad(), [slot_ad()], NOW)
    assert "Request has not yet been considered by the matchmaker.\n" in out
    assert "No successful match recorded." not in out
    assert "Last failed match" not in out
    assert "      1 slots match and are willing to run your job\n" in out
    assert "WARNING" not in out


def test_failed_match_recorded():
    job = job_ad(f'LastRejMatchTime = {int(NOW) - 60}; LastRejMatchReason = "no match found"')
    out = analyze(job, [slot_ad()], NOW)
    lines = out.split("\n")
    assert "No successful match recorded." in lines
    assert "Reason for last match failure: no match found" in lines
    failed = [ln for ln in lines if ln.startswith("Last failed match: ")]
    assert len(failed) == 1
    assert lines.index("No successful match recorded.") < lines.index(failed[0]) < lines.index(
        "Reason for last match failure: no match found")
    assert "Request has not yet been considered by the matchmaker." not in out


def test_successful_match_then_older_failure():
    job = job_ad(f'LastMatchTime = {int(NOW) - 10}; LastRejMatchTime = {int(NOW) - 60}; '
                 'LastRejMatchReason = "no match found"')
    out = analyze(job, [slot_ad()], NOW)
    assert sum(ln.startswith("Last successful match: ") for ln in out.split("\n")) == 1
    assert "No successful match recorded." not in out
    assert "Reason for last match failure" not in out
    assert "Request has not yet been considered" not in out


def test_claimed_slot_running_the_users_job():
    slots = [slot_ad(state="Claimed", extra='RemoteOwner = "alice@example.org"'), slot_ad("s2@h2", "h2")]
    c = count_slots(job_ad(), slots, NOW)
    assert (c.running_your_jobs, c.serving_others, c.willing) == (1, 0, 1)
    out = analyze(job_ad(), slots, NOW)
    assert "      1 slots match and are already running your jobs\n" in out
    assert "serving other users" not in out


def test_claimed_slot_serving_someone_else():
    slots = [slot_ad(state="Claimed", extra='RemoteOwner = "bob@example.org"')]
    out = analyze(job_ad(), slots, NOW)
    assert "      1 slots match but are serving other users\n" in out
    assert "already running your jobs" not in out
    # It matches both ways, so HTCondor gives no warning.
    assert "WARNING" not in out


def test_held_job_status_and_reason():
    out = analyze(job_ad('JobStatus = 5; HoldReason = "disk full"'), [slot_ad()], NOW)
    assert out.startswith("\n012.003:  Job is held.\n\nHold reason: disk full\n")
    assert "Request has not yet been considered" not in out


def test_autocluster_line():
    out = analyze(job_ad('AutoClusterId = 4; AutoClusterAttrs = "Owner,Requirements"'), [slot_ad()], NOW)
    assert "Autocluster 4 (significant attributes: Owner,Requirements)\n" in out


def test_no_slots():
    out = analyze(job_ad(), [], NOW)
    assert "Of 0 slots on 0 machines," in out
    assert "WARNING" not in out
