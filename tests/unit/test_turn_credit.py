"""Per-turn returns and advantages, checked against values computed by hand."""

import pytest

from rlve.algorithms.turn_credit import token_advantages, turn_advantages, turn_returns


def test_what_the_turns_do_not_claim_is_earned_at_the_last_turn():
    # r = [-1, 0 + (0 - (-1))] = [-1, 1]; G_1 = 1, G_0 = -1 + 1 = 0 (the episode's reward)
    assert turn_returns([-1.0, 0.0], 0.0, gamma=1.0) == [0.0, 1.0]
    # no turn rewards: every turn's return is the episode's reward, discounted from the end
    assert turn_returns([0.0, 0.0, 0.0], 1.0, gamma=0.5) == [0.25, 0.5, 1.0]
    assert turn_returns([], 1.0, gamma=1.0) == []


def test_two_turn_episodes_get_the_advantages_computed_by_hand():
    """Rollout A moves illegally at turn 0 (-1, which is its episode's reward); B wins (+1).
    gamma 1: G_A = [-1, 0], G_B = [1, 1]. Turn 0: mean 0 -> -1, +1 (the episode advantages).
    Turn 1: mean 0.5 -> -0.5, +0.5: A's later turn carries half the blame of its first."""
    returns = [turn_returns([-1.0, 0.0], -1.0, 1.0), turn_returns([0.0, 0.0], 1.0, 1.0)]
    assert returns == [[-1.0, 0.0], [1.0, 1.0]]
    assert turn_advantages(returns, std_normalize=False) == [[-1.0, -0.5], [1.0, 0.5]]
    # gamma 0.5: G_A = [-1 + 0.5 * 0, 0] = [-1, 0], G_B = [0 + 0.5 * 1, 1] = [0.5, 1];
    # turn 0: mean -0.25 -> -0.75, +0.75
    discounted = [turn_returns([-1.0, 0.0], -1.0, 0.5), turn_returns([0.0, 0.0], 1.0, 0.5)]
    assert turn_advantages(discounted, std_normalize=False) == [[-0.75, -0.5], [0.75, 0.5]]


def test_a_turn_only_one_rollout_reached_gets_no_advantage():
    # turn 0: [2, 0, 1] -> mean 1; turn 1: [3, 5] -> mean 4; turn 2: only the first rollout
    returns = [[2.0, 3.0, 7.0], [0.0], [1.0, 5.0]]
    assert turn_advantages(returns, std_normalize=False) == [[1.0, -1.0, 0.0], [-1.0], [0.0, 1.0]]
    # std-normalized: turn 0's sample std is 1, turn 1's is sqrt(2)
    normalized = turn_advantages(returns, std_normalize=True, eps=0.0)
    assert normalized[0][0] == pytest.approx(1.0) and normalized[2][1] == pytest.approx(2**-0.5)


def test_with_positions_a_turn_is_compared_with_the_group_s_turns_from_its_position():
    # turn 1: A and C play from position q (0 and 1 -> mean 0.5), B alone from r is compared
    # with every turn 1 (0, 2, 1 -> mean 1); turn 0: all three from p (1, 0, 0.5 -> mean 0.5)
    returns = [[1.0, 0.0], [0.0, 2.0], [0.5, 1.0]]
    positions = [["p", "q"], ["p", "r"], ["p", "q"]]
    by_position = turn_advantages(returns, std_normalize=False, positions=positions)
    assert by_position == [[0.5, -0.5], [-0.5, 1.0], [0.0, 0.5]]
    by_index = turn_advantages(returns, std_normalize=False)  # turn 1: mean 1
    assert by_index == [[0.5, -1.0], [-0.5, 1.0], [0.0, 0.0]]
    # a position reached at different turns: t (3 and 5 -> mean 4); s alone -> turn 0 (1, 5)
    mixed = turn_advantages([[1.0, 3.0], [5.0]], std_normalize=False, positions=[["s", "t"], ["t"]])
    assert mixed == [[-2.0, -1.0], [1.0]]
    with pytest.raises(ValueError, match=r"positions for \[1\] turns, returns for \[2\]"):
        turn_advantages([[1.0, 2.0]], std_normalize=False, positions=[["p"]])


