"""The example's dataset factory (``data.custom.blobs.factory: examples.imported.data:datasets``): any function
returning (train, val, test) datasets of (input tensor, integer label) items; val may be None."""
import torch
from torch.utils.data import TensorDataset


def datasets(n_train: int = 1200, n_test: int = 400, classes: int = 4, seed: int = 0):
    """Greyscale 8x8 images: one fixed pattern per class plus noise."""
    g = torch.Generator().manual_seed(seed)
    patterns = torch.randn(classes, 1, 8, 8, generator=g)

    def split(n):
        y = torch.randint(0, classes, (n,), generator=g)
        return TensorDataset(patterns[y] + 3.0 * torch.randn(n, 1, 8, 8, generator=g), y)

    return split(n_train), None, split(n_test)  # val: carved from train by data.val_size
