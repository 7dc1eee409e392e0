"""A fingerprint of the salt: tells two runs' salts apart without revealing the salt.

Lineage events and logs may say *whether* two runs used the same salt (same salt and data give the same
rows), never the salt. The fingerprint is 48 bits of PBKDF2-HMAC-SHA256 over 200,000 iterations: too
short to pin down a salt, and slow enough that guessing a weak salt from it costs ~0.1 s per guess.
"""

from __future__ import annotations

import hashlib

_ITERATIONS = 200_000
_CONTEXT = b"syndiffix-ops salt fingerprint v1"


def salt_fingerprint(salt: bytes) -> str:
    return hashlib.pbkdf2_hmac("sha256", salt, _CONTEXT, _ITERATIONS, dklen=6).hex()
