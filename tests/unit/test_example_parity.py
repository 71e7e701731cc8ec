"""examples/minimal_rl.py, the one-file RL loop, takes the step rlve's real Trainer takes: the same
recipe and optimizer settings, the same advantages and losses (checked off-policy, where the
clip and the cap act), and from the same weights on the same sampled rollout groups the same
first-step loss and gradient norm, up to float32 rounding.

Tolerances. The example runs right-padded rows through the model and projects every position;
the Trainer packs them, forwards each shared prompt once (a prefix tree) and projects only the
trained positions. The same arithmetic in other shapes: test_packed_parity.py derives what that
may change, L * sqrt(K) * u * LOGIT_SCALE of a log-prob (`fp32_tolerances`, u = 2^-24) and
2 * L * sqrt(K) * u of a gradient entry relative to its tensor's largest. A loss is a weighted
mean of log-probs with weights |A| <= max |A|, so it may move by max |A| times the first, plus
the rounding of its N-term sum in another order, at most N * u * max |A| * LOGIT_SCALE. The
gradient norm moves by at most the norm of the gradients' difference, sqrt(sum over tensors of
(entries x (tolerance x largest entry)^2)), computed from the example's own gradients.
"""

import importlib.util
import math
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from test_packed_parity import LOGIT_SCALE, U32, fp32_tolerances

from rlve.algorithms import group_advantages, policy_loss
from rlve.config import TrainerConfig
from rlve.models import load_causal_lm, load_tokenizer
from rlve.train import load_run_config
from rlve.training.trainer import Trainer

EXAMPLE = Path(__file__).parents[2] / "examples" / "minimal_rl.py"


