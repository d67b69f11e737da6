"""lmcflow: linear mode connectivity studies as Snakemake targets (science code, importable without Snakemake)."""
from __future__ import annotations

__version__ = "0.2.0"
