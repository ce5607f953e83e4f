"""The collector's view of the pool's lag: ads do not expire because their daemon ran behind."""
import time
from pathlib import Path

from daemons.collector.daemon import CollectorConfig, CollectorDaemon
from daemons.core import ads
from daemons.core.clock import PoolClock
from daemons.core.common import CommonConfig


def collector(tmp_path: Path) -> CollectorDaemon:
    common = CommonConfig(role="collector", collector_host=None, bind_host="127.0.0.1", grpc_port=0, status_port=0,
                          time_scale=100.0, pool_epoch=0.0, local_dir=tmp_path, log_dir=tmp_path / "log",
                          spool_dir=tmp_path / "spool", full_hostname="h", uid_domain="h", update_interval_s=300.0)
    wall = [1000.0]
    return CollectorDaemon(common, CollectorConfig(classad_lifetime_s=900.0),
                           PoolClock(scale=100.0, epoch=0.0, wall=lambda: wall[0]))


def test_a_lagging_daemon_stretches_the_expiry_of_every_ad(tmp_path):
    c = collector(tmp_path)
    now = c.clock.now()
    assert c.expiry_now() == now                       # no lag heard of
    c.note_lag(ads.parse_ad(ads.ad_text({"MyType": "Scheduler", "Name": "s", "HtcpoolLoopLagWall": 2.5,
                                         "HtcpoolLoopLagSustainedWall": 0.5})))
    assert c.lags["scheduler s"][:2] == (0.5, 2.5)
    assert c.expiry_now() == now - 250.0               # 2.5 s behind at scale 100
    c.lags["scheduler s"] = (0.5, 2.5, time.time() - 60)   # not heard from since: it no longer counts
    assert c.expiry_now() == now


def _updates_late(sustained_wall: float, recent_wall: float):
    return ads.parse_ad(ads.ad_text({"MyType": "Machine", "Name": "startd@h", "HtcpoolLoopLagWall": 0.01,
                                     "HtcpoolLoopLagSustainedWall": 0.0, "HtcpoolUpdateLagWall": sustained_wall,
                                     "HtcpoolUpdateLagRecentWall": recent_wall, "UpdateInterval": 300}))


def test_late_ad_updates_count_as_the_daemons_lag_and_stretch_the_expiry(tmp_path):
    c = collector(tmp_path)
    now = c.clock.now()
    c.note_lag(_updates_late(2.0, 4.0))
    lags = {(d.name, d.what): (d.sustained_wall_s, d.interval_s) for d in c.current_lags(time.time())}
    assert lags[("machine startd@h", "ad updates")] == (2.0, 300.0) and lags[("machine startd@h", "")] == (0.0, 0.0)
    assert c.expiry_now() == now - 400.0               # its worst recent round, 4 s behind at scale 100
    # Announcing a change of scale waits on slow loops, not on late updates.
    assert c.worst_recent_lag_wall(time.time(), updates=False) == 0.01


def test_update_lag_is_not_counted_for_three_intervals_after_a_fault_fired_here(tmp_path):
    c = collector(tmp_path)
    c.note_lag(_updates_late(2.0, 4.0))
    c.faults.fired_total += 1                          # a delay fault held one of the Update calls
    assert [d.what for d in c.current_lags(time.time())] == ["", ""]
    # Three update intervals (3 x 300 pool s = 9 s at scale 100) and the report lifetime later, it counts.
    later = time.time() + 9.0 + 10.0 + 0.1
    c.note_lag(_updates_late(2.0, 4.0))
    c.update_lags["machine startd@h"] = (2.0, 4.0, later)
    c.lags["machine startd@h"] = (0.0, 0.01, later)
    assert "ad updates" in [d.what for d in c.current_lags(later)]
