"""The torch trainer on the tiny model, CPU: learning signal, accumulation invariance, exact
resume, LoRA merge/export, bad-input handling and config checks."""

import copy
import math
import os
from dataclasses import replace

import pytest
import test_loop  # tests/integration is on sys.path
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

import rlve.training.checkpoint as checkpoint
from rlve.config import LoraConfig, TrainerConfig
from rlve.models import load_causal_lm
from rlve.training.guarded_optimizer import TrainingDiverged
from rlve.training.trainer import Trainer
from rlve.types import RolloutGroup, Trajectory

PROMPT = [82, 272, 91, 223, 90]
COMPLETIONS = [[284, 19, 7], [289, 20, 8], [298, 21, 9], [365, 22, 10]]  # all of length 3
LORA = LoraConfig(enabled=True, rank=4, alpha=8.0)


def make_group(example_id=0, rewards=(1.0, 0.0, 0.0, 0.0), prompt=PROMPT):
    """Four fixed completions of one prompt; completion A (the first) gets reward 1."""
    trajectories = [
        Trajectory(
            prompt=[],
            completion=[],
            token_ids=prompt + completion,
            loss_mask=[0] * len(prompt) + [1] * len(completion),
            reward=reward,
        )
        for completion, reward in zip(COMPLETIONS, rewards, strict=True)
    ]
    return RolloutGroup(example_id=example_id, env_name="test", trajectories=trajectories)


def two_groups():
    # second prompt: other tokens, same length, and completion B rewarded
    return [make_group(0), make_group(1, (0.0, 1.0, 0.0, 0.0), [82, 300, 91, 223, 90])]


def trainable(trainer):
    return {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}


def completion_logprob(trainer, index=0):
    completion = COMPLETIONS[index]
    return trainer.sequence_logprob(PROMPT + completion, [0] * len(PROMPT) + [1] * len(completion))


# ---------------------------------------------------------------------------------------------
# Learning
# ---------------------------------------------------------------------------------------------


def assert_learns_the_rewarded_completion(trainer):
    """Four steps on the fixed group: the rewarded completion gains at least 1 nat, each
    unrewarded one loses log-prob."""
    before = [completion_logprob(trainer, i) for i in range(4)]
    for _ in range(4):
        metrics = trainer.train_step([make_group()])
        assert metrics["train/num_tokens"] == 12 and metrics["train/skipped_steps"] == 0
    after = [completion_logprob(trainer, i) for i in range(4)]
    assert after[0] > before[0] + 1.0
    assert all(a < b for a, b in zip(after[1:], before[1:], strict=True))


@pytest.mark.parametrize("lora", [False, True])
def test_cispo_raises_the_logprob_of_the_rewarded_completion(lora):
    config = TrainerConfig(loss="cispo", lr=1e-3 if not lora else 3e-2)
    if lora:
        config.lora = LORA
    assert_learns_the_rewarded_completion(Trainer(config))


@pytest.mark.parametrize(
    ("loss", "advantage"), [("dppo_tv", "group"), ("dppo_kl", "group"), ("cispo", "maxrl")]
)
def test_the_2026_objectives_raise_the_logprob_of_the_rewarded_completion(loss, advantage):
    """DPPO (both masks) and MaxRL's advantage learn on the fixed group as CISPO does above."""
    assert_learns_the_rewarded_completion(
        Trainer(TrainerConfig(loss=loss, advantage=advantage, lr=1e-3))
    )


def test_sft_steps_lower_the_loss():
    trainer = Trainer(TrainerConfig(lr=1e-3))
    examples = [(PROMPT + c, [0] * len(PROMPT) + [1] * len(c)) for c in COMPLETIONS[:2]]
    losses = [trainer.sft_step(examples)["train/loss"] for _ in range(5)]
    # a random init starts near log(vocab) = log(2048) = 7.6 nats per token
    assert losses[0] == pytest.approx(math.log(2048), abs=0.5)
    assert losses[-1] < losses[0] - 1.0
    assert all(b < a for a, b in zip(losses, losses[1:], strict=False))


