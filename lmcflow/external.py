"""Models from outside lmcflow: torchvision classification models by name (``model.arch: torchvision:<name>``,
random init, nothing downloaded) and a user's own factory (``model.arch: factory`` with
``model.factory: "package.module:function"``), each called with ``model.kwargs``.

The width sweep acts through the builder's own arguments: ``model.width_kwargs: {name: value at width 1}`` passes
``name = max(1, round(value × model.width))`` (integers; floats: value × width). ``num_classes`` comes from the
dataset; a factory also gets ``in_shape`` (C, H, W) when its signature has it. torchvision models take RGB:
a dataset with one channel is repeated to three in front of the model (``lmcflow.models.RepeatChannels``).
"""
from __future__ import annotations

import importlib
import inspect
import os
import sys
from pathlib import Path

TORCHVISION_PREFIX = "torchvision:"
FACTORY_ARCH = "factory"


def is_external(arch: str) -> bool:
    return isinstance(arch, str) and (arch.startswith(TORCHVISION_PREFIX) or arch == FACTORY_ARCH)


def scaled_kwargs(width_kwargs: dict | None, width: float) -> dict:
    """``model.width_kwargs`` at ``width`` (module doc)."""
    out = {}
    for name, base in (width_kwargs or {}).items():
        if isinstance(base, bool) or not isinstance(base, (int, float)):
            raise ValueError(f"model.width_kwargs.{name}: must be a number (its value at width 1), got {base!r}")
        out[name] = max(1, int(round(base * width))) if isinstance(base, int) else float(base) * width
    return out


def import_factory(path: str):
    """The function ``package.module:function`` names, imported as it is, else from the working directory, else
    from the checkout that holds lmcflow."""
    if not isinstance(path, str) or path.count(":") != 1 or not all(path.split(":")):
        raise ValueError(f"model.factory: {path!r} must read 'package.module:function'")
    mod_name, fn_name = path.split(":")
    roots = [os.getcwd(), str(Path(__file__).resolve().parents[1])]  # the working directory, lmcflow's checkout
    mod = None
    for root in [None, *roots]:
        if root is not None and root not in sys.path:
            sys.path.append(root)
        try:
            mod = importlib.import_module(mod_name)
            break
        except ModuleNotFoundError as err:
            if err.name and not mod_name.startswith(err.name):
                raise ValueError(f"model.factory: importing {mod_name!r} fails: {err}") from None
    if mod is None:
        raise ValueError(f"model.factory: module {mod_name!r} is not importable from sys.path, "
                         f"{' or '.join(roots)}")
    fn = getattr(mod, fn_name, None)
    if not callable(fn):
        raise ValueError(f"model.factory: {mod_name} has no function {fn_name!r}")
    return fn


def needs_rgb(arch: str, in_shape: tuple) -> bool:
    """torchvision's classification models take RGB: other channel counts are repeated to three in front."""
    return arch.startswith(TORCHVISION_PREFIX) and in_shape[0] != 3


def _torchvision_builder(name: str):
    import torchvision.models as tvm  # torchvision only for configs that name its models

    known = tvm.list_models(module=tvm)
    if name not in known:
        raise ValueError(f"model.arch: torchvision has no classification model {name!r}; known: {', '.join(known)}")
    return lambda **kw: tvm.get_model(name, weights=None, **kw)


def build_external(arch: str, factory: str | None, kwargs: dict | None, width_kwargs: dict | None, width: float,
                   in_shape: tuple, num_classes: int):
    """The ``torch.nn.Module`` that ``arch``/``factory`` name, built with its kwargs at ``width`` (module doc; the
    RGB adapter is ``lmcflow.models.RepeatChannels``)."""
    from torch import nn  # torch only where a model is built: the config check imports this module


    kw = {**(kwargs or {}), **scaled_kwargs(width_kwargs, width)}
    if arch.startswith(TORCHVISION_PREFIX):
        if factory:
            raise ValueError(f"model.factory is for model.arch {FACTORY_ARCH!r}, not {arch!r}")
        fn = _torchvision_builder(arch[len(TORCHVISION_PREFIX):])
        try:
            model = fn(num_classes=num_classes, **kw)
        except (TypeError, ValueError) as err:
            raise ValueError(f"model.kwargs {kw} for {arch}: {err}") from None
        return model
    if arch != FACTORY_ARCH:
        raise ValueError(f"model.arch {arch!r} is not a torchvision model or {FACTORY_ARCH!r}")
    if not factory:
        raise ValueError(f"model.arch {FACTORY_ARCH!r} needs model.factory: 'package.module:function'")
    fn = import_factory(factory)
    params = inspect.signature(fn).parameters
    extra = {"num_classes": num_classes}
    if "in_shape" in params:
        extra["in_shape"] = tuple(in_shape)
    try:
        model = fn(**extra, **kw)
    except TypeError as err:
        raise ValueError(f"model.factory {factory} with model.kwargs {kw}: {err}") from None
    if not isinstance(model, nn.Module):
        raise ValueError(f"model.factory {factory} returned {type(model).__name__}, not a torch.nn.Module")
    return model


def check_external(model_cfg: dict, in_shape: tuple, num_classes: int, trains: bool = False) -> None:
    """Build the model on the meta device (no memory, no init) and run it on a meta batch, so a wrong name,
    kwarg or shape fails at the config check; ValueError says what. ``trains``: its training forward too, so a
    random op that lmcflow cannot draw from each model's seed (``lmcflow.random_ops.check_random_ops``) is
    refused here rather than when its train job starts."""
    import torch  # the config check imports torch only for configs with models from outside lmcflow

    # torch at import, like torch itself: loaded only where a model from outside lmcflow is built
    from lmcflow.random_ops import check_random_ops

    with torch.device("meta"):
        model = build_external(model_cfg["arch"], model_cfg.get("factory"), model_cfg.get("kwargs"),
                               model_cfg.get("width_kwargs"), float(model_cfg.get("width", 1.0)), in_shape,
                               num_classes)
        try:
            c = 3 if needs_rgb(model_cfg["arch"], in_shape) else in_shape[0]
            out = model.eval()(torch.empty((2, c, *in_shape[1:])))
        except Exception as err:  # any forward error: the model does not take this dataset's inputs
            raise ValueError(f"model {model_cfg['arch']} does not run on inputs of shape {tuple(in_shape)}: "
                             f"{type(err).__name__}: {err}") from None
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (2, num_classes):
        raise ValueError(f"model {model_cfg['arch']} returns {getattr(out, 'shape', type(out).__name__)} for a batch "
                         f"of 2, expected logits of shape (2, {num_classes})")
    if trains:
        try:
            check_random_ops(model, (c, *in_shape[1:]), f"model {model_cfg.get('factory') or model_cfg['arch']}")
        except ValueError as err:
            raise ValueError(f"{err}: turn the op off through model.kwargs, or import trained checkpoints "
                             f"(a study's import) instead of training them") from None
