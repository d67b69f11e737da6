"""Explicit, process-independent seeds.

Python's ``hash()`` is salted per process, so every derived seed goes through
SHA-256 of a readable label instead: the same config point gives the same bits
in any process on the same machine.
"""
from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported lazily where needed
    import torch


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from a tuple of labels, e.g. ``derive_seed("init", 3)``."""
    label = "/".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.sha256(label).digest()[:8], "little") & ((1 << 63) - 1)


def generator(*parts: object, device: str | torch.device = "cpu") -> torch.Generator:
    import torch  # lazy: derive_seed is used by torch-free table and claim jobs

    g = torch.Generator(device=device)
    g.manual_seed(derive_seed(*parts))
    return g
