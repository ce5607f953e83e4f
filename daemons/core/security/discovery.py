"""Which tokens a client sends: HTCondor's token directories, plus the pool's own.

HTCondor's tools read one directory: SEC_TOKEN_DIRECTORY if set, else ~/.condor/tokens.d
if it exists, else SEC_TOKEN_SYSTEM_DIRECTORY (findTokens in
src/condor_io/condor_auth_passwd.cpp); every line of every file (files sorted by name,
hidden and backup files skipped) that is not empty or a comment is a token, and a file
that group or others may read is skipped (read_secure_file). htcpool's command reads
`_CONDOR_SEC_TOKEN_DIRECTORY` / `_CONDOR_SEC_TOKEN_SYSTEM_DIRECTORY` from the
environment for those knobs (it reads no configuration file). Unless
SEC_TOKEN_DIRECTORY names the one directory to use, it reads first the `tokens.d` of
the pool it talks to when it found that pool in a state directory (`htcpool up` writes
the invoking user's token there, so nothing is written to the user's home).

HTCondor's client picks the token whose issuer is the server's trust domain during its
handshake; gRPC has no handshake before the call, so a client sends its first few
candidates (MAX_CANDIDATES, expired ones left out) and the server uses the first that
verifies as one of its own. A token is a bearer credential: send tokens only to pools
you trust, and use TLS off loopback.
"""
from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Mapping

from daemons.core.security.tokens import TokenError, unverified

if TYPE_CHECKING:
    from daemons.core.security.keys import KeyRing

MAX_CANDIDATES = 4
DEFAULT_SYSTEM_DIR = Path("/etc/condor/tokens.d")


@dataclass(frozen=True)
class FoundToken:
    path: Path
    line: int
    token: str
    problem: str = ""    # why it is not sent ("" when it is usable)


def htcondor_token_dir(env: Mapping[str, str], home: Path | None = None) -> Path:
    """The one directory HTCondor's tools would read."""
    if env.get("_CONDOR_SEC_TOKEN_DIRECTORY"):
        return Path(env["_CONDOR_SEC_TOKEN_DIRECTORY"]).expanduser()
    user_dir = (home if home is not None else Path.home()) / ".condor" / "tokens.d"
    if user_dir.is_dir():
        return user_dir
    return Path(env.get("_CONDOR_SEC_TOKEN_SYSTEM_DIRECTORY") or DEFAULT_SYSTEM_DIR)


def _skipped_name(name: str) -> bool:
    return name.startswith(".") or name.endswith(("~", ".rpmsave", ".rpmnew", ".swp", ".bak"))


def read_dir(directory: Path, now: float | None = None) -> list[FoundToken]:
    """Every token line in `directory`'s files, each marked with any reason not to use it."""
    out: list[FoundToken] = []
    try:
        files = sorted(p for p in directory.iterdir() if p.is_file() and not _skipped_name(p.name))
    except OSError:
        return out
    wall = time.time() if now is None else now
    for path in files:
        try:
            st = path.stat()
            text = path.read_text(errors="replace")
        except OSError as e:
            out.append(FoundToken(path, 0, "", f"cannot be read ({e.strerror})"))
            continue
        file_problem = ""
        if st.st_mode & 0o077:
            file_problem = (f"the file may be read by group or others (mode {stat.S_IMODE(st.st_mode):04o}); "
                            f"chmod 600 {path}")
        elif st.st_uid != os.geteuid():
            file_problem = f"the file is owned by uid {st.st_uid}, not by you"
        for n, line in enumerate(text.splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            problem = file_problem
            if not problem:
                try:
                    _, claims = unverified(line)
                    exp = claims.get("exp")
                    if isinstance(exp, (int, float)) and not isinstance(exp, bool) and wall > exp:
                        problem = f"expired {int(wall - exp)} s ago"
                except TokenError as e:
                    problem = str(e)
            out.append(FoundToken(path, n, line, problem))
    return out


def candidate_dirs(env: Mapping[str, str], pool_dir: Path | None = None, home: Path | None = None) -> list[Path]:
    """Directories to read, in order. An explicit SEC_TOKEN_DIRECTORY is the only one (as in
    HTCondor: so `_CONDOR_SEC_TOKEN_DIRECTORY=dir` acts as exactly the tokens in dir);
    otherwise the pool's own, then HTCondor's default."""
    if env.get("_CONDOR_SEC_TOKEN_DIRECTORY"):
        return [htcondor_token_dir(env, home)]
    dirs = [pool_dir] if pool_dir is not None else []
    dirs.append(htcondor_token_dir(env, home))
    return list(dict.fromkeys(d for d in dirs if d is not None))


def candidates(dirs: Iterable[Path], limit: int = MAX_CANDIDATES) -> list[str]:
    """The tokens to send, best first, without repeats."""
    out: list[str] = []
    for d in dirs:
        for t in read_dir(d):
            if not t.problem and t.token not in out:
                out.append(t.token)
                if len(out) >= limit:
                    return out
    return out


def write_token_file(directory: Path, name: str, token: str) -> Path:
    """Write a token as HTCondor's write_out_token does: a plain file name in `directory`
    (created 0700), the file 0600, one line; an existing file is replaced."""
    if not name or name != Path(name).name or name in (".", ".."):
        raise ValueError(f"token name {name!r} must be a plain file name")
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = directory / name
    tmp = directory / f".{name}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    os.replace(tmp, path)
    return path


def ensure_token_file(directory: Path, name: str, keys: KeyRing, *, trust_domain: str, identity: str) -> bool:
    """`directory/name` holds a token for `identity` that this pool verifies: one already
    there that does is kept (so a restart does not change a user's token); otherwise a new
    one is minted with the pool key and written. True if it wrote one."""
    from daemons.core.security.keys import POOL_KEY_ID, KeyFileError
    from daemons.core.security.tokens import mint, verify
    path = directory / name
    if path.exists():
        try:
            info = verify(path.read_text().strip(), keys, trust_domain=trust_domain)
            if info.identity == identity:
                return False
        except (TokenError, KeyFileError, OSError):
            pass
    write_token_file(directory, name, mint(keys.jwt_key(POOL_KEY_ID), identity=identity, issuer=trust_domain))
    return True
