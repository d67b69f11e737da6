"""Which operation gives other bits on another CPU vendor in vendor_neutral mode: a record of SHA-256s, op by op.

A full evidence run in vendor_neutral mode on an Intel Xeon gave the AMD EPYC's bits for every SGD-trained and every
untrained model, and other bits for every AdamW-trained one (docs/reproducibility.md, "The published run"). This
script hashes, in that mode, the outputs of each operation those studies use on fixed inputs (matmul, batched matmul,
LayerNorm, BatchNorm, GELU, the losses, a convolution, float64 Gram and eigenvalues, AdamW's elementwise updates, and
libm's pow as AdamW's bias corrections call it, as exact doubles), then 20 AdamW steps of a small LayerNorm/GELU MLP,
step by step (loss, every gradient, both moments, every parameter). Run it on each vendor and diff the two files:
the first line that differs names the operation.

    PYTHONPATH=. .venv/bin/python tests/data/vendor_probe.py            # writes tests/data/vendor_probe/<vendor>.json
    PYTHONPATH=. .venv/bin/python tests/data/vendor_probe.py --out FILE # writes FILE instead
    PYTHONPATH=. .venv/bin/python tests/data/vendor_probe.py --diff A.json B.json
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
OUT = REPO / "tests/data/vendor_probe"


def sha(t) -> str:
    return hashlib.sha256(t.detach().contiguous().cpu().numpy().tobytes()).hexdigest()[:16]


def probe() -> dict:
    from lmcflow.kernels import apply

    apply("vendor_neutral")  # before torch is imported, as a job does
    import torch
    import torch.nn.functional as F

    from lmcflow.kernels import cpu_info, set_threads

    set_threads(1)
    g = torch.Generator().manual_seed(0)
    rec: dict = {"machine": cpu_info(), "capability": torch.backends.cpu.get_cpu_capability(), "ops": {},
                 "adamw": []}
    x, w = torch.randn(128, 784, generator=g), torch.randn(256, 784, generator=g) * 0.05
    xb, wb = torch.randn(5, 128, 64, generator=g), torch.randn(5, 64, 96, generator=g)
    h = x @ w.T
    img, kern = torch.randn(8, 3, 32, 32, generator=g), torch.randn(16, 3, 3, 3, generator=g)
    labels = torch.randint(0, 10, (128,), generator=g)
    ops = {
        "matmul": lambda: x @ w.T, "addmm": lambda: torch.addmm(torch.ones(256), x, w.T),
        "bmm": lambda: torch.bmm(xb, wb), "layer_norm": lambda: F.layer_norm(h, (256,)),
        "batch_norm": lambda: F.batch_norm(h, None, None, training=True), "gelu": lambda: F.gelu(h),
        "relu": lambda: F.relu(h), "cross_entropy": lambda: F.cross_entropy(h[:, :10], labels),
        "mse": lambda: F.mse_loss(h, torch.zeros_like(h)), "conv2d": lambda: F.conv2d(img, kern, padding=1),
        "gram_float64": lambda: (w.double() @ w.double().T),
        "eigvalsh_float64": lambda: torch.linalg.eigvalsh(w.double() @ w.double().T),
        "sqrt": lambda: h.abs().sqrt(), "exp": lambda: h.exp(), "log": lambda: (h.abs() + 1).log(),
        "lerp": lambda: h.clone().lerp_(h.flip(0), 0.1),
        "addcmul": lambda: h.clone().addcmul_(h, h, value=0.001),
        "addcdiv": lambda: h.clone().addcdiv_(h, h.abs() + 1, value=-0.001),
    }
    for name, fn in ops.items():
        rec["ops"][name] = sha(fn())
    rec["ops"]["pow_libm"] = [(0.999 ** k).hex() for k in range(1, 41)] + [((1 - 0.999 ** k) ** 0.5).hex()
                                                                            for k in range(1, 41)]

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.LayerNorm(256), torch.nn.GELU(),
                                torch.nn.Linear(256, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.03)
    for step in range(20):
        xs = torch.randn(64, 784, generator=g)
        ys = torch.randint(0, 10, (64,), generator=g)
        opt.zero_grad()
        loss = F.cross_entropy(model(xs), ys)
        loss.backward()
        row = {"step": step, "loss": sha(loss), "grads": {n: sha(p.grad) for n, p in model.named_parameters()}}
        opt.step()
        row["exp_avg"] = {n: sha(opt.state[p]["exp_avg"]) for n, p in model.named_parameters()}
        row["exp_avg_sq"] = {n: sha(opt.state[p]["exp_avg_sq"]) for n, p in model.named_parameters()}
        row["params"] = {n: sha(p) for n, p in model.named_parameters()}
        rec["adamw"].append(row)
    return rec


def first_difference(a: dict, b: dict) -> list[str]:
    out = [f"ops.{k}: {a['ops'][k]!s:.40} | {b['ops'].get(k)!s:.40}" for k in a["ops"]
           if a["ops"][k] != b["ops"].get(k)]
    for ra, rb in zip(a["adamw"], b["adamw"]):
        for part in ("loss", "grads", "exp_avg", "exp_avg_sq", "params"):
            if ra[part] != rb[part]:
                keys = [k for k in ra[part] if ra[part][k] != rb[part][k]] if isinstance(ra[part], dict) else []
                out.append(f"adamw step {ra['step']}: first differs at {part} {keys}")
                return out
    return out


def main() -> None:
    if sys.argv[1:2] == ["--diff"]:
        a, b = (json.loads(Path(p).read_text()) for p in sys.argv[2:4])
        diff = first_difference(a, b)
        print("\n".join(diff) if diff else "the same bits, op by op and step by step")
        raise SystemExit(1 if diff else 0)
    rec = probe()
    path = Path(sys.argv[2]) if sys.argv[1:2] == ["--out"] else OUT / f"{rec['machine']['vendor']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(rec, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)
    print(f"{path}: {len(rec['ops'])} ops, {len(rec['adamw'])} AdamW steps on {rec['machine']['model']}")


if __name__ == "__main__":
    main()
