"""On-policy distillation in the trainer and the loop, tiny model on the CPU: a teacher identical
to the student gives nothing, a tokenizer that differs is refused, a student sampling its own
answers moves towards a teacher trained to another behaviour, a run resumes exactly, and the
reward-hacking monitor still sees a policy that stops answering."""

import json
import math
import shutil

import pytest
import test_loop
import torch

from rlve.algorithms.train_sequences import TrainSequence
from rlve.config import TrainerConfig
from rlve.config.distill import DistillConfig
from rlve.models import load_causal_lm
from rlve.training.hacking_monitor import RewardHackingSuspected
from rlve.training.trainer import Trainer
from rlve.types import RolloutGroup, Trajectory

PROMPT = [82, 272, 91, 223, 90]
LOGPROB_TOLERANCE = 2 * 4 * math.sqrt(512) * 2**-24 * 10
"""two float32 log-probs of the same token computed with sums in another order (one sequence
alone, or packed in a prefix tree) differ by up to L sqrt(K) u x 10 nats each (L = 4 layers,
K = 512, u = 2^-24; tests/integration/test_trainer.py derives it)"""


def distill_config(**distill) -> TrainerConfig:
    return TrainerConfig(loss="cispo", lr=1e-3, old_logprobs="sampler",
                         distill=DistillConfig(**distill))  # fmt: skip


@torch.no_grad()
def sample_group(trainer: Trainer, generator: torch.Generator, n=8, length=3) -> RolloutGroup:
    """`n` answers the trainer's model samples itself (temperature 1), with their log-probs:
    on-policy, as vLLM would give them."""
    trajectories = []
    for _ in range(n):
        ids, logps = list(PROMPT), [0.0] * len(PROMPT)
        for _ in range(length):
            logits = trainer.causal_lm(torch.tensor([ids])).logits[0, -1].float()
            logp = torch.log_softmax(logits, dim=-1)
            token = int(torch.multinomial(logp.exp(), 1, generator=generator))
            ids.append(token)
            logps.append(float(logp[token]))
        mask = [0] * len(PROMPT) + [1] * length
        trajectories.append(Trajectory(prompt=[], completion=[], token_ids=ids, loss_mask=mask,
                                       sampler_logprobs=logps, reward=0.0))  # fmt: skip
    return RolloutGroup(example_id=0, env_name="test", trajectories=trajectories)


def test_a_teacher_identical_to_the_student_gives_zero_signal():
    trainer = Trainer(distill_config(teacher="initial", reward_weight=0.0))
    group = sample_group(trainer, torch.Generator().manual_seed(0))
    metrics = trainer.train_step([group])
    assert metrics["distill/tokens"] == 24
    assert abs(metrics["distill/reverse_kl"]) <= 2 * LOGPROB_TOLERANCE
    assert metrics["distill/clip_frac"] == 0.0
    assert metrics["distill/repeat_difference"] == 0.0  # the same kernels on a CPU: exact
    # nothing to learn from: the weights move by no more than the rounding's advantages allow
    assert abs(metrics["train/loss"]) <= 2 * LOGPROB_TOLERANCE * 10


def sft_model(tmp_path, name, answers, steps=20) -> str:
    """A tiny model taught by SFT to answer PROMPT with one of `answers` (one token each, a
    batch of all of them per step: an answer listed k times out of n gets about k/n), exported."""
    trainer = Trainer(TrainerConfig(lr=3e-3))
    for _ in range(steps):
        trainer.sft_step([(PROMPT + answer, [0] * len(PROMPT) + [1]) for answer in answers])
    return trainer.export(str(tmp_path / name))


A, B = [284], [289]


