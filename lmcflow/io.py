"""Atomic, verified file output.

Every file the pipeline writes goes to a temporary name in the same directory
and is renamed into place only when complete, so a killed job never leaves a
file that looks finished. Checkpoints are safetensors (no pickle) and carry the
SHA-256 of their bytes, recorded in ``runs.parquet`` and checked on load. Tables carry the
SHA-256 of their content (``table_content_sha256``) in their Parquet metadata, so an edit by
any other tool is detectable (``lmcflow verify``).

Artifacts are a function of their inputs only: nothing written here records a time, a host
or an absolute path (timings go to the tables' timing columns and the job logs).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from safetensors import SafetensorError, safe_open

from lmcflow.state import METADATA_KEY, metadata_json, with_metadata_json

if TYPE_CHECKING:  # torch is imported lazily where needed
    import torch

TABLE_SCHEMA_VERSION = 2
SCHEMA_VERSION_KEY = b"lmcflow_schema_version"
TABLE_KIND_KEY = b"lmcflow_table"
CONTENT_SHA256_KEY = b"lmcflow_content_sha256"
# SHA-256 of the pandas metadata (column names and dtypes as readers get them), which the content hash leaves out
PANDAS_SHA256_KEY = b"lmcflow_pandas_sha256"


class CorruptFileError(RuntimeError):
    """A file on disk is truncated, corrupt or does not match its recorded hash."""


_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """The process's umask, read without changing it where the kernel reports it (Linux >= 4.7)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    # os.umask can only be read by setting it; the lock keeps two lmcflow writers from interleaving
    with _UMASK_LOCK:
        mask = os.umask(0o077)
        os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike):
    """Yield a temporary path next to ``path``; rename it onto ``path`` on success.

    The file gets the mode a plain ``open(path, "w")`` would give (0o666 less the umask), not
    mkstemp's 0o600, so a group sharing a results folder can read it.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        with open(tmp, "rb+") as fh:
            # after the writer: some (safetensors) replace the file and leave 0o600 again
            os.fchmod(fh.fileno(), 0o666 & ~current_umask())
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_text(path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_json(path, obj) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n")


def mark_out_of_date(directory) -> None:
    """Give a directory output the oldest possible time, so Snakemake reruns the job that makes it (its inputs
    are newer): a bundle directory that lacks a member. Snakemake dates a directory output by its
    ``.snakemake_timestamp`` file where there is one."""
    for p in (Path(directory) / ".snakemake_timestamp", Path(directory)):
        if p.exists():
            os.utime(p, ns=(0, 0))


def json_content_sha256(obj: dict, key: str = "content_sha256") -> str:
    """SHA-256 of a JSON object's content without its own ``key`` (keys sorted, as ``write_json`` writes them):
    recorded in each claim JSON and recomputed by ``lmcflow verify``, so an edited value is detectable."""
    rest = {k: v for k, v in obj.items() if k != key}
    return hashlib.sha256(json.dumps(rest, sort_keys=True, default=_json_default).encode()).hexdigest()


def _json_default(o):
    if hasattr(o, "item"):
        return o.item()
    if hasattr(o, "tolist"):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o)}")


def sha256_file(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def folder_sha256(root) -> str:
    """SHA-256 over a folder's files: each file's path relative to ``root`` and its own SHA-256, in sorted order
    (an image folder of ``data.custom``)."""
    root = Path(root)
    h = hashlib.sha256()
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(f"{f.relative_to(root).as_posix()}\0{sha256_file(f)}\n".encode())
    return h.hexdigest()


def save_tensors(path, tensors: dict[str, torch.Tensor], metadata: dict | None = None) -> str:
    """Save tensors as safetensors atomically; returns the file's SHA-256. A state_dict's ``_metadata`` (module
    versions) is kept as JSON in the header (``lmcflow.state``)."""
    from safetensors.torch import (
        save_file,  # lazy: table jobs import this module without torch
    )

    meta = {"lmcflow": json.dumps(metadata or {}, sort_keys=True, default=_json_default)}
    torch_meta = metadata_json(tensors)  # a state_dict's module versions (lmcflow.state), covered by the hash
    if torch_meta is not None:
        meta[METADATA_KEY] = torch_meta
    tensors = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
    with atomic_path(path) as tmp:
        save_file(tensors, str(tmp), metadata=meta)
        digest = sha256_file(tmp)
    return digest


def load_tensors(path, expected_sha256: str | None = None, rebuild_hint: str = "") -> tuple[dict, dict]:
    """Load a safetensors file and its lmcflow metadata, verifying the hash when given; a state_dict's
    ``_metadata`` stored by ``save_tensors`` comes back on the returned ``OrderedDict``."""
    path = Path(path)
    hint = (f" Delete it and rebuild it with {rebuild_hint}." if rebuild_hint
            else " Delete it and rerun the workflow to rebuild it.")
    if not path.exists():
        raise FileNotFoundError(f"{path}: file not found.{hint}")
    if expected_sha256 is not None:
        actual = sha256_file(path)
        if actual != expected_sha256:
            raise CorruptFileError(
                f"{path}: content hash {actual[:12]}… does not match the recorded {expected_sha256[:12]}… "
                f"(file corrupt or truncated).{hint}")
    from safetensors.torch import load_file  # lazy: it imports torch, and table jobs use this module

    try:
        tensors = load_file(str(path))
        with safe_open(str(path), framework="pt") as fh:
            header = fh.metadata() or {}
            meta = json.loads(header.get("lmcflow", "{}"))
        tensors = with_metadata_json(tensors, header.get(METADATA_KEY))
    except (SafetensorError, OSError, ValueError, json.JSONDecodeError) as err:
        raise CorruptFileError(f"{path}: cannot be read as a safetensors file ({err}).{hint}") from err
    return tensors, meta


def _length_prefixed(values: np.ndarray) -> bytes:
    """The bytes ``table_content_sha256`` hashes for a string column (each value's UTF-8 length as 8 little-endian
    bytes, then the value; None as the two bytes ff ff), built once per distinct value: a column of 270,000 rows
    with a few distinct strings is joined in C instead of hashed value by value."""
    codes, uniques = pd.factorize(values)  # None → −1
    marked = b"\xff\xff"
    encoded = [u.encode() for u in uniques] + [marked]  # index −1: None
    chunks = np.empty(len(encoded), dtype=object)
    chunks[:] = [len(b).to_bytes(8, "little") + b for b in encoded]
    return b"".join(chunks[codes])


def table_content_sha256(table: pa.Table) -> str:
    """SHA-256 of a table's column names, types and values, independent of the Parquet encoding.

    Written into each table's metadata by ``write_parquet`` and recomputed by ``lmcflow verify``:
    an edited value, row or column changes it, a rewrite of the same content does not.
    """
    h = hashlib.sha256()
    for name, col in zip(table.column_names, table.columns, strict=True):
        h.update(f"{name}\0{col.type}\0{len(col)}\0".encode())
        values = col.to_numpy(zero_copy_only=False)
        if values.dtype == object and (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
            h.update(_length_prefixed(values))
        elif values.dtype == object:  # anything else holding nulls: length-prefixed UTF-8 of str(v), None marked
            for v in values:
                b = b"\xff\xff" if v is None else str(v).encode()
                h.update(len(b).to_bytes(8, "little") + b)
        else:
            h.update(np.ascontiguousarray(values, dtype=values.dtype.newbyteorder("<")).tobytes())
    return h.hexdigest()


def write_parquet(path, df: pd.DataFrame, kind: str) -> None:
    """Write a table with the lmcflow schema version, table kind, content hash and the hash of its pandas
    metadata in its metadata."""
    table = pa.Table.from_pandas(df, preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[SCHEMA_VERSION_KEY] = str(TABLE_SCHEMA_VERSION).encode()
    meta[TABLE_KIND_KEY] = kind.encode()
    meta[CONTENT_SHA256_KEY] = table_content_sha256(table).encode()
    meta[PANDAS_SHA256_KEY] = hashlib.sha256(meta.get(b"pandas", b"")).hexdigest().encode()
    table = table.replace_schema_metadata(meta)
    with atomic_path(path) as tmp:
        pq.write_table(table, str(tmp))


def read_parquet(path, kind: str | None = None) -> pd.DataFrame:
    """Read an lmcflow table, refusing tables written by another schema version."""
    schema = pq.read_schema(str(path))
    meta = schema.metadata or {}
    version = meta.get(SCHEMA_VERSION_KEY)
    if version is None or int(version) != TABLE_SCHEMA_VERSION:
        raise CorruptFileError(
            f"{path}: table schema version {version.decode() if version else 'missing'} != "
            f"{TABLE_SCHEMA_VERSION} expected by this lmcflow. Rebuild it: delete the file and run "
            f"`snakemake --cores all {path}` (or `--forcerun` the rule that writes it).")
    if kind is not None and meta.get(TABLE_KIND_KEY, b"").decode() != kind:
        raise CorruptFileError(f"{path}: expected a {kind!r} table, found {meta.get(TABLE_KIND_KEY)!r}")
    return pq.read_table(str(path)).to_pandas()
