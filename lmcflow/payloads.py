"""What a rule hands its job, typed once for both sides: the plan builds these (``lmcflow.plan.families``), the
rule passes them as a param of the same name, and the job function takes them (``lmcflow.jobs``). They are plain
dicts at run time (Snakemake stores and compares params by value), so a payload's keys are its whole contract.
"""
from __future__ import annotations

from typing import TypedDict

# {seed: [checkpoint, run row]} of the models a job reads
Models = dict[int, list[str]]


class MergeEntry(TypedDict):
    """One point of rule ``interpolate``'s ``entries``: what its paths depend on."""

    point: dict  # ``Point.job_dict("model", "train", "merge")``
    methods: list[str]  # the point's merge methods (``lmcflow.config.merge_methods``)
    models: Models
    alignment: dict[str, list[str]]  # {method ≠ identity: [permutation file, alignment rows]} of rule align


class ModelsEntry(TypedDict):
    """One point of rule ``identifiability``'s or ``swap_costs``' ``entries``: the point and the models it reads."""

    point: dict  # ``Point.job_dict`` of the blocks and analysis keys the job reads
    models: Models

# {point id: {seed: [checkpoint, run row]}} of the models a train job writes
TrainModels = dict[str, Models]


class TrainParams(TypedDict):
    """Rule ``train``'s params, the arguments of ``lmcflow.jobs.train.run_train_job`` by the same names."""

    points: list[dict]  # ``Point.job_dict("model", "train")`` of every point of the grid group
    bundles: list[list[str]]  # the point ids of each bundle (the points whose models stack)
    models: TrainModels
    data: dict[str, str]  # {dataset: prepared file}
    device: str
    state_dir: str  # where resumable training states go
    stack_alone: bool  # a bundle of one model trains stacked (a bundle added beside kept ones)


class AlignParams(TypedDict):
    """Rule ``align``'s params, the arguments of ``lmcflow.jobs.align.run_align_block`` by the same names."""

    point: dict  # ``Point.job_dict("model", "train")`` with ``merge.alignment``
    pairs: list  # the seed pairs of the pair block
    models: Models
    device: str


class MechanismParams(TypedDict):
    """Rule ``mechanism``'s params, the arguments of ``lmcflow.jobs.mechanism.run_mechanism_block``."""

    point: dict  # ``Point.job_dict("model", "train")`` with ``merge.bn_reset_size`` and ``analysis.mechanism``
    pairs: list
    models: Models
    alignment: list[str] | None  # [permutation file, alignment rows] of rule align; None for identity
    device: str


class MergeManyParams(TypedDict):
    """Rule ``merge_many``'s params, the arguments of ``lmcflow.jobs.merge_many.run_merge_many``."""

    point: dict  # ``Point.job_dict("model", "train")`` with the merge keys N-way merges read
    models: Models  # every model of the point
    device: str
