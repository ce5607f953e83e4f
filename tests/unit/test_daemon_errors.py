"""Unexpected exceptions outside RPC handlers: background tasks, periodic tasks and the
event loop each log the traceback in the daemon's log and count on /metrics."""
from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from daemons.core.common import CommonConfig
from daemons.core.daemon import Daemon


def _daemon(tmp_path: Path) -> Daemon:
    common = CommonConfig(role="schedd", collector_host=None, bind_host="127.0.0.1", grpc_port=0, status_port=0,
                          time_scale=100.0, pool_epoch=0.0, local_dir=tmp_path, log_dir=tmp_path,
                          spool_dir=tmp_path, full_hostname="test", uid_domain="test", update_interval_s=60.0)
    return Daemon(common)


async def test_a_failed_background_task_is_logged_with_its_traceback_and_counted(tmp_path, caplog):
    d = _daemon(tmp_path)

    async def broken():
        raise ZeroDivisionError("in the background")
    with caplog.at_level(logging.ERROR, logger="htcpool.daemon"):
        task = d.spawn(broken(), "schedd:after:slot1@x")
        with pytest.raises(ZeroDivisionError):
            await task
        await asyncio.sleep(0)
    assert d.metrics()["unexpected_errors_total"] == {(("where", "schedd:after"),): 1.0}
    record = next(r for r in caplog.records if "background task schedd:after:slot1@x failed" in r.getMessage())
    assert isinstance(record.exc_info[1], ZeroDivisionError)


async def test_a_cancelled_background_task_is_not_an_error(tmp_path):
    d = _daemon(tmp_path)
    task = d.spawn(asyncio.sleep(10), "schedd:reschedule")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0)
    assert d.errors == {}


async def test_a_periodic_task_that_raises_is_counted_and_keeps_running(tmp_path, caplog):
    d = _daemon(tmp_path)
    runs = []

    async def flaky():
        runs.append(1)
        if len(runs) == 1:
            raise ValueError("first run fails")
    with caplog.at_level(logging.ERROR, logger="htcpool.daemon"):
        p = d.add_periodic("flaky", 1.0, flaky)
        for _ in range(200):
            if p.runs >= 1:
                break
            await asyncio.sleep(0.01)
        p.task.cancel()
    assert p.failures == 1 and p.runs >= 1
    assert d.metrics()["periodic_failures_total"] == 1.0
    assert d.metrics()["unexpected_errors_total"] == {(("where", "periodic flaky"),): 1.0}
    assert any("periodic task flaky failed" in r.getMessage() and r.exc_info for r in caplog.records)


async def test_an_exception_reaching_the_event_loop_is_logged_and_counted(tmp_path, caplog):
    d = _daemon(tmp_path)
    loop = asyncio.get_running_loop()
    with caplog.at_level(logging.ERROR, logger="htcpool.daemon"):
        d._loop_exception(loop, {"message": "Task exception was never retrieved", "exception": OSError("lost")})
    assert d.errors["event loop"] == 1
    assert any(r.exc_info and isinstance(r.exc_info[1], OSError) for r in caplog.records)
