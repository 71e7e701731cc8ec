"""trainer.tree_attention resolved per device, and the plan a micro-batch's tree carries."""

from __future__ import annotations

import pytest
import torch

from rlve.algorithms.packing import build_train_batch
from rlve.training.tree_plan import resolved, with_attention_plan
from rlve.types import TreeBuckets
from tests.unit.test_prefix_sharing import grouped_sequences

CPU, CUDA = torch.device("cpu"), torch.device("cuda")


def test_auto_is_one_call_per_segment_on_the_cpu_and_buckets_on_a_gpu():
    assert (resolved("auto", CPU), resolved("auto", CUDA)) == ("segments", "buckets")
    assert (resolved("buckets", CPU), resolved("segments", CUDA)) == ("buckets", "segments")
    assert resolved("flex", CUDA) == "flex"
    with pytest.raises(ValueError, match="no FlexAttention backward on the CPU"):
        resolved("flex", CPU)


def test_the_batch_carries_the_plan_of_each_tree():
    batch = build_train_batch(grouped_sequences(), max_tokens=2048, pad_token_id=0,
                              packing="packed", single_row=True, share_prefixes=True)  # fmt: skip
    assert with_attention_plan(batch, "auto", CPU) is batch  # one call per segment: no plan
    planned = with_attention_plan(batch, "buckets", CPU)
    for micro in planned.micro_batches:
        plan = micro.prefix_tree.plan
        assert isinstance(plan, TreeBuckets)
        assert sum(b.query_index.shape[0] for b in plan.buckets) == len(micro.prefix_tree.segments)
        assert isinstance(micro.prefix_tree.to("cpu").plan, TreeBuckets)


def test_a_cpu_trainer_refuses_flex_at_start():
    from rlve.config import TrainerConfig
    from rlve.training.trainer import Trainer

    with pytest.raises(ValueError, match="trainer.tree_attention=flex"):
        Trainer(TrainerConfig(tree_attention="flex", device="cpu"))
