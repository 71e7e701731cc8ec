"""Terminal tic-tac-toe: whole games driven by scripted human input against scripted models."""

from __future__ import annotations

import pytest

from rlve.cli.play import PlaySettings, main, play_game, read_human_move
from rlve.envs.tictactoe import minimax_policy
from rlve.envs.tictactoe.game import EMPTY_BOARD, board_from_string, parse_move, render_board
from rlve.envs.tictactoe.prompts import COMPACT, SYSTEM_PROMPT, turn_message
from rlve.inference.scripted import ScriptedEngine
from rlve.rollout.chat_tokens import ChatTokens


def minimax_lowest(messages):
    """Minimax without an rng: of tied best moves the lowest cell, so games can be hand-traced."""
    return minimax_policy(messages)


class Terminal:
    """Feeds scripted lines to input() and records everything shown, prompts included."""

    def __init__(self, lines: list[str]):
        self.lines = list(lines)
        self.shown: list[str] = []

    def input(self, prompt: str) -> str:
        self.shown.append(prompt)
        if not self.lines:
            raise EOFError
        return self.lines.pop(0)

    def print(self, text: str) -> None:
        self.shown.append(text)

    @property
    def transcript(self) -> str:
        return "\n".join(self.shown)


class CountingEngine(ScriptedEngine):
    def __init__(self, policy, tokenizer=None):
        super().__init__(policy, tokenizer)
        self.requests = []

    async def generate(self, request):
        self.requests.append(request)
        return await super().generate(request)


async def test_a_careless_human_loses_to_minimax_and_bad_input_is_asked_again():
    # O takes a corner; minimax's only safe reply is the centre (4). O takes 2, so X must block
    # at 1; O plays 6, and X completes the middle column 1-4-7.
    terminal = Terminal(["abc", "0", "9", "4", "2", "6"])
    engine = CountingEngine(minimax_lowest)
    record = await play_game(engine, PlaySettings(human_first=True), terminal.input, terminal.print)
    assert record.result == "model"
    assert record.board == board_from_string("OXO X OX ")
    assert record.invalid_answers == record.random_moves == 0
    assert [r.messages[-1]["content"].split("\n")[0] for r in engine.requests] == [
        "You play X. The opponent (O) played cell 0.",
        "The opponent (O) played cell 2.",
        "The opponent (O) played cell 6.",
    ]
    text = terminal.transcript
    assert "Please type the number of a free cell [0, 1, 2, 3, 4, 5, 6, 7, 8]" in text
    assert "9 is not a cell: the cells are numbered 0 to 8." in text
    assert "Cell 4 is taken by X; free cells: [1, 2, 3, 5, 6, 7, 8]." in text
    assert [line for line in terminal.shown if line.startswith("X plays")] == [
        f"X plays cell 4.\n{render_board(board_from_string('O   X    '))}",
        f"X plays cell 1.\n{render_board(board_from_string('OXO X    '))}",
        f"X plays cell 7.\n{render_board(record.board)}",
    ]
    assert "X thinks: Cell 1 blocks O's line." in text
    assert terminal.shown[-1] == "X (the model) wins."
    assert record.messages[-1]["content"].startswith("You win!")  # X's view of the ending


async def test_the_model_sees_the_environments_own_messages():
    terminal = Terminal(["q"])
    engine = CountingEngine(minimax_lowest)
    record = await play_game(engine, PlaySettings(), terminal.input, terminal.print)
    first = engine.requests[0].messages
    assert first == [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": turn_message(EMPTY_BOARD, "You play X and move first.")},
    ]
    assert engine.requests[0].prompt_ids is None  # a text-only engine
    assert engine.requests[0].sampling.temperature == 0.7
    # X opened in the corner (every first move draws; minimax takes the lowest), then O quit.
    assert record.result == "quit" and record.board == board_from_string("X        ")
    assert terminal.shown[-1] == "You quit the game."


async def test_a_careful_human_draws_against_minimax():
    # X 0, O 4 (centre), X 1, O 2 (block), X 6 (block), O 3 (block), X 5 (block), O 7, X 8.
    terminal = Terminal(["4", "2", "3", "7"])
    record = await play_game(
        ScriptedEngine(minimax_lowest), PlaySettings(), terminal.input, terminal.print
    )
    assert record.result == "draw"
    assert record.board == board_from_string("XXOOOXXOX")
    assert terminal.shown[-1] == "It's a draw."


async def test_a_model_without_moves_gets_random_cells_after_its_attempts():
    engine = CountingEngine(lambda messages: "I'd rather chat.")
    # The human walks through the cells in order; taken ones are refused and the next is tried.
    terminal = Terminal([str(c) for c in range(9)])
    settings = PlaySettings(model_attempts=2, seed=5)
    record = await play_game(engine, settings, terminal.input, terminal.print)
    moves = record.random_moves
    assert moves >= 3  # X needs at least 3 moves for a line, else the game runs longer
    assert len(engine.requests) == 2 * moves
    assert record.invalid_answers == 2 * moves
    assert terminal.transcript.count("X gave no valid move in 2 tries") == moves
    # one rejection per move stays in the conversation; the second is dropped for the board
    rejections = [m for m in record.messages if m["content"].startswith("Invalid move")]
    assert len(rejections) == moves
    assert record.result in ("model", "human", "draw")


