"""On-policy distillation's pieces without a model: the per-token advantage by hand, its
statistics, the config's checks, and tic-tac-toe's privileged view reaching the teacher's token
ids and never the student's."""

import asyncio
import json

import pytest

import rlve
from rlve.algorithms.distill import DistillStats, answer_quarters, distilled_sequence
from rlve.algorithms.train_sequences import TrainSequence, sequences_from_groups
from rlve.config import RunConfig
from rlve.config.distill import DistillConfig
from rlve.envs.tictactoe import minimax_policy
from rlve.envs.tictactoe.prompts import OPEN_LINES_RULE
from rlve.inference.engine import SamplingConfig
from rlve.rollout import ScriptedEngine
from rlve.rollout.episode import play_episode
from rlve.rollout.turns import EpisodeSettings
from rlve.training.teacher import check_same_tokenizer, repeat_tolerance, teacher_sequences
from rlve.types import RolloutGroup

# prompt (2 tokens), a 2-token answer, an environment reply (1 token), a 1-token answer
SEQUENCE = TrainSequence(
    token_ids=[10, 11, 20, 21, 30, 40],
    loss_mask=[0, 0, 1, 1, 0, 1],
    advantage=0.5,
    sampler_logprobs=[0.0, 0.0, -1.0, -0.5, 0.0, -2.0],
)


def distill(sequence, teacher, coef=1.0, reward_weight=1.0, clip=(-5.0, 5.0)):
    stats = DistillStats()
    out = distilled_sequence(sequence, teacher, coef=coef, reward_weight=reward_weight,
                             clip_low=clip[0], clip_high=clip[1], stats=stats)  # fmt: skip
    return out.advantages(), stats.metrics()


def test_the_advantage_is_the_reward_s_plus_coef_times_teacher_minus_sampler():
    # d = teacher - sampler: (-0.5 - -1.0, -1.5 - -0.5, -2.0 - -2.0) = (0.5, -1.0, 0.0)
    advantages, metrics = distill(SEQUENCE, [-0.5, -1.5, -2.0], coef=2.0, reward_weight=0.5)
    # 0.5 x 0.5 + 2 x d on the sampled tokens; the prompt and the reply get nothing
    assert advantages == [0.0, 0.0, 1.25, -1.75, 0.0, 0.25]
    # reverse KL per sampled token: mean(sampler - teacher) = (-0.5 + 1.0 + 0) / 3
    assert metrics["distill/reverse_kl"] == pytest.approx(0.5 / 3)
    assert metrics["distill/teacher_logprob"] == pytest.approx(-4.0 / 3)
    assert metrics["distill/clip_frac"] == 0.0 and metrics["distill/tokens"] == 3


def test_pure_distillation_ignores_the_reward_and_clipping_is_counted():
    advantages, metrics = distill(SEQUENCE, [-0.5, -9.5, 1.0], reward_weight=0.0, clip=(-2.0, 2.0))
    # d = (0.5, -9.0, 3.0) clipped to [-2, 2]: (0.5, -2.0, 2.0); two of three tokens clipped
    assert advantages == [0.0, 0.0, 0.5, -2.0, 0.0, 2.0]
    assert metrics["distill/clip_frac"] == pytest.approx(2 / 3)
    assert metrics["distill/reverse_kl"] == pytest.approx((-0.5 + 9.0 - 3.0) / 3)  # unclipped


def test_a_teacher_that_is_the_sampler_gives_zero():
    advantages, metrics = distill(SEQUENCE, [-1.0, -0.5, -2.0], reward_weight=0.0)
    assert advantages == [0.0] * 6 and metrics["distill/reverse_kl"] == 0.0


def test_quarters_are_taken_within_each_answer():
    # answers of 4, 2 and 1 tokens: 4 -> 0 1 2 3; 2 -> 0 2; 1 -> 0
    assert answer_quarters([0, 1, 1, 1, 1, 0, 1, 1, 0, 1]) == [0, 1, 2, 3, 0, 2, 0]
    _, metrics = distill(SEQUENCE, [-0.5, -1.5, -2.0])
    # quarter 0: tokens 2 and 5 (d 0.5, 0.0): KL -0.25; quarter 2: token 3 (d -1.0): KL 1.0
    assert metrics["distill/reverse_kl_q1"] == pytest.approx(-0.25)
    assert metrics["distill/reverse_kl_q3"] == pytest.approx(1.0)
    assert metrics["distill/reverse_kl_q2"] == metrics["distill/reverse_kl_q4"] == 0.0


def test_a_count_mismatch_or_missing_sampler_logprobs_is_refused():
    with pytest.raises(ValueError, match="2 teacher log-probs for 3 sampled tokens"):
        distill(SEQUENCE, [-1.0, -1.0])
    blind = TrainSequence([1, 2], [0, 1])
    with pytest.raises(ValueError, match="sampler's log-probs"):
        distill(blind, [-1.0])


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"teacher": "initial", "coef": 0.0}, "coef must be > 0"),
        ({"teacher": "initial", "reward_weight": -1.0}, "reward_weight must be >= 0"),
        ({"teacher": "initial", "clip_low": 1.0}, "clip_low must be < 0 < clip_high"),
        ({"teacher": "self"}, "teacher=self without privileged=true"),
        ({"privileged": True}, "privileged=true needs a teacher"),
        ({"teacher_server": "http://h:1"}, "teacher_server needs trainer.distill.teacher"),
        ({"teacher": "initial", "teacher_server": "http://h:1"}, "is the student itself"),
    ],
)
def test_bad_distill_settings_fail_naming_the_field(fields, message):
    with pytest.raises(ValueError, match=message):
        DistillConfig(**fields).validate()


