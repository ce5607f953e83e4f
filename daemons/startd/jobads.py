"""Running jobs' ads, kept small. Pure.

A busy slot must keep its job's ad (policy expressions such as PREEMPT, WANT_VACATE or
MaxJobRetirementTime see it as TARGET), but a parsed classad2 ad costs about 5 KB, and
a startd holds one per busy slot. The ad is kept instead as its one-line text (classad2's
repr, which parses back to an equal ad), compressed with zlib against a preset
dictionary: a recent job ad of the same startd. Job ads from one schedd repeat each other
almost entirely, so a 900-character ad takes about 40 bytes, and compressing against the
dictionary is faster than without one. A job ad unlike the dictionary (it compresses to
more than a quarter of its text) becomes the dictionary for the ads that follow; every
packed ad keeps a reference to the dictionary it was packed with.
"""
from __future__ import annotations

import zlib

import classad2

# Packed to more than this share of its text: the dictionary no longer looks like the ads.
POOR_RATIO = 0.25


def _compress(text: bytes, zdict: bytes) -> bytes:
    c = zlib.compressobj(zdict=zdict) if zdict else zlib.compressobj()
    return c.compress(text) + c.flush()


class JobAdPacker:
    """Packs the job ads of one startd against its current dictionary."""

    __slots__ = ("zdict",)

    def __init__(self) -> None:
        self.zdict = b""

    def pack(self, ad: classad2.ClassAd) -> tuple[bytes, bytes]:
        """(the dictionary used, the packed ad)."""
        text = repr(ad).encode()
        packed = _compress(text, self.zdict)
        if len(packed) > POOR_RATIO * len(text):
            self.zdict = text
            packed = _compress(text, text)
        return self.zdict, packed


def unpack(zdict: bytes, packed: bytes) -> classad2.ClassAd:
    d = zlib.decompressobj(zdict=zdict) if zdict else zlib.decompressobj()
    return classad2.ClassAd((d.decompress(packed) + d.flush()).decode())
