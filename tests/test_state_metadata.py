"""State dicts keep PyTorch's ``_metadata`` (module versions) through permutation, interpolation, averaging,
REPAIR's clones and checkpoint I/O, so torchvision's versioned MNASNet goes from derivation to a merged model
loaded with strict loading."""
import pytest
import torch
import torchvision.models as tvm

from lmcflow.alignment import apply_permutation, permutation_spec
from lmcflow.alignment.derive import example_batch
from lmcflow.io import load_tensors, save_tensors
from lmcflow.merge_many import average_states
from lmcflow.merging import interpolate_state
from lmcflow.models import ModelSpec, build_model
from lmcflow.state import checkpoint_state, load_into, versioned


def _mnasnet():
    torch.manual_seed(0)
    return tvm.mnasnet0_5(num_classes=10)


def test_mnasnet_derives_permutes_merges_and_reloads_strictly(tmp_path):
    a, b = _mnasnet(), tvm.mnasnet0_5(num_classes=10)
    x = example_batch((3, 32, 32), 2)
    spec = permutation_spec(a, example_input=x)
    assert len(spec.groups) >= 10 and spec.proof_residual < 1e-8
    perms = {g: torch.randperm(n, generator=torch.Generator().manual_seed(1)) for g, n in spec.sizes.items()}
    b_aligned = apply_permutation(spec, b.state_dict(), perms)
    merged = interpolate_state(a.state_dict(), b_aligned, 0.5)
    mean = average_states([a.state_dict(), b_aligned])
    for state in (b_aligned, merged, mean):
        assert state._metadata == a.state_dict()._metadata
        tvm.mnasnet0_5(num_classes=10).load_state_dict(state, strict=True)
    assert versioned(a)
    digest = save_tensors(tmp_path / "m.safetensors", checkpoint_state(a), {"x": 1})
    loaded, meta = load_tensors(tmp_path / "m.safetensors", expected_sha256=digest)
    assert meta == {"x": 1} and loaded._metadata == a.state_dict()._metadata
    c = tvm.mnasnet0_5(num_classes=10)
    c.load_state_dict(loaded, strict=True)
    assert all(torch.equal(v, a.state_dict()[k]) for k, v in c.state_dict().items())
    # a state without _metadata (a plain dict) fails as PyTorch's own loading does, and loads through load_into
    plain = dict(merged)
    with pytest.raises(ValueError, match="version"):
        tvm.mnasnet0_5(num_classes=10).load_state_dict(plain)
    load_into(tvm.mnasnet0_5(num_classes=10), plain)


def test_unversioned_models_write_checkpoints_without_torch_metadata(tmp_path):
    """lmcflow's own models do not read versions: their checkpoint bytes stay what they were."""
    model = build_model(ModelSpec(arch="mlp", in_shape=(1, 28, 28), num_classes=10, width=0.125, depth=2))
    assert not versioned(model)
    save_tensors(tmp_path / "a.safetensors", checkpoint_state(model))
    save_tensors(tmp_path / "b.safetensors", dict(model.state_dict()))
    assert (tmp_path / "a.safetensors").read_bytes() == (tmp_path / "b.safetensors").read_bytes()
