"""The published dataset files, checked before use (torch-free).

``RAW_FILES``: the decompressed MNIST-family files by size and SHA-256. Fashion-MNIST's SHA-256s were computed
from Debian's package ``dataset-fashion-mnist`` (0.0~git20200523.55506a9-1), decompressed; MNIST's SHA-256s are
not recorded here (no copy of MNIST could be hashed where these were written), so MNIST's decompressed files are
checked by size and IDX header, and a ``.gz`` source by the MD5 that torchvision publishes for it
(``PUBLISHED_GZ_MD5``, the same list torchvision's own download checks). CIFAR's extracted batch files are checked
by torchvision's published MD5s (``cifar_md5s``); no SHA-256 of them is recorded. docs/usage.md, "Data", says
the same for users.

``stage_mnist`` copies (and decompresses) the files a search path holds into the cache torchvision reads: each
source is checked while it is copied, a staged copy is checked before it is trusted and replaced when it is stale
or partial, and a temporary file never outlives its try.
"""
from __future__ import annotations

import gzip
import hashlib
import logging
import os
import zlib
from pathlib import Path

log = logging.getLogger(__name__)

# stem -> (bytes, SHA-256 or None): the decompressed IDX files (16-byte image header, 8-byte label header)
_MNIST_SIZES = {"train-images-idx3-ubyte": 47040016, "train-labels-idx1-ubyte": 60008,
                "t10k-images-idx3-ubyte": 7840016, "t10k-labels-idx1-ubyte": 10008}
RAW_FILES: dict[str, dict[str, tuple[int, str | None]]] = {
    "fashion_mnist": {
        "train-images-idx3-ubyte": (47040016, "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888"),
        "train-labels-idx1-ubyte": (60008, "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9"),
        "t10k-images-idx3-ubyte": (7840016, "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b"),
        "t10k-labels-idx1-ubyte": (10008, "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34"),
    },
    "mnist": {stem: (size, None) for stem, size in _MNIST_SIZES.items()},
}
# The MD5s torchvision's MNIST and FashionMNIST classes publish for the upstream .gz files (``resources``).
PUBLISHED_GZ_MD5 = {
    "mnist": {"train-images-idx3-ubyte": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
              "train-labels-idx1-ubyte": "d53e105ee54ea40749a09fcbcd1e9432",
              "t10k-images-idx3-ubyte": "9fb629c4189551a2d022fa330f9573f3",
              "t10k-labels-idx1-ubyte": "ec29112dd5afa0611ce80d1b7f02629c"},
    "fashion_mnist": {"train-images-idx3-ubyte": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
                      "train-labels-idx1-ubyte": "25c81989df183df01b3e8a0aad5dffbe",
                      "t10k-images-idx3-ubyte": "bef4ecab320f06d8554ea6380940ec79",
                      "t10k-labels-idx1-ubyte": "bb300cfdad3c16e7a12a480ee83cd310"},
}
_IDX_MAGIC = {"images": b"\x00\x00\x08\x03", "labels": b"\x00\x00\x08\x01"}
_CHUNK = 1 << 20


class DataFileError(RuntimeError):
    """A dataset file is not the published one: the message names the file, what was expected and what was found."""


def _expected(dataset: str, stem: str) -> str:
    size, sha = RAW_FILES[dataset][stem]
    return f"{size} bytes" + (f" with SHA-256 {sha}" if sha else "")


def _header_ok(stem: str, head: bytes) -> bool:
    kind = "images" if "images" in stem else "labels"
    n = (60000 if stem.startswith("train") else 10000).to_bytes(4, "big")
    return head[:4] == _IDX_MAGIC[kind] and head[4:8] == n


def check_raw(path: Path, dataset: str, stem: str) -> str | None:
    """Why the decompressed file ``path`` is not ``dataset``'s published ``stem`` (None: it is)."""
    size, sha = RAW_FILES[dataset][stem]
    got = path.stat().st_size
    if got != size:
        return f"{got} bytes, expected {_expected(dataset, stem)}"
    h = hashlib.sha256()  # ~0.1 s for the 47 MB training images
    with open(path, "rb") as f:
        head = f.read(16)
        h.update(head)
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    if not _header_ok(stem, head):
        return f"not an IDX file of {stem} (header {head[:8].hex()}), expected {_expected(dataset, stem)}"
    if sha and h.hexdigest() != sha:
        return f"SHA-256 {h.hexdigest()}, expected {_expected(dataset, stem)}"
    return None


def _md5(path: Path) -> str:
    h = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _remove_stale_temporaries(dst: Path) -> None:
    """Temporaries of ``dst`` left by a staging process that no longer runs (killed before its cleanup)."""
    for tmp in dst.parent.glob(f".{dst.name}.*.tmp"):
        pid = tmp.name.removeprefix(f".{dst.name}.").removesuffix(".tmp")
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            tmp.unlink(missing_ok=True)