async def test_token_engines_get_the_rendered_prompt_ids(tiny_tokenizer):
    engine = CountingEngine(minimax_lowest, tokenizer=tiny_tokenizer)
    terminal = Terminal(["4", "q"])
    await play_game(engine, PlaySettings(), terminal.input, terminal.print)
    chat = ChatTokens(tiny_tokenizer)
    assert len(engine.requests) == 2
    for request in engine.requests:
        assert request.prompt_ids == chat.prompt_ids(request.messages)


def test_read_human_move_refuses_taken_and_out_of_range_cells():
    board = board_from_string("XO       ")
    terminal = Terminal(["", "-1", "1", " 2 "])
    assert read_human_move(board, terminal.input, terminal.print) == 2
    assert terminal.shown[1::2] == [
        "Please type the number of a free cell [2, 3, 4, 5, 6, 7, 8], or q to quit.",
        "-1 is not a cell: the cells are numbered 0 to 8.",
        "Cell 1 is taken by O; free cells: [2, 3, 4, 5, 6, 7, 8].",
    ]
    assert read_human_move(board, Terminal(["QUIT"]).input, print) is None
    assert read_human_move(board, Terminal([]).input, print) is None  # end of input


def test_main_plays_games_until_the_human_declines():
    # Game 1 as in the careless-human test (model wins); game 2 the human quits at once.
    terminal = Terminal(["0", "2", "6", "y", "q"])
    score = main(
        ["--policy", "rlve.envs.tictactoe:minimax_policy", "--human-first", "--hide-thinking"],
        terminal.input,
        terminal.print,
    )
    assert score == {"model": 1, "human": 0, "draw": 0}
    assert "Score: model 1, you 0, draws 0." in terminal.shown
    assert not any(line.startswith("X thinks") for line in terminal.shown)


def test_settings_refuse_zero_attempts():
    with pytest.raises(ValueError, match="model_attempts must be >= 1, got 0"):
        PlaySettings(model_attempts=0)
    with pytest.raises(
        ValueError, match=r"board must be one of \['compact', 'grid', 'threats'\], got 'x'"
    ):
        PlaySettings(board="x")


async def test_a_model_trained_on_the_compact_board_sees_it_the_human_sees_the_grid():
    # the careless-human game again: the same moves, the model's messages in the compact words
    terminal = Terminal(["0", "2", "6"])
    engine = CountingEngine(minimax_lowest)
    settings = PlaySettings(human_first=True, rules="short", board="compact")
    record = await play_game(engine, settings, terminal.input, terminal.print)
    assert record.result == "model" and record.board == board_from_string("OXO X OX ")
    assert record.messages[0]["content"] == COMPACT.system_prompts["short"]
    assert [r.messages[-1]["content"] for r in engine.requests] == [
        "You play X. O played 0.\nO 1 2\n3 4 5\n6 7 8\nYour turn.",
        "O played 2.\nO 1 O\n3 X 5\n6 7 8\nYour turn.",
        "O played 6.\nO X O\n3 X 5\nO 7 8\nYour turn.",
    ]
    assert record.messages[-1]["content"] == "You win!\nO X O\n3 X 5\nO X 8"
    assert f"X plays cell 7.\n{render_board(record.board)}" in terminal.shown


async def test_escape_sequences_in_the_models_text_are_shown_not_sent_to_the_terminal():
    clipboard, clear = "\x1b]52;c;ZWNobyBwd25lZA==\x07", "\x1b[2J"

    def hostile(messages):
        cell = parse_move(minimax_policy(messages))
        return f"<think>{clipboard}mine\u202e{clear}</think><move>{cell}</move>"

    terminal = Terminal([str(cell) for cell in range(9)])
    await play_game(ScriptedEngine(hostile), PlaySettings(), terminal.input, terminal.print)
    thoughts = [line for line in terminal.shown if line.startswith("X thinks")]
    assert thoughts[0] == r"X thinks: \x1b]52;c;ZWNobyBwd25lZA==\x07mine\u202e\x1b[2J"
    assert not any("\x1b" in line or "\u202e" in line for line in terminal.shown)


def test_a_vllm_engine_logs_to_a_file_not_over_the_board(monkeypatch, tmp_path):
    # the engine is stood in for: what is checked is where main asks a vLLM engine to log
    asked = {}

    def build_engine(args, log_dir=None):
        asked["log_dir"] = log_dir
        return ScriptedEngine(minimax_lowest)

    monkeypatch.setattr("rlve.cli.eval.build_engine", build_engine)
    terminal = Terminal(["q"])
    main(["--model", "tiny", "--log-dir", str(tmp_path)], terminal.input, terminal.print)
    assert asked["log_dir"] == tmp_path
    assert terminal.shown[0] == f"(vLLM's log: {tmp_path / 'vllm.log'})"
