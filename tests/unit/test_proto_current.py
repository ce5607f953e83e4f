"""The committed gRPC stubs are what scripts/gen_proto makes from proto/ today."""
from __future__ import annotations

import filecmp
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_generated_code_is_current(tmp_path):
    subprocess.run([str(ROOT / "scripts" / "gen_proto"), str(tmp_path)], check=True,
                   env=dict(os.environ, PYTHON=sys.executable), capture_output=True)
    committed = ROOT / "daemons" / "pb" / "htcpool"
    fresh = tmp_path / "htcpool"
    names = sorted(p.name for p in fresh.iterdir() if p.suffix in (".py", ".pyi"))
    assert names == sorted(p.name for p in committed.iterdir() if p.suffix in (".py", ".pyi"))
    stale = [n for n in names if not filecmp.cmp(fresh / n, committed / n, shallow=False)]
    assert stale == [], f"regenerate with scripts/gen_proto: {stale}"
