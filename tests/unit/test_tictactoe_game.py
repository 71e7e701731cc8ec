"""Tic-tac-toe rules, minimax, the seeded opponent, the parsers and the scripted policies.

Boards are written as 9-character keys, row-major: "XX OO    " is
     X | X | 2
    ---------
     O | O | 5
    ---------
     6 | 7 | 8
"""

import random

import pytest

from rlve.envs.tictactoe.game import (
    EMPTY_BOARD,
    FORMAT_PATTERN,
    InvalidMove,
    best_moves,
    board_from_string,
    format_ok,
    free_cells,
    is_over,
    minimax_scores,
    mistake_at_stake,
    mistake_kind,
    noisy_best_move,
    opponent_move,
    opponent_rng,
    parse_board,
    parse_move,
    place,
    render_board,
    render_compact_board,
    winner,
)
from rlve.envs.tictactoe.policies import (
    lines_reason,
    minimax_policy,
    noisy_minimax_policy,
    random_policy,
)
from rlve.envs.tictactoe.prompts import (
    COMPACT,
    GRID,
    SYSTEM_PROMPT,
    final_message,
    invalid_move_message,
    opponent_cell,
    opponent_played_status,
    turn_message,
)

B = board_from_string

# ---------------------------------------------------------------- rules

EIGHT_LINES = [
    (0, 1, 2),
    (3, 4, 5),
    (6, 7, 8),
    (0, 3, 6),
    (1, 4, 7),
    (2, 5, 8),
    (0, 4, 8),
    (2, 4, 6),
]


@pytest.mark.parametrize("line", EIGHT_LINES)
@pytest.mark.parametrize("mark", ["X", "O"])
def test_winner_on_every_line(line, mark):
    cells = [" "] * 9
    for i in line:
        cells[i] = mark
    assert winner(tuple(cells)) == mark


def test_full_board_without_line_is_a_draw():
    # X O X / X O O / O X X: no row, column or diagonal has three equal marks.
    board = B("XOXXOOOXX")
    assert winner(board) is None
    assert is_over(board)  # over with no winner: a draw
    assert free_cells(board) == []


def test_empty_board_has_no_winner_and_is_not_a_draw():
    assert winner(EMPTY_BOARD) is None
    assert not is_over(EMPTY_BOARD)
    assert free_cells(EMPTY_BOARD) == list(range(9))


def test_a_board_with_a_line_is_not_a_draw_even_when_full():
    board = B("XXXOOXOXO")  # top row X, board full
    assert is_over(board) and winner(board) == "X"


def test_place_returns_a_new_board():
    board = B("X        ")
    assert place(board, 4, "O") == B("X   O    ")
    assert board == B("X        ")


@pytest.mark.parametrize(
    ("cell", "message"),
    [(4, "cell 4 is already taken by O"), (9, "cell 9 is out of range"), (-1, "cell -1")],
)
def test_place_rejects_taken_and_out_of_range_cells(cell, message):
    with pytest.raises(InvalidMove, match=message) as raised:
        place(B("X   O    "), cell, "X")
    assert f"cell {cell}" in raised.value.reason


# ---------------------------------------------------------------- rendering and parsing boards

RENDERED_XO_X_O = " X | O | 2\n---------\n 3 | X | 5\n---------\n 6 | 7 | O"


def test_render_board_exact_text():
    assert render_board(B("XO  X   O")) == RENDERED_XO_X_O


def test_parse_board_inverts_render_board():
    for key in ["         ", "XO  X   O", "XOXXOOOXX", "   O  X  "]:
        assert parse_board(render_board(B(key))) == B(key)


def test_parse_board_reads_the_last_board_of_a_text():
    first, second = B("X        "), B("X   O   X")
    text = f"Start:\n{render_board(first)}\n\nNow:\n{render_board(second)}\nYour turn."
    assert parse_board(text) == second


def test_parse_board_ignores_digits_in_the_wrong_cell_and_needs_a_board():
    # "8" in cell 0 cannot be a free cell of a rendered board, so this is not a board.
    fake = " 8 | 1 | 2\n---------\n 3 | 4 | 5\n---------\n 6 | 7 | 0"
    with pytest.raises(ValueError):
        parse_board(fake)
    with pytest.raises(ValueError):
        parse_board("no board here")


COMPACT_XO_X_O = "X O 2\n3 X 5\n6 7 O"