def test_pure_distillation_with_dynamic_sampling_is_refused():
    config = RunConfig()
    config.rollout.engine = "scripted"
    config.trainer.distill = DistillConfig(teacher="initial", reward_weight=0.0)
    config.rollout.dynamic_sampling = True
    with pytest.raises(ValueError, match="dynamic_sampling=false"):
        config.validate()


def test_a_tokenizer_that_differs_is_refused_naming_the_first_token(tiny_tokenizer):
    class Other:
        def get_vocab(self):
            vocab = dict(tiny_tokenizer.get_vocab())
            token = next(t for t, i in vocab.items() if i == 7)
            vocab["<renamed>"] = vocab.pop(token)
            return vocab

    check_same_tokenizer(tiny_tokenizer, tiny_tokenizer, "same")  # the same: accepted
    with pytest.raises(ValueError, match="token id 7 is .* for the student and '<renamed>'"):
        check_same_tokenizer(tiny_tokenizer, Other(), "other")


def test_the_repeat_tolerance_is_four_units_in_the_last_place():
    logps = [-0.5, -8.0]
    assert repeat_tolerance("float32", logps) == pytest.approx(4 * 8 * 2.0**-23)
    assert repeat_tolerance("bfloat16", logps) == pytest.approx(4 * 8 * 2.0**-7)


# ---- privileged view: tic-tac-toe's threats line ----------------------------------------------


def played(tokenizer, privileged, board="grid", seed=3):
    env = rlve.load_environment("tictactoe", rules="short", board=board)
    engine = ScriptedEngine(minimax_policy, tokenizer)
    settings = EpisodeSettings(privileged_view=privileged)
    example = env.make_example(seed, 5)
    trajectory, _ = asyncio.run(
        play_episode(env, engine, example, SamplingConfig(max_tokens=32), settings, seed)
    )
    return trajectory


def test_the_threats_line_reaches_the_teachers_ids_and_never_the_students(tiny_tokenizer):
    trajectory = played(tiny_tokenizer, privileged=True)
    view = trajectory.teacher_view
    student = tiny_tokenizer.decode(trajectory.token_ids)
    teacher = tiny_tokenizer.decode(view.token_ids)
    assert trajectory.num_turns >= 3
    # the student played the plain board; the teacher read the threats board's words
    assert "can win at" not in student and "No line has two" not in student
    assert OPEN_LINES_RULE.strip() not in student and OPEN_LINES_RULE.strip() in teacher
    board_turns = teacher.count("Your turn.")
    assert board_turns == trajectory.num_turns
    assert teacher.count("can win at") + teacher.count("No line has two of a mark.") >= board_turns
    # the same sampled ids, in the same order, each turn's after the teacher's own context
    sampled = [t for t, m in zip(trajectory.token_ids, trajectory.loss_mask, strict=True) if m]
    assert [t for t, m in zip(view.token_ids, view.loss_mask, strict=True) if m] == sampled
    assert len(view.token_ids) > len(trajectory.token_ids)
    # without the flag nothing is recorded, and the student's ids are the same either way
    plain = played(tiny_tokenizer, privileged=False)
    assert plain.teacher_view is None and plain.token_ids == trajectory.token_ids


def test_a_board_that_states_the_threats_shows_the_teacher_the_same(tiny_tokenizer):
    trajectory = played(tiny_tokenizer, privileged=True, board="threats")
    assert trajectory.teacher_view.token_ids == trajectory.token_ids


def test_the_view_travels_to_the_teacher_sequences_and_is_checked(tiny_tokenizer):
    trajectories = [played(tiny_tokenizer, True, seed=s) for s in (3, 4)]
    for t, reward in zip(trajectories, (1.0, 0.0), strict=True):
        t.reward = reward
    group = RolloutGroup(example_id=0, env_name="tictactoe", trajectories=trajectories)
    sequences = sequences_from_groups([group], std_normalize=False).sequences
    read = teacher_sequences(sequences)
    assert [r.token_ids for r in read] == [t.teacher_view.token_ids for t in trajectories]
    broken = [TrainSequence(s.token_ids, s.loss_mask, teacher_token_ids=s.teacher_token_ids,
                            teacher_loss_mask=[0] * len(s.teacher_token_ids))
              for s in sequences]  # fmt: skip
    with pytest.raises(ValueError, match="other sampled ids than the student's"):
        teacher_sequences(broken)


def test_the_teacher_view_survives_the_group_journal(tiny_tokenizer):
    from rlve.rollout.group_journal import group_from_json, group_to_json

    trajectory = played(tiny_tokenizer, privileged=True)
    group = RolloutGroup(example_id=0, env_name="tictactoe", trajectories=[trajectory])
    again = group_from_json(json.loads(json.dumps(group_to_json(group))))
    assert again.trajectories[0].teacher_view == trajectory.teacher_view
