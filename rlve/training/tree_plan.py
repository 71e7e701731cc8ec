"""How a micro-batch's prefix tree is attended: `trainer.tree_attention` resolved for the
trainer's device, and the plan made once per micro-batch for every layer to read.

"segments": one sdpa call per segment (rlve.training.tree_attention, no plan). "buckets":
segments of like shapes batched (rlve.training.tree_buckets). "flex": one FlexAttention call
(rlve.training.tree_flex; GPUs only: torch 2.13 has no FlexAttention backward on the CPU).
"auto": segments on the CPU, where buckets were no faster (docs/benchmarks.md, "The prefix
tree's attention in buckets"); buckets on a GPU, where every call is a kernel launch.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from rlve.training.tree_buckets import plan_buckets
from rlve.types import TrainBatch


def resolved(choice: str, device: torch.device) -> str:
    """`choice` with "auto" replaced by what it picks on `device`; "flex" on a CPU refused."""
    if choice == "flex" and device.type == "cpu":
        raise ValueError(
            "trainer.tree_attention=flex: torch has no FlexAttention backward on the CPU; "
            "use segments (auto) or buckets there"
        )
    if choice == "auto":
        return "segments" if device.type == "cpu" else "buckets"
    return choice


def with_attention_plan(batch: TrainBatch, choice: str, device: torch.device) -> TrainBatch:
    """`batch` with each micro-batch's prefix tree planned as `choice` (TrainerConfig
    .tree_attention) runs it on `device`; as it is where that is one call per segment."""
    how = resolved(choice, device)
    if how == "segments":
        return batch
    if how == "flex":
        from rlve.training.tree_flex import plan_flex

        def plan(tree):
            return plan_flex(tree, device)
    else:
        plan = plan_buckets
    micro_batches = [
        micro if micro.prefix_tree is None
        else replace(micro, prefix_tree=replace(micro.prefix_tree, plan=plan(micro.prefix_tree)))
        for micro in batch.micro_batches
    ]  # fmt: skip
    return replace(batch, micro_batches=micro_batches)
