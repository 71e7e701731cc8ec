"""A push's weights produced one tensor at a time, with their layout known before the first.

Under FSDP2 each full tensor exists only once every rank has gathered it, so a push that listed
its tensors to learn their names and shapes would hold a whole unsharded model on rank 0 (in
fp32, for full fine-tuning: the out-of-memory of exactly the models that need FSDP). The
trainer knows every name, dtype and shape from its state dict without gathering anything
(a DTensor's shape is the whole tensor's), so a transport can lay out its file or announce its
broadcast first and then take the tensors as they come, holding one at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import torch

NamedTensors = Iterable[tuple[str, torch.Tensor]]

Layout = tuple[tuple[str, torch.dtype, tuple[int, ...]], ...]
"""(name, dtype, shape) of every tensor of a push, in order"""


@dataclass(frozen=True)
class WeightStream:
    """The tensors of a push (read once, in `layout`'s order) and their layout."""

    layout: Layout
    tensors: NamedTensors

    def __iter__(self) -> Iterator[tuple[str, torch.Tensor]]:
        """The tensors, each checked against the layout; one too many or too few is an error."""
        count = 0
        for (name, dtype, shape), (given, tensor) in zip(self.layout, self.tensors, strict=True):
            if (given, tensor.dtype, tuple(tensor.shape)) != (name, dtype, shape):
                raise ValueError(
                    f"weight {count}: the layout says {name} {dtype} {list(shape)}, the stream "
                    f"gave {given} {tensor.dtype} {list(tensor.shape)}"
                )
            count += 1
            yield given, tensor

    def cast(self, wire: Callable[[torch.dtype], torch.dtype]) -> WeightStream:
        """The same stream with each tensor converted to `wire(its dtype)` as it passes."""
        layout = tuple((name, wire(dtype), shape) for name, dtype, shape in self.layout)
        tensors = ((name, tensor.to(wire(tensor.dtype))) for name, tensor in self)
        return WeightStream(layout, tensors)

    def without(self, name: str) -> WeightStream:
        """The stream less the tensor `name` (an export leaves out a tied output head)."""
        layout = tuple(entry for entry in self.layout if entry[0] != name)
        return WeightStream(layout, ((n, t) for n, t in self if n != name))


def as_stream(named_tensors: NamedTensors | WeightStream) -> WeightStream:
    """A stream as it is; other tensors (already held, all of them) listed to learn their
    layout."""
    if isinstance(named_tensors, WeightStream):
        return named_tensors
    listed = list(named_tensors)
    return WeightStream(layout_of(listed), listed)


def layout_of(tensors: Iterable[tuple[str, torch.Tensor]]) -> Layout:
    return tuple((name, t.dtype, tuple(t.shape)) for name, t in tensors)
