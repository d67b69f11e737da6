"""Train the example's models with plain PyTorch (no lmcflow), as a user would, and save them where
examples/imported/config.yaml reads them: seeds 0 and 1 as safetensors, seed 2 as a torch file of its state_dict.

    python examples/imported/train_checkpoints.py [OUT_DIR]   # default: checkpoints/ (relative to the cwd)
"""
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout, for `examples.imported`
from examples.imported.data import datasets  # noqa: E402
from examples.imported.net import build  # noqa: E402


def train(seed: int, epochs: int = 3):
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    train_set, _, _ = datasets()
    x, y = train_set.tensors
    model = build(num_classes=4, in_shape=(1, 8, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for _ in range(epochs):
        for idx in torch.randperm(len(x)).split(64):
            opt.zero_grad()
            F.cross_entropy(model(x[idx]), y[idx]).backward()
            opt.step()
    return model.eval()


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "checkpoints")
    out.mkdir(parents=True, exist_ok=True)
    for seed in (0, 1, 2):
        state = {k: v.contiguous() for k, v in train(seed).state_dict().items()}
        if seed < 2:
            save_file(state, out / f"model-{seed}.safetensors")
        else:
            torch.save(state, out / f"model-{seed}.pt")
        print(f"seed {seed}: wrote {out}")
