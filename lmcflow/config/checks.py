"""Checks of a resolved config beyond the JSON schema, run at DAG construction before any job: datasets,
architectures, λ grids, synthetic data, symmetry blocks, alignment and mechanism settings, claims, bundles."""
from __future__ import annotations

import json

from lmcflow.config.catalog import TORCHVISION_DATASETS, check_params, check_symmetry
from lmcflow.config.params import (
    _N_WEIGHT_LAYERS,
    ALIGNABLE_ARCHS,
    alignment_params,
    analysis_params,
    bundle_key,
    mechanism_methods,
    mechanism_params,
    merge_methods,
)
from lmcflow.config.partners import expand_points
from lmcflow.config.points import point_matches, point_value
from lmcflow.errors import ConfigError
from lmcflow.external import check_external, is_external


def check_semantics(config: dict, claim_registry: dict, dataset_names, architectures) -> None:
    """Checks beyond the JSON schema, run at DAG construction before any job."""
    studies = config.get("studies") or {}
    for name, study in studies.items():
        seeds = study.get("seeds", [])
        if len(set(seeds)) != len(seeds):
            raise ConfigError(f"studies.{name}.seeds: seeds must be distinct, got {seeds}")
    points = expand_points(config)
    for (name, pid), p in points.items():
        where = f"studies.{name} (point {pid})"
        if p.dataset not in dataset_names:
            raise ConfigError(f"{where}: dataset {p.dataset!r} is not defined; allowed: {', '.join(dataset_names)}")
        if p.model.get("arch") not in architectures and not is_external(p.model.get("arch")):
            raise ConfigError(f"{where}: model.arch {p.model.get('arch')!r} is unknown; "
                              f"allowed: {', '.join(architectures)}, torchvision:<name>, factory")
        if not p.model.get("width", 0) > 0:
            raise ConfigError(f"{where}: model.width must be > 0, got {p.model.get('width')}")
        n = int(p.merge["lambdas"])
        if n < 3 or (n - 1) % 2:
            raise ConfigError(f"{where}: merge.lambdas={n} must be odd and ≥ 3 so the grid holds 0, ½ and 1")
        if p.model.get("arch") != "mlp" and p.model.get("norm") == "layernorm":
            raise ConfigError(f"{where}: model.norm=layernorm is only for the MLP; use batchnorm or groupnorm")
    check_data_sizes(config.get("data") or {}, {p.dataset for p in points.values()})
    check_external_models(config, points)
    check_identifiability_semantics(config, points)
    check_alignment_semantics(points)
    for cid, ccfg in (config.get("claims") or {}).items():
        if cid not in claim_registry:
            raise ConfigError(f"claims.{cid}: unknown claim id; known: {', '.join(sorted(claim_registry))}")
        claim = claim_registry[cid]
        named = (ccfg or {}).get("study")
        names = list(named) if isinstance(named, list) else [named]
        if len(names) > 1 and not claim.multi_study:
            raise ConfigError(f"claims.{cid}.study: this claim reads one study, got the list {names}")
        if not names:
            raise ConfigError(f"claims.{cid}.study: the list of studies is empty")
        for study in names:
            if study not in studies:
                raise ConfigError(f"claims.{cid}.study: {study!r} is not a study in this config; "
                                  f"defined: {', '.join(studies) or 'none'}")
            claim.check_config(cid, ccfg, study, studies[study], [p for (s, _), p in points.items() if s == study])


def check_data_sizes(data: dict, used: set) -> None:
    """Split sizes that fit the published training split of each torchvision dataset a point uses: the validation
    split carved from it (``data.val_size``, a subset's ``val_size``) and a subset's ``n_train`` from what is left."""
    val_size = data.get("val_size", 0)
    subsets = data.get("subsets") or {}
    for name in sorted(used):
        if name in subsets:
            sub = subsets[name]
            ds, key = TORCHVISION_DATASETS.get(sub.get("base")), f"data.subsets.{name}.val_size"
            val = sub.get("val_size", val_size)
            key = key if "val_size" in sub else "data.val_size"
        else:
            ds, val, key, sub = TORCHVISION_DATASETS.get(name), val_size, "data.val_size", {}
        if ds is None:
            continue  # synthetic data sizes its own splits (data.synthetic.<name>.n_train, n_val, n_test)
        if not 0 <= val < ds.n_train:
            raise ConfigError(f"{key}: {val} validation examples cannot be carved from {ds.name}'s {ds.n_train} "
                              f"training examples (dataset {name!r}); it must be in [0, {ds.n_train})")
        n_train = sub.get("n_train")
        if n_train is not None and n_train > ds.n_train - val:
            raise ConfigError(f"data.subsets.{name}.n_train: {n_train} training examples, but {ds.name} has "
                              f"{ds.n_train - val} left once {val} are carved off for validation")


