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