def test_a_token_of_turn_one_gets_turn_one_s_advantage():
    # prompt 0-2, turn 0 = tokens 3-4, environment reply 5-6, turn 1 = token 7, then 8
    per_token = token_advantages(9, [(3, 5), (7, 8)], [-1.0, -0.5])
    assert per_token == [0.0, 0.0, 0.0, -1.0, -1.0, 0.0, 0.0, -0.5, 0.0]


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="gamma must be in"):
        turn_returns([0.0], 1.0, gamma=1.5)
    with pytest.raises(ValueError, match="2 turns but 1 turn advantages"):
        token_advantages(4, [(0, 1), (2, 3)], [1.0])
    with pytest.raises(ValueError, match="outside a sequence of 4"):
        token_advantages(4, [(2, 6)], [1.0])


@pytest.mark.parametrize(
    ("penalty", "expected"), [("flat", [-0.1, 0.0]), ("per_move", [-0.1, -0.1])]
)
def test_tictactoe_credits_an_invalid_move_s_penalty_to_that_move(penalty, expected):
    import rlve
    from rlve.envs.tictactoe import minimax_policy
    from rlve.rollout import ScriptedEngine

    answers = iter(["no move here", "<move>9</move>"])  # two invalid moves, then minimax

    def policy(messages):
        return next(answers, None) or minimax_policy(messages)

    env = rlve.load_environment("tictactoe", num_examples=1, invalid_penalty=penalty,
                                min_random_move_prob=0.0, max_random_move_prob=0.0)  # fmt: skip
    [trajectory] = rlve.evaluate(env, ScriptedEngine(policy), 1).groups[0].trajectories
    assert trajectory.turn_rewards[:2] == expected  # malformed too: no part of the format reward
    well_formed = 0.2 / trajectory.num_turns  # each minimax answer's part of it
    assert trajectory.turn_rewards[2:] == pytest.approx([well_formed] * (trajectory.num_turns - 2))
    rubric_penalty = {"flat": "invalid_move_penalty", "per_move": "invalid_moves_penalty"}
    assert trajectory.metrics[f"reward/{rubric_penalty[penalty]}"] == pytest.approx(sum(expected))


def two_turn_group():
    """The two rollouts of the hand-computed case, as token sequences: prompt 0-1, turn 0 =
    tokens 2-3, reply 4, turn 1 = tokens 5-6."""
    from rlve.types import RolloutGroup, Trajectory

    def rollout(turn_rewards, reward):
        return Trajectory(prompt=[], completion=[], token_ids=[1, 2, 3, 4, 5, 6, 7],
                          loss_mask=[0, 0, 1, 1, 0, 1, 1], sampler_logprobs=[0.0] * 7,
                          turn_spans=[(2, 4), (5, 7)], reward=reward, num_turns=2,
                          turn_rewards=turn_rewards)  # fmt: skip

    return RolloutGroup(0, "game", [rollout([-1.0, 0.0], -1.0), rollout([], 1.0)])


