"""Sequences that begin alike, forwarded once: the prefix tree of a micro-batch.

A causal decoder's hidden state at position t depends only on tokens 0..t, so two sequences that
share their first l tokens have the same hidden states there. The games of a rollout group share
their prompt (and often their first turns: the environment's seeded replies repeat), and every
sequence of a run shares the system prompt. Sorted in lexicographic order, a sequence shares the
most with the one just before it; its tokens after that common prefix become the tree's new
nodes, attending to the nodes of the prefix (its ancestors) and causally to each other. The
trainer runs the decoder on the nodes only and reads each sequence's hidden states through
`node_index`, so forward and backward see every distinct prefix once and the gradients are those
of the separate sequences, up to the order of float sums.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from rlve.types import PrefixTree, Segment, Span


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Number of leading tokens `a` and `b` share. Example: [1, 2, 3], [1, 2, 5, 6] -> 2."""
    limit = min(len(a), len(b))
    for i in range(limit):
        if a[i] != b[i]:
            return i
    return limit


def lexicographic_order(sequences: Sequence[Sequence[int]]) -> list[int]:
    """Indices of `sequences` in lexicographic order of their tokens (ties by index): each one
    then shares with the one before it the longest prefix it shares with any earlier one."""
    return sorted(range(len(sequences)), key=lambda i: (list(sequences[i]), i))


def new_tokens(sequences: Sequence[Sequence[int]]) -> list[int]:
    """For `sequences` in the order given, how many tokens each adds to the tree of those before
    it: its length minus its common prefix with the previous one (exact in lexicographic order).
    Example: [[1, 2, 3], [1, 2, 4, 5], [1, 2, 4, 5]] -> [3, 2, 0]."""
    added, previous = [], []
    for tokens in sequences:
        added.append(len(tokens) - common_prefix(previous, tokens))
        previous = tokens
    return added


def _truncate(path: list[Span], length: int) -> tuple[Span, ...]:
    """The first `length` nodes of a path given as runs."""
    kept = []
    for start, end in path:
        if length <= 0:
            break
        kept.append((start, min(end, start + length)))
        length -= end - start
    return tuple(kept)


def build_prefix_tree(sequences: Sequence[Sequence[int]]) -> PrefixTree:
    """The prefix tree of `sequences`, taken in the order given (lexicographic order shares
    every common prefix; another order shares only prefixes with the previous sequence).

    Example: [[5, 6, 7], [5, 6, 8, 9]] -> nodes [5, 6, 7, 8, 9] at positions [0, 1, 2, 2, 3];
    node_index [0, 1, 2, 0, 1, 3, 4]; segments (0, 3) with no ancestors and (3, 5) after
    ((0, 2),); key_index [0, 1, 2, 0, 1, 3, 4].
    """
    ids: list[int] = []
    positions: list[int] = []
    node_index: list[int] = []
    segments: list[Segment] = []
    key_index: list[int] = []
    previous: Sequence[int] = []
    path: list[Span] = []
    for tokens in sequences:
        shared = common_prefix(previous, tokens)
        ancestors = _truncate(path, shared)
        start = len(ids)
        ids += tokens[shared:]
        positions += range(shared, len(tokens))
        own = (start, len(ids))
        path = [*ancestors, own]
        path_nodes = [n for first, end in path for n in range(first, end)]
        if own[1] > own[0]:
            segments.append(Segment(nodes=own, ancestors=ancestors))
            key_index += path_nodes
        node_index += path_nodes
        previous = tokens
    return PrefixTree(
        input_ids=torch.tensor([ids], dtype=torch.long),
        position_ids=torch.tensor([positions], dtype=torch.long),
        node_index=torch.tensor([node_index], dtype=torch.long),
        segments=tuple(segments),
        key_index=torch.tensor(key_index, dtype=torch.long),
    )


def pack_by_new_tokens(sequences: Sequence[Sequence[int]], max_tokens: int) -> list[list[int]]:
    """Indices of `sequences` in lexicographic order, cut into micro-batches whose trees have at
    most `max_tokens` nodes (a sequence longer than that gets a tree of its own).
    Example: [[1, 2, 3], [9], [1, 2, 4]], max_tokens 4 -> [[0, 2], [1]] (3 + 1 nodes, then 1).
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    order = lexicographic_order(sequences)
    batches: list[list[int]] = []
    used = 0
    for index, added in zip(order, new_tokens([sequences[i] for i in order]), strict=True):
        if batches and used + added <= max_tokens:
            batches[-1].append(index)
            used += added
        else:
            batches.append([index])
            used = len(sequences[index])
    return batches
