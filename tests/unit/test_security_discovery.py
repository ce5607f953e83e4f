"""Which tokens a client sends: HTCondor's directories, the pool's own, and what is skipped."""
from __future__ import annotations

import os

from daemons.core.security.discovery import (MAX_CANDIDATES, candidate_dirs, candidates, htcondor_token_dir,
                                             read_dir, write_token_file)
from daemons.core.security.keys import derive_jwt_key
from daemons.core.security.tokens import mint

KEY = derive_jwt_key(b"k")


def tok(who: str, **kw) -> str:
    return mint(KEY, identity=who, issuer="pool", **kw)


def test_htcondors_directory_order(tmp_path):
    home = tmp_path / "home"
    assert str(htcondor_token_dir({"_CONDOR_SEC_TOKEN_DIRECTORY": "/x"}, home)) == "/x"
    assert str(htcondor_token_dir({}, home)) == "/etc/condor/tokens.d"    # no ~/.condor/tokens.d: the system one
    assert str(htcondor_token_dir({"_CONDOR_SEC_TOKEN_SYSTEM_DIRECTORY": "/s"}, home)) == "/s"
    (home / ".condor" / "tokens.d").mkdir(parents=True)
    assert htcondor_token_dir({}, home) == home / ".condor" / "tokens.d"


def test_the_pools_directory_comes_first_unless_one_is_named(tmp_path):
    pool = tmp_path / "pool" / "tokens.d"
    home = tmp_path / "home"
    assert [str(d) for d in candidate_dirs({}, pool, home)] == [str(pool), "/etc/condor/tokens.d"]
    assert [str(d) for d in candidate_dirs({"_CONDOR_SEC_TOKEN_DIRECTORY": "/mine"}, pool, home)] == ["/mine"]


def test_files_in_name_order_comments_skipped_unsafe_and_expired_left_out(tmp_path):
    d = tmp_path / "tokens.d"
    write_token_file(d, "b-bob", tok("bob@pool"))
    write_token_file(d, "a-alice", tok("alice@pool"))
    (d / "c-notes").write_text("# a comment\n\n" + tok("carol@pool") + "\n")
    os.chmod(d / "c-notes", 0o600)
    write_token_file(d, "d-old", tok("old@pool", lifetime_s=1, now=1000))
    write_token_file(d, "e-open", tok("open@pool"))
    os.chmod(d / "e-open", 0o644)
    write_token_file(d, "f-junk", "not a token")
    (d / ".hidden").write_text(tok("hidden@pool"))
    found = read_dir(d)
    assert [(f.path.name, f.line) for f in found] == [("a-alice", 1), ("b-bob", 1), ("c-notes", 3), ("d-old", 1),
                                                      ("e-open", 1), ("f-junk", 1)]
    problems = {f.path.name: f.problem for f in found if f.problem}
    assert problems["d-old"].startswith("expired")
    assert "may be read by group or others (mode 0644)" in problems["e-open"]
    assert problems["f-junk"].startswith("not a JWT")
    sent = candidates([d])
    assert len(sent) == 3 <= MAX_CANDIDATES
    assert sent[0] == (d / "a-alice").read_text().strip()


def test_write_token_file_is_private_and_plain_named(tmp_path):
    path = write_token_file(tmp_path / "t", "alice", "abc")
    assert (path.read_text(), os.stat(path).st_mode & 0o777, os.stat(path.parent).st_mode & 0o777) == (
        "abc\n", 0o600, 0o700)
    import pytest
    with pytest.raises(ValueError, match="plain file name"):
        write_token_file(tmp_path, "../x", "abc")


def test_ensure_token_file_keeps_a_good_token_and_replaces_any_other(tmp_path):
    from daemons.core.security.discovery import ensure_token_file
    from daemons.core.security.keys import POOL_KEY_ID, KeyRing, create_key_file
    from daemons.core.security.tokens import verify
    key = tmp_path / "passwords.d" / POOL_KEY_ID
    create_key_file(key)
    keys = KeyRing(key, key.parent)
    tokens = tmp_path / "tokens.d"
    assert ensure_token_file(tokens, "alice", keys, trust_domain="pool", identity="alice@pool")
    first = (tokens / "alice").read_text()
    assert verify(first.strip(), keys, trust_domain="pool").identity == "alice@pool"
    # Again: the token verifies and names alice, so it is kept as it is.
    assert not ensure_token_file(tokens, "alice", keys, trust_domain="pool", identity="alice@pool")
    assert (tokens / "alice").read_text() == first
    # Another identity, another key's token, or junk in the file: replaced.
    assert ensure_token_file(tokens, "alice", keys, trust_domain="pool", identity="alice@elsewhere.pool")
    assert verify((tokens / "alice").read_text().strip(), keys, trust_domain="pool").identity == "alice@elsewhere.pool"
    write_token_file(tokens, "alice", tok("alice@pool"))        # signed with a key this pool does not have
    assert ensure_token_file(tokens, "alice", keys, trust_domain="pool", identity="alice@pool")
    write_token_file(tokens, "alice", "junk")
    assert ensure_token_file(tokens, "alice", keys, trust_domain="pool", identity="alice@pool")
    assert verify((tokens / "alice").read_text().strip(), keys, trust_domain="pool").identity == "alice@pool"
    assert os.stat(tokens / "alice").st_mode & 0o777 == 0o600


def test_a_token_with_characters_a_jwt_cannot_hold_is_left_out(tmp_path):
    """gRPC refuses a metadata value that is not printable ASCII in the client, as an error
    that is not a status (the CLI would have shown a traceback): such a line is not sent."""
    good = tok("alice")
    for name, line in (("a-accent", good + "é"), ("b-space", good.replace(".", ". ", 1)), ("c-good", good)):
        (tmp_path / name).write_text(line + "\n")
        os.chmod(tmp_path / name, 0o600)
    problems = {f.path.name: f.problem for f in read_dir(tmp_path)}
    assert problems["a-accent"].startswith("not a JWT (it holds characters other than")
    assert problems["b-space"].startswith("not a JWT")
    assert problems["c-good"] == ""
    assert candidates([tmp_path]) == [good]
