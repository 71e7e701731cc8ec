"""One model turn of a conversation, sampled into a growing token-exact record.

The episode's own conversation (rlve.rollout.episode) and a self-play seat's (rlve.rollout.seat)
take their turns the same way: the tokens of the environment's pending reply are appended (from
the chat template, once), the turn's sampling settings get their own seed and the room left under
`max_seq_len`, and the sampled tokens go into the record exactly as sampled.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from rlve.envs.base import State
from rlve.inference.engine import (
    Engine,
    EngineFatalError,
    Generation,
    GenerationRequest,
    SamplingConfig,
)
from rlve.reliability.clean_text import clean_messages, without_surrogates
from rlve.rollout.chat_tokens import ChatTemplateError, ChatTokens
from rlve.types import Example, Message, SideSequence, TeacherView

PrivilegedView = Callable[[list[Message], State], "list[Message] | None"]
"""`Environment.privileged_view`: what a teacher reads in place of the student's messages"""


@dataclass(frozen=True)
class EpisodeSettings:
    """How episodes are played, apart from the environment's own rules."""

    max_seq_len: int | None = None
    """longest token sequence of an episode; a turn that would not fit ends it ('context_length')"""
    time_limit_s: float | None = None
    """wall-clock limit per episode, setup included; past it the episode ends as 'timeout' and
    the batch goes on"""
    privileged_view: bool = False
    """also record the episode as the environment's `privileged_view` shows it to a teacher
    (the trajectory's `teacher_view`; trainer.distill.privileged)"""


@dataclass
class EpisodeRecord:
    """A conversation as it grows; read back even when the episode is cut off by its time limit."""

    example: Example
    state: State
    messages: list[Message]
    token_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    turn_spans: list[tuple[int, int]] = field(default_factory=list)
    pending_reply: list[Message] = field(default_factory=list)
    truncated_turns: int = 0
    turn_versions: list[int] = field(default_factory=list)
    """the weights version of each sampled turn"""
    side_sequences: list[SideSequence] = field(default_factory=list)
    prompt: list[Message] | None = None
    """the conversation's own prompt, when it is not the example's (a seat's, or one
    `setup_state` set)"""
    teacher: TeacherView | None = None
    """the conversation as a privileged teacher reads it, grown turn by turn beside it"""

    def append(self, ids: list[int], mask: int, logprobs: list[float] | None = None) -> None:
        self.token_ids.extend(ids)
        self.loss_mask.extend([mask] * len(ids))
        self.logprobs.extend(logprobs if logprobs is not None else [0.0] * len(ids))


class EngineFailure(Exception):
    """One engine request raised or timed out (not an EngineFatalError): this episode ends."""


class EnvironmentFailure(Exception):
    """The environment's own code raised while setting up or answering a turn, or its reply
    could not be tokenized: this episode ends."""


async def sample_turn(
    engine: Engine, chat: ChatTokens | None, record: EpisodeRecord, sampling: SamplingConfig,
    settings: EpisodeSettings, seed: int, tools: list[dict] | None = None,
    view: PrivilegedView | None = None,
) -> Generation | None:  # fmt: skip
    """Sample the next turn of `record` (seed `seed`) and append it, as a message and, with a
    chat template, as tokens. None when not even one token fits under `max_seq_len`. With
    `view` and a `record.teacher`, the teacher's tokens grow beside the student's: the view of
    the prompt or the pending reply, then the same sampled ids."""
    reply_ids: list[int] = []
    teacher = record.teacher if chat is not None else None
    teacher_ids: list[int] = []
    if chat is not None and not record.token_ids:
        record.append(chat.prompt_ids(record.messages), 0)
        if teacher is not None:
            teacher.append(chat.prompt_ids(_viewed(view, record.messages, record.state)), 0)
    elif chat is not None and record.pending_reply:
        last_ids = record.token_ids[record.turn_spans[-1][0] : record.turn_spans[-1][1]]
        shown = _viewed(view, record.pending_reply, record.state) if teacher is not None else []
        try:
            reply_ids = chat.reply_ids(last_ids, record.pending_reply)
            if teacher is not None:
                teacher_ids = chat.reply_ids(last_ids, shown)
        except ChatTemplateError:
            raise
        except Exception as exc:  # text the tokenizer refuses (a lone surrogate...)
            raise EnvironmentFailure(
                f"tokenizing the environment's reply: {type(exc).__name__}: {exc}"
            ) from exc
    turn_sampling = _turn_sampling(sampling, settings, len(record.token_ids) + len(reply_ids), seed)
    if turn_sampling is None:
        return None
    record.append(reply_ids, 0)
    if teacher is not None:
        teacher.append(teacher_ids, 0)
    record.pending_reply = []
    request = GenerationRequest(
        messages=record.messages,
        sampling=turn_sampling,
        prompt_ids=list(record.token_ids) if chat is not None else None,
        tools=tools,
    )
    try:
        generation = await engine.generate(request)
    except EngineFatalError:
        raise
    except Exception as exc:  # a lost request, a server that did not answer in time
        raise EngineFailure(f"{type(exc).__name__}: {exc}") from exc
    # token-exact engines decode their tokens; a remote engine's JSON may hold anything
    assistant: Message = {"role": "assistant", "content": without_surrogates(generation.text)}
    if generation.tool_calls:
        assistant["tool_calls"] = generation.tool_calls
    record.messages.append(assistant)
    if chat is not None:
        start = len(record.token_ids)
        record.append(generation.token_ids, 1, generation.logprobs)
        record.turn_spans.append((start, len(record.token_ids)))
        if teacher is not None:
            teacher.append(list(generation.token_ids), 1)
    record.truncated_turns += generation.finish_reason == "length"
    record.turn_versions.append(generation.weight_version)
    return generation


def _viewed(view: PrivilegedView | None, messages: list[Message], state: State) -> list[Message]:
    """What the teacher reads in place of `messages`: the environment's privileged view of them
    (its text taken `without_surrogates`), or `messages` themselves."""
    try:
        shown = view(messages, state) if view is not None else None
    except Exception as exc:  # the environment's own code: this episode's fault
        raise EnvironmentFailure(f"privileged_view: {type(exc).__name__}: {exc}") from exc
    return messages if shown is None else clean_messages(shown)


def add_reply(record: EpisodeRecord, reply: list[Message]) -> None:
    """The environment's messages after a turn: shown now, tokenized before the next turn (so a
    conversation ends on its last sampled token). Their text is taken `without_surrogates`."""
    reply = clean_messages(reply)
    record.messages.extend(reply)
    record.pending_reply.extend(reply)


def _turn_sampling(
    sampling: SamplingConfig, settings: EpisodeSettings, prompt_len: int, seed: int
) -> SamplingConfig | None:
    """A turn's sampling settings: its own seed, max_tokens cut to the room that is left (None
    when not even one token fits)."""
    sampling = sampling.with_overrides(seed=seed)
    if settings.max_seq_len is None or prompt_len == 0:
        return sampling
    room = settings.max_seq_len - prompt_len
    if room < 1:
        return None
    return sampling.with_overrides(max_tokens=min(sampling.max_tokens, room))
