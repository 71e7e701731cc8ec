"""The environment API: what an episode is, independent of who plays it.

An environment owns a dataset of examples, a parser, a rubric and the rules of the conversation:
`setup_state` prepares a per-episode `state` dict, `env_response` answers each model turn, and
methods marked `@stop` end the episode. The episode runner (`rlve.rollout`) drives these hooks
against an inference engine, so the same environment serves evaluation and training.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from datasets import Dataset

from rlve.config import is_int, require
from rlve.envs.parsers import Parser
from rlve.envs.rubric import Rubric
from rlve.types import Example, Message, Trajectory

State = dict[str, Any]

_STOP_ATTR = "_rlve_stop_priority"


def stop(func: Callable | None = None, *, priority: int = 0):
    """Mark a method `(self, state) -> bool` as a stop condition.

    Stop conditions are checked before every model turn, highest priority first; the first that
    returns True ends the episode and its name becomes the trajectory's `stop_reason`.
    """

    def mark(f: Callable) -> Callable:
        setattr(f, _STOP_ATTR, priority)
        return f

    return mark(func) if func is not None else mark


def require_int(name: str, value: object, minimum: int) -> None:
    """Reject an environment argument that is not an integer >= `minimum`, naming it."""
    require(
        is_int(value) and value >= minimum, f"{name} must be an integer >= {minimum}, got {value!r}"
    )


def build_dataset(rows: Iterable[Mapping[str, Any]], system_prompt: str | None = None) -> Dataset:
    """A dataset with the columns every environment exposes: prompt, answer, info, example_id.

    Each row gives either `prompt` (a list of messages) or `question` (the user's text); the
    system prompt, if any, is put in front. `answer` and `info` are optional.
    """
    records = []
    for i, row in enumerate(rows):
        if "prompt" in row and not isinstance(row["prompt"], str):
            prompt = [dict(m) for m in row["prompt"]]
        elif "question" in row or "prompt" in row:
            prompt = [{"role": "user", "content": str(row.get("question", row.get("prompt")))}]
        else:
            raise ValueError(f"dataset row {i} has neither 'prompt' nor 'question': {sorted(row)}")
        if system_prompt and not (prompt and prompt[0]["role"] == "system"):
            prompt = [{"role": "system", "content": system_prompt}, *prompt]
        records.append(
            {
                "prompt": prompt,
                "answer": str(row.get("answer", "")),
                "info": dict(row.get("info") or {}),
                "example_id": int(row.get("example_id", i)),
            }
        )
    if not records:
        raise ValueError("an environment's dataset needs at least one example")
    return Dataset.from_list(records)


class Environment:
    """Base class: a dataset, a parser, a rubric and the turn-taking rules of an episode."""

    escape_metrics: tuple[str, ...] = ()
    """episode metrics (shares in [0, 1]) that rise when a policy escapes the task instead of
    doing it, e.g. games with an invalid move; the reward-hacking monitor watches them"""

    legal_answer_metric: str | None = None
    """the episode metric (a share in [0, 1]) of the answers the environment could act on, e.g.
    legal moves; a run whose first batch has almost none stops there (`stop_if_unplayable`)"""

    def __init__(
        self,
        dataset: Dataset | Iterable[Mapping[str, Any]],
        *,
        system_prompt: str | None = None,
        parser: Parser | None = None,
        rubric: Rubric | None = None,
        max_turns: int = 1,
        name: str | None = None,
        sampling: Mapping[str, Any] | None = None,
        tools: list[dict[str, Any]] | None = None,
    ):
        if max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")
        self.system_prompt = system_prompt
        if isinstance(dataset, Dataset):
            self.dataset = dataset
        else:
            self.dataset = build_dataset(dataset, system_prompt)
        self.parser = parser or Parser()
        self.rubric = rubric or Rubric(parser=self.parser)
        self.max_turns = max_turns
        self.name = name or type(self).__name__
        self.sampling = dict(sampling or {})
        """Default sampling settings of this environment (e.g. max_tokens); config overrides."""
        self.tool_schemas = tools
        """JSON schemas of the tools, passed to the chat template; None without tools."""
        self.passing_reward = 1.0
        """the reward at which a rollout counts as solved (see `accuracy`)"""
        self._examples: list[Example] | None = None
        self._stops = self._collect_stops()

    # ---- examples ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.dataset)

    def example(self, index: int) -> Example:
        """The example at `index` of the dataset (wrapping around past its end)."""
        if self._examples is None:
            self._examples = [
                Example(
                    example_id=int(row["example_id"]),
                    prompt=[dict(m) for m in row["prompt"]],
                    answer=row["answer"],
                    info={k: v for k, v in (row["info"] or {}).items() if v is not None},
                )
                for row in self.dataset
            ]
        return self._examples[index % len(self._examples)]

    # ---- the episode's hooks ------------------------------------------------------------------

    def initial_state(self, example: Example) -> State:
        """The state every episode starts with; `setup_state` adds the environment's own."""
        return {
            "prompt": example.prompt,
            "answer": example.answer,
            "info": example.info,
            "example_id": example.example_id,
            "turn": 0,
            "done": False,
            "stop_reason": None,
        }

    async def setup_state(self, state: State) -> None:
        """Prepare the per-episode state (board, resources...). Default: nothing.

        It may set `state["prompt"]` to a new list of messages (e.g. the example's prompt plus
        a first observation that exists only once the episode's resource is up): the episode
        then starts from it, and it is the trajectory's prompt."""

    async def env_response(self, messages: list[Message], state: State) -> list[Message]:
        """The environment's reply to the model's last message. Single-turn: none."""
        return []

    def privileged_view(self, messages: list[Message], state: State) -> list[Message] | None:
        """What a distillation teacher alone reads in place of `messages` (the episode's prompt
        before its first turn, or the environment's reply after a turn), with `state` as it is
        then: e.g. the same messages with a hint the student does not see. None: the teacher
        reads what the student reads. Used with trainer.distill.privileged (the default defines
        none, and such a run is refused at start)."""
        return None

    async def cleanup_state(self, state: State) -> None:
        """Release per-episode resources; runs even when the episode failed."""

    def episode_metrics(self, state: State) -> dict[str, float]:
        """Extra per-episode metrics (e.g. `game/win`) read from the final state."""
        return {}

    def accuracy(self, trajectory: Trajectory) -> float:
        """1.0 when a scored rollout counts as solved (what the curriculum counts), else 0.0.
        Default: its reward reaches `passing_reward`."""
        return float(trajectory.reward >= self.passing_reward)

    def reward_turn(self, state: State, value: float, turn: int | None = None) -> None:
        """Say that `value` of the episode's reward was earned by the turn just played (an
        invalid move's penalty, at that move), or by model turn `turn` (0-based). The rubric's
        reward stays the episode's; training with `trainer.credit=turn` gives each turn its own
        return (rlve.algorithms.turn_credit)."""
        earned = state.setdefault("turn_rewards", {})
        turn = state["turn"] - 1 if turn is None else turn
        earned[turn] = earned.get(turn, 0.0) + float(value)

    def end_episode(self, state: State, reason: str = "env_done") -> None:
        """Called by `env_response` when its reply is the last message of the episode."""
        state["done"] = True
        state["stop_reason"] = reason

    # ---- stop conditions ----------------------------------------------------------------------

    @stop(priority=100)
    def env_done(self, state: State) -> bool:
        """The environment ended the episode (its last reply was final)."""
        return bool(state.get("done"))

    @stop(priority=90)
    def max_turns_reached(self, state: State) -> bool:
        return state["turn"] >= self.max_turns

    def _collect_stops(self) -> list[tuple[int, str]]:
        found = []
        for name, member in inspect.getmembers(type(self), callable):
            priority = getattr(member, _STOP_ATTR, None)
            if priority is not None:
                found.append((priority, name))
        return sorted(found, key=lambda pair: (-pair[0], pair[1]))

    async def check_stop(self, state: State) -> str | None:
        """The name of the first stop condition that holds, or None to play on."""
        for _, name in self._stops:
            result = getattr(self, name)(state)
            if inspect.isawaitable(result):
                result = await result
            if result:
                return state.get("stop_reason") if name == "env_done" else name
        return None


class SingleTurnEnv(Environment):
    """One prompt, one completion, scored by the rubric."""

    def __init__(self, dataset, **kwargs):
        kwargs.setdefault("max_turns", 1)
        super().__init__(dataset, **kwargs)


class MultiTurnEnv(Environment):
    """A conversation: the environment answers each model turn until a stop condition holds.

    Subclasses implement `env_response`; when its reply is final (game over), it calls
    `self.end_episode(state)` and the reply is shown but not followed by another model turn.
    """

    def __init__(self, dataset, *, max_turns: int = 10, **kwargs):
        super().__init__(dataset, max_turns=max_turns, **kwargs)

    async def env_response(self, messages: list[Message], state: State) -> list[Message]:
        raise NotImplementedError(f"{type(self).__name__} must implement env_response")


def require_privileged_views(envs: Mapping[str, Environment]) -> None:
    """Raise ValueError naming the environments that define no `privileged_view` (a run with
    trainer.distill.privileged needs one from each)."""
    blind = [name for name, env in envs.items()
             if type(env).privileged_view is Environment.privileged_view]  # fmt: skip
    if blind:
        raise ValueError(
            f"trainer.distill.privileged=true, but environment(s) {blind} define no "
            "privileged_view (what the teacher alone sees): set privileged=false, or define "
            "Environment.privileged_view for them"
        )
