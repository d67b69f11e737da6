"""Every kind of file lmcflow writes gets the mode a plain write under the umask gives (not mkstemp's 0600)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Each writer in a fresh process under the given umask; prints {file: mode}.
WRITE_ALL = """
import json, os, sys
from pathlib import Path
os.umask(int(sys.argv[2], 8))
import torch
import matplotlib.pyplot as plt
from lmcflow.figures.common import save_figure
from lmcflow.io import atomic_path, current_umask, save_tensors, write_json, write_text
from lmcflow.tables import TABLES, write_table

out = Path(sys.argv[1])
assert current_umask() == int(sys.argv[2], 8)
write_table(out / "tables/claims.parquet", "claims", [])
save_tensors(out / "models/seed-0.safetensors", {"w": torch.zeros(3)})
save_tensors(out / "align/pair-0-1.safetensors", {"perm": torch.arange(3)})
write_json(out / "claims/c.json", {"verdict": "supported"})
write_text(out / "provenance.html", "<html></html>")
fig, ax = plt.subplots()
ax.plot([0, 1])
save_figure(fig, out / "figures/f.png", out / "figures/f.pdf")
with atomic_path(out / "raw.bin") as tmp:
    tmp.write_bytes(b"x")
print(json.dumps({str(p.relative_to(out)): p.stat().st_mode & 0o777 for p in out.rglob("*") if p.is_file()}))
"""


@pytest.mark.parametrize("umask,mode", [("022", 0o644), ("077", 0o600), ("002", 0o664)])
def test_every_writer_honours_the_umask(tmp_path, umask, mode):
    res = subprocess.run([sys.executable, "-c", WRITE_ALL, str(tmp_path), umask], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)}, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    modes = json.loads(res.stdout.splitlines()[-1])
    assert len(modes) == 8 and not any(name.endswith(".tmp") for name in modes), modes
    assert {name: oct(m) for name, m in modes.items() if m != mode} == {}


def test_umask_is_read_without_changing_it():
    from lmcflow.io import current_umask

    old = os.umask(0o027)
    try:
        assert current_umask() == 0o027 and current_umask() == 0o027
    finally:
        os.umask(old)
