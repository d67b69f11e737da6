"""State dicts as PyTorch writes them: an ``OrderedDict`` whose ``_metadata`` attribute holds each module's
``version`` (and whatever else ``_save_to_state_dict`` recorded). Versioned modules (torchvision's MNASNet, old
BatchNorm checkpoints) read it in ``_load_from_state_dict`` and refuse a state_dict without it, so every state_dict
lmcflow builds from another one (permuted, interpolated, merged, cloned, loaded from a checkpoint) carries it
over with ``like_state``; checkpoints store it as JSON in the safetensors header (``lmcflow.io``)."""
from __future__ import annotations

import json
from collections import OrderedDict

METADATA_KEY = "torch_state_dict_metadata"  # the safetensors header entry that holds ``_metadata`` as JSON


def like_state(values, like) -> OrderedDict:
    """An ``OrderedDict`` of ``values`` (a mapping or (key, value) pairs) carrying ``like``'s ``_metadata``."""
    out = OrderedDict(values)
    meta = getattr(like, "_metadata", None)
    if meta is not None:
        out._metadata = OrderedDict((k, dict(v)) for k, v in meta.items())
    return out


def metadata_json(state) -> str | None:
    """``state._metadata`` as canonical JSON (None when it has none)."""
    meta = getattr(state, "_metadata", None)
    if meta is None:
        return None
    return json.dumps([[k, dict(v)] for k, v in meta.items()], sort_keys=True)


def with_metadata_json(tensors: dict, text: str | None) -> OrderedDict:
    """``tensors`` as an ``OrderedDict`` whose ``_metadata`` is read back from ``metadata_json``'s text."""
    out = OrderedDict(tensors)
    if text is not None:
        out._metadata = OrderedDict((k, v) for k, v in json.loads(text))
    return out


def versioned(model) -> bool:
    """Whether a module of ``model`` outside ``torch.nn`` reads its state_dict version when loading (it overrides
    ``_load_from_state_dict``, like torchvision's MNASNet): its checkpoints must carry ``_metadata``."""
    import torch.nn as nn  # lazy: table jobs import lmcflow.io, which imports this module, without torch

    base = nn.Module._load_from_state_dict
    return any(type(m)._load_from_state_dict is not base and not type(m).__module__.startswith("torch.nn.")
               for m in model.modules())


def checkpoint_state(model) -> OrderedDict:
    """``model.state_dict()`` to write to a checkpoint: with its ``_metadata`` where the model is ``versioned``,
    else without (the bytes of an unversioned model's checkpoint do not depend on torch's module versions)."""
    sd = model.state_dict()
    return sd if versioned(model) else OrderedDict(sd)


def load_into(model, state, strict: bool = True):
    """``model.load_state_dict(state)``; a ``state`` without ``_metadata`` takes the model's own (the versions of
    the code that built it, which is the code that wrote lmcflow's checkpoints)."""
    if getattr(state, "_metadata", None) is None:
        state = like_state(state, model.state_dict())
    return model.load_state_dict(state, strict=strict)
