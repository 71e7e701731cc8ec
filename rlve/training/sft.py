"""SFT warm-up: teach the output contract from a teacher's games before RL.

`teacher_games` plays an environment with a teacher (a scripted policy such as noisy minimax, or any
engine) and keeps the good games as token-exact trajectories: the loss masks select exactly the
teacher's turns, tokenized as the student's chat template renders them. `sft_warmup` trains on
them and exports a model directory that vLLM and the RL loop load.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rlve.config import TrainerConfig
from rlve.envs import load_environment
from rlve.envs.base import Environment
from rlve.envs.tictactoe import noisy_minimax_policy
from rlve.envs.tictactoe.game import X_MARK, best_moves, parse_board, parse_move
from rlve.evaluation import evaluate
from rlve.inference.scripted import ScriptedEngine
from rlve.rollout.chat_tokens import conversation_tokens, end_of_turn_id
from rlve.rollout.progress import progress_bar
from rlve.rollout.records import write_text_atomically
from rlve.training.trainer import Trainer
from rlve.types import Trajectory


@dataclass
class SftSequence:
    """One training sequence: token ids and the mask of the tokens to learn."""

    token_ids: list[int]
    loss_mask: list[int]
    reward: float

    @classmethod
    def of(cls, trajectory: Trajectory) -> SftSequence:
        return cls(trajectory.token_ids, trajectory.loss_mask, trajectory.reward)


def teacher_games(
    env: Environment,
    engine,
    num_games: int,
    tokenizer,
    seed: int = 0,
    keep: Callable[[Trajectory], bool] | None = None,
) -> tuple[list[Trajectory], dict[str, float]]:
    """Play `num_games` games with the teacher; return the kept ones and the teacher's summary.

    By default a game is kept when its reward is positive and every turn was well formed (the
    recipe's filter: win reward > 0 and format 1). Games of text-only teachers are tokenized in
    the student's chat format, exactly as a token-exact episode lays them out.
    """
    keep = keep or (lambda t: t.reward > 0 and t.metrics.get("game/format", 1.0) == 1.0)
    result = evaluate(env, engine, num_games, seed=seed, progress=True)
    kept = [t for g in result.groups for t in g.trajectories if keep(t)]
    for t in kept:
        if not t.is_token_exact:
            t.token_ids, t.loss_mask = conversation_tokens(
                tokenizer, t.prompt, t.completion, env.tool_schemas
            )
    return kept, result.summary


def save_examples(path: str | Path, trajectories: Sequence[Trajectory]) -> int:
    """Write SFT sequences as JSON lines (atomically); returns how many."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = ({"token_ids": t.token_ids, "loss_mask": t.loss_mask, "reward": t.reward}
            for t in trajectories)  # fmt: skip
    write_text_atomically(path, "".join(json.dumps(row) + "\n" for row in rows))
    return len(trajectories)


def load_examples(path: str | Path) -> list[SftSequence]:
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    if not rows:
        raise ValueError(f"{path} holds no SFT examples")
    return [SftSequence(r["token_ids"], r["loss_mask"], r.get("reward", 0.0)) for r in rows]


