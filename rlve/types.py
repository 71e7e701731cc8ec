"""The data that crosses rlve's boundaries: episodes, rollout groups and training batches.

Everything here is a plain dataclass. Environments produce `Trajectory`s, the episode runner
bundles the rollouts of one example into a `RolloutGroup`, and the trainer consumes groups.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # tensors only appear in annotations; importing types.py stays torch-free
    from torch import Tensor

Message = dict[str, Any]
"""One chat message, OpenAI style: {"role": ..., "content": ...} (tool calls as extra keys)."""


@dataclass
class Example:
    """One row of an environment's dataset: what an episode starts from."""

    example_id: int
    prompt: list[Message]
    answer: str = ""
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class SideSequence:
    """A side call of an episode (the REPL's `llm()`) as a token sequence: the rendered prompt
    (mask 0) and the sampled answer (mask 1, with the sampler's log-probs)."""

    token_ids: list[int]
    loss_mask: list[int]
    sampler_logprobs: list[float]


@dataclass
class TeacherView:
    """What a distillation teacher reads of an episode (trainer.distill.privileged): the
    environment's `privileged_view` of its prompt and of each reply, rendered by the same chat
    template, and between them the student's sampled ids exactly as sampled."""

    token_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    """1 exactly on the sampled ids: the same ids, in the same order, as the trajectory's"""

    def append(self, ids: list[int], mask: int) -> None:
        self.token_ids.extend(ids)
        self.loss_mask.extend([mask] * len(ids))


@dataclass(frozen=True)
class Fault:
    """Something outside the model that spoiled an episode or a problem (rlve.rollout.faults)."""

    kind: str
    """"generator_error", "env_error", "engine_error", "timeout" or "verifier_error\""""
    message: str
    """what went wrong, for the logs and for the report of a run stopped by its fault rate"""


@dataclass
class Trajectory:
    """One finished episode, token-exact when the engine works on token ids.

    `token_ids` is the whole episode as one flat sequence: the rendered prompt, then for each
    turn the sampled completion followed by the tokens of the environment's reply. `loss_mask`
    is 1 exactly on sampled tokens; `sampler_logprobs` holds the sampler's log-prob of each token
    (0.0 where the mask is 0). `turn_spans` are the [start, end) ranges of each sampled
    completion inside `token_ids`. Text-only engines leave the four token fields empty.
    """

    prompt: list[Message]
    completion: list[Message]
    answer: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    token_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    sampler_logprobs: list[float] = field(default_factory=list)
    turn_spans: list[tuple[int, int]] = field(default_factory=list)
    reward: float = 0.0
    """the task's reward (the rubric's score): what accuracy, dynamic sampling, the curriculum and
    the reward/* metrics read"""
    shaping: float = 0.0
    """added to `reward` for training only (DAPO's overlong penalty): advantages are computed
    from `trained_reward`"""
    turn_shaping: list[float] = field(default_factory=list)
    """per model turn, the part of `shaping` it earned (its own overlong penalty): per-turn
    credit charges it at that turn; empty when nothing was shaped"""
    metrics: dict[str, float] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    stop_reason: str = ""
    env_name: str = ""
    example_id: int = 0
    difficulty: int | None = None
    seed: int | None = None
    weight_version: int = 0
    """the oldest weights version that sampled a token of it (its lag is counted from this)"""
    turn_versions: list[int] = field(default_factory=list)
    """the weights version that sampled each turn of `turn_spans` (the engines hold a weight push
    until the turns in flight end, so every token of a turn has its turn's version); versions
    differ only when rollouts span pushes (`rollout.max_staleness`)"""
    num_turns: int = 0
    truncated_turns: int = 0
    side_sequences: list[SideSequence] = field(default_factory=list)
    """side calls trained with this trajectory's advantage; empty unless the environment sets
    `train_side_calls` (PythonREPLEnv's train_on_sub_calls)"""
    fault: Fault | None = None
    """the fault that ended or spoiled this episode, None for a clean one (`faults/<kind>`)"""
    turn_rewards: list[float] = field(default_factory=list)
    """per model turn, the part of `reward` it earned (`Environment.reward_turn`); empty when
    the environment credits no turn"""
    teacher_view: TeacherView | None = None
    """the episode as a distillation teacher with a privileged view reads it; None: as played"""
    seats: list[Trajectory] = field(default_factory=list)
    """the game's other players when the policy plays them too (self-play, rlve.rollout.seat):
    each with its own reward, trained against the same seat of the group's other games"""

    @property
    def prompt_len(self) -> int:
        """Tokens before the first sampled token (the rendered prompt)."""
        return self.turn_spans[0][0] if self.turn_spans else len(self.token_ids)

    @property
    def num_sampled_tokens(self) -> int:
        return sum(self.loss_mask)

    @property
    def version_span(self) -> int:
        """How many weights versions sampled its turns (1 for a rollout within one version)."""
        return max(self.turn_versions) - min(self.turn_versions) + 1 if self.turn_versions else 1

    @property
    def trained_reward(self) -> float:
        """The reward the advantages compare: the task's, plus shaping."""
        return self.reward + self.shaping

    @property
    def is_token_exact(self) -> bool:
        return bool(self.token_ids)


