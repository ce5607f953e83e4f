"""Claim ids in HTCondor's shape, <address>#<startd start>#<sequence>#<secret>, kept as numbers.

The first three parts are public (PublicClaimId shows them); the secret is what makes a
claim id a capability. A startd holds two ids per busy slot (its claim's and the offer
for a preempting claim) and one per idle slot: as strings that is about 115 – 140
bytes each, 10 MB at 50,000 busy slots. So the startd keeps each id's sequence number
(an int) and prints the id when it is needed: the secret of number n is a keyed BLAKE2b
of n, 128 bits, under a 256-bit key drawn once per process from the `secrets` module.
Without the key nobody can compute one id from others (BLAKE2b in keyed mode is a
pseudo-random function), as nobody could guess a random secret; the key never leaves
the process, so a restarted startd's ids are new ones, as a restarted HTCondor
startd's are. Tests may inject `secret` (a function of n) to make ids predictable.

A number's low IX_BITS bits are the index of the slot the id belongs to (SlotIndex), the
rest a sequence that never repeats in a process: the startd finds an id's slot in a list
instead of keeping a dictionary entry for each of its ids (two per busy slot: about 5 MB
at 50,000 slots), and then checks that the slot still holds that very number.
"""
from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Callable, Generic, Iterator, TypeVar

IX_BITS = 24                    # up to 16 million slots in one process
IX_MASK = (1 << IX_BITS) - 1
IX_STEP = 1 << IX_BITS          # from one number of a slot to the next of the same slot
T = TypeVar("T")


def keyed_secret() -> Callable[[int], str]:
    """n -> 32 hex digits: BLAKE2b of n under a fresh key from the OS CSPRNG."""
    key = secrets.token_bytes(32)

    def secret(n: int) -> str:
        return hashlib.blake2b(n.to_bytes(8, "little"), key=key, digest_size=16).hexdigest()
    return secret


class ClaimIds:
    """A startd's claim ids: `next()` numbers a new one, `text(n)` prints it, and
    `number(text)` gives the number of an id this startd made (0 for anything else)."""

    __slots__ = ("prefix", "secret", "seq")

    def __init__(self, address: str, started: float, secret: Callable[[int], str] | None = None) -> None:
        self.prefix = f"<{address}>#{int(started)}#"   # the public part before the number
        self.secret = secret if secret is not None else keyed_secret()
        self.seq = 0

    def next(self, ix: int = 0) -> int:
        """A new number for an id of the slot at index `ix` (SlotIndex)."""
        self.seq += 1
        return (self.seq << IX_BITS) | ix

    def next_pair(self, ix: int) -> int:
        """A new number for a claim on the slot at `ix`, the one after it (n + IX_STEP)
        given out with it: the claimed slot's offer for a preempting claim, which the slot
        then need not store (Slot.cap)."""
        n = self.next(ix)
        self.next(ix)
        return n

    def text(self, n: int) -> str:
        """The id numbered n ("" for 0, no id)."""
        return f"{self.prefix}{n}#{self.secret(n)}" if n else ""

    def number(self, claim_id: str) -> int:
        """n if `claim_id` is text(n) for an n this startd gave out, else 0. The whole id is
        compared, its secret in constant time: a guessed secret finds nothing."""
        prefix = self.prefix
        if not claim_id.startswith(prefix) or not claim_id.isascii():
            return 0
        digits, sep, _ = claim_id[len(prefix):].partition("#")
        if not sep or not digits.isdigit() or len(digits) > 19:
            return 0
        n = int(digits)
        if not 0 < (n >> IX_BITS) <= self.seq:
            return 0
        return n if hmac.compare_digest(self.text(n), claim_id) else 0


class SlotIndex(Generic[T]):
    """The slots of a startd process by index: a claim id's number names its slot's index
    (ClaimIds.next), so finding an id's slot is a list lookup. An index freed by a deleted
    dynamic slot is given to the next new one; an old id then finds the new slot, whose
    own numbers differ, so callers compare the number with what the slot holds."""

    __slots__ = ("_slots", "_free")

    def __init__(self) -> None:
        self._slots: list[T | None] = []
        self._free: list[int] = []

    def add(self, slot: T) -> int:
        if self._free:
            ix = self._free.pop()
            self._slots[ix] = slot
            return ix
        ix = len(self._slots)
        if ix > IX_MASK:
            raise OverflowError(f"more than {IX_MASK + 1} slots in one startd process")
        self._slots.append(slot)
        return ix

    def remove(self, ix: int) -> None:
        self._slots[ix] = None
        self._free.append(ix)

    def get(self, n: int) -> T | None:
        """The slot whose index claim id number `n` carries (None if none is there)."""
        ix = n & IX_MASK
        return self._slots[ix] if ix < len(self._slots) else None

    def __iter__(self) -> Iterator[T]:
        return (s for s in self._slots if s is not None)

    def __len__(self) -> int:
        return len(self._slots) - len(self._free)