def sft_warmup(
    examples: Sequence[SftSequence],
    config: TrainerConfig,
    output_dir: str | Path,
    batch_size: int = 32,
    seed: int = 0,
    on_step: Callable[[int, dict[str, float]], None] | None = None,
) -> tuple[Path, list[float]]:
    """Train `config.max_steps` SFT steps on shuffled batches; export the model to output_dir.

    Returns the exported directory and the loss of every step. `on_step(step, metrics)` is called
    after each step (1, 2, ...) with its `train/*` metrics: the command line logs them to W&B.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    trainer = Trainer(config)
    rng = random.Random(seed)
    order: list[int] = []
    losses = []
    bar = progress_bar(iterable=range(config.max_steps), desc="SFT")
    for step in bar:
        if len(order) < batch_size:
            fresh = list(range(len(examples)))
            rng.shuffle(fresh)
            order += fresh
        batch, order = order[:batch_size], order[batch_size:]
        metrics = trainer.sft_step([(examples[i].token_ids, examples[i].loss_mask) for i in batch])
        losses.append(metrics["train/loss"])
        if on_step is not None:
            on_step(step + 1, metrics)
        bar.set_postfix(loss=f"{losses[-1]:.4f}", refresh=False)  # shown at the bar's next print
    return Path(trainer.export(str(output_dir))), losses


def tictactoe_teacher_data(
    tokenizer, num_games: int, noise: float, seed: int = 0, best_moves_only: bool = False,
    reasons: str = "verdict", **env_args,
) -> tuple[list[Trajectory], dict[str, float]]:  # fmt: skip
    """The embedded demo's SFT data: noisy minimax games against the RL opponent range, the
    teacher's reasons worded as `reasons` names (policies.REASONS). With `best_moves_only` the
    teacher's deliberate random moves that are not best moves stay in the games but out of the
    loss (`mask_moves_off_best_play`)."""
    env = load_environment("tictactoe", num_examples=num_games, seed=seed + 1, **env_args)
    teacher = noisy_minimax_policy(noise, reasons)
    engine = ScriptedEngine(teacher, tokenizer, end_of_turn_id(tokenizer))
    games, summary = teacher_games(env, engine, num_games, tokenizer, seed,
                                   keep=_won_or_drew_cleanly)  # fmt: skip
    if best_moves_only:
        masked = sum(mask_moves_off_best_play(t) for t in games)
        turns = sum(len(t.turn_spans) for t in games)
        summary = {**summary, "sft/masked_turns": masked / max(turns, 1)}
    return games, summary


def mask_moves_off_best_play(game: Trajectory) -> int:
    """Take out of `game`'s loss mask every turn whose move is not a best move (minimax) of the
    board it answered; returns how many turns. The game is left as it was played: later turns
    still see the move, as the student will see its own."""
    turns, board_text = [], ""  # (the board an answer saw, the answer)
    for message in [*game.prompt, *game.completion]:
        if message["role"] == "assistant":
            turns.append((board_text, str(message["content"])))
        elif message["role"] == "user":
            board_text = message["content"]
    if len(turns) != len(game.turn_spans):
        raise ValueError(f"{len(game.turn_spans)} turn spans for {len(turns)} answers: "
                         "a token-exact game is needed")  # fmt: skip
    masked = 0
    for (start, end), (board_text, answer) in zip(game.turn_spans, turns, strict=True):
        if parse_move(answer) not in best_moves(parse_board(board_text), X_MARK):
            game.loss_mask[start:end] = [0] * (end - start)
            masked += 1
    return masked


def reference_answer_data(
    env: Environment, tokenizer, difficulties: Sequence[int], per_difficulty: int, seed: int = 0
) -> list[SftSequence]:
    """SFT data from a generated environment's own solutions: fresh problems at each difficulty,
    answered `<answer>reference</answer>` (no reasoning), in the student's chat format."""
    sequences = []
    for difficulty in difficulties:
        for i in range(per_difficulty):
            example = env.make_example(seed=seed * 1_000_003 + difficulty * 10_007 + i,
                                       difficulty=difficulty)  # fmt: skip
            if not example.answer:
                raise ValueError(f"{env.name} gave no reference answer at difficulty {difficulty}")
            sequences.append(answer_sequence(tokenizer, example.prompt, example.answer,
                                             env.tool_schemas))  # fmt: skip
    return sequences


def answer_sequence(tokenizer, prompt: list[dict], answer: str, tool_schemas=None) -> SftSequence:
    """`prompt` answered `<answer>answer</answer>` (no reasoning), in the student's chat format."""
    reply = [{"role": "assistant", "content": f"<answer>{answer}</answer>"}]
    ids, mask = conversation_tokens(tokenizer, prompt, reply, tool_schemas)
    return SftSequence(ids, mask, 1.0)


def _won_or_drew_cleanly(t: Trajectory) -> bool:
    """The recipe's filter for tic-tac-toe teacher games: win reward > 0 and format 1."""
    return t.metrics["reward/win_reward"] > 0 and t.metrics["game/format"] == 1.0
