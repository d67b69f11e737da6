"""Studies of imported checkpoints (``studies.<s>.import``) and ``data.custom`` datasets in the plan: which files
each import job reads, their SHA-256 (taken when the DAG is built: a changed file changes the job's params, so
it reruns, and the job checks the file against it before use), and what provenance records of them.

An imported study has one point and trains nothing: rule ``import_models`` writes each seed block's bundle
directory (the same files rule ``train`` writes), so every rule after training reads it unchanged.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

from lmcflow.config import ConfigError
from lmcflow.io import sha256_file

# rule train's and rule import_models's {study} wildcards: a study is either trained or imported
ANY_STUDY = "[A-Za-z0-9_-]+"


@functools.cache
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    return sha256_file(path)


def file_sha256(path: str) -> str:
    """SHA-256 of a file, computed once per version of it in this process (a DAG asks many times)."""
    st = Path(path).stat()
    return _sha256(str(path), st.st_size, st.st_mtime_ns)


def checkpoint_files(study: str, cfg: dict, seeds: list) -> dict[int, str]:
    """{seed: checkpoint file} of ``studies.<study>.import.checkpoints`` (a ``{seed}`` pattern or a list in
    the order of ``seeds``); ConfigError names the key and the file that is missing."""
    given = cfg["checkpoints"]
    key = f"studies.{study}.import.checkpoints"
    if isinstance(given, str):
        files = {int(s): given.replace("{seed}", str(s)) for s in seeds}
    else:
        if len(given) != len(seeds):
            raise ConfigError(f"{key}: {len(given)} files for {len(seeds)} seeds {seeds}; give one per seed, in "
                              f"their order")
        files = {int(s): str(f) for s, f in zip(seeds, given, strict=True)}
    for i, (s, f) in enumerate(files.items()):
        if not Path(f).is_file():
            where = key if isinstance(given, str) else f"{key}[{i}]"
            raise ConfigError(f"{where}: {f} (seed {s}) does not exist (relative paths are relative to the "
                              f"workflow's working directory, {Path.cwd()})")
    return files


class Imports:
    """The imported studies and custom datasets of a config (module doc), and rule import_models's inputs and
    params over a ``lmcflow.plan.grid.Grid`` of it (None: only the checks)."""

    def __init__(self, config: dict, grid=None):
        self.grid = grid
        studies = config["studies"]
        self.checkpoints: dict[str, dict[int, str]] = {}  # {imported study: {seed: checkpoint file}}
        for s, st in studies.items():
            if "import" not in st:
                continue
            where = f"studies.{s}"
            for key in ("sweep", "train"):
                if key in st:
                    raise ConfigError(f"{where}.{key}: a study of imported checkpoints trains nothing and has one "
                                      f"point; remove {key}")
            if not str(st.get("model", {}).get("arch", "")).startswith(("factory", "torchvision:")):
                raise ConfigError(f"{where}.model.arch: imported checkpoints need the model that reads them: "
                                  f"model.arch 'factory' with model.factory, or 'torchvision:<name>'")
            self.checkpoints[s] = checkpoint_files(s, st["import"], list(st["seeds"]))
        for name, cfg in ((config["data"] or {}).get("custom") or {}).items():
            folder = cfg.get("image_folder")
            if folder is not None and not Path(folder, "train").is_dir():
                raise ConfigError(f"data.custom.{name}.image_folder: {folder} has no train/ folder (train/ and "
                                  f"test/ of one folder of images per class are needed)")

    def trained_studies(self) -> str:
        """rule train's {study} constraint: every study that is not imported."""
        if not self.checkpoints:
            return ANY_STUDY
        # not an imported study's name followed by the end of the name (the wildcard sits inside a path)
        return f"(?!(?:{'|'.join(map(re.escape, self.checkpoints))})(?![A-Za-z0-9_-])){ANY_STUDY}"

    def imported_studies(self) -> str:
        """rule import_models's {study} constraint (none: a pattern that matches nothing)."""
        return "|".join(map(re.escape, self.checkpoints)) or "(?!)"

    # ----------------------------------------------------------------------- rule import_models
    def point(self, wc):
        return self.grid.group_points(wc)[0].job_dict("model", "train")

    def models(self, wc):
        """{seed: [checkpoint, run row]} the job writes (as rule train's ``models`` for the group's one point)."""
        return next(iter(self.grid.group_models(wc).values()))

    def sources(self, wc):
        """{seed: [file, SHA-256]} the job reads: its params, so a changed checkpoint reruns it."""
        return {s: [f, file_sha256(f)] for s, f in self.checkpoints[wc.study].items() if s in self.grid.block_seeds(wc)}

    def files(self, wc):
        return [f for f, _ in self.sources(wc).values()]

    # ----------------------------------------------------------------------- provenance
    def provenance(self) -> dict:
        """What provenance.json records of imported inputs: each checkpoint's file and SHA-256."""
        return {"imported_checkpoints": {s: {str(seed): {"file": f, "sha256": file_sha256(f)}
                                             for seed, f in files.items()} for s, files in self.checkpoints.items()}}
