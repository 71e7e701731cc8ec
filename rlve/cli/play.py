"""`scripts/play.py`: play tic-tac-toe against a model in the terminal.

The model plays X and sees the game exactly as the environment shows it (its system prompt, the
board and status messages of `rlve.envs.tictactoe.prompts`, in the board rendering it learned
with); you play O on the grid board. An answer without a legal move is sent back with the
reason, as in training; after `model_attempts` bad answers a random free cell is played for the
model, and the game says so. Input and output go through `input_fn`
and `print_fn`, so a test can play whole games.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from rlve.envs.tictactoe.game import (
    EMPTY,
    EMPTY_BOARD,
    O_MARK,
    X_MARK,
    Board,
    InvalidMove,
    answered_cell,
    free_cells,
    is_over,
    place,
    render_board,
    think_text,
    winner,
)
from rlve.envs.tictactoe.prompts import BOARDS, SYSTEM_PROMPTS, Wording
from rlve.inference.engine import Engine, GenerationRequest, SamplingConfig
from rlve.reliability.clean_text import terminal_safe
from rlve.rollout.chat_tokens import ChatTokens
from rlve.types import Message

InputFn = Callable[[str], str]
PrintFn = Callable[[str], None]

QUIT_WORDS = ("q", "quit", "exit")


@dataclass(frozen=True)
class PlaySettings:
    """How a game against the model is played."""

    human_first: bool = False
    """you (O) open the game; otherwise the model (X) does"""
    model_attempts: int = 3
    """answers the model may give for one move before a random free cell is played for it"""
    show_thinking: bool = True
    """print the model's <think> text"""
    sampling: SamplingConfig = SamplingConfig(temperature=0.7, max_tokens=128)
    """the model's sampling settings (each answer gets its own seed from `seed`)"""
    seed: int = 0
    """seed of the model's sampling and of the random moves played for it"""
    rules: str = "full"
    """the system prompt the model was trained with: "full" or "short" (the recipe's)"""
    board: str = "grid"
    """the board rendering the model was trained with: "grid", "compact" or "threats"
    (prompts.BOARDS)"""

    def __post_init__(self):
        if self.model_attempts < 1:
            raise ValueError(f"model_attempts must be >= 1, got {self.model_attempts}")
        if self.board not in BOARDS:
            raise ValueError(f"board must be one of {sorted(BOARDS)}, got {self.board!r}")

    @property
    def wording(self) -> Wording:
        """The environment's words for the model under `board`."""
        return BOARDS[self.board]


@dataclass
class GameRecord:
    """How a game went; `result` is 'model', 'human', 'draw' or 'quit'."""

    result: str
    board: Board
    messages: list[Message] = field(default_factory=list)
    """the conversation as the model saw it"""
    invalid_answers: int = 0
    """model answers without a legal move"""
    random_moves: int = 0
    """moves played at random for the model after `model_attempts` invalid answers"""


def read_human_move(board: Board, input_fn: InputFn, print_fn: PrintFn) -> int | None:
    """Ask until the human names a free cell; None when they quit (or input ends)."""
    while True:
        try:
            text = input_fn("Your move (0-8, q to quit): ").strip().lower()
        except EOFError:
            return None
        if text in QUIT_WORDS:
            return None
        if not re.fullmatch(r"[+-]?\d+", text):
            print_fn(f"Please type the number of a free cell {free_cells(board)}, or q to quit.")
            continue
        cell = int(text)
        if not 0 <= cell <= 8:
            print_fn(f"{cell} is not a cell: the cells are numbered 0 to 8.")
        elif board[cell] != EMPTY:
            print_fn(f"Cell {cell} is taken by {board[cell]}; free cells: {free_cells(board)}.")
        else:
            return cell


class ModelPlayer:
    """Asks the engine for X's moves, with the environment's messages and retry rule."""

    def __init__(self, engine: Engine, settings: PlaySettings, print_fn: PrintFn):
        self.engine = engine
        self.settings = settings
        self.print = print_fn
        self.chat = ChatTokens(engine.tokenizer) if engine.tokenizer is not None else None
        self.rng = random.Random(settings.seed)
        self.answers = 0

    async def answer(self, messages: list[Message]) -> str:
        sampling = self.settings.sampling.with_overrides(
            seed=self.settings.seed * 1000 + self.answers
        )
        self.answers += 1
        prompt_ids = self.chat.prompt_ids(messages) if self.chat is not None else None
        request = GenerationRequest(list(messages), sampling, prompt_ids=prompt_ids)
        return (await self.engine.generate(request)).text

    async def move(self, board: Board, messages: list[Message], record: GameRecord) -> int:
        """X's next cell; appends the model's answers (and why they were rejected) to messages."""
        for _ in range(self.settings.model_attempts):
            text = await self.answer(messages)
            messages.append({"role": "assistant", "content": text})
            thought = think_text(text)
            if self.settings.show_thinking and thought is not None:
                self.print(f"X thinks: {terminal_safe(thought)}")
            try:
                return answered_cell(text, board)
            except InvalidMove as invalid:
                record.invalid_answers += 1
                self.print(f"X's answer was invalid ({invalid.reason}). It wrote: {text[:200]!r}")
                retry = self.settings.wording.invalid_move_message(invalid.reason, board)
                messages.append({"role": "user", "content": retry})
        # The last rejection is dropped: the board in the next turn message shows X's move.
        messages.pop()
        cell = self.rng.choice(free_cells(board))
        record.random_moves += 1
        self.print(
            f"X gave no valid move in {self.settings.model_attempts} tries; "
            f"playing a random free cell for it: {cell}."
        )
        return cell