def test_render_compact_board_exact_text():
    assert render_compact_board(B("XO  X   O")) == COMPACT_XO_X_O
    assert render_compact_board(EMPTY_BOARD) == "0 1 2\n3 4 5\n6 7 8"


def test_parse_board_reads_either_rendering_and_the_last_board_of_both():
    for key in ["         ", "XO  X   O", "XOXXOOOXX", "   O  X  "]:
        assert parse_board(render_compact_board(B(key))) == B(key)
    first, second = B("X        "), B("X   O   X")
    assert parse_board(f"{render_board(first)}\n{render_compact_board(second)}") == second
    assert parse_board(f"{render_compact_board(first)}\n{render_board(second)}") == second


def test_a_compact_board_is_three_whole_lines_with_each_digit_in_its_cell():
    with pytest.raises(ValueError):  # rows inside longer lines
        parse_board("row X O 2\n3 X 5\n6 7 O now")
    with pytest.raises(ValueError):  # "8" in cell 0
        parse_board("8 1 2\n3 4 5\n6 7 0")


# ---------------------------------------------------------------- minimax


def test_immediate_win_scores_one_plus_free_cells():
    # X to move on "XX OO    ". 2 wins at once: 5 cells filled then, 4 free -> 1 + 4 = 5.
    # 5 blocks O's row; then O must block 2, X must block 6 and nobody can win -> 0.
    # 6, 7 or 8 let O complete its row at 5 with 3 cells free -> O scores 4, so X scores -4.
    assert minimax_scores(B("XX OO    "), "X") == {2: 5, 5: 0, 6: -4, 7: -4, 8: -4}
    assert best_moves(B("XX OO    "), "X") == [2]


def test_o_must_block():
    # O to move on "XX  O    ": any cell but 2 lets X win at 2 with 4 cells free -> -(1 + 4).
    assert minimax_scores(B("XX  O    "), "O") == {2: 0, 3: -5, 5: -5, 6: -5, 7: -5, 8: -5}
    assert best_moves(B("XX  O    "), "O") == [2]


def test_empty_board_is_a_draw_for_both_players():
    assert minimax_scores(EMPTY_BOARD, "X") == dict.fromkeys(range(9), 0)
    assert minimax_scores(EMPTY_BOARD, "O") == dict.fromkeys(range(9), 0)
    assert best_moves(EMPTY_BOARD, "X") == list(range(9))


def test_corner_opening_o_must_take_the_centre():
    # Every other reply loses to a fork: X wins on its 4th move with 2 cells free -> -3.
    scores = minimax_scores(B("X        "), "O")
    assert scores == {4: 0} | {cell: -3 for cell in (1, 2, 3, 5, 6, 7, 8)}


def test_opposite_corners_give_o_four_equal_best_replies():
    # X in 0 and 8, O in the centre, O to move. Any edge draws. A corner (2 or 6) forces X to
    # block the diagonal in the other corner, which forks; X wins with 2 cells free -> -3.
    board = B("X   O   X")
    assert minimax_scores(board, "O") == {1: 0, 3: 0, 5: 0, 7: 0, 2: -3, 6: -3}
    assert best_moves(board, "O") == [1, 3, 5, 7]


def test_minimax_refuses_a_finished_game():
    with pytest.raises(ValueError, match="over"):
        minimax_scores(B("XXXOO    "), "O")


# ---------------------------------------------------------------- the seeded opponent

FOUR_BEST = B("X   O   X")  # best O replies {1, 3, 5, 7}; free cells {1, 2, 3, 5, 6, 7}


def test_opponent_breaks_ties_among_all_best_moves():
    replies = {opponent_move(FOUR_BEST, 0.0, random.Random(seed)) for seed in range(200)}
    assert replies == {1, 3, 5, 7}


def test_fully_random_opponent_also_plays_losing_moves():
    replies = {opponent_move(FOUR_BEST, 1.0, random.Random(seed)) for seed in range(200)}
    assert replies == {1, 2, 3, 5, 6, 7}


def test_opponent_draws_the_branch_then_the_choice():
    # The documented draw order: one rng.random() against p, then one rng.choice.
    for seed in range(50):
        replay = random.Random(seed)
        candidates = free_cells(FOUR_BEST) if replay.random() < 0.5 else [1, 3, 5, 7]
        expected = replay.choice(candidates)
        assert opponent_move(FOUR_BEST, 0.5, random.Random(seed)) == expected


