"""The bundled datasets, the user's dataset plug-in, the validation split, and the resumable
stream of batches."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sized
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler, Sampler, Subset

from train.config.load import DataConfig
from train.parts.plugins import PluginError, call_factory

BUNDLED_CORPUS = Path(__file__).resolve().parents[1] / "data" / "corpus.txt"


class SyntheticBlobs(Dataset[Any]):
    """Gaussian blobs around `classes` random centres: separable for a large `separation`."""

    def __init__(
        self, samples: int, features: int, classes: int, separation: float, seed: int
    ) -> None:
        generator = torch.Generator().manual_seed(seed)
        centres = torch.randn(classes, features, generator=generator) * separation
        self.targets = torch.randint(0, classes, (samples,), generator=generator)
        noise = torch.randn(samples, features, generator=generator)
        self.inputs = centres[self.targets] + noise
        self.info = {"in_features": features, "num_classes": classes}

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.inputs[index], self.targets[index]


class CharWindows(Dataset[Any]):
    """Windows of a text file as character ids: input window and the next-character targets."""

    def __init__(self, path: str | None, context: int, stride: int | None) -> None:
        text = Path(path or BUNDLED_CORPUS).read_text(encoding="utf-8")
        vocab = sorted(set(text))
        self.vocab = "".join(vocab)
        lookup = {char: index for index, char in enumerate(vocab)}
        self.ids = torch.tensor([lookup[char] for char in text], dtype=torch.long)
        self.context = context
        self.starts = list(range(0, len(self.ids) - context - 1, stride or context))
        self.info = {
            "vocab_size": len(vocab),
            "context": context,
            "tokens_per_sample": context,
        }

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        start = self.starts[index]
        window = self.ids[start : start + self.context + 1]
        return window[:-1], window[1:]

    def holdout(self, fraction: float) -> tuple[Subset[Any], Subset[Any]]:
        """(training, validation) windows: the validation windows are the last `fraction` of
        them, the training ones end before the first of those begins (no shared character)."""
        first_val = len(self.starts) - max(1, int(len(self.starts) * fraction))
        cut = self.starts[first_val]
        train = [i for i in range(first_val) if self.starts[i] + self.context + 1 <= cut]
        return Subset(self, train), Subset(self, range(first_val, len(self.starts)))


def build_dataset(config: DataConfig) -> tuple[Dataset[Any], dict[str, Any]]:
    """The dataset named by data.name and its info dict (sizes the model needs)."""
    if config.name == "synthetic":
        dataset: Any = SyntheticBlobs(**config.args)
    elif config.name == "chars":
        dataset = CharWindows(**config.args)
    else:
        dataset = call_factory(config.name, **config.args)
    map_style = isinstance(dataset, Sized) and hasattr(dataset, "__getitem__")
    if not map_style:
        raise PluginError(
            f"{config.name} returned {type(dataset).__name__}, not a map-style Dataset"
            " (with __len__ and __getitem__)"
        )
    info = dict(getattr(dataset, "info", None) or {})
    return dataset, info


def holdout_split(dataset: Dataset[Any], fraction: float) -> tuple[Dataset[Any], Dataset[Any]]:
    """(training, validation) parts of a bundled dataset: the validation part is its last
    `fraction` of samples (at least one), the same on every rank and every run."""
    split = getattr(dataset, "holdout", None)
    if callable(split):
        train, val = split(fraction)
        return train, val
    size = len(dataset)  # type: ignore[arg-type]
    first_val = size - max(1, int(size * fraction))
    return Subset(dataset, range(first_val)), Subset(dataset, range(first_val, size))


def build_val_dataset(config: DataConfig) -> Dataset[Any]:
    """A plug-in's validation set: `data.val` called with `data.args`."""
    assert config.val is not None
    dataset = call_factory(config.val, **config.args)
    if not isinstance(dataset, Sized) or not hasattr(dataset, "__getitem__"):
        raise PluginError(
            f"{config.val} returned {type(dataset).__name__}, not a map-style Dataset"
            " (with __len__ and __getitem__)"
        )
    return dataset  # type: ignore[return-value]


def to_device(batch: Any, device: torch.device) -> Any:
    """`batch` (a tensor, or lists, tuples and dicts of them) moved to `device`."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(item, device) for item in batch)
    if isinstance(batch, dict):
        return {key: to_device(value, device) for key, value in batch.items()}
    return batch


class _SkipFirst(Sampler[int]):
    """The indices of `sampler` after the first `skip` of them."""

    def __init__(self, sampler: DistributedSampler[Any], skip: int) -> None:
        self.sampler = sampler
        self.skip = skip

    def __iter__(self) -> Iterator[int]:
        return itertools.islice(iter(self.sampler), self.skip, None)

    def __len__(self) -> int:
        return max(0, len(self.sampler) - self.skip)


class BatchStream:
    """Batches for one rank, epoch after epoch, resumable at (epoch, batch in epoch).

    The order depends only on the seed, epoch and rank (DistributedSampler, drop_last), so
    a resumed run sees exactly the batches an uninterrupted one would have seen.
    """

    def __init__(
        self,
        dataset: Dataset[Any],
        sampler: DistributedSampler[Any],
        batch_size: int,
        num_workers: int,
        epoch: int = 0,
        position: int = 0,
        pin_memory: bool = False,
    ) -> None:
        self.dataset = dataset
        self.sampler = sampler
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.epoch = epoch
        self.position = position
        self.batches_per_epoch = len(sampler) // batch_size
        self._iterator: Iterator[Any] | None = None

    def next(self) -> Any:
        """The next batch; moves to the next epoch (set_epoch) after the last full batch."""
        if self._iterator is None:
            self.sampler.set_epoch(self.epoch)
            loader = DataLoader(
                self.dataset,
                batch_size=self.batch_size,
                sampler=_SkipFirst(self.sampler, self.position * self.batch_size),
                drop_last=True,
                num_workers=self.num_workers,
                pin_memory=self.pin_memory,
                # Its own generator: making an iterator must not draw from the global RNG.
                generator=torch.Generator().manual_seed(self.epoch),
            )
            self._iterator = iter(loader)
        batch = next(self._iterator)
        self.position += 1
        if self.position >= self.batches_per_epoch:
            self.epoch += 1
            self.position = 0
            self._iterator = None
        return batch

    def state(self) -> tuple[int, int]:
        """(epoch, index of the next batch within it)."""
        return self.epoch, self.position