@dataclass
class RolloutGroup:
    """The rollouts of one example: the unit of group-relative advantages."""

    example_id: int
    env_name: str
    trajectories: list[Trajectory]
    difficulty: int | None = None

    @property
    def clean(self) -> list[Trajectory]:
        """The rollouts no fault spoiled: the only ones trained on and counted by the curriculum
        (a faulty one's score says nothing about the model: `faults/*` counts it instead)."""
        return [t for t in self.trajectories if t.fault is None]

    @property
    def rewards(self) -> list[float]:
        """The task rewards of the clean rollouts."""
        return [t.reward for t in self.clean]

    @property
    def has_signal(self) -> bool:
        """False when the clean rollouts all got the same task reward, or fewer than two are
        clean, and so did each self-play seat of them: no group-relative learning signal
        (shaping alone does not count, as in DAPO)."""
        clean = self.clean
        compared = [clean, *seat_rosters(clean)]  # each compared within itself
        return any(
            len(rollouts) > 1 and any(t.reward != rollouts[0].reward for t in rollouts)
            for rollouts in compared
        )


def seat_rosters(rollouts: list[Trajectory]) -> list[list[Trajectory]]:
    """The self-play seats of `rollouts` by position: list k holds the k-th seat of each rollout
    that has one, in the rollouts' order. Each list is compared within itself, as a group's
    rollouts are (advantages, dynamic sampling)."""
    positions = max((len(t.seats) for t in rollouts), default=0)
    return [[t.seats[k] for t in rollouts if len(t.seats) > k] for k in range(positions)]


Span = tuple[int, int]
"""[start, end) of a run of consecutive positions"""


@dataclass(frozen=True)
class Segment:
    """The nodes one sequence adds to a `PrefixTree`, and the nodes before them on its path."""

    nodes: Span
    ancestors: tuple[Span, ...]
    """the runs of nodes holding the prefix it shares with earlier sequences, in order"""


@dataclass(frozen=True)
class Bucket:
    """Segments of a `PrefixTree` batched into one sdpa call (rlve.training.tree_buckets): S of
    them, padded to Q queries and K keys."""

    query_index: Tensor
    """[S, Q] long: the node of each query row (0 in padding)"""
    key_index: Tensor
    """[S, K] long: the node of each key column, ancestors then own nodes (0 in padding)"""
    mask: Tensor
    """[S, 1, Q, K] bool: which keys each query row sees"""
    real_rows: Tensor
    """[R] long: the flat rows (s * Q + i) that hold a real query, in node order within a
    segment, segment after segment"""


@dataclass(frozen=True)
class TreeBuckets:
    """Every segment of a tree in some bucket; `node_order` puts the outputs back in node order."""

    buckets: tuple[Bucket, ...]
    node_order: Tensor
    """[N] long: for node n, its row in the buckets' real rows written one after another"""

    def to(self, device: Any) -> TreeBuckets:
        moved = tuple(
            Bucket(
                b.query_index.to(device),
                b.key_index.to(device),
                b.mask.to(device),
                b.real_rows.to(device),
            )
            for b in self.buckets
        )
        return TreeBuckets(moved, self.node_order.to(device))


@dataclass(frozen=True)
class FlexPlan:
    """A `PrefixTree`'s attention as one FlexAttention call (rlve.training.tree_flex), made on
    the device it runs on."""

    block_mask: Any
    """torch's BlockMask over the padded nodes, its mask_mod reading a tensor on that device"""
    padded: int
    """nodes after padding (a multiple of tree_flex.PAD_NODES): one compile per length"""
    device: str

    def to(self, device: Any) -> FlexPlan:
        if str(device) != self.device:
            raise ValueError(f"a FlexPlan made on {self.device} cannot move to {device}: make it "
                             "there (rlve.training.tree_plan.with_attention_plan)")  # fmt: skip
        return self


