"""Datasets as whole in-memory tensors.

``prepare_dataset`` reads a dataset once through torchvision's own dataset
classes (their real download code stays available to users with a network),
carves a validation split from the training set with a fixed seed, normalises
with the training split's per-channel statistics and writes one safetensors
file. Training and evaluation jobs then load that file into memory: at these
sizes a DataLoader with worker processes only costs time.
"""
from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from lmcflow.config.catalog import TORCHVISION_DATASETS, TorchvisionDataset, dataset_names  # noqa: F401  (re-exported)
from lmcflow.data_files import DataFileError, check_cifar, stage_mnist, train_label_counts
from lmcflow.io import CorruptFileError, load_tensors, save_tensors
from lmcflow.seeding import generator

log = logging.getLogger(__name__)

SPLITS = ("train", "val", "test")


# Synthetic generators register themselves here: generator name -> callable(params, seed) returning
# ({split: (x, y)}, meta). A config names dataset instances in data.synthetic: {name: {generator, ...}}.
SYNTHETIC_DATASETS: dict = {}

DEFAULT_SEARCH_PATHS = ("/usr/share/datasets/fashion-mnist",)


class DataNotFoundError(RuntimeError):
    pass


def _find_mnist_layout(ds: TorchvisionDataset, folder: Path) -> dict[str, Path] | None:
    """Raw MNIST-family files of ``ds`` in ``folder`` (flat, .gz or not, or in torchvision's layout).

    MNIST and Fashion-MNIST ship files of the same names, so a folder of the other one is passed over
    (``_is_fashion_mnist``): a search path with Debian's Fashion-MNIST never stands in for MNIST."""
    for base in (folder, folder / ds.tv_class / "raw"):
        found = {}
        for stem in ds.raw_files:
            for cand in (base / stem, base / f"{stem}.gz"):
                if cand.is_file():
                    found[stem] = cand
                    break
        if len(found) == len(ds.raw_files):
            if ds.name in ("mnist", "fashion_mnist") and _is_fashion_mnist(found) != (ds.name == "fashion_mnist"):
                log.info(f"[data] {ds.name}: the files in {base} are the other MNIST-family dataset; skipped")
                continue
            return found
    return None


def _is_fashion_mnist(found: dict[str, Path]) -> bool:
    """Fashion-MNIST's 60000 training labels are exactly 6000 per class; MNIST's are not (5421 to 6742)."""
    counts = train_label_counts(found["train-labels-idx1-ubyte"])
    return counts[:10] == [6000] * 10 and not any(counts[10:])


def _stage_mnist(found: dict[str, Path], ds: TorchvisionDataset, cache_root: Path) -> Path:
    """Raw files, decompressed, in torchvision's expected ``<root>/<Class>/raw`` layout, each checked against the
    published file by size and SHA-256 (``lmcflow.data_files``); a stale or partial staged copy is replaced.

    Debian's gzip files differ in MD5 from torchvision's list (recompressed); the decompressed bytes are the
    published data, and torchvision checks no MD5 when it is not downloading.
    """
    stage_mnist(found, ds.name, cache_root / ds.tv_class / "raw")
    return cache_root


def _load_torchvision(ds: TorchvisionDataset, search_paths, cache_root: Path, download: bool):
    import torchvision.datasets as tvd  # ~0.5 s of import; synthetic and prepared data never need it

    cls = getattr(tvd, ds.tv_class)
    searched = []
    root = None
    for sp in list(search_paths) + [str(cache_root)]:
        p = Path(sp).expanduser()
        searched.append(str(p))
        if not p.is_dir():
            continue
        if ds.raw_files:
            found = _find_mnist_layout(ds, p)
            if found:
                log.info(f"[data] {ds.name}: raw files found in {p}")
                root = _stage_mnist(found, ds, cache_root)
                break
        elif (p / ds.archive_dir).is_dir():
            log.info(f"[data] {ds.name}: extracted archive found in {p}")
            check_cifar(p / ds.archive_dir, cls)
            root = p
            break
    if root is None and download:
        log.info(f"[data] {ds.name}: not found locally, downloading with torchvision into {cache_root}")
        try:
            cls(root=str(cache_root), train=True, download=True)
            cls(root=str(cache_root), train=False, download=True)
            root = cache_root
            if ds.raw_files:  # torchvision checked the .gz MD5s; check what it unpacked
                _stage_mnist({s: cache_root / ds.tv_class / "raw" / s for s in ds.raw_files}, ds, cache_root)
        except Exception as err:  # network errors come in many types
            raise DataNotFoundError(_missing_message(ds, searched, f"download failed: {err}")) from err
    if root is None:
        raise DataNotFoundError(_missing_message(ds, searched, "data.download is false"))
    try:
        train = cls(root=str(root), train=True, download=False)
        test = cls(root=str(root), train=False, download=False)
    except (RuntimeError, ValueError, EOFError, OSError) as err:  # torchvision's own shape and integrity errors
        raise DataFileError(f"{ds.name} in {root}: torchvision cannot read it ({err})") from err
    return _as_array(train), _as_array(test)


