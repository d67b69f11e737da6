"""What a config can name — torchvision datasets and architectures — without importing torch.

The DAG is built from these names (config checks in ``workflow/rules/common.smk``); keeping them free of
torch keeps every Snakemake start, dry run and ``lmcflow`` config command ~3 CPU-s shorter.
``lmcflow.data`` and ``lmcflow.models`` re-export them.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TorchvisionDataset:
    name: str
    tv_class: str  # attribute of torchvision.datasets
    in_shape: tuple
    num_classes: int
    raw_files: tuple  # files torchvision expects in its raw folder (MNIST family)
    archive_dir: str = ""  # for CIFAR: the extracted folder torchvision expects under root


_MNIST_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")

TORCHVISION_DATASETS = {
    "mnist": TorchvisionDataset("mnist", "MNIST", (1, 28, 28), 10, _MNIST_FILES),
    "fashion_mnist": TorchvisionDataset("fashion_mnist", "FashionMNIST", (1, 28, 28), 10, _MNIST_FILES),
    "cifar10": TorchvisionDataset("cifar10", "CIFAR10", (3, 32, 32), 10, (), "cifar-10-batches-py"),
    "cifar100": TorchvisionDataset("cifar100", "CIFAR100", (3, 32, 32), 100, (), "cifar-100-python"),
}

ARCHITECTURES = ("mlp", "vgg11", "resnet20", "sum_relu")


def dataset_names(data_cfg: dict | None = None) -> list[str]:
    """Datasets a config can name: torchvision's plus its own synthetic instances and subsets."""
    cfg = data_cfg or {}
    return sorted(set(TORCHVISION_DATASETS) | set(cfg.get("synthetic") or {}) | set(cfg.get("subsets") or {}))
