"""The collector's judgement of advertised addresses (pure part)."""
from daemons.collector.reachability import address_problem, peer_host, split_sinful


def test_split_and_peer():
    assert split_sinful("<10.0.0.3:9618?addrs=x>") == ("10.0.0.3", 9618)
    assert split_sinful("collector:9618") == ("collector", 9618)
    assert split_sinful("<nohost>") is None
    assert peer_host("ipv4:10.0.0.3:5555") == "10.0.0.3"
    assert peer_host("ipv6:[::1]:5555") == "::1"
    assert peer_host("unix:/tmp/x") is None


def test_loopback_from_another_host_is_a_problem():
    why = address_problem("<127.0.0.1:4000>", "ipv4:10.0.0.3:5555")
    assert why == "127.0.0.1 is a loopback address and the update came from 10.0.0.3, another host"


def test_loopback_from_loopback_is_fine():
    assert address_problem("<127.0.0.1:4000>", "ipv4:127.0.0.1:5555") is None
    assert address_problem("<127.0.0.1:4000>", "ipv6:[::1]:5555") is None


def test_unspecified_and_malformed():
    assert "unspecified" in address_problem("<0.0.0.0:4000>", "ipv4:127.0.0.1:1")
    assert address_problem("<10.0.0.3>", "ipv4:10.0.0.3:1") == "MyAddress '<10.0.0.3>' is not host:port"


def test_routable_or_named_addresses_are_left_to_the_probe():
    assert address_problem("<10.0.0.4:4000>", "ipv4:10.0.0.3:5555") is None
    assert address_problem("<startd.example:4000>", "ipv4:10.0.0.3:5555") is None
