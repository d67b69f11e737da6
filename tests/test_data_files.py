"""Data in, checked: the staged files are the published ones (size and SHA-256), a bad file is named with what
was expected, a stale or partial staged copy is replaced, and no temporary file outlives a failed try."""
from __future__ import annotations

import gzip
import hashlib
import os
import shutil
from pathlib import Path

import pytest
import torchvision.datasets as tvd

from lmcflow.data import load_dataset, prepare_dataset
from lmcflow.data_files import PUBLISHED_GZ_MD5, RAW_FILES, DataFileError, check_cifar, cifar_md5s, stage_file
from lmcflow.io import CorruptFileError

FMNIST = Path("/usr/share/datasets/fashion-mnist")
STEMS = tuple(RAW_FILES["fashion_mnist"])
LABELS = "train-labels-idx1-ubyte"


def test_published_md5s_are_torchvisions_lists():
    """The .gz MD5s lmcflow accepts are the ones torchvision's own download checks."""
    for name, cls in (("mnist", tvd.MNIST), ("fashion_mnist", tvd.FashionMNIST)):
        assert {f.removesuffix(".gz"): md5 for f, md5 in cls.resources} == PUBLISHED_GZ_MD5[name]
    assert all(len(md5) == 32 for _, md5 in cifar_md5s(tvd.CIFAR10) + cifar_md5s(tvd.CIFAR100))


@pytest.mark.fmnist
def test_recorded_fashion_mnist_hashes_are_debians_files_decompressed():
    for stem, (size, sha) in RAW_FILES["fashion_mnist"].items():
        data = gzip.decompress((FMNIST / f"{stem}.gz").read_bytes())
        assert (len(data), hashlib.sha256(data).hexdigest()) == (size, sha)


def _decompressed(folder: Path, stems=STEMS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for stem in stems:
        (folder / stem).write_bytes(gzip.decompress((FMNIST / f"{stem}.gz").read_bytes()))
    return folder


def _no_temporaries(*folders: Path) -> None:
    left = [p for f in folders if f.exists() for p in f.rglob(".*.tmp")]
    assert not left, left


@pytest.mark.fmnist
@pytest.mark.parametrize("damage", ["truncated", "garbage", "flipped-byte", "truncated-gz", "garbage-gz"])
def test_a_bad_source_file_is_named_with_what_was_expected(damage, tmp_path):
    src_dir, raw = tmp_path / "src", tmp_path / "cache" / "raw"
    good = gzip.decompress((FMNIST / f"{LABELS}.gz").read_bytes())
    gz = damage.endswith("-gz")
    src = src_dir / (LABELS + (".gz" if gz else ""))
    src_dir.mkdir()
    data = {"truncated": good[:30000], "garbage": os.urandom(len(good)),
            "flipped-byte": good[:500] + bytes([good[500] ^ 1]) + good[501:],
            "truncated-gz": (FMNIST / f"{LABELS}.gz").read_bytes()[:9000], "garbage-gz": os.urandom(9000)}[damage]
    src.write_bytes(data)
    with pytest.raises(DataFileError) as err:
        stage_file(src, raw / LABELS, "fashion_mnist", LABELS)
    msg = str(err.value)
    assert msg.startswith(f"{src}: ") and "60008 bytes" in msg
    if damage == "flipped-byte":
        assert f"expected 60008 bytes with SHA-256 {RAW_FILES['fashion_mnist'][LABELS][1]}" in msg
    assert not (raw / LABELS).exists()
    _no_temporaries(tmp_path)


@pytest.mark.fmnist
def test_a_stale_staged_copy_is_replaced_and_dead_temporaries_removed(tmp_path):
    """The first contact: a truncated file staged from a bad search path, then the config points back at good
    data. The staged copy is checked, found short, and replaced; a dead process's temporary is removed."""
    cache = tmp_path / "cache"
    raw = _decompressed(cache / "FashionMNIST" / "raw")
    (raw / "train-images-idx3-ubyte").write_bytes((raw / "train-images-idx3-ubyte").read_bytes()[:1_000_000])
    dead = raw / ".train-images-idx3-ubyte.999999999.tmp"
    dead.write_bytes(b"\0" * 1000)
    meta = prepare_dataset("fashion_mnist", {"search_paths": [str(FMNIST)], "download": False, "val_size": 1000},
                           tmp_path / "fm.safetensors", cache)
    assert meta["sizes"]["train"] == 59000
    assert (raw / "train-images-idx3-ubyte").stat().st_size == 47040016
    _no_temporaries(tmp_path)
    # The prepared file records its tensors' SHA-256: a flipped byte in the data region is refused on load.
    path = tmp_path / "fm.safetensors"
    assert len(load_dataset(path).y["train"]) == 59000
    blob = bytearray(path.read_bytes())
    blob[-1000] ^= 0x40
    path.write_bytes(bytes(blob))
    with pytest.raises(CorruptFileError, match="rule prepare_data"):
        load_dataset(path)


@pytest.mark.fmnist
def test_a_corrupt_staged_copy_that_is_its_own_source_is_removed(tmp_path):
    """A folder searched in place (the cache after a download) holding a corrupt file: the file is removed and
    named, so the next run stages or downloads it again instead of failing the same way."""
    raw = _decompressed(tmp_path / "raw", [LABELS])
    (raw / LABELS).write_bytes((raw / LABELS).read_bytes()[:100])
    with pytest.raises(DataFileError, match="It was lmcflow's staged copy and is removed"):
        stage_file(raw / LABELS, raw / LABELS, "fashion_mnist", LABELS)
    assert not (raw / LABELS).exists()


def test_a_wrong_cifar_file_is_named_with_the_published_md5(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    for name, _ in cifar_md5s(tvd.CIFAR10):
        (folder / name).write_bytes(b"not a batch")
    name, md5 = cifar_md5s(tvd.CIFAR10)[0]
    with pytest.raises(DataFileError, match=f"{folder / name}: MD5 .*, expected torchvision's published {md5}"):
        check_cifar(folder, tvd.CIFAR10)
    shutil.rmtree(folder)
    with pytest.raises(DataFileError, match="missing from the extracted CIFAR10 folder"):
        check_cifar(tmp_path / "cifar-10-batches-py", tvd.CIFAR10)
