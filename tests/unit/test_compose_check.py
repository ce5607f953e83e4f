"""The compose check's pure parts: the swarm variant of the compose file, and the tally."""
from pathlib import Path

from daemons.harness.compose_check import COMPOSE_FILE, outcome, swarm_stack


def test_swarm_stack_of_the_real_compose_file():
    text = COMPOSE_FILE.read_text()
    stack = swarm_stack(text, Path("/cfg"))
    # depends_on becomes a list; services behind a profile are left out; nothing else changes.
    assert "condition: service_healthy" in text and "service_healthy" not in stack
    assert "service_completed_successfully" in text and "service_completed_successfully" not in stack
    assert stack.count("depends_on: [collector]") == 3          # negotiator, schedd, startd
    assert stack.count("depends_on: [secrets]") == 1            # the collector
    assert "profiles:" not in stack and "defrag:" not in stack and "drainboss:" not in stack
    assert "- /cfg/pool.conf:/etc/htcpool/pool.conf:ro" in stack and "- ./" not in stack
    for kept in ("secrets:", "pool-secrets:/etc/htcpool/secrets:ro", "condition: on-failure",
                 "collector:", "negotiator:", "schedd:", "startd:", "endpoint_mode: dnsrr", "replicas: 3",
                 "schedd-spool:/var/lib/htcpool/spool", "networks:", "subnet: ${POOL_SUBNET:-10.201.0.0/24}"):
        assert kept in stack, kept


def test_swarm_stack_small():
    text = ("x-a: &a\n  image: i\nservices:\n  one:\n    <<: *a\n    depends_on:\n      two:\n"
            "        condition: service_healthy\n      three:\n        condition: service_started\n"
            "  two:\n    image: i\n    depends_on:\n      - three\n"
            "  off:\n    image: i\n    profiles: [extra]\n  three:\n    image: i\nvolumes:\n  v:\n")
    assert swarm_stack(text, Path("/c")) == (
        "x-a: &a\n  image: i\nservices:\n  one:\n    <<: *a\n    depends_on: [two, three]\n"
        "  two:\n    image: i\n    depends_on: [three]\n  three:\n    image: i\nvolumes:\n  v:\n")


def test_outcome_counts_lost_and_twice_completed_jobs():
    submitted = ["1.0", "1.1", "1.2", "1.3"]
    history = ["1 0 4", "1 1 4", "1 1 4", "1 2 3", "2 0 4"]   # 1.1 twice, 1.2 removed, 1.3 never, 2.0 not ours
    o = outcome(submitted, history, [])
    assert (o.jobs, o.completed, o.lost, o.duplicated) == (4, 2, 2, 1)