def stage_file(src: Path, dst: Path, dataset: str, stem: str) -> None:
    """``dst``: ``src`` decompressed (``.gz``) or copied, checked against the published file, written atomically.

    A staged ``dst`` that checks out is kept; one that does not (stale, partial, another dataset's) is replaced.
    A source that is not the published file raises ``DataFileError`` naming it, and no temporary file remains."""
    if dst.exists():
        why = check_raw(dst, dataset, stem)
        if why is None:
            return
        if dst.resolve() == src.resolve():
            dst.unlink()
            raise DataFileError(f"{src}: {why}; not the published {dataset} file {stem}. It was lmcflow's staged "
                                "copy and is removed: the next run stages or downloads it again")
        log.warning(f"[data] {dst}: {why}; a stale or partial staged copy, replaced from {src}")
    dst.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporaries(dst)
    published_md5 = PUBLISHED_GZ_MD5.get(dataset, {}).get(stem)
    gz_published = src.suffix == ".gz" and published_md5 is not None and _md5(src) == published_md5
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")  # unique: two prepare jobs may stage at once
    try:
        opener = gzip.open if src.suffix == ".gz" else open
        try:
            with opener(src, "rb") as fin, open(tmp, "wb") as fout:
                while chunk := fin.read(_CHUNK):
                    fout.write(chunk)
        except (EOFError, gzip.BadGzipFile, zlib.error) as err:
            raise DataFileError(f"{src}: not a complete gzip file ({type(err).__name__}: {err}); expected "
                                f"{dataset}'s {stem}, {_expected(dataset, stem)} once decompressed") from None
        why = check_raw(tmp, dataset, stem)
        if why is not None and not (gz_published and why.startswith("SHA-256")):
            raise DataFileError(f"{src}: {why}" + (" once decompressed" if src.suffix == ".gz" else "")
                                + f"; not {dataset}'s published {stem}. Replace it, or remove its folder from "
                                "data.search_paths")
        if RAW_FILES[dataset][stem][1] is None and not gz_published:
            log.warning(f"[data] {src}: size and IDX header of {dataset}'s {stem} check out; lmcflow records no "
                        "SHA-256 of it and the source is not the published .gz, so its content is not verified")
        tmp.replace(dst)
    finally:
        tmp.unlink(missing_ok=True)


def stage_mnist(found: dict[str, Path], dataset: str, raw: Path) -> None:
    """Every file of ``found`` (stem -> source) staged into ``raw``."""
    raw.mkdir(parents=True, exist_ok=True)
    for stem, src in found.items():
        stage_file(src, raw / stem, dataset, stem)


def train_label_counts(src: Path) -> list[int]:
    """Examples per class in an MNIST-family training-label file (``.gz`` or not); DataFileError naming a file
    that is not one."""
    opener = gzip.open if src.suffix == ".gz" else open
    try:
        with opener(src, "rb") as f:
            data = f.read()
    except (EOFError, gzip.BadGzipFile, zlib.error) as err:
        raise DataFileError(f"{src}: not a complete gzip file ({type(err).__name__}: {err}); expected an "
                            f"MNIST-family train-labels-idx1-ubyte, {_MNIST_SIZES['train-labels-idx1-ubyte']} "
                            "bytes once decompressed") from None
    if len(data) != _MNIST_SIZES["train-labels-idx1-ubyte"] or not _header_ok("train-labels-idx1-ubyte", data):
        raise DataFileError(f"{src}: {len(data)} bytes (header {data[:8].hex()}); expected an MNIST-family "
                            f"train-labels-idx1-ubyte of {_MNIST_SIZES['train-labels-idx1-ubyte']} bytes")
    counts = [0] * 256
    for b in data[8:]:
        counts[b] += 1
    return counts


def cifar_md5s(tv_class) -> list[tuple[str, str]]:
    """(file, published MD5) of a torchvision CIFAR class's extracted batches and meta file."""
    return [*tv_class.train_list, *tv_class.test_list, (tv_class.meta["filename"], tv_class.meta["md5"])]


def check_cifar(folder: Path, tv_class) -> None:
    """DataFileError naming the first extracted CIFAR file that is missing or not torchvision's published one."""
    for name, md5 in cifar_md5s(tv_class):
        path = folder / name
        if not path.is_file():
            raise DataFileError(f"{path}: missing from the extracted {tv_class.__name__} folder {folder}")
        got = _md5(path)
        if got != md5:
            raise DataFileError(f"{path}: MD5 {got}, expected torchvision's published {md5} "
                                f"({path.stat().st_size} bytes); replace the extracted folder {folder}")