def announce(board: Board, quit_game: bool) -> tuple[str, str]:
    """(result, sentence) of a finished or abandoned game."""
    if quit_game:
        return "quit", "You quit the game."
    mark = winner(board)
    if mark == X_MARK:
        return "model", "X (the model) wins."
    if mark == O_MARK:
        return "human", "You win!"
    return "draw", "It's a draw."


async def play_game(
    engine: Engine,
    settings: PlaySettings = PlaySettings(),
    input_fn: InputFn = input,
    print_fn: PrintFn = print,
) -> GameRecord:
    """One game: the model as X through `engine`, the human as O through `input_fn`."""
    board = EMPTY_BOARD
    words = settings.wording
    messages: list[Message] = [{"role": "system", "content": words.system_prompts[settings.rules]}]
    record = GameRecord(result="quit", board=board, messages=messages)
    model = ModelPlayer(engine, settings, print_fn)
    print_fn("You play O, the model plays X. Type a free cell's number to move.")
    status = words.opening_status(None)
    quit_game = False
    if settings.human_first:
        print_fn(render_board(board))
        cell = read_human_move(board, input_fn, print_fn)
        quit_game = cell is None
        if not quit_game:
            board = place(board, cell, O_MARK)
            status = words.opening_status(cell)
    while not quit_game:
        messages.append({"role": "user", "content": words.turn_message(board, status)})
        cell = await model.move(board, messages, record)
        board = place(board, cell, X_MARK)
        print_fn(f"X plays cell {cell}.\n{render_board(board)}")
        if is_over(board):
            break
        cell = read_human_move(board, input_fn, print_fn)
        quit_game = cell is None
        if not quit_game:
            board = place(board, cell, O_MARK)
            status = words.opponent_played_status(cell)
            if is_over(board):
                print_fn(render_board(board))
                break
    record.result, sentence = announce(board, quit_game)
    record.board = board
    if not quit_game:  # the model's view of the ending, as the environment would tell it
        x_result = {"model": "win", "human": "loss", "draw": "draw"}[record.result]
        messages.append({"role": "user", "content": words.final_message(x_result, board)})
    print_fn(sentence)
    return record


# ---------------------------------------------------------------- the command


def build_parser() -> argparse.ArgumentParser:
    from rlve.cli.eval import add_engine_arguments

    parser = argparse.ArgumentParser(prog="play.py", description=__doc__.split("\n")[0])
    add_engine_arguments(parser)
    parser.add_argument("--human-first", action="store_true", help="you open the game")
    parser.add_argument("--attempts", type=int, default=3, help="model answers per move")
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--max-tokens", type=int, default=128, help="most tokens per answer")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log-dir", type=Path, default=Path("runs/play"),
                        help="where a vLLM engine writes its log (vllm.log)")  # fmt: skip
    parser.add_argument("--hide-thinking", action="store_true", help="don't show <think> text")
    parser.add_argument("--rules", choices=sorted(SYSTEM_PROMPTS), default="full",
                        help="the system prompt it learned with (make recipe: short)")  # fmt: skip
    parser.add_argument("--board", choices=sorted(BOARDS), default="grid",
                        help="the board rendering it learned with")  # fmt: skip
    return parser


async def play_session(engine: Engine, settings: PlaySettings, input_fn: InputFn,
                       print_fn: PrintFn) -> dict[str, int]:  # fmt: skip
    """Games until the human declines another; returns the score."""
    score = {"model": 0, "human": 0, "draw": 0}
    game = 0
    while True:
        game_settings = replace(settings, seed=settings.seed + game)
        record = await play_game(engine, game_settings, input_fn, print_fn)
        if record.result == "quit":
            break
        score[record.result] += 1
        game += 1
        print_fn(f"Score: model {score['model']}, you {score['human']}, draws {score['draw']}.")
        try:
            again = input_fn("Play again? [y/N] ").strip().lower()
        except EOFError:
            break
        if again not in ("y", "yes"):
            break
    return score


def main(argv: list[str] | None = None, input_fn: InputFn = input,
         print_fn: PrintFn = print) -> dict[str, int]:  # fmt: skip
    """Parse the flags, start the engine, play until the human stops."""
    from rlve.cli.eval import UsageError, build_engine, close_engine, engine_kind

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        sampling = SamplingConfig(temperature=args.temperature, max_tokens=args.max_tokens)
        settings = PlaySettings(
            human_first=args.human_first,
            model_attempts=args.attempts,
            show_thinking=not args.hide_thinking,
            sampling=sampling,
            seed=args.seed,
            rules=args.rules,
            board=args.board,
        )
        # vLLM's start-up lines (hundreds with a float32 checkpoint) would bury the board
        engine = build_engine(args, log_dir=args.log_dir)
    except (UsageError, ValueError) as exc:
        parser.error(str(exc))
    if engine_kind(args) == "vllm":
        print_fn(f"(vLLM's log: {args.log_dir / 'vllm.log'})")

    async def session() -> dict[str, int]:
        try:
            return await play_session(engine, settings, input_fn, print_fn)
        finally:
            await close_engine(engine)

    return asyncio.run(session())