_EXTERNAL_ONLY = ("factory", "kwargs", "width_kwargs", "trace_overrides")


def check_external_models(config: dict, points: dict) -> None:
    """Models from outside lmcflow (lmcflow.external): built once per distinct model block on the meta device and
    run on a meta batch of the dataset's shape, so a wrong name, kwarg or shape fails before any job. Their points
    use standard layers and no analyses that read lmcflow's own models' hidden_features."""
    data = config.get("data") or {}
    checked = set()
    for (name, pid), p in points.items():
        where = f"studies.{name} (point {pid})"
        arch = p.model.get("arch")
        if not is_external(arch):
            stray = [k for k in _EXTERNAL_ONLY if k in p.model]
            if stray:
                raise ConfigError(f"{where}: model.{stray[0]} is for models from outside lmcflow "
                                  f"(model.arch torchvision:<name> or factory), not model.arch {arch!r}")
            continue
        if (p.model.get("symmetry") or {}).get("kind", "standard") != "standard":
            raise ConfigError(f"{where}: model.symmetry is for lmcflow's own architectures; {arch} has standard "
                              f"layers (symmetry kind standard)")
        a = analysis_params(p)
        if mechanism_methods(p) or any(bool(a.get(f)) for f in ("identifiability", "coherence", "swap_costs")):
            raise ConfigError(f"{where}: analysis.mechanism / identifiability / coherence / swap_costs read "
                              f"lmcflow's own architectures' hidden layers; model.arch {arch} has none of them")
        base = p.dataset if p.dataset in TORCHVISION_DATASETS else ((data.get("subsets") or {}).get(p.dataset) or
                                                                     {}).get("base")
        if base not in TORCHVISION_DATASETS:
            continue  # synthetic data: its shape is known when it is generated
        ds = TORCHVISION_DATASETS[base]
        trains = "import" not in config["studies"][name]  # a study of imported checkpoints trains nothing
        key = json.dumps([p.model, ds.in_shape, ds.num_classes, trains], sort_keys=True, default=str)
        if key in checked:
            continue
        checked.add(key)
        try:
            check_external(p.model, ds.in_shape, ds.num_classes, trains)
        except ValueError as err:
            raise ConfigError(f"{where}: {err}") from None


def check_identifiability_semantics(config: dict, points: dict) -> None:
    """Synthetic dataset parameters, dataset subsets, symmetry blocks and analysis flags."""
    data = config.get("data") or {}
    synthetic = data.get("synthetic") or {}
    for name, params in synthetic.items():
        try:
            check_params(name, params)
        except ValueError as err:
            raise ConfigError(str(err)) from None
    for name, sub in (data.get("subsets") or {}).items():
        if name in TORCHVISION_DATASETS or name in synthetic:
            raise ConfigError(f"data.subsets.{name}: the name is already a torchvision or synthetic dataset; "
                              f"choose another name")
        if (sub or {}).get("base") not in TORCHVISION_DATASETS:
            raise ConfigError(f"data.subsets.{name}.base: {(sub or {}).get('base')!r} is not a torchvision "
                              f"dataset; allowed: {', '.join(sorted(TORCHVISION_DATASETS))}")
    for (name, pid), p in points.items():
        where = f"studies.{name} (point {pid})"
        try:
            sym = check_symmetry(p.model.get("symmetry"))
        except ValueError as err:
            raise ConfigError(f"{where}: {err}") from None
        n_layers = _N_WEIGHT_LAYERS.get(p.model.get("arch"))
        if n_layers and sym["kind"] in ("w_asymmetric", "syre"):
            need = n_layers(p.model)
            for key in ("n_fixed", "sigma_f_scale"):
                v = sym[key]
                if isinstance(v, (list, tuple)) and len(v) < need:
                    raise ConfigError(f"{where}: model.symmetry.{key} has {len(v)} entries but "
                                      f"model.arch={p.model['arch']} has {need} weight layers (head included); "
                                      f"give one entry per layer or a single number")
        a = analysis_params(p)
        other = [f for f in a["matching_features"] if f != "post_activation"]
        if a["identifiability"] and other and p.model.get("arch") != "mlp":
            raise ConfigError(f"{where}: analysis.matching_features {other} need model.arch mlp (other architectures "
                              f"give post-activation features only); got {p.model.get('arch')!r}")
        if a["swap_costs"] and a["ridge_beta"] is not None and a["ridge_steps"] > 0 and \
                p.model.get("arch") not in ("mlp", "sum_relu"):
            raise ConfigError(f"{where}: analysis.ridge_steps > 0 (the post-activation ridge fit) is for linear layers "
                              f"(model.arch mlp or sum_relu); use ridge_steps: 0 for {p.model.get('arch')!r}")
        if (a["identifiability"] or a["coherence"]) and len(p.seeds) < 2:
            raise ConfigError(f"{where}: analysis.identifiability / analysis.coherence compare seed pairs; "
                              f"studies.{name}.seeds needs at least 2 seeds")
        if p.model.get("arch") == "sum_relu" and not (p.dataset in synthetic and
                                                      synthetic[p.dataset].get("generator") == "coherence"):
            raise ConfigError(f"{where}: model.arch=sum_relu has a scalar output and needs a regression "
                              f"dataset (a data.synthetic entry with generator: coherence), got {p.dataset!r}")


