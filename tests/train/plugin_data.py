"""A plug-in dataset with a validation factory (`data.val`), as docs/train.md describes:
both factories are called with `data.args`; items are (inputs, targets)."""

from __future__ import annotations

import torch
from torch.utils.data import Dataset


class Blobs(Dataset):
    """`samples` points in `features` dimensions, `classes` labels, fixed by `seed`."""

    def __init__(self, samples: int, features: int, classes: int, seed: int) -> None:
        centres = torch.randn(classes, features, generator=torch.Generator().manual_seed(0))
        generator = torch.Generator().manual_seed(seed)
        self.targets = torch.randint(0, classes, (samples,), generator=generator)
        self.inputs = centres[self.targets] + torch.randn(samples, features, generator=generator)
        self.info = {"in_features": features, "num_classes": classes}

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.inputs[index], self.targets[index]


def make_train(
    samples: int = 64, val_samples: int = 7, features: int = 4, classes: int = 3
) -> Blobs:
    """The training set (`data.name`)."""
    return Blobs(samples, features, classes, seed=1)


def make_val(samples: int = 64, val_samples: int = 7, features: int = 4, classes: int = 3) -> Blobs:
    """The validation set (`data.val`): other points of the same classes."""
    return Blobs(val_samples, features, classes, seed=2)