def test_sft_accepts_trajectories_and_rejects_an_all_masked_batch():
    trainer = Trainer(TrainerConfig())
    group = make_group()
    assert trainer.sft_step(group.trajectories)["train/num_tokens"] == 12
    with pytest.raises(ValueError, match="every token of the SFT batch is masked"):
        trainer.sft_step([(PROMPT, [0] * len(PROMPT))])


@pytest.mark.parametrize(
    "loss", ["dapo", "cispo", "grpo", "dr_grpo", "gspo", "gmpo", "dppo_tv", "dppo_kl"]
)
def test_gradient_accumulation_equals_one_big_batch(loss):
    # 8 sequences of 8 tokens: one micro-batch of 8 rows (budget 64) vs 8 micro-batches of 1.
    # With the usual eps, Adam's first step is about lr * sign(g): blind to the gradient's scale
    # (a per-micro-batch mean would pass) and touchy where |g| ~ eps. adam_eps = 1 makes the
    # step lr * g / (|g| + 1) ~ lr * g, so the parameters show the gradient itself.
    results = []
    for budget in (64, 8):
        config = TrainerConfig(
            loss=loss, lr=0.1, adam_eps=1.0, max_grad_norm=0.0, max_tokens_per_microbatch=budget
        )
        trainer = Trainer(config)
        metrics = trainer.train_step(two_groups())
        results.append((trainable(trainer), metrics))
    (big, big_metrics), (small, small_metrics) = results
    assert big_metrics["train/loss"] == pytest.approx(small_metrics["train/loss"], abs=1e-6)
    assert big_metrics["train/grad_norm"] == pytest.approx(small_metrics["train/grad_norm"], 1e-4)
    for name in big:
        assert (big[name] - small[name]).abs().max().item() <= 1e-6, name


def uneven_group():
    """Completions of 3, 20, 1 and 40 tokens after the 5-token prompt: 8, 25, 6, 45 in all."""
    completions = [[284, 19, 7], list(range(300, 320)), [289], list(range(400, 440))]
    trajectories = [
        Trajectory(prompt=[], completion=[], token_ids=PROMPT + c,
                   loss_mask=[0] * len(PROMPT) + [1] * len(c), reward=float(i == 1))
        for i, c in enumerate(completions)
    ]  # fmt: skip
    return RolloutGroup(example_id=0, env_name="test", trajectories=trajectories)


@pytest.mark.parametrize("loss", ["cispo", "grpo", "gspo"])
def test_a_packed_step_is_the_padded_step_without_the_padding(loss):
    # Padded: one micro-batch of 4 rows x 45 = 180 positions for 84 tokens (padded_frac 96/180).
    # Packed: one row of 45 + 25 + 8 + 6 = 84 tokens, attended one sequence at a time
    # (SEQUENCE_SDPA): no padding at all.
    # adam_eps = 1 makes the update lr * g / (|g| + 1), so the weights show the gradient. The
    # layouts differ only in the order of float32 sums (tests/unit/test_packed_parity.py derives
    # the bounds): log-probs by L sqrt(K) u x 10 nats, L = 4 layers, K = 512, u = 2^-24, so the
    # loss too (|A| <= 1); gradients by 2 L sqrt(K) u of their size, times lr for the weights.
    results = {}
    for packing in ("padded", "packed"):
        config = TrainerConfig(loss=loss, lr=0.1, adam_eps=1.0, max_grad_norm=0.0, packing=packing)
        trainer = Trainer(config)
        results[packing] = (trainer.train_step([uneven_group()]), trainable(trainer))
    (padded, padded_weights), (packed, packed_weights) = results["padded"], results["packed"]
    assert padded["perf/padded_frac"] == pytest.approx(96 / 180)
    assert packed["perf/padded_frac"] == 0.0
    tolerance = 2 * 4 * math.sqrt(512) * 2**-24
    assert packed["train/loss"] == pytest.approx(padded["train/loss"], abs=tolerance / 2 * 10)
    assert packed["train/grad_norm"] == pytest.approx(padded["train/grad_norm"], rel=tolerance)
    for name, weight in padded_weights.items():
        change = (weight - packed_weights[name]).abs().max().item()
        assert change <= 0.1 * tolerance * padded["train/grad_norm"], name