def check_alignment_semantics(points: dict) -> None:
    """merge.alignment.at names settings and matches a point; aligned/mechanism models can be aligned."""
    by_study: dict[str, list] = {}
    for (name, pid), p in points.items():
        by_study.setdefault(name, []).append(p)
        where = f"studies.{name} (point {pid})"
        for key in alignment_params(p)["at"] or {}:
            if point_value(p, key) is None:
                raise ConfigError(f"{where}: merge.alignment.at.{key}: {key!r} names no setting of the point")
        mech = mechanism_params(p)
        unknown = [m for m in mech["methods"] if m not in p.merge["methods"]]
        if unknown:
            raise ConfigError(f"{where}: analysis.mechanism.methods {unknown} are not in merge.methods "
                              f"{p.merge.get('methods')}; the mechanism reads the merge's aligned pairs")
        chosen = (p.merge.get("repair") or {}).get("methods") or []
        unknown = [m for m in chosen if m not in p.merge["methods"] and m not in p.merge["many"]["methods"]]
        if unknown:
            raise ConfigError(f"{where}: merge.repair.methods {unknown} are neither in merge.methods "
                              f"{p.merge.get('methods')} nor in merge.many.methods: they would never be REPAIR'd")
        aligned = [m for m in merge_methods(p) if m != "identity"]
        if (aligned or mechanism_methods(p)) and p.model.get("arch") not in ALIGNABLE_ARCHS and \
                not (aligned and not mechanism_methods(p) and is_external(p.model.get("arch"))):
            what = "merge.methods " + str(aligned) if aligned else "analysis.mechanism"
            raise ConfigError(f"{where}: {what} needs model.arch in {', '.join(ALIGNABLE_ARCHS)}, "
                              f"got {p.model.get('arch')!r}")
    for name, pts in by_study.items():
        wanted = {m for p in pts for m in p.merge["methods"] if m != "identity"}
        if wanted and not any(point_matches(p, alignment_params(p)["at"]) for p in pts):
            raise ConfigError(f"studies.{name}: merge.alignment.at {alignment_params(pts[0])['at']} matches no "
                              f"point of the study, so merge.methods {sorted(wanted)} would never run")


def check_bundle_points(points: list, data_cfg: dict | None = None, label: str = "bundle") -> None:
    """ConfigError naming two points of ``points`` that cannot share a bundle, and how they differ."""
    if not points:
        return
    ref = json.loads(bundle_key(points[0], data_cfg))
    for p in points[1:]:
        key = json.loads(bundle_key(p, data_cfg))
        if key != ref:
            diff = []
            for block, want in ref.items():
                got = key[block]
                if isinstance(want, dict):
                    diff += [f"{block}.{k}" for k in sorted(set(want) | set(got)) if want.get(k) != got.get(k)]
                elif want != got:
                    diff.append(block)
            raise ConfigError(f"{label}: points {points[0].study}/{points[0].point} and {p.study}/{p.point} cannot "
                              f"train in one bundle: they differ in {', '.join(diff)} (a bundle needs the same model "
                              f"structure, train settings and data shape)")
