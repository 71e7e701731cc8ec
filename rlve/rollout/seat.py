"""Self-play seats: another player of an episode, played by the episode's own policy.

An environment opens a seat with `state["open_seat"](messages)` (its first prompt, in that
player's own view) and then, whenever that player is to move, `await seat.play()` for its answer
and `seat.tell(messages)` for what it sees next. A seat is a conversation of its own, token-exact
like the episode's, with its own `state` (where the environment keeps that player's side of the
game: its result, its invalid moves, its per-turn rewards). It becomes one of the trajectory's
`seats`, is scored by the environment's rubric from its own state, and is trained with
group-relative advantages against the same seat of the group's other games
(rlve.algorithms.train_sequences).
"""

from __future__ import annotations

import copy

from rlve.envs.base import State
from rlve.inference.engine import Engine, SamplingConfig
from rlve.rollout.chat_tokens import ChatTokens
from rlve.rollout.turns import EpisodeRecord, EpisodeSettings, add_reply, sample_turn
from rlve.types import Example, Message


class Seat:
    """One other player of an episode (see the module docstring)."""

    def __init__(
        self, engine: Engine, sampling: SamplingConfig, settings: EpisodeSettings,
        example: Example, messages: list[Message], seed: int,
    ):  # fmt: skip
        self.state: State = {"turn": 0, "info": example.info}
        """this player's side of the episode: the environment writes here, the rubric reads it"""
        prompt = copy.deepcopy(messages)
        self.record = EpisodeRecord(example, self.state, copy.deepcopy(prompt), prompt=prompt)
        self._engine, self._sampling, self._settings = engine, sampling, settings
        self._seed = seed
        self._chat = ChatTokens(engine.tokenizer, None) if engine.tokenizer is not None else None

    async def play(self) -> str | None:
        """This player's next answer; None when not even one token of it fits under
        `max_seq_len` (the environment decides what that means for the game)."""
        turn_seed = self._seed * 1000 + self.state["turn"]
        generation = await sample_turn(
            self._engine, self._chat, self.record, self._sampling, self._settings, turn_seed
        )
        if generation is None:
            return None
        self.state["turn"] += 1
        return generation.text

    def tell(self, messages: list[Message]) -> None:
        """What this player sees before its next answer."""
        add_reply(self.record, messages)


def seat_opener(
    engine: Engine, sampling: SamplingConfig, settings: EpisodeSettings, example: Example,
    episode_seed: int, seats: list[Seat],
):  # fmt: skip
    """`open_seat(messages) -> Seat` for an episode; each seat it opens is appended to `seats`
    and samples with seeds of its own (distinct from the episode's and the other seats')."""

    def open_seat(messages: list[Message]) -> Seat:
        seed = episode_seed * 31 + len(seats) + 1
        seat = Seat(engine, sampling, settings, example, messages, seed)
        seats.append(seat)
        return seat

    return open_seat
