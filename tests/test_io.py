import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from lmcflow.io import (
    CorruptFileError,
    atomic_path,
    load_tensors,
    read_parquet,
    save_tensors,
    write_parquet,
)


def test_atomic_path_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "out.txt"
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed")
    assert not target.exists() and list(tmp_path.iterdir()) == []


def test_checkpoint_hash_verified(tmp_path):
    p = tmp_path / "m.safetensors"
    digest = save_tensors(p, {"w": torch.arange(1000.0)}, {"seed": 1})
    t, meta = load_tensors(p, expected_sha256=digest)
    assert torch.equal(t["w"], torch.arange(1000.0)) and meta == {"seed": 1}
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])  # truncated by a dying node
    with pytest.raises(CorruptFileError, match=str(p)):
        load_tensors(p, expected_sha256=digest, rebuild_hint="rule train")
    with pytest.raises(CorruptFileError, match="rule train"):
        load_tensors(p, rebuild_hint="rule train")


def test_parquet_schema_version_checked(tmp_path):
    p = tmp_path / "t.parquet"
    write_parquet(p, pd.DataFrame({"a": [1]}), "runs")
    assert read_parquet(p, "runs")["a"].tolist() == [1]
    pq.write_table(pa.table({"a": [1]}), str(tmp_path / "old.parquet"))
    with pytest.raises(CorruptFileError, match="schema version missing.*Rebuild"):
        read_parquet(tmp_path / "old.parquet", "runs")
    with pytest.raises(CorruptFileError, match="expected a 'barriers' table"):
        read_parquet(p, "barriers")
