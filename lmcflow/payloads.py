"""What a rule hands its job, typed once for both sides: the plan builds these (``lmcflow.plan.rules``), the
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
