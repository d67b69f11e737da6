"""What a config can say, checked without importing torch: torchvision datasets, architectures, the
``model.symmetry`` block and the ``data.synthetic`` generators' parameters.

The DAG is built after these checks (``workflow/rules/common.smk`` → ``lmcflow.config.check_semantics``); keeping
them free of torch keeps every Snakemake start, dry run and ``lmcflow`` config command ~3 CPU-s shorter.
``lmcflow.data``, ``lmcflow.models``, ``lmcflow.symmetry`` and ``lmcflow.synthetic`` re-export what they use.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from lmcflow.config.schema import block_defaults  # the schema holds every default


@dataclass(frozen=True)
class TorchvisionDataset:
    name: str
    tv_class: str  # attribute of torchvision.datasets
    in_shape: tuple
    num_classes: int
    raw_files: tuple  # files torchvision expects in its raw folder (MNIST family)
    archive_dir: str = ""  # for CIFAR: the extracted folder torchvision expects under root
    n_train: int = 60000  # examples in the published training split (validation is carved from it)


_MNIST_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")

TORCHVISION_DATASETS = {
    "mnist": TorchvisionDataset("mnist", "MNIST", (1, 28, 28), 10, _MNIST_FILES),
    "fashion_mnist": TorchvisionDataset("fashion_mnist", "FashionMNIST", (1, 28, 28), 10, _MNIST_FILES),
    "cifar10": TorchvisionDataset("cifar10", "CIFAR10", (3, 32, 32), 10, (), "cifar-10-batches-py", 50000),
    "cifar100": TorchvisionDataset("cifar100", "CIFAR100", (3, 32, 32), 100, (), "cifar-100-python", 50000),
}

ARCHITECTURES = ("mlp", "vgg11", "resnet20", "sum_relu")


def dataset_names(data_cfg: dict | None = None) -> list[str]:
    """Datasets a config can name: torchvision's plus its own synthetic instances, subsets and custom data."""
    cfg = data_cfg or {}
    return sorted(set(TORCHVISION_DATASETS) | set(cfg.get("synthetic") or {}) | set(cfg.get("subsets") or {})
                  | set(cfg.get("custom") or {}))


# --------------------------------------------------------------------------- model.symmetry (lmcflow.symmetry)
SYMMETRY_KINDS = ("standard", "w_asymmetric", "syre", "sigma_asymmetric")
MASK_TYPES = ("fixed_count", "bernoulli")
FIXED_SCALINGS = ("unit", "fan_in")
SYMMETRY_KEYS = ("kind", "sigma_f", "sigma_f_scale", "mask_seed", "n_fixed", "mask_type",
                 "mask_density", "fixed_scaling", "gate_scale")


def symmetry_error(key: str, msg: str) -> ValueError:
    return ValueError(f"model.symmetry.{key}: {msg}")