def test_random_move_frequency_matches_the_probability():
    # On "XX  O    " the only best O move is 2; a random move picks one of 6 free cells, so a
    # move other than 2 shows up with probability p * 5/6 and p is estimated as share * 6/5.
    rng = random.Random(0)
    moves = [opponent_move(B("XX  O    "), 0.3, rng) for _ in range(2000)]
    estimated_p = sum(move != 2 for move in moves) / 2000 * 6 / 5
    assert abs(estimated_p - 0.3) < 0.05


def test_opponent_rng_is_seeded_from_example_seed_and_board_key():
    assert opponent_rng(7, FOUR_BEST).random() == random.Random("7_X   O   X").random()
    replies = [opponent_move(FOUR_BEST, 0.5, opponent_rng(7, FOUR_BEST)) for _ in range(5)]
    assert len(set(replies)) == 1
    other_seeds = {opponent_move(FOUR_BEST, 0.0, opponent_rng(s, FOUR_BEST)) for s in range(50)}
    assert other_seeds == {1, 3, 5, 7}


def test_noisy_best_move_rejects_a_probability_outside_0_1():
    with pytest.raises(ValueError, match="random_move_prob"):
        noisy_best_move(FOUR_BEST, "O", 1.5, random.Random(0))


# ---------------------------------------------------------------- reading answers


@pytest.mark.parametrize(
    ("text", "move"),
    [
        ("<think>x</think><move>4</move>", 4),
        ("<move>1</move> on second thought <move>5</move>", 5),
        ("<move> 7 </move>", 7),
        ("<move>\n3\n</move>", 3),
        ("<move><move>6</move>", 6),
        ("<move>8</move> then <move>", 8),
        ("<move>a</move>", None),
        ("<move>4 5</move>", None),
        ("<move>4.0</move>", None),
        ("<move></move>", None),
        ("<move>٣</move>", None),  # an Arabic-Indic digit is not an ASCII integer
        ("hello", None),
        ("", None),
        ("<move>9" + "9" * 5000 + "</move>", None),  # too many digits for int(): still no raise
    ],
)
def test_parse_move(text, move):
    assert parse_move(text) == move


def test_parse_move_on_a_megabyte_of_unclosed_tags():
    assert parse_move("<move>" * 175_000) is None  # 1.05 MB
    assert parse_move("<move>" + "7 " * 500_000) is None


FORMAT_CASES = [
    ("<think>centre</think>\n<move>4</move>", True),
    ("<think>\nmulti\nline\n</think><move>4</move>", True),
    ("<think></think><move></move>", True),
    ("<move>4</move>", False),
    ("<think>no move</think>", False),
    ("<move>4</move><think>late</think>", False),
    ("<think>open <move>4</move>", False),
    ("<think><think></think></think>x<move>1</move>", True),
    ("", False),
]


@pytest.mark.parametrize(("text", "ok"), FORMAT_CASES)
def test_format_ok_agrees_with_the_pattern(text, ok):
    assert format_ok(text) is ok
    assert (FORMAT_PATTERN.search(text) is not None) is ok


def test_format_ok_matches_the_pattern_on_random_tag_soup():
    pieces = ["<think>", "</think>", "<move>", "</move>", "a", "\n", "<", ">"]
    rng = random.Random(0)
    for _ in range(2000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 10)))
        assert format_ok(text) == (FORMAT_PATTERN.search(text) is not None), text


# ---------------------------------------------------------------- messages


def test_turn_message_exact_text():
    board = B("XO  X   O")
    expected = (
        f"The opponent (O) played cell 8.\n\n{RENDERED_XO_X_O}\n\n"
        "Available positions: [2, 3, 5, 6, 7]\nYour turn."
    )
    assert turn_message(board, opponent_played_status(8)) == expected
    assert turn_message(board, None) == expected.split("\n\n", 1)[1]


def test_messages_show_the_board_a_policy_can_read():
    board = B("XO  X   O")
    assert parse_board(invalid_move_message("cell 4 is already taken by X", board)) == board
    assert invalid_move_message("cell 4 is already taken by X", board).startswith(
        "Invalid move: cell 4 is already taken by X."
    )
    assert "<move>N</move>" in SYSTEM_PROMPT
    assert [final_message(r) for r in ("win", "loss", "draw")] == [
        "You win!",
        "You lose.",
        "It's a draw.",
    ]