@pytest.mark.parametrize("packing", ["padded", "packed"])
def test_each_token_is_trained_with_its_turn_s_advantage(packing):
    from rlve.algorithms.packing import build_train_batch
    from rlve.algorithms.train_sequences import sequences_from_groups

    episode = sequences_from_groups([two_turn_group()], std_normalize=False).sequences
    per_turn = sequences_from_groups([two_turn_group()], std_normalize=False, turn_gamma=1.0)
    assert [s.advantages() for s in episode] == [
        [0.0, 0.0, -1.0, -1.0, 0.0, -1.0, -1.0], [0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0]]  # fmt: skip
    assert [s.advantages() for s in per_turn.sequences] == [
        [0.0, 0.0, -1.0, -1.0, 0.0, -0.5, -0.5], [0.0, 0.0, 1.0, 1.0, 0.0, 0.5, 0.5]]  # fmt: skip
    batch = build_train_batch(per_turn.sequences, max_tokens=64, pad_token_id=0, packing=packing)
    trained = [
        a for mb in batch.micro_batches
        for a, m in zip(mb.advantages.flatten().tolist(), mb.loss_mask.flatten().tolist(),
                        strict=True) if m
    ]  # fmt: skip
    assert sorted(trained) == sorted([-1.0, -1.0, -0.5, -0.5, 1.0, 1.0, 0.5, 0.5])


def test_turn_positions_are_the_conversation_before_the_turn():
    """Three rollouts, gamma 0 (turn 1 earns the episode's reward, turn 0 nothing): A and C
    played the same turn 0 (tokens 3 4), so their turn 1 comes after the same conversation and
    is compared with each other's (1, 0 -> mean 0.5); B's is alone and compared with every
    turn 1 (1, 0, 0 -> mean 1/3)."""
    from rlve.algorithms.train_sequences import sequences_from_groups
    from rlve.types import RolloutGroup, Trajectory

    def rollout(first_turn, reward):
        return Trajectory(prompt=[], completion=[], token_ids=[1, 2, *first_turn, 5, 6, 7],
                          loss_mask=[0, 0, 1, 1, 0, 1, 1], turn_spans=[(2, 4), (5, 7)],
                          reward=reward, num_turns=2)  # fmt: skip

    group = RolloutGroup(0, "game", [rollout([3, 4], 1.0), rollout([3, 9], 0.0),
                                     rollout([3, 4], 0.0)])  # fmt: skip
    sequences = sequences_from_groups([group], std_normalize=False, turn_gamma=0.0,
                                      turn_positions=True).sequences  # fmt: skip
    assert [s.advantages()[5] for s in sequences] == pytest.approx([0.5, -1 / 3, -0.5])
    assert [s.advantages()[2] for s in sequences] == [0.0, 0.0, 0.0]
    by_index = sequences_from_groups([group], std_normalize=False, turn_gamma=0.0).sequences
    assert [s.advantages()[5] for s in by_index] == pytest.approx([2 / 3, -1 / 3, -1 / 3])


def test_a_turn_s_overlong_penalty_is_charged_at_that_turn():
    """Two drawn games (0.5), gamma 0. A's first answer ran past the limit: its overlong
    shaping, -1, belongs to turn 0. A's returns: [-1, 0.5 - 1 - (-1)] = [-1, 0.5]; B's [0, 0.5].
    Turn 0: mean -0.5 -> -0.5, +0.5; turn 1: equal -> 0. Left to the last turn, the penalty
    would have blamed A's second move and spared the first."""
    from rlve.algorithms.train_sequences import sequences_from_groups
    from rlve.types import RolloutGroup, Trajectory

    def rollout(turn_shaping):
        return Trajectory(prompt=[], completion=[], token_ids=[1, 2, 3, 4, 5, 6, 7],
                          loss_mask=[0, 0, 1, 1, 0, 1, 1], turn_spans=[(2, 4), (5, 7)],
                          reward=0.5, shaping=sum(turn_shaping), turn_shaping=turn_shaping,
                          num_turns=2)  # fmt: skip

    group = RolloutGroup(0, "game", [rollout([-1.0, 0.0]), rollout([])])
    sequences = sequences_from_groups([group], std_normalize=False, turn_gamma=0.0).sequences
    assert [s.advantages() for s in sequences] == [
        [0.0, 0.0, -0.5, -0.5, 0.0, 0.0, 0.0], [0.0, 0.0, 0.5, 0.5, 0.0, 0.0, 0.0]]  # fmt: skip
