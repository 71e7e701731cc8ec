"""An agent's calls recorded token for token: what one agent session trains on.

An agent (rlve.envs.agent) sends its whole conversation on every call. The record keeps each
call's prompt ids, the sampled ids and the sampler's log-probs in one growing sequence, a
segment, as an episode does. A call continues a segment when its rendered conversation starts
with the segment's text: its last call rendered with the answer the agent got back. Then only the
text past that prefix is tokenized and appended after the recorded ids (the rest of the template's
end-of-turn marker, the new messages, the generation prompt); the sampled ids are never
re-tokenized. Otherwise the agent rewrote its history (a template dropped an earlier think block,
the agent edited, summarized or re-rendered a message) and the call starts a new segment, a new
training sample: counted in `splits`, with the tokens past the common prefix in `drift_tokens`.
A call that extends a segment another call of the same session extended meanwhile (parallel calls,
`n` > 1) branches: a new segment too, counted in `branches`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rlve.algorithms.prefix_tree import common_prefix
from rlve.inference.engine import Generation
from rlve.rollout.chat_tokens import ChatTokens
from rlve.types import Message, SideSequence


@dataclass
class Segment:
    """One training sample of an agent session: a token-exact sequence of its calls."""

    token_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    turn_spans: list[tuple[int, int]] = field(default_factory=list)
    calls: list[int] = field(default_factory=list)
    """the session's index of the call that sampled each turn"""
    versions: list[int] = field(default_factory=list)
    """the weights version that sampled each turn"""
    text: str = ""
    """the conversation through its last answer, as the template renders it"""

    def append(self, ids: list[int], mask: int, logprobs: list[float] | None = None) -> None:
        self.token_ids.extend(ids)
        self.loss_mask.extend([mask] * len(ids))
        self.logprobs.extend(logprobs if logprobs is not None else [0.0] * len(ids))

    def as_side_sequence(self) -> SideSequence:
        return SideSequence(self.token_ids, self.loss_mask, self.logprobs)


@dataclass(frozen=True)
class CallPlan:
    """Where a call's prompt comes from: the segment it continues (None: a new one), that
    segment's length when the call was planned, and the prompt ids to sample after."""

    segment: int | None
    base_len: int
    prompt_ids: list[int]
    drift_tokens: int = 0
    rewrote: bool = False
    """the call's conversation continues none of the segments there were: a split"""


class AgentRecord:
    """The segments of one agent session (see the module's docstring)."""

    def __init__(self) -> None:
        self.segments: list[Segment] = []
        self.splits = 0
        self.branches = 0
        self.drift_tokens = 0
        self.calls = 0
        self.truncated = 0
        """calls whose answer hit the token limit"""

    def plan(self, chat: ChatTokens, messages: list[Message]) -> CallPlan:
        """The prompt of a call with `messages` (already `template_messages`)."""
        text = chat.render(messages, generation_prompt=True)
        for index in reversed(range(len(self.segments))):
            segment = self.segments[index]
            if text.startswith(segment.text):
                start, end = segment.turn_spans[-1]
                bridge = chat.turn_end_rest(segment.token_ids[start:end])
                bridge += chat.encode(text[len(segment.text) :])
                return CallPlan(index, len(segment.token_ids), segment.token_ids + bridge)
        ids = chat.encode(text)
        if not self.segments:
            return CallPlan(None, 0, ids)
        drift = len(ids) - common_prefix(ids, self.segments[-1].token_ids)
        return CallPlan(None, 0, ids, drift_tokens=drift, rewrote=True)

    def record(self, plan: CallPlan, generation: Generation, turn_text: str) -> int:
        """Append a sampled call (planned as `plan`) and return its call index. `turn_text`:
        the call's messages and its answer rendered without a generation prompt."""
        segment = self.segments[plan.segment] if plan.segment is not None else None
        if segment is None or len(segment.token_ids) != plan.base_len:
            if plan.rewrote:
                self.splits += 1
                self.drift_tokens += plan.drift_tokens
            elif self.segments:  # another call of the same conversation was recorded first
                self.branches += 1
            segment = Segment()
            segment.append(plan.prompt_ids, 0)
            self.segments.append(segment)
        else:
            segment.append(plan.prompt_ids[plan.base_len :], 0)
        start = len(segment.token_ids)
        logprobs = list(generation.logprobs) or [0.0] * len(generation.token_ids)
        segment.append(list(generation.token_ids), 1, logprobs)
        segment.turn_spans.append((start, len(segment.token_ids)))
        segment.calls.append(self.calls)
        segment.versions.append(generation.weight_version)
        segment.text = turn_text
        self.truncated += generation.finish_reason == "length"
        self.calls += 1
        return self.calls - 1