def test_compact_messages_exact_text():
    board = B("XO  X   O")
    played = COMPACT.opponent_played_status(8)
    assert COMPACT.turn_message(board, played) == f"O played 8.\n{COMPACT_XO_X_O}\nYour turn."
    assert COMPACT.turn_message(board, COMPACT.opening_status(None)).startswith(
        "You play X and move first.\nX O 2\n"
    )
    assert COMPACT.opening_status(3) == "You play X. O played 3."
    reason = "cell 4 is already taken by X"
    assert COMPACT.invalid_move_message(reason, board) == (
        f"Invalid move: cell 4 is already taken by X.\n{COMPACT_XO_X_O}\nTry again."
    )
    assert COMPACT.final_message("loss", board) == f"You lose.\n{COMPACT_XO_X_O}"


def test_the_old_message_functions_are_the_grid_wordings():
    board = B("XO  X   O")
    assert turn_message(board, None) == GRID.turn_message(board, None)
    assert GRID.opening_status(3) == "You play X. The opponent (O) played cell 3."
    assert final_message("win", board) == f"You win!\n\n{RENDERED_XO_X_O}"


def test_opponent_cell_reads_the_status_line_of_either_wording():
    assert opponent_cell(GRID.turn_message(B("XO       "), GRID.opening_status(1))) == 1
    assert opponent_cell(COMPACT.turn_message(B("X       O"), "O played 8.")) == 8
    assert opponent_cell("You play X and move first.\nYour turn.") is None


@pytest.mark.parametrize("rules", ["full", "short"])
def test_each_system_prompt_shows_the_board_its_wording_sends(rules):
    grid, compact = GRID.system_prompts[rules], COMPACT.system_prompts[rules]
    assert "0 1 2\n3 4 5\n6 7 8" in compact and "|" not in compact
    assert "Available positions" not in compact and "<move>N</move>" in compact
    if rules == "full":  # the full rules draw the empty board as it is sent, and only that
        assert grid.replace(render_board(EMPTY_BOARD), "0 1 2\n3 4 5\n6 7 8") == compact


# ---------------------------------------------------------------- scripted policies


def play_game(policy, policy_rng, random_move_prob, example_seed, model_starts):
    """One game as the environment plays it; returns "win", "loss" or "draw" for X."""
    board, status = EMPTY_BOARD, None
    messages = [{"role": "system", "content": SYSTEM_PROMPT}]
    if not model_starts:
        cell = opponent_move(board, random_move_prob, opponent_rng(example_seed, board))
        board, status = place(board, cell, "O"), opponent_played_status(cell)
    while True:
        messages.append({"role": "user", "content": turn_message(board, status)})
        answer = policy(messages, policy_rng)
        assert FORMAT_PATTERN.search(answer)
        messages.append({"role": "assistant", "content": answer})
        board = place(board, parse_move(answer), "X")
        if winner(board) == "X":
            return "win"
        if is_over(board):  # no line, board full
            return "draw"
        cell = opponent_move(board, random_move_prob, opponent_rng(example_seed, board))
        board, status = place(board, cell, "O"), opponent_played_status(cell)
        if winner(board) == "O":
            return "loss"
        if is_over(board):  # no line, board full
            return "draw"


@pytest.mark.parametrize("model_starts", [True, False])
def test_perfect_players_always_draw(model_starts):
    results = {play_game(minimax_policy, random.Random(s), 0.0, s, model_starts) for s in range(50)}
    assert results == {"draw"}


def test_minimax_policy_never_loses_to_a_random_opponent():
    results = [play_game(minimax_policy, random.Random(s), 1.0, s, s % 2 == 0) for s in range(200)]
    assert results.count("loss") == 0
    assert results.count("win") > 150  # a random opponent rarely survives perfect play


def test_random_policy_never_beats_a_perfect_opponent():
    results = [play_game(random_policy, random.Random(s), 0.0, s, s % 2 == 0) for s in range(200)]
    assert results.count("win") == 0
    assert results.count("loss") > 100


def test_minimax_policy_answer_and_determinism():
    messages = [{"role": "user", "content": turn_message(B("XX OO    "), None)}]
    assert (
        minimax_policy(messages)
        == "<think>Cell 2 completes three in a row.</think>\n<move>2</move>"
    )
    # Without an rng the first best cell: on the empty board that is 0.
    empty = [{"role": "user", "content": turn_message(EMPTY_BOARD, None)}]
    assert parse_move(minimax_policy(empty)) == 0
    assert random_policy(empty) == random_policy(empty)


