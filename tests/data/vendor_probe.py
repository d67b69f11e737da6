"""Which operation gives other bits on another CPU vendor in vendor_neutral mode: a record of SHA-256s, op by op.

A full evidence run in vendor_neutral mode on an Intel Xeon gave the AMD EPYC's bits for every SGD-trained and every
untrained model, and other bits for every AdamW-trained one (docs/reproducibility.md, "The published run"). This
script hashes, in that mode, the outputs of each operation those studies use on fixed inputs (matmul, batched matmul,
LayerNorm, BatchNorm, GELU, the losses, a convolution, float64 Gram and eigenvalues, AdamW's elementwise updates, and
libm's pow as AdamW's bias corrections call it, as exact doubles), then 20 AdamW steps of a small LayerNorm/GELU MLP,
step by step (loss, every gradient, both moments, every parameter): once with PyTorch's default AdamW (``adamw``) and
once with the AdamW that lmcflow's training makes in that mode (``adamw_lmcflow``: the fused kernel,
``lmcflow.kernels.fused_adamw``). Run it on each vendor and diff the two files: the first line that differs names the
operation. Sections only one record holds (a record made before they were added) are listed, not compared.

What it found (an AMD EPYC against an Intel Xeon): ``sqrt`` alone of the ops, MKL's vector square root that the
default AdamW calls; so in that mode lmcflow's AdamW is the fused one.

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
    rec: dict = {"machine": cpu_info(), "capability": torch.backends.cpu.get_cpu_capability(), "ops": {}}
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
        "tanh": lambda: h.tanh(), "erf": lambda: h.erf(), "sigmoid": lambda: h.sigmoid(),
        "softmax": lambda: h.softmax(-1), "log_softmax": lambda: h.log_softmax(-1),
        "sqrt_float64": lambda: h.double().abs().sqrt(),
    }
    for name, fn in ops.items():
        rec["ops"][name] = sha(fn())
    rec["ops"]["pow_libm"] = [(0.999 ** k).hex() for k in range(1, 41)] + [((1 - 0.999 ** k) ** 0.5).hex()
                                                                            for k in range(1, 41)]

    from lmcflow.training import optimizer_for

    data_state = g.get_state()
    for section, make in (("adamw", lambda ps: torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.03)),
                          ("adamw_lmcflow", lambda ps: optimizer_for(ps, {"optimizer": "adamw", "lr": 1e-3,
                                                                          "weight_decay": 0.03}))):
        rec[section] = adamw_steps(torch, F, make, data_state)
    return rec


def adamw_steps(torch, F, make_optimizer, data_state) -> list[dict]:
    """20 steps of a LayerNorm/GELU MLP under ``make_optimizer``, hashed step by step; the batches drawn from a
    generator in ``data_state`` (where the ops left theirs, as in the records made before there were two runs)."""
    g = torch.Generator()
    g.set_state(data_state)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.LayerNorm(256), torch.nn.GELU(),
                                torch.nn.Linear(256, 10))
    opt = make_optimizer(list(model.parameters()))
    rows = []
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
        rows.append(row)
    return rows


def first_difference(a: dict, b: dict) -> tuple[list[str], list[str]]:
    """The differing ops and, per AdamW section, the first step and part that differ; and what only one holds."""
    out = [f"ops.{k}: {a['ops'][k]!s:.40} | {b['ops'][k]!s:.40}" for k in a["ops"]
           if k in b["ops"] and a["ops"][k] != b["ops"][k]]
    sections = [k for k in a if k.startswith("adamw") and k in b]
    for section in sections:
        for ra, rb in zip(a[section], b[section]):
            parts = [p for p in ("loss", "grads", "exp_avg", "exp_avg_sq", "params") if ra[p] != rb[p]]
            if parts:
                keys = [k for k in ra[parts[0]] if ra[parts[0]][k] != rb[parts[0]][k]] \
                    if isinstance(ra[parts[0]], dict) else []
                out.append(f"{section} step {ra['step']}: first differs at {parts[0]} {keys}")
                break
    one_sided = sorted({f"ops.{k}" for k in a["ops"].keys() ^ b["ops"].keys()}
                       | {k for k in a.keys() ^ b.keys() if k.startswith("adamw")})
    return out, one_sided


def main() -> None:
    if sys.argv[1:2] == ["--diff"]:
        a, b = (json.loads(Path(p).read_text()) for p in sys.argv[2:4])
        diff, one_sided = first_difference(a, b)
        print("\n".join(diff) if diff else "the same bits, op by op and step by step")
        if one_sided:
            print(f"not compared (in one record only): {', '.join(one_sided)}")
        raise SystemExit(1 if diff else 0)
    rec = probe()
    path = Path(sys.argv[2]) if sys.argv[1:2] == ["--out"] else OUT / f"{rec['machine']['vendor']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(rec, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)
    print(f"{path}: {len(rec['ops'])} ops, {len(rec['adamw'])} AdamW steps twice on {rec['machine']['model']}")


if __name__ == "__main__":
    main()
