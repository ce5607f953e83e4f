"""What a daemon process loads: not the libraries only some paths of it need.

A startd's memory per slot counts the interpreter and its imports (issue 14), so what it
imports at start is checked here, each in a fresh interpreter (this one has loaded
everything the tests import): aiohttp only when the status page is first asked, and
without TLS none of cryptography: the key derivation's HKDF is OpenSSL's, and PyJWT does
without the X.509 and asymmetric keys it would load (IDTOKENS are HMAC).
"""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _modules_after(code: str, whole: bool = False) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120, check=True)
    names = json.loads(out.stdout.strip().splitlines()[-1])
    return set(names) if whole else {m.split(".")[0] for m in names}


def test_a_startd_imports_neither_aiohttp_nor_cryptography(tmp_path):
    key = tmp_path / "POOL"
    loaded = _modules_after(f"""
import os
from pathlib import Path
from daemons.core import runner
from daemons.startd import daemon
from daemons.core.security.keys import KeyRing, create_key_file
from daemons.core.security.tokens import mint, verify
create_key_file(Path({str(key)!r}))
keys = KeyRing(Path({str(key)!r}), Path({str(tmp_path)!r}))
token = mint(keys.jwt_key("POOL"), identity="condor@pool", issuer="pool")
assert verify(token, keys, trust_domain="pool").identity == "condor@pool"
""", whole=True)
    assert not any(m == "aiohttp" or m.startswith("aiohttp.") for m in loaded)
    assert "jwt" in loaded and not any(m.split(".")[0] == "cryptography" for m in loaded)


def test_the_status_page_loads_aiohttp_at_its_first_request():
    loaded = _modules_after("""
import asyncio, json, logging, sys, urllib.request
from daemons.core.status import StatusPage

class Daemon:
    role, name, log = "startd", "s", logging.getLogger("test")
    def status(self): return {"ok": 1}
    def status_detail(self, name): return None
    def metrics(self): return {}

async def main():
    page = StatusPage(Daemon())
    url = await page.start("127.0.0.1", 0)
    assert "aiohttp" not in sys.modules
    def get(path):
        with urllib.request.urlopen(url + path, timeout=30) as r:
            return r.read()
    # several at once: those that come while aiohttp loads wait for it
    got = await asyncio.gather(*(asyncio.to_thread(get, "/status") for _ in range(3)))
    assert [json.loads(g) for g in got] == [{"ok": 1}] * 3
    assert b"htcpool_startd" not in await asyncio.to_thread(get, "/metrics")
    await page.stop()

asyncio.run(main())
""")
    assert "aiohttp" in loaded
