"""Trained models and data from outside lmcflow: checkpoints a user trained (safetensors, or torch files read
with ``weights_only=True``: nothing loads pickle), and datasets a user's factory returns or an image folder holds
(``data.custom``). Each input is checked against the SHA-256 the plan recorded before it is used.

Details: docs/usage.md, "Your own trained models and data".
"""
from __future__ import annotations

import logging
import pickle
from pathlib import Path

import torch
from torch import nn

from lmcflow.data import SPLITS, split_train_val
from lmcflow.external import import_factory
from lmcflow.io import CorruptFileError, folder_sha256, save_tensors, sha256_file
from lmcflow.state import like_state, load_into

log = logging.getLogger(__name__)

TORCH_SUFFIXES = (".pt", ".pth", ".bin")
NESTED_KEYS = ("state_dict", "model_state_dict", "model")  # where training scripts commonly nest a state_dict


def verified(path, sha256: str, what: str) -> Path:
    """``path`` after checking that its SHA-256 is the one the plan recorded (CorruptFileError otherwise)."""
    path = Path(path)
    if not path.is_file():
        raise CorruptFileError(f"{path}: {what} is missing (it existed when the DAG was built)")
    got = sha256_file(path)
    if got != sha256:
        raise CorruptFileError(f"{path}: {what} changed since the DAG was built (SHA-256 {got[:12]}, recorded "
                               f"{sha256[:12]}); rerun snakemake, which imports it again")
    return path


def read_state_dict(path) -> dict[str, torch.Tensor]:
    """The state_dict in a checkpoint file: safetensors, or a torch file read weights-only (a state_dict, or one
    nested under ``state_dict``/``model_state_dict``/``model``). ValueError names the file and what is wrong."""
    path = Path(path)
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file  # lazy: safetensors only where a checkpoint is read

        try:
            return load_file(str(path))
        except Exception as err:  # safetensors raises its own error types
            raise ValueError(f"{path}: not a readable safetensors file ({err})") from None
    if path.suffix not in TORCH_SUFFIXES:
        raise ValueError(f"{path}: a checkpoint must be .safetensors or a torch file ({', '.join(TORCH_SUFFIXES)})")
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError) as err:
        raise ValueError(f"{path}: cannot be read with torch.load(weights_only=True), and lmcflow loads no pickle "
                         f"otherwise ({str(err).splitlines()[0]}); save the model's state_dict "
                         f"(torch.save(model.state_dict(), path)) or a safetensors file") from None
    if isinstance(obj, dict) and not all(isinstance(v, torch.Tensor) for v in obj.values()):
        nested = [k for k in NESTED_KEYS if isinstance(obj.get(k), dict)]
        obj = obj[nested[0]] if nested else obj
    if not isinstance(obj, dict) or not obj or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise ValueError(f"{path}: holds no state_dict (a mapping of names to tensors, at the top or under "
                         f"{' / '.join(NESTED_KEYS)})")
    return dict(obj)


def fit_checkpoint(model: nn.Module, state: dict, path) -> nn.Module:
    """``model`` with ``state`` loaded strictly; ValueError names the file and the keys that do not fit."""
    own = model.state_dict()
    missing = sorted(set(own) - set(state))
    extra = sorted(set(state) - set(own))
    shapes = [f"{k}: {tuple(state[k].shape)} vs the model's {tuple(own[k].shape)}" for k in own
              if k in state and state[k].shape != own[k].shape]
    if missing or extra or shapes:
        parts = [f"missing {missing[:5]}" if missing else "", f"unexpected {extra[:5]}" if extra else "",
                 f"shapes differ ({'; '.join(shapes[:3])})" if shapes else ""]
        raise ValueError(f"{path}: does not fit the model that model.factory builds: "
                         f"{', '.join(p for p in parts if p)}; check model.factory and model.kwargs")
    load_into(model, like_state({k: v.to(own[k].dtype) for k, v in state.items()}, state))
    return model


