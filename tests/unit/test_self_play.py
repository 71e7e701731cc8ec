"""Self-play tic-tac-toe: the policy plays O in a seat of its own, which is token-exact, sees the
board with the marks swapped, is scored from its own side, and is trained against the same seat
of the group's other games."""

import pytest

import rlve
from rlve.algorithms.dynamic_sampling import filter_groups
from rlve.algorithms.train_sequences import sequences_from_groups
from rlve.envs.tictactoe import minimax_policy
from rlve.envs.tictactoe.game import parse_board, parse_move
from rlve.envs.tictactoe.prompts import BOARDS
from rlve.envs.tictactoe.self_play import SEAT_ATTEMPTS, plays_self, seat_result, swap_marks
from rlve.rollout import ChatTokens, ScriptedEngine
from rlve.rollout.group_journal import group_from_json, group_to_json
from rlve.types import RolloutGroup, Trajectory


def self_play_env(**kwargs):
    return rlve.load_environment("tictactoe", num_examples=8, opponent="self", **kwargs)


def assistant_texts(messages):
    return [m["content"] for m in messages if m["role"] == "assistant"]


def test_a_scripted_fraction_of_the_games_keeps_the_scripted_opponent_spread_evenly():
    assert [i for i in range(8) if not plays_self(i, 0.25)] == [3, 7]
    assert all(plays_self(i, 0.0) for i in range(8))
    assert not any(plays_self(i, 1.0) for i in range(8))
    env = self_play_env(scripted_fraction=0.25)
    opponents = [row["info"]["opponent"] for row in env.dataset]
    assert opponents == ["self"] * 3 + ["scripted"] + ["self"] * 3 + ["scripted"]


def test_o_sees_the_board_with_the_marks_swapped_and_the_results_flip():
    assert swap_marks(tuple("XO X O   ")) == tuple("OX O X   ")
    assert [seat_result(r) for r in ("win", "loss", "draw", None)] == ["loss", "win", "draw", None]


def test_both_seats_are_token_exact_conversations_and_minimax_against_itself_draws(
    tiny_tokenizer,
):
    tok = tiny_tokenizer
    result = rlve.evaluate(self_play_env(), ScriptedEngine(minimax_policy, tok), 8)
    chat = ChatTokens(tok)
    for t in (g.trajectories[0] for g in result.groups):
        (seat,) = t.seats
        # perfect play on both sides: a draw, scored 0.5 + 0.2 (format) for each seat
        assert t.metrics["game/draw"] == seat.metrics["game/draw"] == 1.0
        assert t.reward == pytest.approx(0.7) and seat.reward == pytest.approx(0.7)
        # nine cells: the seat that opened made five moves, the other four
        assert sorted([t.num_turns, seat.num_turns]) == [4, 5]
        for player in (t, seat):
            ids = player.token_ids
            assert ids[: player.prompt_len] == chat.prompt_ids(player.prompt)
            texts = assistant_texts(player.completion)
            assert len(player.turn_spans) == len(texts) == player.num_turns
            for (start, end), text in zip(player.turn_spans, texts, strict=True):
                assert ids[start:end] == tok.encode(text, add_special_tokens=False) + [
                    tok.eos_token_id
                ]
            assert player.turn_spans[-1][1] == len(ids)


@pytest.mark.parametrize("board", ["grid", "compact"])
def test_each_seat_sees_the_other_s_moves_as_o_moves(board):
    words = BOARDS[board]
    result = rlve.evaluate(self_play_env(board=board), ScriptedEngine(minimax_policy), 8)
    by_start = {g.trajectories[0].info["opponent_starts"]: g.trajectories[0] for g in result.groups}
    x_first = by_start[False]
    x_move = parse_move(assistant_texts(x_first.completion)[0])
    seat_view = parse_board(x_first.seats[0].prompt[-1]["content"])
    assert x_first.seats[0].prompt[-1]["content"].startswith(words.opening_status(x_move))
    assert x_first.seats[0].prompt[0]["content"] == words.system_prompts["full"]
    assert seat_view.count("O") == 1 and seat_view[x_move] == "O" and "X" not in seat_view
    o_first = by_start[True]
    assert o_first.seats[0].prompt[-1]["content"].startswith("You play X and move first.")
    o_move = parse_move(assistant_texts(o_first.seats[0].completion)[0])
    # X's prompt is made after O's opening: O's cell shows as O
    x_view = parse_board(o_first.prompt[-1]["content"])
    assert x_view[o_move] == "O" and x_view.count("O") == 1 and "X" not in x_view


def games_x_opened(env, policy) -> list[Trajectory]:
    """X's side of the 8 self-play games of `env` that X opened, `policy` playing both seats."""
    result = rlve.evaluate(env, ScriptedEngine(policy), 8)
    games = [g.trajectories[0] for g in result.groups
             if not g.trajectories[0].info["opponent_starts"]]  # fmt: skip
    assert games
    return games


def o_always_invalid(messages):
    """Minimax for X; garbage for O. O's seat sees itself as X, so the two are told apart by the
    board: in a game X opened, X moves on an even number of marks and O on an odd one."""
    board = parse_board(messages[-1]["content"])
    return "no idea" if (9 - board.count(" ")) % 2 else minimax_policy(messages)