def _missing_message(ds: TorchvisionDataset, searched, why: str) -> str:
    if ds.raw_files:
        expect = ", ".join(f"{f}[.gz]" for f in ds.raw_files)
    else:
        expect = f"the extracted folder {ds.archive_dir}/"
    return (f"dataset {ds.name!r} not found and not downloadable ({why}). Searched: {', '.join(searched)}. "
            f"Provide it by putting {expect} into one of these folders, or add the folder holding them "
            f"to the config list data.search_paths, or set data.download: true on a machine with a network.")


def _as_array(tv_ds) -> tuple[np.ndarray, np.ndarray]:
    x = tv_ds.data
    x = x.numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
    if x.ndim == 3:  # (N, H, W) grey images
        x = x[:, None]
    else:  # (N, H, W, C) colour images
        x = x.transpose(0, 3, 1, 2)
    y = tv_ds.targets
    y = y.numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
    return x.astype(np.float32) / 255.0, y.astype(np.int64)


def split_train_val(x: torch.Tensor, y: torch.Tensor, val_size: int, seed: int):
    """Fixed-seed validation split carved from the training set."""
    if not 0 <= val_size < len(x):
        raise ValueError(f"data.val_size={val_size} must be in [0, {len(x)})")
    perm = torch.randperm(len(x), generator=generator("val-split", seed))
    val_idx, train_idx = perm[:val_size].sort().values, perm[val_size:].sort().values
    return x[train_idx], y[train_idx], x[val_idx], y[val_idx]


def prepare_dataset(name: str, data_cfg: dict, out_path, cache_root) -> dict:
    """Build the prepared tensor file for dataset ``name``; returns its metadata."""
    val_size = int(data_cfg.get("val_size", 5000))
    split_seed = int(data_cfg.get("split_seed", 0))
    synthetic = data_cfg.get("synthetic") or {}
    subset = (data_cfg.get("subsets") or {}).get(name)
    if subset is not None:
        return _prepare_subset(name, subset, data_cfg, out_path, cache_root)
    if name in synthetic:
        params = dict(synthetic[name])
        kind = params.pop("generator", None)
        if kind not in SYNTHETIC_DATASETS:
            raise ValueError(f"data.synthetic.{name}.generator={kind!r} is unknown; "
                             f"allowed: {', '.join(sorted(SYNTHETIC_DATASETS))}")
        splits, meta = SYNTHETIC_DATASETS[kind](params, split_seed)
        tensors = {f"{k}_{s}": torch.as_tensor(v) for s, (xs, ys) in splits.items() for k, v in (("x", xs), ("y", ys))}
        meta.update(dataset=name, source="synthetic")
    elif name in TORCHVISION_DATASETS:
        ds = TORCHVISION_DATASETS[name]
        (xtr, ytr), (xte, yte) = _load_torchvision(
            ds, data_cfg.get("search_paths", DEFAULT_SEARCH_PATHS), Path(cache_root),
            bool(data_cfg.get("download", True)))
        xtr, ytr, xte, yte = map(torch.from_numpy, (xtr, ytr, xte, yte))
        xtr, ytr, xva, yva = split_train_val(xtr, ytr, val_size, split_seed)
        # Per-channel statistics of the training split only (no leakage from val/test).
        mean = xtr.mean(dim=(0, 2, 3), keepdim=True)
        std = xtr.std(dim=(0, 2, 3), keepdim=True)
        norm = lambda t: ((t - mean) / std).contiguous()  # noqa: E731
        tensors = {"x_train": norm(xtr), "y_train": ytr, "x_val": norm(xva), "y_val": yva,
                   "x_test": norm(xte), "y_test": yte}
        meta = {"dataset": name, "source": "torchvision", "in_shape": list(ds.in_shape),
                "num_classes": ds.num_classes, "task": "classification",
                "mean": mean.flatten().tolist(), "std": std.flatten().tolist()}
    else:
        raise ValueError(f"dataset {name!r} is unknown; allowed: {', '.join(dataset_names(data_cfg))}")
    meta.update(val_size=val_size, split_seed=split_seed,
                sizes={s: int(len(tensors[f"y_{s}"])) for s in SPLITS}, tensors_sha256=tensors_sha256(tensors))
    save_tensors(out_path, tensors, meta)
    log.info(f"[data] {name}: wrote {out_path} sizes={meta['sizes']}")
    return meta


def subset_indices(n_total: int, n_train: int, seed: int) -> torch.Tensor:
    """Sorted indices of a seeded random subset of ``n_train`` out of ``n_total`` training examples."""
    if not 1 <= n_train <= n_total:
        raise ValueError(f"n_train={n_train} must be in [1, {n_total}] (the training split after the "
                         f"validation split was carved off)")
    return torch.randperm(n_total, generator=generator("train-subset", seed))[:n_train].sort().values


