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
"""
from __future__ import annotations

import zlib

import classad2

# Packed to more than this share of its text: the dictionary no longer looks like the ads.
POOR_RATIO = 0.25


def _compress(text: bytes, zdict: bytes) -> bytes:
    c = zlib.compressobj(zdict=zdict) if zdict else zlib.compressobj()
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
    d = zlib.decompressobj(zdict=zdict) if zdict else zlib.decompressobj()
    return classad2.ClassAd((d.decompress(packed) + d.flush()).decode())
