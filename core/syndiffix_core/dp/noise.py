"""Noise for DP marginals from a keyed cryptographic stream, never from a global RNG or a clock.

Choice: the key is HMAC-SHA256(salt, domain label + table identity + digest of the input's content and of
the parameters); each
use ("record count", "percentile k=2", "gaussian k=3 subset (0, 4)", ...) gets its own sub-key
HMAC-SHA256(key, label), and its random bits are the SHAKE-256 extendable output of that sub-key and a call counter. SHAKE-256 is a
cryptographic XOF (one C call per request, hundreds of MB/s), so without the salt the noise is
unpredictable, and with it every run on the same input is reproducible. numpy's PCG64/Philox would be
faster still but are not cryptographic; we do not need their speed here.

Floating-point caveats, honestly:
  * uniforms have 53 random bits and lie in (0, 1) exclusive, so Box-Muller gaussians are truncated at
    |z| <= sqrt(-2 ln 2^-54) ~ 8.65 sigma; the lost tail mass (~1e-17) is far below any delta we use.
  * the float gaussian/Laplace/exponential samples are not exact: their low-order bits are uneven, which
    is what Mironov's attack on floating-point Laplace exploits. Noisy counts here are only compared to a
    threshold and then rounded to integers before anything leaves the engine, which destroys those bits;
    we still do not claim the guarantees of an exact discrete sampler (e.g. Canonne-Kamath-Steinke).
  * The key covers the salt, the table identity and a digest of the input's content (its row multiset),
    so the same input gives the same noise (re-running leaks nothing new) while *changed* data gets fresh
    noise: two releases of different data never share noise, whose difference would reveal the change in
    the true counts exactly. Every release of changed data spends epsilon again (basic composition).
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json

import numpy as np
import pandas as pd

_DOMAIN = b"syndiffix-ops/dp-marginals/v1\x00"
_TWO_POW_MINUS_53 = 2.0**-53


class NoiseStream:
    """A labelled, reproducible source of uniform, gaussian, Laplace and exponential samples."""

    def __init__(self, key: bytes) -> None:
        self._key = key
        self._calls = 0

    def uniforms(self, size: int | tuple[int, ...]) -> np.ndarray:
        """Uniform float64 samples in the open interval (0, 1)."""
        count = int(np.prod(size))
        block = self._key + self._calls.to_bytes(8, "little")
        self._calls += 1
        bits = (
            np.frombuffer(hashlib.shake_256(block).digest(8 * count), dtype="<u8")
            if count
            else np.empty(0, "<u8")
        )
        return ((bits >> np.uint64(11)).astype(np.float64) + 0.5).reshape(size) * _TWO_POW_MINUS_53

    def gaussians(self, size: int | tuple[int, ...]) -> np.ndarray:
        """Standard normal samples (Box-Muller on two uniforms per sample)."""
        count = int(np.prod(size))
        u = self.uniforms(2 * count)
        return (np.sqrt(-2.0 * np.log(u[:count])) * np.cos(2.0 * np.pi * u[count:])).reshape(size)

    def exponentials(self, size: int | tuple[int, ...]) -> np.ndarray:
        """Exponential samples with rate 1."""
        return -np.log(self.uniforms(size))

    def generator(self) -> np.random.Generator:
        """A fast PCG64 generator seeded from this stream, for bulk randomness that needs no secrecy of
        its own (which tuples a capped record keeps, synthesis sampling): only its seed must be secret."""
        seed = np.frombuffer(hashlib.shake_256(self._key + b"generator").digest(32), dtype="<u8")
        return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed.tolist())))

    def laplace(self, scale: float) -> float:
        """One Laplace(0, scale) sample (difference of two exponentials)."""
        e = self.exponentials(2)
        return float(scale * (e[0] - e[1]))


class NoiseSource:
    """All the noise of one release, keyed by the secret salt, the table's identity and a digest of the
    released data's content (see :func:`content_digest`)."""

    def __init__(self, salt: bytes | str, table_identity: str, content: bytes = b"") -> None:
        if isinstance(salt, str):
            salt = salt.encode("utf-8")
        if not salt:
            raise ValueError("the salt must not be empty: without a secret the noise is predictable")
        message = _DOMAIN + table_identity.encode("utf-8") + b"\x00" + content
        self._key = hmac.new(salt, message, hashlib.sha256).digest()

    def fingerprint(self) -> str:
        """An opaque id of this noise key, for lineage: two releases with the same fingerprint drew the same
        noise from the same data and parameters (the second one repeats the first and spends nothing new).
        A keyed PRF of the key under a fixed label: it tells nothing about the key, the salt or the data."""
        return hmac.new(self._key, b"release fingerprint", hashlib.sha256).hexdigest()[:32]

    def stream(self, *label: object) -> NoiseStream:
        text = "\x1f".join(str(part) for part in label).encode("utf-8")
        return NoiseStream(hmac.new(self._key, text, hashlib.sha256).digest())


def params_digest(params: object) -> bytes:
    """SHA-256 of a parameters dataclass's values: part of the noise key, so a release with changed
    parameters on unchanged data draws fresh noise. With shared noise, two releases at different scales
    (epsilon 4 and 2: n + 50 L and n + 100 L with the same Laplace draw L) would give n exactly."""
    canonical = json.dumps(dataclasses.asdict(params), sort_keys=True, default=str)
    return hashlib.sha256(canonical.encode("utf-8")).digest()


def content_digest(df: pd.DataFrame) -> bytes:
    """SHA-256 of a frame's column names, dtypes and row multiset: the same rows in any order give the
    same digest (SQL reads come without ORDER BY), any changed, added or removed row a different one."""
    header = "\x1f".join(f"{name}\x1e{dtype}" for name, dtype in df.dtypes.items()).encode("utf-8")
    rows = np.sort(pd.util.hash_pandas_object(df, index=False).to_numpy())
    return hashlib.sha256(header + b"\x00" + rows.astype("<u8").tobytes()).digest()
