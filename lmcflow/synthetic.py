"""Synthetic datasets of the neuron-identifiability study (Bürgin et al., 2026).

Details: docs/internals.md, "`lmcflow.synthetic`".
"""
from __future__ import annotations

import math

import torch

from lmcflow.config.catalog import (  # noqa: F401  (check_params and the names: re-exported)
    COHERENCE_DEFAULTS,
    EMBEDDINGS,
    GAUSSIAN_SUBSPACE_DEFAULTS,
    NOISE_SCALES,
    SPLITS,
    _choice,
    _float,
    _int,
    _params,
    check_params,
)
from lmcflow.seeding import generator


def random_orthonormal(d: int, k: int, g: torch.Generator) -> torch.Tensor:
    """d×k matrix with orthonormal columns, Haar-distributed (QR with sign fix), float64."""
    a = torch.randn(d, k, generator=g, dtype=torch.float64)
    q, r = torch.linalg.qr(a)
    return q * torch.sign(torch.diagonal(r)).where(torch.diagonal(r) != 0, torch.ones(k, dtype=torch.float64))


# --------------------------------------------------------------------------- gaussian_subspace
def gaussian_subspace_task(params: dict | None, seed: int = 0) -> dict:
    """The fixed parts of a gaussian_subspace dataset: basis U, means, rotations, scales (float64)."""
    p, seed = _params("gaussian_subspace", params, GAUSSIAN_SUBSPACE_DEFAULTS, seed)
    c = _int("gaussian_subspace", p, "classes", 2)
    d = _int("gaussian_subspace", p, "d", 1)
    k = _int("gaussian_subspace", p, "k", 1, d)
    sep = _float("gaussian_subspace", p, "separation")
    noise = _float("gaussian_subspace", p, "noise_scale")
    _choice("gaussian_subspace", p, "noise_scales", NOISE_SCALES)
    g = generator("gaussian_subspace", seed, "task")
    basis = random_orthonormal(d, k, g)
    means = sep * torch.randn(c, k, generator=g, dtype=torch.float64)
    rotations = torch.stack([random_orthonormal(k, k, g) for _ in range(c)])
    if p["noise_scales"] == "signed_normal":
        scales = noise * torch.randn(k, generator=g, dtype=torch.float64)
    else:
        scales = noise * (0.5 + torch.rand(k, generator=g, dtype=torch.float64))
    energy = float((means ** 2).sum(1).mean()) + float((scales ** 2).sum())  # E‖latent‖² (uniform labels)
    c0 = math.sqrt(d / energy) if (p["standardize"] and energy > 0) else 1.0
    return {"params": p, "seed": seed, "basis": basis, "means": means, "rotations": rotations,
            "scales": scales, "global_scale": c0}


def gaussian_subspace(params: dict | None, seed: int = 0):
    task = gaussian_subspace_task(params, seed)
    p, seed = task["params"], task["seed"]
    c, d, k = int(p["classes"]), int(p["d"]), int(p["k"])
    splits = {}
    for split in SPLITS:
        n = _int("gaussian_subspace", p, f"n_{split}", 0 if split != "train" else 1)
        g = generator("gaussian_subspace", seed, "samples", split)
        y = torch.randint(0, c, (n,), generator=g)
        eps = torch.randn(n, k, generator=g, dtype=torch.float64) * task["scales"]
        latent = task["means"][y] + torch.einsum("nij,nj->ni", task["rotations"][y], eps)
        x = task["global_scale"] * latent @ task["basis"].T
        splits[split] = (x.float().contiguous(), y.long())
    meta = {"in_shape": [d], "num_classes": c, "task": "classification", "generator": "gaussian_subspace",
            "k": k, "d": d, "params": {**p, "seed": seed}}
    return splits, meta


# --------------------------------------------------------------------------- coherence
def coherence_embedding(m: int, embedding: str, d: int = 20, seed: int = 0) -> torch.Tensor:
    """E ∈ R^{d×2}, orthonormal columns, 2m active coordinates of squared row norm 1/m (ν = 1/m)."""
    if not 1 <= m <= d // 2:
        raise ValueError(f"data.synthetic (coherence).m: must be in [1, {d // 2}] for d={d}, got {m}")
    e = torch.zeros(d, 2, dtype=torch.float64)
    if embedding == "exact_copy":
        e[:m, 0] = 1 / math.sqrt(m)
        e[m:2 * m, 1] = 1 / math.sqrt(m)
        return e
    if embedding == "random_tight_frame":
        g = generator("coherence", seed, "tight-frame", d)
        order = torch.randperm(d, generator=g)
        theta = torch.rand(d // 2, generator=g, dtype=torch.float64) * math.pi
        for t in range(m):
            c, s = math.cos(float(theta[t])), math.sin(float(theta[t]))
            e[order[2 * t]] = torch.tensor([c, s], dtype=torch.float64) / math.sqrt(m)
            e[order[2 * t + 1]] = torch.tensor([-s, c], dtype=torch.float64) / math.sqrt(m)
        return e
    raise ValueError(f"data.synthetic (coherence).embedding: {embedding!r} is unknown; "
                     f"allowed: {', '.join(EMBEDDINGS)}")


def coherence(params: dict | None, seed: int = 0):
    p, seed = _params("coherence", params, COHERENCE_DEFAULTS, seed)
    d = _int("coherence", p, "d", 2)
    m = _int("coherence", p, "m", 1, d // 2)
    noise = _float("coherence", p, "noise")
    emb = coherence_embedding(m, p["embedding"], d, seed)
    splits = {}
    for split in SPLITS:
        n = _int("coherence", p, f"n_{split}", 0 if split != "train" else 1)
        g = generator("coherence", seed, "samples", split)
        z = torch.randn(n, 2, generator=g, dtype=torch.float64)
        y = torch.relu(z[:, 0] + z[:, 1])
        if noise > 0:
            y = y + noise * torch.randn(n, generator=g, dtype=torch.float64)
        splits[split] = ((z @ emb.T).float().contiguous(), y.float())
    meta = {"in_shape": [d], "num_classes": 1, "task": "regression", "generator": "coherence",
            "k": 2, "d": d, "m": m, "nu": 1.0 / m, "embedding": p["embedding"],
            "basis": emb.tolist(), "params": {**p, "seed": seed}}
    return splits, meta


GENERATORS = {"gaussian_subspace": gaussian_subspace, "coherence": coherence}
