import gzip
import shutil

import pytest
import torch

from lmcflow.data import (
    DataNotFoundError,
    load_dataset,
    prepare_dataset,
    split_train_val,
)

pytestmark = pytest.mark.fmnist


def test_real_fashion_mnist_loads(fmnist_path):
    d = load_dataset(fmnist_path)
    assert {s: len(d.y[s]) for s in ("train", "val", "test")} == {"train": 55000, "val": 5000, "test": 10000}
    assert d.x["train"].shape[1:] == (1, 28, 28) and d.x["train"].dtype == torch.float32
    assert d.num_classes == 10 and d.in_shape == (1, 28, 28)
    # Normalised with the training split's statistics.
    assert abs(d.x["train"].mean().item()) < 1e-3 and abs(d.x["train"].std().item() - 1) < 1e-3
    # Real data: every class present with ~1000 test images each (Fashion-MNIST is balanced).
    assert torch.bincount(d.y["test"]).tolist() == [1000] * 10


def test_missing_data_error_names_dataset_and_paths(tmp_path):
    with pytest.raises(DataNotFoundError) as err:
        prepare_dataset("mnist", {"search_paths": [str(tmp_path / "nowhere")], "download": False},
                        tmp_path / "out.safetensors", tmp_path / "cache")
    msg = str(err.value)
    assert "'mnist'" in msg and str(tmp_path / "nowhere") in msg and "data.search_paths" in msg
    assert "train-images-idx3-ubyte" in msg
    assert not (tmp_path / "out.safetensors").exists()


def test_uncompressed_files_in_torchvision_layout(tmp_path):
    # Users may hold the decompressed files in torchvision's <root>/FashionMNIST/raw layout.
    raw = tmp_path / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    for f in ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", "train-images-idx3-ubyte", "train-labels-idx1-ubyte"):
        with gzip.open(f"/usr/share/datasets/fashion-mnist/{f}.gz") as fin, open(raw / f, "wb") as fout:
            shutil.copyfileobj(fin, fout)
    meta = prepare_dataset("fashion_mnist", {"search_paths": [str(tmp_path)], "download": False, "val_size": 100},
                           tmp_path / "fm.safetensors", tmp_path / "cache")
    assert meta["sizes"] == {"train": 59900, "val": 100, "test": 10000}


def test_validation_split_is_seeded_and_disjoint():
    x = torch.arange(100).float()[:, None]
    y = torch.arange(100)
    a = split_train_val(x, y, 10, seed=0)
    b = split_train_val(x, y, 10, seed=0)
    c = split_train_val(x, y, 10, seed=1)
    assert torch.equal(a[3], b[3]) and not torch.equal(a[3], c[3])
    assert set(a[1].tolist()).isdisjoint(a[3].tolist()) and len(a[1]) == 90


def test_fashion_mnist_files_never_stand_in_for_mnist(tmp_path):
    """MNIST and Fashion-MNIST ship files of the same names: a search path holding Debian's Fashion-MNIST is
    passed over for ``mnist`` (torchvision's own MNIST loading and download stay the way to get it)."""
    with pytest.raises(DataNotFoundError, match="'mnist'"):
        prepare_dataset("mnist", {"search_paths": ["/usr/share/datasets/fashion-mnist"], "download": False},
                        tmp_path / "out.safetensors", tmp_path / "cache")
    assert not (tmp_path / "cache" / "MNIST").exists()


def test_subset_with_its_own_validation_size(tmp_path):
    """``data.subsets`` entries may carve their own validation split (the authors' 10% of the training set) and
    keep every remaining training example when ``n_train`` is absent."""
    meta = prepare_dataset("fm_val10", {"search_paths": ["/usr/share/datasets/fashion-mnist"], "download": False,
                                        "val_size": 5000, "subsets": {"fm_val10": {"base": "fashion_mnist",
                                                                                   "val_size": 6000}}},
                           tmp_path / "fm.safetensors", tmp_path / "cache")
    assert meta["sizes"] == {"train": 54000, "val": 6000, "test": 10000}
