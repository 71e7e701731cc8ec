"""The prefix tree's attention as one FlexAttention call (rlve.training.tree_flex) against the
call per segment: the mask by hand, the forward on the CPU, forward and backward on a GPU."""

from __future__ import annotations

import pytest
import torch

from rlve.algorithms.prefix_tree import build_prefix_tree
from rlve.training.tree_flex import PAD_NODES, plan_flex, visible_until
from tests.unit.test_tree_buckets import SHAPES, check_parity


def test_which_nodes_see_each_node_by_hand():
    # nodes 5 6 7 | 8 9: segment 0 is nodes 0-2; segment 1 is nodes 3-4 after nodes 0-1
    tree = build_prefix_tree([[5, 6, 7], [5, 6, 8, 9]])
    until = visible_until(tree)
    assert until.tolist() == [5, 5, 3, 5, 5]
    sees = [[int(k <= q < until[k]) for k in range(5)] for q in range(5)]
    assert sees == [
        [1, 0, 0, 0, 0],
        [1, 1, 0, 0, 0],
        [1, 1, 1, 0, 0],  # segment 0 causal
        [1, 1, 0, 1, 0],  # segment 1: its ancestors 0-1, not node 2, then causal
        [1, 1, 0, 1, 1],
    ]


def test_the_block_mask_covers_the_nodes_padded():
    tree = build_prefix_tree([[5, 6, 7], [5, 6, 8, 9]])
    plan = plan_flex(tree, "cpu")
    assert plan.padded == PAD_NODES and plan.block_mask.shape[-2:] == (PAD_NODES, PAD_NODES)
    assert plan.to("cpu") is plan
    with pytest.raises(ValueError, match="cannot move to cuda"):
        plan.to("cuda")


@pytest.mark.parametrize("shape", SHAPES, ids=lambda f: f.__name__)
def test_flex_gives_the_per_segment_outputs_on_the_cpu(shape):
    # forward only: torch 2.13 has no FlexAttention backward on the CPU
    check_parity(shape, lambda tree: plan_flex(tree, "cpu"), torch.float32, "cpu", backward=False)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda f: f.__name__)
def test_flex_on_cuda_gives_the_per_segment_outputs_and_gradients(shape, dtype):
    check_parity(shape, lambda tree: plan_flex(tree, "cuda"), dtype, "cuda")
