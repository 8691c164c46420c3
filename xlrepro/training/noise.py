"""Kept for scripts that import it: each model's own random numbers live in `xlrepro.engine.noise`."""
from ..engine.noise import Noise, from_bits32, stream_key, uniform, uniform_int64

__all__ = ["Noise", "from_bits32", "stream_key", "uniform", "uniform_int64"]