def test_a_step_forwards_each_prompt_once_and_skips_what_has_no_advantage():
    # rewards 1, 0, 0.5, 0.5: advantages 0.5, -0.5, 0, 0, so completions C and D (8 tokens each)
    # cannot move the loss; A and B share the 5-token prompt: 5 + 3 + 3 nodes for 16 tokens
    group = make_group(rewards=(1.0, 0.0, 0.5, 0.5))
    results = {}
    for share in (False, True):
        config = TrainerConfig(lr=0.1, adam_eps=1.0, max_grad_norm=0.0, share_prefixes=share)
        trainer = Trainer(config)
        results[share] = (trainer.train_step([group]), trainable(trainer))
    (apart, apart_weights), (shared, shared_weights) = results[False], results[True]
    assert shared["perf/skipped_tokens"] == apart["perf/skipped_tokens"] == 16
    assert shared["perf/unshared_tokens"] == apart["perf/forward_tokens"] == 16
    assert shared["perf/forward_tokens"] == 11
    assert shared["train/num_tokens"] == 12  # the skipped completions still count in the mean
    # FLOPs (rlve.training.flops; tiny: 4 layers of 245,760 weights, 4 heads of 32, 128 x 2048
    # head) of one forward, x3 for the backward: shared, the 11 nodes at positions 0-4, 5-7, 5-7
    # (keys read 15 + 2 x 21); apart, two sequences of positions 0-7 (2 x 36); both 6 head tokens
    head = 2 * 128 * 2048 * 6
    assert shared["perf/train_flops"] == 3 * (2 * 4 * 245_760 * 11 + 2048 * 57 + head)
    assert apart["perf/train_flops"] == 3 * (2 * 4 * 245_760 * 16 + 2048 * 72 + head)
    achieved, peak = shared["perf/train_tflops"], shared["perf/peak_tflops"]
    assert shared["perf/mfu"] == pytest.approx(achieved / peak)
    tolerance = 2 * 4 * math.sqrt(512) * 2**-24  # as in the packed step's test above
    assert shared["train/loss"] == pytest.approx(apart["train/loss"], abs=tolerance / 2 * 10)
    for name, weight in apart_weights.items():
        change = (weight - shared_weights[name]).abs().max().item()
        assert change <= 0.1 * tolerance * apart["train/grad_norm"], name
    with_kl = Trainer(TrainerConfig(kl_beta=0.1)).train_step([group])
    assert with_kl["perf/skipped_tokens"] == 0  # the KL term needs every token


# ---------------------------------------------------------------------------------------------
# Checkpoints
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("lora", [False, True])
def test_kill_and_resume_reproduces_the_uninterrupted_run(tmp_path, lora):
    config = TrainerConfig(loss="cispo", lr=1e-3, warmup_steps=2, lr_schedule="cosine",
                           max_steps=4, weight_decay=0.01)  # fmt: skip
    if lora:  # adapter dropout draws from the torch rng, which must be restored too
        config.lora = replace(LORA, dropout=0.1)
    uninterrupted = Trainer(config)
    for step in range(4):
        uninterrupted.train_step(two_groups())
        if step == 1:
            saved = uninterrupted.save(str(tmp_path), extra={"curriculum": {"level": 3}})
    assert os.path.basename(saved) == "step_00000002"

    resumed = Trainer(config)
    assert resumed.resume(saved) == {"curriculum": {"level": 3}}
    assert resumed.step == 2
    for _ in range(2):
        resumed.train_step(two_groups())
    test_loop.assert_same_weights(trainable(resumed), trainable(uninterrupted))


