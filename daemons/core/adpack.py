"""Ads kept small and parsed again when needed. Pure.

A parsed classad2 ad costs 5 – 8 KB (a job ad about 5, a slot ad about 8), and a daemon
of a large pool holds one for every running job: the startd each busy slot's job ad
(policy expressions such as PREEMPT see it as TARGET), the schedd each claim's slot ad
(a claim is reused for the submitter's next job that the slot matches). Such an ad is
kept instead as its one-line text, compressed with zlib against a preset dictionary: a
recent ad of the same kind. Ads of one kind from one pool repeat each other almost
entirely, so a 900-character job ad takes about 40 bytes and a 1,700-character slot ad
about 35, and compressing against the dictionary is faster than without one. An ad
unlike the dictionary (it compresses to more than a quarter of its text) becomes the
dictionary for the ads that follow; every packed ad keeps a reference to the dictionary
it was packed with.

The compressor is zlib's with a 16 KB window and a small hash table (WBITS, MEM_LEVEL),
not its default 32 KB window and 64 KB tables: an ad and its dictionary are a few KB,
so they pack to the same bytes, and zlib's state is 72 KB instead of 256 KB, which a
pack allocates, fills and frees. Where glibc's heap top was free (it gives the top back
once more than 128 KB is free there) each pack grew the heap by the whole state and
gave it back: 73 – 119 µs a pack in a fresh process, 9 – 18 µs now. In the daemons of
`bench throughput`, whose heap tops are mostly held, it was less: a claimed slot ad's
pack in the schedd 41.6 → 37.7 µs of CPU (84 → 65 µs of wall time), a job ad's in the
startd 24.7 → 21.2 µs.
"""
from __future__ import annotations

import zlib

import classad2

# Packed to more than this share of its text: the dictionary no longer looks like the ads.
POOR_RATIO = 0.25
WBITS = 14        # a 16 KB window: an ad and its dictionary fit in it
MEM_LEVEL = 4     # zlib's hash table and output buffer at 4 KB each (its default 8: 64 KB)


def _compress(text: bytes, zdict: bytes) -> bytes:
    c = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, WBITS, MEM_LEVEL, zlib.Z_DEFAULT_STRATEGY,
                         *((zdict,) if zdict else ()))
    return c.compress(text) + c.flush()


class AdPacker:
    """Packs one daemon's ads of one kind against its current dictionary."""

    __slots__ = ("zdict",)

    def __init__(self) -> None:
        self.zdict = b""

    def pack(self, ad: classad2.ClassAd) -> tuple[bytes, bytes]:
        """(the dictionary used, the packed ad)."""
        return self.pack_text(repr(ad))

    def pack_text(self, text: str) -> tuple[bytes, bytes]:
        """pack() of the ad whose one-line text this is (one that parses)."""
        raw = text.encode()
        packed = _compress(raw, self.zdict)
        if len(packed) > POOR_RATIO * len(raw):
            self.zdict = raw
            packed = _compress(raw, raw)
        return self.zdict, packed

    def packed(self, text: str) -> "PackedAd":
        return PackedAd(*self.pack_text(text))


class PackedAd:
    """An ad held packed; `parse()` gives a fresh parse each time (changes are not kept)."""

    __slots__ = ("zdict", "data")

    def __init__(self, zdict: bytes, data: bytes) -> None:
        self.zdict, self.data = zdict, data

    def parse(self) -> classad2.ClassAd:
        return unpack(self.zdict, self.data)


def unpack(zdict: bytes, packed: bytes) -> classad2.ClassAd:
    d = zlib.decompressobj(WBITS, zdict=zdict) if zdict else zlib.decompressobj(WBITS)
    return classad2.ClassAd((d.decompress(packed) + d.flush()).decode())