@torch.no_grad()
def answer_logprobs(model) -> torch.Tensor:
    """[vocab] log-probs of the first answer token."""
    return torch.log_softmax(model(torch.tensor([PROMPT])).logits[0, -1].float(), dim=-1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_student_distilled_from_a_teacher_of_another_behaviour_moves_towards_it(tmp_path, seed):
    """The student answers A or B about evenly, the teacher A three times in four. Sampling its
    own answers with their advantage d_t alone (no reward), the student's exact reverse KL to
    the teacher (over the whole vocabulary, at the answer) falls, and it answers A more often.
    The estimate from 8 samples a step is too noisy to show it in 6 steps; the exact value is
    not."""
    student_path = sft_model(tmp_path, "student", [A, B])
    teacher_path = sft_model(tmp_path, "teacher", [A, A, A, B])
    teacher = answer_logprobs(load_causal_lm(teacher_path))
    config = distill_config(teacher=teacher_path, reward_weight=0.0)
    config.model = student_path
    student = Trainer(config)

    def reverse_kl() -> float:
        mine = answer_logprobs(student.causal_lm)
        return float((mine.exp() * (mine - teacher)).sum())

    generator = torch.Generator().manual_seed(seed)
    before, share_before = reverse_kl(), float(answer_logprobs(student.causal_lm)[A[0]].exp())
    for _ in range(6):
        student.train_step([sample_group(student, generator, length=1)])
    share_after = float(answer_logprobs(student.causal_lm)[A[0]].exp())
    assert 0.45 < share_before < 0.55 and float(teacher[A[0]].exp()) > 0.7
    assert reverse_kl() < 0.5 * before, (before, reverse_kl())
    assert share_after > share_before + 0.1


def test_a_teacher_with_another_tokenizer_is_refused_naming_the_token(tmp_path, tiny_path):
    other = tmp_path / "other"
    shutil.copytree(tiny_path, other)
    tokenizer = json.loads((other / "tokenizer.json").read_text())
    vocab = tokenizer["model"]["vocab"]
    first, second = sorted(vocab, key=vocab.get)[300:302]  # swap two ordinary tokens' ids
    vocab[first], vocab[second] = vocab[second], vocab[first]
    (other / "tokenizer.json").write_text(json.dumps(tokenizer))
    with pytest.raises(ValueError, match=r"token id 300 is .* for the student and .* teacher"):
        Trainer(distill_config(teacher=str(other)))


def test_kill_and_resume_reproduces_the_uninterrupted_distillation(tmp_path):
    teacher = sft_model(tmp_path, "teacher", [A, A, B])
    config = distill_config(teacher=teacher, reward_weight=0.5)
    groups = [sample_group(Trainer(TrainerConfig()), torch.Generator().manual_seed(s))
              for s in range(4)]  # fmt: skip
    for group, reward in zip(groups, (1.0, 0.0, 0.5, 0.0), strict=True):
        group.trajectories[0].reward = reward
    whole = Trainer(config)
    for step, group in enumerate(groups):
        whole.train_step([group])
        if step == 1:
            saved = whole.save(str(tmp_path / "checkpoints"))
    resumed = Trainer(config)
    resumed.resume(saved)
    for group in groups[2:]:
        resumed.train_step([group])
    test_loop.assert_same_weights(
        dict(resumed.model.named_parameters()), dict(whole.model.named_parameters())
    )


def test_environment_tokens_get_no_signal_in_a_real_step():
    trainer = Trainer(distill_config(teacher="initial"))
    # prompt, answer, an environment reply, answer: only the 4 sampled tokens are scored
    ids = PROMPT + [284, 19] + [91, 223] + [7, 8]
    mask = [0] * 5 + [1, 1] + [0, 0] + [1, 1]
    sequence = TrainSequence(ids, mask, sampler_logprobs=[0.0] * 5 + [-1.0] * 2 + [0.0] * 2
                             + [-1.0] * 2)  # fmt: skip
    (distilled,), metrics = trainer.teacher.distill([sequence])
    assert metrics["distill/tokens"] == 4
    advantages = distilled.advantages()
    assert [advantages[i] for i in (0, 1, 2, 3, 4, 7, 8)] == [0.0] * 7
    assert all(advantages[i] != 0.0 for i in (5, 6, 9, 10))


# ---- the loop --------------------------------------------------------------------------------

DISTILL = ["trainer.distill.teacher=initial", "trainer.distill.privileged=true"]
"""added to the loop tests' fast run (tests/integration/test_loop.py): the starting weights as
the teacher, reading the threats line of the grid board the student plays"""


def run(tmp_path, name, *overrides, on_step=None):
    return test_loop.run(tmp_path, name, *DISTILL, *overrides, on_step=on_step)


def test_a_distillation_run_resumes_exactly_and_logs_its_metrics(tmp_path):
    whole = run(tmp_path, "whole", "trainer.max_steps=3", "save_every=1")
    run(tmp_path, "part", "trainer.max_steps=2", "save_every=1")
    part = run(tmp_path, "part", "trainer.max_steps=3", "save_every=1", "resume=true")
    rows_whole, rows_part = test_loop.metrics(whole), test_loop.metrics(part)
    keys = [k for k in rows_whole[2] if k.startswith(("distill/", "train/loss", "reward/"))]
    assert "distill/reverse_kl" in keys and "distill/reverse_kl_q4" in keys
    assert {k: rows_part[2][k] for k in keys} == {k: rows_whole[2][k] for k in keys}
    assert rows_whole[0]["distill/tokens"] > 0


def test_a_policy_that_stops_answering_still_trips_the_monitor_under_pure_distillation(tmp_path):
    """With the reward out of the advantage (reward_weight 0), a policy that stops playing from
    step 3 on is still seen: the monitor watches the environment's escapes, not the loss."""

    def escape_after_2(step, trainer, engine, metrics):
        test_loop.ESCAPING["now"] = step >= 2

    test_loop.ESCAPING["now"] = False
    with pytest.raises(RewardHackingSuspected, match="step 3: .*game/invalid rose from 0.000"):
        run(tmp_path, "r", "trainer.max_steps=5", "save_every=100", "hacking.action=stop",
            "trainer.distill.reward_weight=0", "rollout.dynamic_sampling=false",
            "rollout.scripted_policy=test_loop:stops_playing",
            on_step=escape_after_2)  # fmt: skip
    assert [r["step"] for r in test_loop.metrics(tmp_path / "r")] == [1, 2, 3]


def test_privileged_needs_an_environment_with_a_view(tmp_path):
    with pytest.raises(ValueError, match=r"environment\(s\) \['reverse_text'\] define no"):
        run(tmp_path, "r", "env.names=[reverse_text]", "trainer.max_steps=1")


@pytest.mark.vllm
def test_the_distillation_recipe_runs_on_the_tiny_model_through_vllm(tmp_path):
    """`+experiment=tictactoe_distill` as a user runs it, with the tiny model at small sizes:
    warm-up, vLLM sampling with its log-probs, the live policy scoring them from the threats
    board's view; the tiny model plays no legal move, so the first-batch check is off."""
    from rlve.loop import train
    from rlve.train import load_run_config

    out = tmp_path / "run"
    config = load_run_config([
        "+experiment=tictactoe_distill", "model=tiny", "stop_if_unplayable=false",
        "warmup.teacher_games=24", "warmup.steps=2", "warmup.batch_size=4",
        "rollout.groups_per_step=2", "rollout.group_size=2", "rollout.max_tokens=8",
        "evaluation.games=0", "trainer.max_steps=2", "logging.wandb_mode=disabled",
        "logging.console_every=0", f"output_dir={out}",
    ])  # fmt: skip
    train(config)
    rows = test_loop.metrics(out)
    assert [r["step"] for r in rows] == [1, 2]
    for row in rows:
        assert row["distill/tokens"] > 0 and math.isfinite(row["distill/reverse_kl"])
        assert 0.0 <= row["distill/clip_frac"] <= 1.0
