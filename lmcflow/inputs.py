"""What a command needs from disk, checked before it reads: what is missing and the command that makes it.

``lmcflow claims`` reads ``tables/claims.parquet``; where only the claim JSONs exist (a claim target
built alone, e.g. ``snakemake --cores all results/claims/width-merge-accuracy.json``), it reads the
JSONs themselves, as rule claims_table would.
"""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa

from lmcflow.claims import claim_row
from lmcflow.config import ConfigError, parse_overrides, resolve_config
from lmcflow.io import read_parquet


class MissingInput(ConfigError):
    """A file or folder a command reads is not there (exit status 1: nothing to show)."""


def read_config(path: str | None, overrides: list[str] | None = None) -> dict:
    """``resolve_config`` on a config named on the command line (or the embedded default) and ``--config``
    entries (dotted keys allowed: ``lmcflow.config.parse_overrides``); a missing, empty or unparsable file is
    a ConfigError naming it (``lmcflow.config.load_config_file``)."""
    return resolve_config([path] if path else [], parse_overrides(overrides or []))


def results_folder(path: str | Path, role: str = "") -> Path:
    """A folder a run wrote results into (tables/, claims/ or provenance.json); ``role`` prefixes the message."""
    p = Path(path)
    where = f"{role} {path}" if role else str(path)
    if not p.is_dir():
        raise ConfigError(f"{where}: no such results folder; a run makes it: `snakemake --cores all` "
                          "(paths.results in the config names it)")
    if not any((p / name).exists() for name in ("tables", "claims", "provenance.json")):
        raise ConfigError(f"{where}: not a results folder (no tables/, claims/ or provenance.json); a run makes "
                          "one: `snakemake --cores all`")
    return p


def claim_rows(results: str | Path) -> tuple[list[dict], str]:
    """claims.parquet's rows, else rows made from the claim JSONs; and a note on where they came from."""
    if not Path(results).is_dir():
        results_folder(results)  # raises
    root = Path(results)
    summary = root / "tables/claims.parquet"
    make_summary = f"`snakemake --cores all {summary}`"
    if summary.is_file():
        try:
            return read_parquet(summary, "claims").to_dict("records"), ""
        except (pa.ArrowException, OSError) as err:  # truncated or not Parquet; a wrong version: CorruptFileError
            raise ConfigError(f"{summary}: not a readable Parquet file ({err}); rebuild it with "
                              f"`snakemake --cores all --forcerun {summary}`") from err
    jsons = sorted((root / "claims").glob("*.json"))
    if not jsons:
        raise MissingInput(f"{root}: no claims: neither {summary} nor {root / 'claims'}/*.json; make them with "
                           f"{make_summary} (or one claim: `snakemake --cores all {root}/claims/CLAIM_ID.json`)")
    rows = []
    for path in jsons:
        try:
            rows.append(claim_row(json.loads(path.read_text())))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as err:
            raise ConfigError(f"{path}: not a claim JSON written by lmcflow ({type(err).__name__}: {err}); rebuild "
                              f"it with `snakemake --cores all --forcerun {path}`") from err
    return rows, (f"{summary} is missing: read the {len(rows)} claim JSONs in {root / 'claims'}; "
                  f"{make_summary} writes the table")