def load_example():
    spec = importlib.util.spec_from_file_location("minimal_rl", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while they are built
    spec.loader.exec_module(module)
    return module


example = load_example()


@pytest.fixture(scope="module")
def run_trainer_configs():
    """The trainer config `python -m rlve.train trainer.loss=<loss>` runs with, per loss."""
    return {loss: load_run_config([f"trainer.loss={loss}"]).trainer for loss in example.RECIPES}


def test_the_example_runs_rlves_recipes_with_rlves_optimizer(run_trainer_configs):
    for loss, recipe in example.RECIPES.items():
        config = run_trainer_configs[loss]
        assert config.loss == loss
        assert recipe == {name: getattr(config, name) for name in recipe}, loss
    defaults, args = TrainerConfig(), example.Args()
    assert (args.temperature, args.max_grad_norm) == (defaults.temperature, defaults.max_grad_norm)
    optimizer = example.make_optimizer(torch.nn.Linear(2, 2), args)
    settings = optimizer.param_groups[0]
    assert settings["betas"] == (defaults.beta1, defaults.beta2)
    assert (settings["eps"], settings["weight_decay"]) == (defaults.adam_eps, defaults.weight_decay)


def test_group_advantages_by_hand_and_as_rlve_computes_them():
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=torch.float64)
    # mean 0.25; sample std sqrt((0.75^2 + 3 * 0.25^2) / 3) = 0.5
    centered = example.group_advantages(rewards, std_normalize=False)
    assert centered.tolist() == [0.75, -0.25, -0.25, -0.25]
    normalized = example.group_advantages(rewards, std_normalize=True)
    assert normalized.tolist() == pytest.approx([1.5, -0.5, -0.5, -0.5], rel=1e-5)  # eps 1e-6
    same = torch.full((3,), 0.1, dtype=torch.float64)  # 0.1 * 3 / 3 != 0.1 in floats
    assert example.group_advantages(same, std_normalize=True).tolist() == [0.0] * 3
    groups = torch.rand(6, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    ours = torch.stack([example.group_advantages(g, std_normalize=False) for g in groups])
    assert torch.equal(ours, group_advantages(groups, std_normalize=False))
    # torch's std along a row of a matrix rounds its 8-term sum of squares in another order than
    # its std of a vector: within 8 u (u = 2^-53), and the division adds one more rounding
    ours = torch.stack([example.group_advantages(g, std_normalize=True) for g in groups])
    theirs = group_advantages(groups, std_normalize=True)
    torch.testing.assert_close(ours, theirs, rtol=(8 + 2) * 2.0**-53, atol=0.0)


@pytest.mark.parametrize("loss", ["cispo", "grpo"])
def test_the_losses_equal_rlves_off_policy_where_the_clip_acts(loss):
    generator = torch.Generator().manual_seed(0)
    mask = torch.rand(6, 10, generator=generator) < 0.7
    mask[:, 0] = False
    mask[:, 1] = True  # every row has a sampled token
    logp = torch.where(mask, -4 * torch.rand(6, 10, generator=generator), 0.0)
    # |log r| up to 2: ratios from 0.14 to 7.4, past GRPO's clip range and CISPO's cap of 5
    old_logp = torch.where(mask, logp + 4 * torch.rand(6, 10, generator=generator) - 2, 0.0)
    advantages = torch.randn(6, 1, generator=generator)
    recipe = example.RECIPES[loss]
    values, grads = [], []
    for which in ("example", "rlve"):
        leaf = logp.clone().requires_grad_(True)
        if which == "rlve":
            hyper = {k: v for k, v in recipe.items() if k != "std_normalize"}
            value, stats = policy_loss(loss, leaf, old_logp, advantages.expand(6, 10), mask,
                                       **hyper)  # fmt: skip
            assert stats.clip_frac_high > 0 and (loss == "cispo" or stats.clip_frac_low > 0)
        elif loss == "cispo":
            value = example.cispo_loss(leaf, old_logp, advantages, mask, recipe["is_cap"])
        else:
            value = example.grpo_loss(leaf, old_logp, advantages, mask, recipe["eps_low"],
                                      recipe["eps_high"])  # fmt: skip
        value.backward()
        values.append(value.item())
        grads.append(leaf.grad)
    # The loss is a weighted sum of at most n terms, weights adding up to 1 (1 / n, or
    # 1 / (rows * row count)), each term at most 20 |A| (CISPO: weight <= 5 times |logp| <= 4;
    # GRPO: r |A| <= 7.4 |A|): each implementation's rounding is within (n + 2) u of 20 max |A|.
    n = int(mask.sum())
    bound = 2 * (n + 2) * U32 * 20.0 * float(advantages.abs().max())
    assert values[0] == pytest.approx(values[1], abs=bound)
    # a gradient entry is a product of a few factors (weight, A, 1 / count): a few roundings
    torch.testing.assert_close(grads[0], grads[1], rtol=8 * U32, atol=0.0)


def ended_early(trajectory, tokens: int):
    """`trajectory` as if its sampler had stopped `tokens` tokens sooner."""
    end = len(trajectory.token_ids) - tokens
    start = trajectory.turn_spans[0][0]
    return replace(trajectory, token_ids=trajectory.token_ids[:end],
                   loss_mask=trajectory.loss_mask[:end], turn_spans=[(start, end)])  # fmt: skip


@pytest.fixture(scope="module")
def sampled_groups(tiny_path):
    """Two prompts of different lengths, four completions each, sampled by the example. The
    random tiny model seldom samples a stop token, so some completions are cut short: with
    completions of one length, a token mean (CISPO) would equal a mean of sequence means (GRPO).
    """
    args = example.Args(max_new_tokens=8, group_size=4)
    model, tokenizer = load_causal_lm(tiny_path), load_tokenizer(tiny_path)
    env = example.load_env("vowels")
    torch.manual_seed(0)
    model.eval()
    groups = [example.sample_group(model, tokenizer, env, env.example(i), args) for i in (3, 12)]
    for group in groups:
        cuts = zip(group.trajectories, (0, 5, 2, 6), strict=True)
        group.trajectories = [ended_early(t, tokens) for t, tokens in cuts]
    assert all(g.has_signal for g in groups)  # rewards differ in each group: a gradient
    assert all(len({t.num_sampled_tokens for t in g.trajectories}) > 1 for g in groups)
    return groups


@pytest.mark.parametrize("loss", ["cispo", "grpo"])
def test_the_first_step_has_the_loss_and_gradient_norm_of_rlves_trainer(
    tiny_path, sampled_groups, run_trainer_configs, loss
):
    config = run_trainer_configs[loss]
    assert config.dtype == "float32" and config.num_iterations == 1 and not config.lora.enabled
    metrics = Trainer(config).train_step(sampled_groups)

    args = example.Args(loss=loss)
    model = load_causal_lm(tiny_path)
    model.train()
    batch = example.make_batch(sampled_groups, config.std_normalize, "cpu")
    with torch.no_grad():
        logp = example.token_logprobs(model, batch.input_ids, batch.loss_mask, 1.0)
    assert logp.abs().max() < LOGIT_SCALE  # the premise of fp32_tolerances
    loss_value, grad_norm = example.train_step(
        model, example.make_optimizer(model, args), sampled_groups, args
    )

    value_tol, grad_tol = fp32_tolerances(model.config)
    max_advantage = float(batch.advantages.abs().max())
    n = int(batch.loss_mask.sum())
    assert metrics["train/num_tokens"] == n
    loss_tol = max_advantage * (value_tol + n * U32 * LOGIT_SCALE)
    assert abs(metrics["train/loss"] - loss_value) <= loss_tol
    # clipping scaled every gradient by one factor, which this ratio does not see
    grads = [p.grad for p in model.parameters()]
    spread = math.sqrt(sum(g.numel() * g.abs().max().item() ** 2 for g in grads))
    norm = math.sqrt(sum(g.square().sum().item() for g in grads))
    assert grad_norm > 0
    assert abs(metrics["train/grad_norm"] - grad_norm) <= grad_tol * spread / norm * grad_norm