# --------------------------------------------------------------------------- data.custom
def _stack(ds, name: str, split: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, labels) of a dataset of (input, label) items, or of a TensorDataset, as tensors."""
    if isinstance(ds, torch.utils.data.TensorDataset) and len(ds.tensors) == 2:
        x, y = ds.tensors
    else:
        try:
            items = [ds[i] for i in range(len(ds))]
            x = torch.stack([torch.as_tensor(item[0]) for item in items])
            y = torch.as_tensor([int(item[1]) for item in items])
        except (TypeError, IndexError, ValueError, RuntimeError) as err:
            raise ValueError(f"data.custom.{name}: the {split} dataset's items must be (input tensor, integer "
                             f"label) pairs of one shape ({type(err).__name__}: {err})") from None
    if len(x) == 0:
        raise ValueError(f"data.custom.{name}: the {split} dataset is empty")
    return x.float().contiguous(), y.long().contiguous()


def _image_folder(name: str, cfg: dict) -> dict:
    import torchvision  # lazy: torchvision only for image folders

    root = Path(cfg["image_folder"])
    steps = [torchvision.transforms.Grayscale(1)] if int(cfg.get("channels", 3)) == 1 else \
        [torchvision.transforms.Lambda(lambda im: im.convert("RGB"))]
    if cfg.get("image_size"):
        steps.append(torchvision.transforms.Resize(tuple(cfg["image_size"])))
    transform = torchvision.transforms.Compose([*steps, torchvision.transforms.ToTensor()])
    splits, classes = {}, None
    for split in SPLITS:
        if not (root / split).is_dir():
            if split == "val":
                continue
            raise ValueError(f"data.custom.{name}.image_folder: {root / split} is missing (train/ and test/ are "
                             f"needed, val/ is optional)")
        folder = torchvision.datasets.ImageFolder(str(root / split), transform=transform)
        if classes is not None and folder.classes != classes:
            raise ValueError(f"data.custom.{name}.image_folder: {root / split} has classes {folder.classes}, "
                             f"{root / 'train'} has {classes}")
        classes = folder.classes
        splits[split] = folder
    return splits


def prepare_custom(name: str, cfg: dict, data_cfg: dict, out_path) -> dict:
    """``data.custom.<name>`` as a prepared dataset file (the format of ``lmcflow.data.prepare_dataset``)."""
    val_size, split_seed = int(data_cfg.get("val_size", 5000)), int(data_cfg.get("split_seed", 0))
    if "factory" in cfg:
        try:
            fn = import_factory(cfg["factory"])
        except ValueError as err:
            raise ValueError(f"data.custom.{name}.factory: {err}") from None
        out = fn(**(cfg.get("kwargs") or {}))
        if not isinstance(out, (tuple, list)) or len(out) != 3:
            raise ValueError(f"data.custom.{name}.factory: {cfg['factory']} must return (train, val, test) datasets "
                             f"(val may be None), got {type(out).__name__}")
        given = dict(zip(SPLITS, out, strict=True))
    else:
        if cfg.get("sha256") and folder_sha256(cfg["image_folder"]) != cfg["sha256"]:
            raise CorruptFileError(f"{cfg['image_folder']}: data.custom.{name}.image_folder changed since the DAG "
                                   f"was built; rerun snakemake, which prepares it again")
        given = _image_folder(name, cfg)
    tensors = {}
    for split, ds in given.items():
        if ds is not None:
            tensors[f"x_{split}"], tensors[f"y_{split}"] = _stack(ds, name, split)
    if "x_val" not in tensors:
        try:
            x, y, xv, yv = split_train_val(tensors["x_train"], tensors["y_train"], val_size, split_seed)
        except ValueError as err:
            raise ValueError(f"data.custom.{name}: no validation set given, and {err}") from None
        tensors.update(x_train=x, y_train=y, x_val=xv, y_val=yv)
    shapes = {tuple(tensors[f"x_{s}"].shape[1:]) for s in SPLITS}
    if len(shapes) > 1:
        raise ValueError(f"data.custom.{name}: the splits' inputs have different shapes {sorted(shapes)}")
    meta = {"dataset": name, "source": "factory" if "factory" in cfg else "image_folder",
            "in_shape": list(shapes.pop()), "task": "classification",
            "num_classes": int(max(int(tensors[f"y_{s}"].max()) for s in SPLITS)) + 1,
            "val_size": len(tensors["y_val"]), "split_seed": split_seed,
            "sizes": {s: int(len(tensors[f"y_{s}"])) for s in SPLITS}}
    if "image_folder" in cfg:
        x = tensors["x_train"]
        mean, std = x.mean(dim=(0, 2, 3), keepdim=True), x.std(dim=(0, 2, 3), keepdim=True)
        for s in SPLITS:
            tensors[f"x_{s}"] = ((tensors[f"x_{s}"] - mean) / std).contiguous()
        meta.update(mean=mean.flatten().tolist(), std=std.flatten().tolist())
    save_tensors(out_path, tensors, meta)
    log.info(f"[data] {name} ({meta['source']}): wrote {out_path} sizes={meta['sizes']}")
    return meta