@pytest.mark.parametrize(("penalty", "per_move"), [("flat", False), ("per_move", True)])
def test_an_o_seat_without_a_valid_move_pays_for_each_answer_and_the_game_goes_on(
    penalty, per_move
):
    games = games_x_opened(self_play_env(invalid_penalty=penalty), o_always_invalid)
    for t in games:
        (seat,) = t.seats
        assert t.metrics["game/invalid"] == 0.0 and t.metrics["game/loss"] == 0.0
        assert t.stop_reason == "game_over"
        # X (minimax, opening) never loses, so the game ends on X's move: O moved once less,
        # each time after SEAT_ATTEMPTS invalid answers (then a random free cell is played)
        assert seat.num_turns == (t.num_turns - 1) * SEAT_ATTEMPTS
        assert seat.metrics["game/invalid_moves"] == seat.num_turns
        expected = [-0.1] * seat.num_turns if per_move else [-0.1] + [0.0] * (seat.num_turns - 1)
        assert seat.turn_rewards == pytest.approx(expected)
        result_reward = {"win": 1.0, "draw": 0.5}.get(seat_result(_x_result(t)), 0.0)
        assert seat.reward == pytest.approx(result_reward + sum(expected))


def _x_result(t: Trajectory) -> str:
    return next(r for r in ("win", "draw", "loss") if t.metrics[f"game/{r}"] == 1.0)


def game(reward: float, seat_reward: float) -> Trajectory:
    seat = Trajectory([], [], token_ids=[5, 6, 7], loss_mask=[0, 1, 1], turn_spans=[(1, 3)],
                      reward=seat_reward)  # fmt: skip
    return Trajectory([], [], token_ids=[1, 2, 3, 4], loss_mask=[0, 1, 1, 1],
                      turn_spans=[(1, 4)], reward=reward, seats=[seat])  # fmt: skip


def test_seats_are_trained_against_the_same_seat_of_the_group_s_other_games():
    # X won game 0 and lost game 1; O's seat the other way round. Without std normalisation each
    # is its reward minus its seat's mean: X [1 - 0.5, 0 - 0.5], O [0 - 0.5, 1 - 0.5].
    group = RolloutGroup(0, "tictactoe", [game(1.0, 0.0), game(0.0, 1.0)])
    made = sequences_from_groups([group], std_normalize=False).sequences
    assert [(s.token_ids[0], s.advantage) for s in made] == [
        (1, 0.5),
        (1, -0.5),
        (5, -0.5),
        (5, 0.5),
    ]
    # per-turn credit works per seat too: one turn each, gamma 1 gives the same numbers
    per_turn = sequences_from_groups([group], std_normalize=False, turn_gamma=1.0).sequences
    assert [s.advantages()[1] for s in per_turn] == [0.5, -0.5, -0.5, 0.5]


def test_a_group_whose_seats_disagree_has_a_learning_signal_for_dynamic_sampling():
    # X drew both games (no signal for X); O's seats scored 0.7 and 0.6 (an invalid move)
    seats_differ = RolloutGroup(0, "tictactoe", [game(0.7, 0.7), game(0.7, 0.6)])
    all_equal = RolloutGroup(1, "tictactoe", [game(0.7, 0.7), game(0.7, 0.7)])
    assert seats_differ.has_signal and not all_equal.has_signal
    assert filter_groups([seats_differ, all_equal]).kept == [seats_differ]


def test_seats_survive_the_group_journal(tiny_tokenizer):
    result = rlve.evaluate(self_play_env(), ScriptedEngine(minimax_policy, tiny_tokenizer), 2)
    for group in result.groups:
        again = group_from_json(group_to_json(group))
        assert again == group and again.trajectories[0].seats[0].turn_spans


def test_an_unknown_opponent_is_refused_by_name():
    with pytest.raises(ValueError, match="opponent must be one of .*'selff'"):
        rlve.load_environment("tictactoe", opponent="selff")
    with pytest.raises(ValueError, match="scripted_fraction"):
        rlve.load_environment("tictactoe", opponent="self", scripted_fraction=1.5)


def o_first_free_cell(messages):
    """Minimax for X; the first free cell for O (told apart as in `o_always_invalid`)."""
    board = parse_board(messages[-1]["content"])
    if (9 - board.count(" ")) % 2:
        return f"<think>first</think><move>{board.index(' ')}</move>"
    return minimax_policy(messages)


def test_the_o_seat_s_mistakes_are_its_own_and_cost_it_at_the_move():
    games = games_x_opened(self_play_env(mistake_penalty=0.25), o_first_free_cell)
    for t in games:
        (seat,) = t.seats
        assert t.metrics["game/mistakes"] == 0.0  # minimax never makes one
        count = seat.metrics["game/mistakes"]
        # after X's optimal opening O still draws with best play: O loses only by a mistake
        assert count >= (seat_result(_x_result(t)) == "loss")
        # each well-formed answer earns 0.2 / answers at its turn, each mistake costs 0.25
        penalties = [round(r - 0.2 / len(seat.turn_rewards), 9) for r in seat.turn_rewards]
        assert penalties.count(-0.25) == count
    assert any(seat_result(_x_result(t)) == "loss" for t in games)