def test_checkpoints_keep_the_newest_k_and_survive_a_crash_mid_save(tmp_path, monkeypatch):
    trainer = Trainer(TrainerConfig(keep_checkpoints=2))
    for step in range(4):
        trainer.step = step
        trainer.save(str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == ["step_00000002", "step_00000003"]

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(checkpoint, "_fsync_tree", crash)  # after every file is written
    trainer.step = 4
    with pytest.raises(OSError, match="disk full"):
        trainer.save(str(tmp_path))
    # no half-written step_4, no staging directory left, the last good one still loads
    assert sorted(os.listdir(tmp_path)) == ["step_00000002", "step_00000003"]
    monkeypatch.undo()
    assert checkpoint.load_trainer_state(checkpoint.latest_checkpoint(str(tmp_path)))["step"] == 3


# ---------------------------------------------------------------------------------------------
# Weights for vLLM and export
# ---------------------------------------------------------------------------------------------


def test_lora_inference_weights_are_the_merged_base_weights():
    trainer = Trainer(TrainerConfig(lr=1e-2, lora=LORA))
    for _ in range(2):
        trainer.train_step([make_group()])
    weights = dict(trainer.named_weights_for_inference())
    base_state = load_causal_lm("tiny").state_dict()
    assert set(weights) == set(base_state) | {"lm_head.weight"}
    merged = copy.deepcopy(trainer.model).merge_and_unload().state_dict()
    for name, value in weights.items():
        assert torch.allclose(value, merged[name], atol=1e-6), name
    # the adapters did train: merged attention weights moved away from the base
    q_proj = "model.layers.0.self_attn.q_proj.weight"
    assert (weights[q_proj] - base_state[q_proj]).abs().max() > 1e-4
    assert torch.equal(weights["lm_head.weight"], weights["model.embed_tokens.weight"])


def test_full_finetune_inference_weights_include_the_tied_lm_head():
    trainer = Trainer(TrainerConfig())
    weights = dict(trainer.named_weights_for_inference())
    assert set(weights) == set(load_causal_lm("tiny").state_dict()) | {"lm_head.weight"}
    assert torch.equal(weights["lm_head.weight"], weights["model.embed_tokens.weight"])


def test_exported_model_gives_the_trainers_logits(tmp_path):
    trainer = Trainer(TrainerConfig(lr=1e-2, lora=LORA))
    trainer.train_step([make_group()])
    path = trainer.export(str(tmp_path / "export"))
    exported = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    ids = torch.tensor([PROMPT + COMPLETIONS[0]])
    trainer.model.eval()
    with torch.no_grad():
        expected = trainer.model(input_ids=ids).logits
        got = exported(input_ids=ids).logits
    assert (got - expected).abs().max().item() <= 1e-5
    assert len(AutoTokenizer.from_pretrained(path)) == len(trainer.tokenizer)


# ---------------------------------------------------------------------------------------------
# Off-policy, KL, bad input
# ---------------------------------------------------------------------------------------------


def test_kl_to_the_base_is_zero_at_first_and_grows_with_lora():
    trainer = Trainer(TrainerConfig(lr=1e-2, lora=LORA, kl_beta=0.1))
    first = trainer.train_step([make_group()])
    # LoRA's B starts at zero, so the adapted model equals the base: k3 = e^0 - 0 - 1 = 0
    assert first["train/kl"] == pytest.approx(0.0, abs=1e-9)
    later = [trainer.train_step([make_group()])["train/kl"] for _ in range(2)]
    assert later[-1] > 1e-6


@pytest.mark.parametrize(("iterations", "clipped"), [(1, False), (2, True)])
def test_later_iterations_use_the_old_logprobs_from_before_the_first(iterations, clipped):
    # on-policy, the ratio is exactly 1 and nothing is clipped; in the second iteration the
    # ratio is against the weights before the first update, which lr 0.03 moved beyond 1 +- 0.2
    trainer = Trainer(TrainerConfig(loss="dapo", lr=3e-2, num_iterations=iterations))
    metrics = trainer.train_step([make_group()])
    assert (metrics["train/clip_frac"] > 0) == clipped
    assert trainer.version == 1


def test_sampler_logprobs_give_mismatch_metrics():
    trainer = Trainer(TrainerConfig(tis_cap=2.0))
    group = make_group()
    for trajectory in group.trajectories:
        logp = trainer.sequence_logprob(trajectory.token_ids, trajectory.loss_mask)
        # every sampled token gets the same sampler log-prob: the true per-token values differ,
        # so only the equality of mean and max diff at one token would be a coincidence
        trajectory.sampler_logprobs = [0.0] * len(PROMPT) + [logp / 3 + 0.1] * 3
    metrics = trainer.train_step([group])
    assert metrics["sampling/logprob_diff_max"] > 0
    assert metrics["sampling/is_ratio_max"] >= metrics["sampling/is_ratio_mean"] > 0


def token_logprobs(trainer, trajectory) -> list[float]:
    """The trainer's per-token log-probs of `trajectory` (0.0 off the mask), temperature 1."""
    ids = torch.tensor([trajectory.token_ids])
    with torch.no_grad():
        logp = torch.log_softmax(trainer.model(ids).logits[0, :-1].float(), dim=-1)
    per_token = [0.0] + logp.gather(-1, ids[0, 1:, None])[:, 0].tolist()
    return [lp if m else 0.0 for lp, m in zip(per_token, trajectory.loss_mask, strict=True)]


def sampled_at(trainer, group, shift: float = 0.0):
    """`group` with sampler log-probs = the trainer's own, minus `shift` nats per token."""
    for trajectory in group.trajectories:
        logps = token_logprobs(trainer, trajectory)
        trajectory.sampler_logprobs = [
            lp - shift if m else 0.0 for lp, m in zip(logps, trajectory.loss_mask, strict=True)
        ]
    return group


# Completion A (3 of the group's 12 trained tokens) sampled 1 nat below the trainer: r = e per
# token, A's product e^3, its geometric mean e; the other 9 tokens at r = 1. With tis_cap 2 each
# level corrects A's 3 tokens (one sequence of four), and nothing else.
@pytest.mark.parametrize("level", ["token", "sequence", "geometric"])
@pytest.mark.parametrize("mode", ["truncate", "mask"])
def test_one_step_with_each_sampler_correction_corrects_exactly_the_off_tokens(level, mode):
    trainer = Trainer(TrainerConfig(lr=1e-2, tis_cap=2.0, tis_level=level, tis_mode=mode))
    group = sampled_at(trainer, make_group())
    off = group.trajectories[0]
    # 1 nat lower on its sampled tokens (mask 1), 0.0 elsewhere as before
    off.sampler_logprobs = [
        lp - m for lp, m in zip(off.sampler_logprobs, off.loss_mask, strict=True)
    ]
    before = trainable(trainer)
    metrics = trainer.train_step([group])
    acted = "sampling/tis_truncated_frac" if mode == "truncate" else "sampling/tis_masked_frac"
    share = metrics[acted]
    assert share == pytest.approx(3 / 12)
    assert metrics["sampling/tis_sequence_frac"] == pytest.approx(1 / 4)
    assert math.isfinite(metrics["train/loss"]) and metrics["train/skipped_steps"] == 0
    assert any((trainable(trainer)[n] - w).abs().max() > 0 for n, w in before.items())


def test_one_step_with_an_entropy_share_trains_only_the_most_uncertain_tokens():
    # on-policy CISPO: loss = -sum over kept tokens of A log p / 12, A = r - mean: 0.75 for
    # completion A and -0.25 for the others. Temperature 0.05 spreads the random model's
    # near-uniform entropies (all about log 2048 at temperature 1) over 0.6-3.3 nats, so that
    # entropy_quantile 5/12 cuts between the 5th and 6th highest with a wide margin (the four
    # completions' first tokens share one position and one entropy; they are all kept).
    temperature, share = 0.05, 5 / 12
    trainer = Trainer(TrainerConfig(loss="cispo", entropy_quantile=share, temperature=temperature))
    group = make_group()
    tokens = []  # (entropy, A log p) of each trained token
    for trajectory, advantage in zip(group.trajectories, [0.75, -0.25, -0.25, -0.25], strict=True):
        ids = torch.tensor([trajectory.token_ids])
        with torch.no_grad():
            logits = trainer.model(ids).logits[0, :-1].float() / temperature
        for t in range(len(PROMPT), len(trajectory.token_ids)):
            row = torch.log_softmax(logits[t - 1], dim=-1)
            entropy = -(row.exp() * row).sum().item()
            tokens.append((entropy, advantage * row[trajectory.token_ids[t]].item()))
    tokens.sort(reverse=True)
    assert tokens[4][0] - tokens[5][0] > 0.01  # the cut is far from a tie
    expected = -sum(value for _, value in tokens[:5]) / 12
    metrics = trainer.train_step([group])
    assert metrics["train/loss"] == pytest.approx(expected, rel=1e-4)
    assert metrics["train/entropy_kept_frac"] == pytest.approx(5 / 12)


@pytest.mark.parametrize(
    ("loss", "is_cap", "clip_low", "clip_high"),
    [
        # r = 2 on every token. CISPO caps the weight at is_cap: 5 leaves it, 1.5 caps all 12.
        ("cispo", 5.0, 0.0, 0.0),
        ("cispo", 1.5, 0.0, 1.0),
        # DAPO: r = 2 > 1 + 0.28 clips the tokens with A > 0 (completion A: 3 of 12 tokens);
        # for A < 0 the clip from below needs r < 0.8, so it never fires (it reads no is_cap)
        ("dapo", None, 0.0, 0.25),
    ],
)
def test_ratio_against_the_sampler_is_what_the_sampler_logprobs_say(
    loss, is_cap, clip_low, clip_high
):
    trainer = Trainer(TrainerConfig(loss=loss, is_cap=is_cap, old_logprobs="sampler"))
    group = sampled_at(trainer, make_group(), shift=math.log(2.0))
    metrics = trainer.train_step([group])
    assert metrics["train/ratio_mean"] == pytest.approx(2.0, rel=1e-4)
    assert metrics["train/ratio_min"] == pytest.approx(2.0, rel=1e-4)
    assert metrics["train/clip_frac_low"] == clip_low
    assert metrics["train/clip_frac_high"] == pytest.approx(clip_high)
    assert "sampling/is_ratio_mean" not in metrics  # old == sampler: nothing to compare


def test_a_batch_sampled_one_version_ago_has_ratios_away_from_one():
    trainer = Trainer(TrainerConfig(loss="cispo", lr=1e-3, old_logprobs="sampler"))
    fresh = sampled_at(trainer, make_group())
    assert trainer.train_step([fresh])["train/ratio_max"] == pytest.approx(1.0, abs=1e-5)
    stale = sampled_at(trainer, make_group())  # sampled by version 1 ...
    trainer.train_step([sampled_at(trainer, make_group())])  # ... the trainer moves to version 2
    metrics = trainer.train_step([stale])
    assert metrics["train/ratio_max"] > 1.001 or metrics["train/ratio_min"] < 0.999


def test_old_logprobs_sampler_needs_sampler_logprobs():
    trainer = Trainer(TrainerConfig(old_logprobs="sampler"))
    metrics = trainer.train_step([make_group()])  # no sampler log-probs: the group is skipped
    assert metrics["train/skipped_groups"] == 1


@pytest.mark.parametrize(("mini_batches", "clipped"), [(1, False), (2, True)])
def test_later_mini_batches_train_with_a_ratio_and_clip(mini_batches, clipped):
    # two groups, one per mini-batch: the first update moves the weights (lr 0.03), so the second
    # mini-batch's ratio against the log-probs recomputed before the first leaves 1 +- 0.2
    trainer = Trainer(TrainerConfig(loss="dapo", lr=3e-2, mini_batches=mini_batches))
    metrics = trainer.train_step(two_groups())
    assert (metrics["train/clip_frac"] > 0) == clipped
    assert trainer.scheduler.last_epoch == mini_batches  # one optimizer step per mini-batch
    assert metrics["train/num_tokens"] == 24


def test_the_lr_schedule_spans_every_optimizer_step():
    # max_steps 2 train steps x 2 mini-batches = 4 optimizer steps of cosine; after the first
    # train step (2 optimizer steps) the lr is half way: 0.5 * (1 + cos(pi * 2 / 4)) = 0.5
    config = TrainerConfig(lr=1e-3, lr_schedule="cosine", max_steps=2, mini_batches=2)
    trainer = Trainer(config)
    trainer.train_step(two_groups())
    assert trainer.scheduler.get_last_lr()[0] == pytest.approx(0.5e-3)


def test_nan_reward_group_is_skipped_and_counted():
    trainer = Trainer(TrainerConfig(lr=1e-3))
    before = trainable(trainer)
    nan_group = make_group(1, (math.nan, 0.0, 1.0, 0.0))
    metrics = trainer.train_step([make_group(), nan_group])
    assert metrics["train/skipped_groups"] == 1
    assert metrics["train/num_tokens"] == 12  # only the good group's 4 x 3 tokens
    assert math.isfinite(metrics["train/loss"]) and metrics["train/skipped_steps"] == 0
    assert any(not torch.equal(before[n], p) for n, p in trainable(trainer).items())


def test_three_nan_steps_in_a_row_raise_training_diverged():
    trainer = Trainer(TrainerConfig(lr=1e-3))
    with torch.no_grad():
        trainer.model.model.norm.weight[0] = math.nan  # every logit becomes NaN
    before = trainable(trainer)
    for expected_skips in (1, 2):
        metrics = trainer.train_step([make_group()])
        assert metrics["train/skipped_steps"] == expected_skips
        assert math.isnan(metrics["train/loss"])
        after = trainable(trainer)
        assert all(torch.allclose(before[n], after[n], 0, 0, equal_nan=True) for n in before)
    with pytest.raises(TrainingDiverged, match="3 steps in a row"):
        trainer.train_step([make_group()])


def test_a_step_with_only_bad_groups_is_a_skipped_step():
    trainer = Trainer(TrainerConfig())
    metrics = trainer.train_step([make_group(0, (math.inf, 0.0, 0.0, 0.0))])
    assert (metrics["train/skipped_groups"], metrics["train/skipped_steps"]) == (1, 1)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("loss", "ppo", "trainer.loss: unknown loss .ppo."),
        ("eps_low", 1.5, r"eps_low must be in \[0, 1\)"),
        ("is_cap", 0.0, "is_cap must be > 0, got 0.0"),
        ("tis_cap", 0.5, "tis_cap must be None or > 1"),
        ("dtype", "float8", "dtype must be one of"),
        ("max_tokens_per_microbatch", 0, "max_tokens_per_microbatch must be >= 1"),
        ("lora", LoraConfig(enabled=True, rank=0), "lora.rank must be >= 1"),
        ("old_logprobs", "behaviour", r"old_logprobs must be one of \['sampler', 'recompute'\]"),
        ("mini_batches", 0, "mini_batches must be >= 1, got 0"),
        ("packing", "tight", r"packing must be one of \['padded', 'packed'\], got 'tight'"),
    ],
)
def test_bad_config_fails_at_start_naming_the_field(field, value, message):
    loss = "cispo" if field == "is_cap" else "dapo"  # a loss that reads the field
    with pytest.raises(ValueError, match=message):
        Trainer(replace(TrainerConfig(loss=loss), **{field: value}))