def _is_number(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(float(v))


def check_symmetry(sym: dict | None) -> dict:
    """Validated ``model.symmetry`` block with defaults filled in; ValueError names the bad key."""
    sym = dict(sym or {})
    unknown = sorted(set(sym) - set(SYMMETRY_KEYS))
    if unknown:
        raise symmetry_error(unknown[0], f"unknown key; allowed: {', '.join(SYMMETRY_KEYS)}")

    out = {**block_defaults("symmetry"), **sym}
    if out["kind"] not in SYMMETRY_KINDS:
        raise symmetry_error("kind", f"{out['kind']!r} is unknown; allowed: {', '.join(SYMMETRY_KINDS)}")
    if not _is_number(out["sigma_f"]) or out["sigma_f"] < 0:
        raise symmetry_error("sigma_f", f"must be a finite number ≥ 0, got {out['sigma_f']!r}")
    if isinstance(out["mask_seed"], bool) or not isinstance(out["mask_seed"], numbers.Integral):
        raise symmetry_error("mask_seed", f"must be an integer, got {out['mask_seed']!r}")
    for v in _as_list(out["sigma_f_scale"]):
        if not _is_number(v) or v < 0:
            raise symmetry_error("sigma_f_scale", f"entries must be finite numbers ≥ 0, got {v!r}")
    for v in _as_list(out["n_fixed"]):
        ok = (isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= 0) or \
             (_is_number(v) and not isinstance(v, numbers.Integral) and 0 < v <= 1)
        if not ok:
            raise symmetry_error("n_fixed", f"entries must be an int ≥ 0 (count) or a float in (0, 1] "
                                  f"(fraction of fan-in), got {v!r}")
    if out["mask_type"] not in MASK_TYPES:
        raise symmetry_error("mask_type", f"{out['mask_type']!r} is unknown; allowed: {', '.join(MASK_TYPES)}")
    if not _is_number(out["mask_density"]) or not 0 < out["mask_density"] <= 1:
        raise symmetry_error("mask_density", f"must be in (0, 1], got {out['mask_density']!r}")
    if out["fixed_scaling"] not in FIXED_SCALINGS:
        raise symmetry_error("fixed_scaling",
                             f"{out['fixed_scaling']!r} is unknown; allowed: {', '.join(FIXED_SCALINGS)}")
    if not _is_number(out["gate_scale"]) or out["gate_scale"] <= 0:
        raise symmetry_error("gate_scale", f"must be a finite number > 0, got {out['gate_scale']!r}")
    return out


def _as_list(v) -> list:
    return list(v) if isinstance(v, (list, tuple)) else [v]


# --------------------------------------------------------------------------- data.synthetic (lmcflow.synthetic)
SYNTHETIC_GENERATORS = ("gaussian_subspace", "coherence")  # lmcflow.synthetic.GENERATORS implements them
SPLITS = ("train", "val", "test")
EMBEDDINGS = ("exact_copy", "random_tight_frame")
NOISE_SCALES = ("uniform", "signed_normal")

GAUSSIAN_SUBSPACE_DEFAULTS = {"classes": 10, "k": 8, "d": 64, "separation": 1.0, "noise_scale": 1.0,
                              "noise_scales": "uniform", "n_train": 10000, "n_val": 2000, "n_test": 2000,
                              "standardize": True}
COHERENCE_DEFAULTS = {"m": 1, "embedding": "exact_copy", "d": 20, "noise": 0.0,
                      "n_train": 4000, "n_val": 1000, "n_test": 2000}


def _params(name: str, params: dict | None, defaults: dict, seed: int) -> tuple[dict, int]:
    params = dict(params or {})
    seed = params.pop("seed", seed)
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise ValueError(f"data.synthetic ({name}).{unknown[0]}: unknown parameter; "
                         f"allowed: {', '.join(sorted(defaults))}, seed")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise ValueError(f"data.synthetic ({name}).seed: must be an integer, got {seed!r}")
    return {**defaults, **params}, int(seed)


def _int(name: str, p: dict, key: str, lo: int, hi: int | None = None) -> int:
    v = p[key]
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < lo or (hi is not None and v > hi):
        rng = f"[{lo}, {hi}]" if hi is not None else f"≥ {lo}"
        raise ValueError(f"data.synthetic ({name}).{key}: must be an integer {rng}, got {v!r}")
    return int(v)


def _choice(name: str, p: dict, key: str, allowed) -> str:
    if p[key] not in allowed:
        raise ValueError(f"data.synthetic ({name}).{key}: {p[key]!r} is unknown; allowed: {', '.join(allowed)}")
    return p[key]


def _float(name: str, p: dict, key: str, lo: float = 0.0) -> float:
    v = p[key]
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) or v < lo:
        raise ValueError(f"data.synthetic ({name}).{key}: must be a finite number ≥ {lo}, got {v!r}")
    return float(v)


def check_params(name: str, params: dict) -> None:
    """Validate a ``data.synthetic.<name>`` entry without generating data (ValueError names the key).

    Runs at DAG construction, so a bad generator parameter fails before any job.
    """
    params = dict(params or {})
    kind = params.pop("generator", None)
    if kind not in SYNTHETIC_GENERATORS:
        raise ValueError(f"data.synthetic.{name}.generator: {kind!r} is unknown; allowed: "
                         f"{', '.join(SYNTHETIC_GENERATORS)}")
    defaults = GAUSSIAN_SUBSPACE_DEFAULTS if kind == "gaussian_subspace" else COHERENCE_DEFAULTS
    try:
        p, _ = _params(kind, params, defaults, 0)
        for split in SPLITS:
            _int(kind, p, f"n_{split}", 0 if split != "train" else 1)
        if kind == "gaussian_subspace":
            _int(kind, p, "classes", 2)
            d = _int(kind, p, "d", 1)
            _int(kind, p, "k", 1, d)
            _float(kind, p, "separation")
            _float(kind, p, "noise_scale")
            _choice(kind, p, "noise_scales", NOISE_SCALES)
            if not isinstance(p["standardize"], bool):
                raise ValueError(f"data.synthetic ({kind}).standardize: must be true or false")
        else:
            d = _int(kind, p, "d", 2)
            _int(kind, p, "m", 1, d // 2)
            _float(kind, p, "noise")
            if p["embedding"] not in EMBEDDINGS:
                raise ValueError(f"data.synthetic ({kind}).embedding: {p['embedding']!r} is unknown; "
                                 f"allowed: {', '.join(EMBEDDINGS)}")
    except ValueError as err:
        raise ValueError(str(err).replace(f"data.synthetic ({kind})", f"data.synthetic.{name}")) from None
