"""Flagging a bench's figures produced under lag (pure)."""
from daemons.cli import lagreport
from daemons.core import ads


def _ad(**attrs):
    return ads.parse_ad(ads.ad_text(attrs))


COLLECTOR = dict(MyType="Collector", Name="c", HtcpoolLoopLagMax=0.5, TimeScale=1000.0, HtcpoolTimeScaleChanges=0,
                 HtcpoolLagEvents=0, HtcpoolConfiguredTimeScale=1000.0, HtcpoolLagPolicy="slow", HtcpoolMaxLag=60.0)


def test_a_run_without_lag_events_is_not_lagged():
    before = lagreport.snapshot([_ad(**COLLECTOR), _ad(MyType="Scheduler", Name="s", HtcpoolLoopLagMax=3.0)])
    after = lagreport.snapshot([_ad(**COLLECTOR), _ad(MyType="Scheduler", Name="s", HtcpoolLoopLagMax=7.5,
                                                      HtcpoolUpdateLagMax=120.0),
                                _ad(MyType="Machine", Name="slot1@h")])
    r = lagreport.report(before, after)
    assert r == {"lagged": False, "lag_events": 0, "time_scale_changes": 0, "time_scale_end": 1000.0,
                 "time_scale_configured": 1000.0, "lag_policy": "slow", "max_lag_pool_s": 60.0,
                 "loop_lag_max_pool_s": {"collector c": 0.5, "scheduler s": 7.5},
                 "update_lag_max_pool_s": {"scheduler s": 120.0}}
    out = lagreport.lines(r)
    assert out[0] == "lag: within HTCPOOL_MAX_LAG = 60 pool s throughout"
    assert out[2] == "  worst ad update round past UPDATE_INTERVAL since start (pool s): scheduler s 120"


def test_events_or_a_change_of_scale_between_the_snapshots_flag_the_run():
    before = lagreport.snapshot([_ad(**COLLECTOR)])
    after = lagreport.snapshot([_ad(**dict(COLLECTOR, HtcpoolLagEvents=2, HtcpoolTimeScaleChanges=1,
                                           TimeScale=250.0))])
    r = lagreport.report(before, after)
    assert r["lagged"] and r["lag_events"] == 2 and r["time_scale_changes"] == 1 and r["time_scale_end"] == 250.0
    out = lagreport.lines(r)
    assert out[0].startswith("LAGGED: the pool could not keep up with TIME_SCALE 1000 ")
    assert out[1].startswith("  to measure a pool that keeps up, run it at TIME_SCALE 250 or less ")
    # Events from before the run (start-up) do not flag it.
    assert not lagreport.report(after, after)["lagged"]