def _prepare_subset(name: str, subset: dict, data_cfg: dict, out_path, cache_root) -> dict:
    """``data.subsets.<name>``: a torchvision dataset whose training split is a seeded random subset.

    The validation split (``subset.val_size``, default ``data.val_size``) is carved from the full
    training set first (as for the base dataset: with the same size both have the same validation
    and test examples); then ``n_train`` training examples are kept (seed ``subset.seed``, default
    ``data.split_seed``; absent: all of them); normalisation statistics come from the kept examples.
    """
    base = subset.get("base")
    if base not in TORCHVISION_DATASETS:
        raise ValueError(f"data.subsets.{name}.base={base!r} must be a torchvision dataset; "
                         f"allowed: {', '.join(sorted(TORCHVISION_DATASETS))}")
    val_size = int(subset.get("val_size", data_cfg.get("val_size", 5000)))
    split_seed = int(data_cfg.get("split_seed", 0))
    seed = int(subset.get("seed", split_seed))
    ds = TORCHVISION_DATASETS[base]
    (xtr, ytr), (xte, yte) = _load_torchvision(
        ds, data_cfg.get("search_paths", DEFAULT_SEARCH_PATHS), Path(cache_root),
        bool(data_cfg.get("download", True)))
    xtr, ytr, xte, yte = map(torch.from_numpy, (xtr, ytr, xte, yte))
    xtr, ytr, xva, yva = split_train_val(xtr, ytr, val_size, split_seed)
    try:
        n_train = subset.get("n_train")
        keep = subset_indices(len(xtr), len(xtr) if n_train is None else int(n_train), seed)
    except ValueError as err:
        raise ValueError(f"data.subsets.{name}.n_train: {err}") from None
    xtr, ytr = xtr[keep], ytr[keep]
    mean = xtr.mean(dim=(0, 2, 3), keepdim=True)
    std = xtr.std(dim=(0, 2, 3), keepdim=True)
    norm = lambda t: ((t - mean) / std).contiguous()  # noqa: E731
    tensors = {"x_train": norm(xtr), "y_train": ytr, "x_val": norm(xva), "y_val": yva,
               "x_test": norm(xte), "y_test": yte}
    meta = {"dataset": name, "source": "torchvision-subset", "base": base, "subset_seed": seed,
            "in_shape": list(ds.in_shape), "num_classes": ds.num_classes, "task": "classification",
            "mean": mean.flatten().tolist(), "std": std.flatten().tolist(),
            "val_size": val_size, "split_seed": split_seed,
            "sizes": {s: int(len(tensors[f"y_{s}"])) for s in SPLITS}, "tensors_sha256": tensors_sha256(tensors)}
    save_tensors(out_path, tensors, meta)
    log.info(f"[data] {name} (subset of {base}): wrote {out_path} sizes={meta['sizes']}")
    return meta


@dataclass
class Dataset:
    """A prepared dataset in memory: ``x[split]``, ``y[split]`` and metadata."""

    x: dict
    y: dict
    meta: dict

    @property
    def in_shape(self) -> tuple:
        return tuple(self.meta["in_shape"])

    @property
    def num_classes(self) -> int:
        return int(self.meta["num_classes"])

    @property
    def task(self) -> str:
        return self.meta.get("task", "classification")

    def to(self, device) -> Dataset:
        return Dataset({k: v.to(device) for k, v in self.x.items()},
                       {k: v.to(device) for k, v in self.y.items()}, self.meta)

    def with_shuffled_labels(self, seed: int) -> Dataset:
        """The same inputs (shared tensors) with the training labels permuted by a permutation drawn from
        ``derive_seed("label-permutation", seed)``: a null partner that learns no input-label relation. The
        validation and test labels stay true, so its accuracy there is chance."""
        y = self.y["train"]
        perm = torch.randperm(len(y), generator=generator("label-permutation", int(seed))).to(y.device)
        return Dataset(dict(self.x), {**self.y, "train": y[perm]}, {**self.meta, "shuffled_labels_seed": int(seed)})


def tensors_sha256(tensors: dict) -> str:
    """SHA-256 of a prepared dataset's tensors (names, dtypes, shapes and bytes, in name order)."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].contiguous().cpu()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)};".encode())
        h.update(t.view(torch.uint8).numpy().data if t.numel() else b"")
    return h.hexdigest()


def load_dataset(path) -> Dataset:
    """A prepared dataset, its tensors checked against the SHA-256 its file records (a flipped byte in the data
    region is otherwise read as a value)."""
    tensors, meta = load_tensors(path, rebuild_hint="rule prepare_data")
    if "tensors_sha256" in meta and tensors_sha256(tensors) != meta["tensors_sha256"]:
        raise CorruptFileError(f"{path}: its tensors do not match the SHA-256 the file records (corrupt); delete it "
                               "and rebuild it with rule prepare_data")
    return Dataset({s: tensors[f"x_{s}"] for s in SPLITS}, {s: tensors[f"y_{s}"] for s in SPLITS}, meta)


# Register the synthetic generators (imported last: lmcflow.synthetic does not import this module).
from lmcflow.synthetic import GENERATORS as _SYNTHETIC_GENERATORS  # noqa: E402

SYNTHETIC_DATASETS.update(_SYNTHETIC_GENERATORS)