@dataclass(frozen=True)
class PrefixTree:
    """One decoder pass over the distinct prefixes of a packed micro-batch's sequences
    (rlve.algorithms.prefix_tree builds it): a row of N nodes, each a token that begins alike
    in one or more sequences, attending to its ancestors and to the earlier nodes of its
    segment."""

    input_ids: Tensor
    """[1, N] long, the token of each node"""
    position_ids: Tensor
    """[1, N] long, each node's position within the sequences through it (its depth)"""
    node_index: Tensor
    """[B, T] long, aligned with the micro-batch's rows: the node of each token"""
    segments: tuple[Segment, ...]
    """one per sequence with tokens not shared with an earlier one, in node order"""
    key_index: Tensor
    """[K] long: the nodes each segment's attention reads, segment after segment, its ancestors'
    runs then its own nodes (K is the sum of their lengths)"""
    plan: TreeBuckets | FlexPlan | None = None
    """how the attention runs over it (rlve.training.tree_plan): its segments batched into a
    few calls, or one FlexAttention call; None: one sdpa call per segment"""

    @property
    def num_nodes(self) -> int:
        return int(self.input_ids.shape[1])

    def to(self, device: Any) -> PrefixTree:
        return PrefixTree(
            input_ids=self.input_ids.to(device),
            position_ids=self.position_ids.to(device),
            node_index=self.node_index.to(device),
            segments=self.segments,
            key_index=self.key_index.to(device),
            plan=None if self.plan is None else self.plan.to(device),
        )


@dataclass
class MicroBatch:
    """One forward/backward pass of the trainer: rows of token ids, in one of two layouts.

    Padded (`position_ids` None): one sequence per row, right-padded; padding has attention 0 and
    loss mask 0. Packed (`position_ids` set): sequences end to end in a row, none padded, and
    attention never crosses from one sequence into another (rlve.training.packed_attention).
    Every tensor is [B, T] and aligned with `input_ids`: position t describes token t (its loss
    mask, its advantage, the sampler's log-prob of it).
    """

    input_ids: Tensor
    """[B, T] long token ids"""
    attention_mask: Tensor
    """[B, T] long, 1 on real tokens"""
    loss_mask: Tensor
    """[B, T] bool, True on the tokens that are trained on (sampled / assistant tokens)"""
    advantages: Tensor
    """[B, T] float32, the sequence's advantage on its masked tokens and 0 elsewhere"""
    sampler_logprobs: Tensor | None
    """[B, T] float32 sampler log-probs (0 off the mask); None when a row has none"""
    sequence_index: list[int]
    """the positions of this micro-batch's sequences in the list the batch was built from, in the
    order of their rows (and, packed, of their places in a row)"""
    old_logprobs: Tensor | None = None
    """[B, T] log-probs under the weights before this step, filled by the trainer when needed"""
    ref_logprobs: Tensor | None = None
    """[B, T] log-probs under the reference model, filled by the trainer when kl_beta > 0"""
    position_ids: Tensor | None = None
    """[B, T] long, each token's position within its own sequence (0 where a sequence starts):
    set for packed rows, None for padded rows (there, positions count from each row's start)"""
    prefix_tree: PrefixTree | None = None
    """packed rows only: the decoder runs on this tree of their distinct prefixes instead of the
    rows, each token reading its hidden state from its node (None: the rows are forwarded)"""

    @property
    def num_loss_tokens(self) -> int:
        return int(self.loss_mask.sum().item())


@dataclass
class TrainBatch:
    """One optimizer step's sequences, packed into micro-batches by a token budget."""

    micro_batches: list[MicroBatch]
    num_sequences: int
    """sequences over all micro-batches (GRPO scales each micro-batch by its share of these)"""
    num_loss_tokens: int
    """masked tokens over all micro-batches: the token-level losses' denominator"""
    skipped_tokens: int = 0
    """tokens of the sequences left out of every pass (all their advantages 0, no KL term):
    counted in `num_sequences` and `num_loss_tokens`, where their loss terms are exactly 0"""

    @property
    def forward_tokens(self) -> int:
        """Positions the decoder runs on, per pass: a micro-batch's tree nodes, else its rows."""
        return sum(
            m.prefix_tree.num_nodes if m.prefix_tree is not None else m.input_ids.numel()
            for m in self.micro_batches
        )