def test_noisy_minimax_policy_noise_levels():
    # "XX OO    ": the best X move is 2. Noise 0 always takes it; noise 1 picks among 5 cells.
    messages = [{"role": "user", "content": turn_message(B("XX OO    "), None)}]
    exact = noisy_minimax_policy(0.0)
    assert {parse_move(exact(messages, random.Random(s))) for s in range(50)} == {2}
    noisy = noisy_minimax_policy(1.0)
    assert {parse_move(noisy(messages, random.Random(s))) for s in range(200)} == {2, 5, 6, 7, 8}
    with pytest.raises(ValueError, match="noise"):
        noisy_minimax_policy(-0.1)
    with pytest.raises(ValueError, match="reasons must be one of.*'why'"):
        noisy_minimax_policy(0.5, reasons="why")


@pytest.mark.parametrize(
    ("key", "cell", "reason"),
    [
        ("XX OO    ", 2, "X has 0 and 1: 2 wins."),  # X's win comes before O's block
        ("X  OO   X", 5, "O has 3 and 4: 5 blocks."),
        ("O   O  X ", 8, "O has 0 and 4: 8 blocks."),  # a diagonal
        ("O   X   O", 1, "No line has two. Cell 1 keeps the game safe."),
        ("OO XX O X", 5, "X has 3 and 4: 5 wins."),  # O's open pair 0-1 is not mentioned
        ("OO X  X  ", 2, "O has 0 and 1: 2 blocks."),  # the block also gives X a pair, 2 and 6
    ],
)
def test_lines_reason_names_the_line_before_the_cell(key, cell, reason):
    assert lines_reason(board_from_string(key), cell) == reason


def test_the_reasons_style_changes_the_words_not_the_moves():
    boards = [B(k) for k in ("X  OO   X", "O   X   O", "XX OO    ", "    O    ")]
    verdict, lines = noisy_minimax_policy(0.5), noisy_minimax_policy(0.5, reasons="lines")
    for board in boards:
        messages = [{"role": "user", "content": turn_message(board, None)}]
        for s in range(20):
            a, b = verdict(messages, random.Random(s)), lines(messages, random.Random(s))
            assert parse_move(a) == parse_move(b)
    block = [{"role": "user", "content": turn_message(B("X  OO   X"), None)}]
    assert (
        lines(block, random.Random(0)) == "<think>O has 3 and 4: 5 blocks.</think>\n<move>5</move>"
    )


@pytest.mark.parametrize(
    ("key", "mistakes", "good"),
    [
        ("X  OO   X", [1, 2, 6, 7], [5]),  # O threatens 5: every other cell misses the block
        ("XX OO    ", [5, 6, 7, 8], [2]),  # 2 wins; 5 blocks but gives the win up (a draw)
        ("O   X   O", [2, 6], [1, 3, 5, 7]),  # a corner lets O fork on the other (O 6: 3 and 7)
        ("XO  X    ", [], [2, 3, 5, 6, 7, 8]),  # 8 wins now, the rest later: none is a mistake
    ],
)
def test_a_mistake_gives_up_a_won_or_drawn_result(key, mistakes, good):
    board = board_from_string(key)
    assert [c for c in mistakes + good if mistake_kind(board, c, "X")] == mistakes


@pytest.mark.parametrize(
    ("key", "player", "cell", "kind"),
    [
        ("X  OO   X", "X", 1, "missed_block"),
        ("XX OO    ", "X", 5, "missed_win"),  # blocking O instead of winning is still a miss
        ("O   X   O", "X", 2, "fork_allowed"),
        # X 0, O 8, X to move: 2 wins by a fork (O must block 1, then X 6 threatens 3 and 4);
        # 1 lets that win go
        ("X       O", "X", 1, "fork_missed"),
        ("X       O", "X", 2, None),
    ],
)
def test_a_mistake_is_named_by_what_it_gave_up(key, player, cell, kind):
    assert mistake_kind(board_from_string(key), cell, player) == kind


@pytest.mark.parametrize(
    ("key", "stake"),
    [
        ("X  OO   X", "missed_block"),
        ("XX OO    ", "missed_win"),
        ("O   X   O", "fork_allowed"),
        ("X       O", "fork_missed"),
        ("XO  X    ", None),  # every move still wins
        ("     OXXO", None),  # O threatens 2; X blocks, O's forced 4 forks 0 and 3: lost
    ],
)
def test_the_mistake_at_stake_is_the_one_any_bad_move_makes(key, stake):
    board = board_from_string(key)
    assert mistake_at_stake(board, "X") == stake
    kinds = {mistake_kind(board, cell, "X") for cell in free_cells(board)} - {None}
    assert kinds == ({stake} if stake else set())
