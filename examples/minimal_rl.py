"""RL for a language model in one file: sample groups, score them, CISPO or GRPO, AdamW.

Run it:  .venv/bin/python examples/minimal_rl.py --steps 20   (the embedded tiny model, on CPU)
         .venv/bin/python examples/minimal_rl.py --loss grpo --env reverse_text --model DIR

Every step samples `group_size` completions for each of `prompts_per_step` prompts with the policy
itself (plain `transformers` generate), scores them with the environment's rubric, compares each
reward with the rest of its group, and takes one policy-gradient step. This is what rlve's trainer
does without the machinery around it: no vLLM, no micro-batches, no curriculum, no checkpoints.
tests/unit/test_example_parity.py checks that a step here has the loss and gradient norm of a
step of rlve's real Trainer (rlve/training/trainer.py) on the same rollout groups.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from dataclasses import dataclass, fields

import torch
from torch import Tensor

import rlve
from rlve.envs.base import Environment
from rlve.models import load_causal_lm, load_tokenizer
from rlve.types import Example, RolloutGroup, Trajectory


@dataclass
class Args:
    model: str = "tiny"
    """"tiny" (rlve's embedded model, random weights, built here without a download) or a path"""
    env: str = "vowels"
    """an rlve single-turn environment by name (rlve.list_environments()): "vowels", the smoke
    task that a model climbs from random weights, or e.g. "reverse_text\""""
    loss: str = "cispo"
    """"cispo" or "grpo"; each comes with its recipe (RECIPES below)"""
    steps: int = 20
    """training steps: one batch of rollout groups and `epochs` optimizer steps each"""
    prompts_per_step: int = 8
    """prompts (rollout groups) per step"""
    group_size: int = 8
    """completions sampled per prompt, compared with each other; >= 2"""
    max_new_tokens: int = 8
    """longest completion, in tokens"""
    temperature: float = 1.0
    """sampling temperature; the log-probs of the loss use the same one"""
    lr: float = 1e-2
    """AdamW's learning rate (rlve's default 1e-5 suits a pretrained model; random weights need
    big steps)"""
    max_grad_norm: float = 1.0
    """the gradient is clipped to this global norm"""
    epochs: int = 1
    """optimizer steps on each batch (PPO epochs, rlve's trainer.num_iterations); from the
    second one on the ratio r leaves 1 and CISPO's cap or GRPO's clip can act"""
    seed: int = 0
    """seed of torch's generator: the weights are fixed, so it decides every sample"""
    device: str = "cpu"
    """torch device, e.g. "cpu" or "cuda\""""


RECIPES = {
    "cispo": {"std_normalize": False, "is_cap": 5.0},
    "grpo": {"std_normalize": True, "eps_low": 0.2, "eps_high": 0.2},
}
"""each loss's own settings, as `trainer.loss=<loss>` resolves them (the test checks that)"""


# ---------------------------------------------------------------------------------------------
# The environment
# ---------------------------------------------------------------------------------------------


def load_env(name: str) -> Environment:
    """A single-turn rlve environment by name."""
    env = rlve.load_environment(name)
    if env.max_turns != 1:  # a conversation needs rlve's episode runner (rlve/rollout)
        raise ValueError(f"{name} is a multi-turn environment; this example plays one turn")
    return env


# ---------------------------------------------------------------------------------------------
# Rollouts: sample a group of completions per prompt, score them with the rubric
# ---------------------------------------------------------------------------------------------


def stop_token_ids(model, tokenizer) -> list[int]:
    """The tokens that end a completion: the tokenizer's eos and the model's generation ones."""
    ids = model.generation_config.eos_token_id
    ids = [] if ids is None else [ids] if isinstance(ids, int) else list(ids)
    return sorted({tokenizer.eos_token_id, *ids} - {None})


def scores(env: Environment, example: Example, texts: list[str]) -> list[float]:
    """The rubric's reward of each completion of `example` (its functions run async)."""
    n = len(texts)
    completions = [[{"role": "assistant", "content": text}] for text in texts]
    states = [env.initial_state(example) for _ in texts]
    scored = asyncio.run(env.rubric.score_group(
        [example.prompt] * n, completions, [example.answer] * n, states, [example.info] * n
    ))  # fmt: skip
    return [s.reward for s in scored]


@torch.no_grad()
def sample_group(model, tokenizer, env: Environment, example: Example, args: Args) -> RolloutGroup:
    """`group_size` completions of one prompt, as rlve's token-exact trajectories: the prompt's
    tokens (loss mask 0) then the sampled ones up to and with the stop token (loss mask 1)."""
    text = tokenizer.apply_chat_template(example.prompt, tokenize=False, add_generation_prompt=True)
    prompt_ids = tokenizer.encode(text, add_special_tokens=False)
    prompt = torch.tensor([prompt_ids], device=args.device)
    stops = stop_token_ids(model, tokenizer)
    # top_k=0 and top_p=1 sample from the whole softmax(logits / T): the distribution whose
    # log-probs the loss takes (transformers would otherwise keep only the 50 likeliest tokens)
    output = model.generate(
        prompt, attention_mask=torch.ones_like(prompt), do_sample=True,
        temperature=args.temperature, top_k=0, top_p=1.0, max_new_tokens=args.max_new_tokens,
        num_return_sequences=args.group_size, eos_token_id=stops, pad_token_id=stops[0],
    )  # fmt: skip
    completions = []
    for row in output[:, len(prompt_ids) :].tolist():
        ends = [i for i, token in enumerate(row) if token in stops]
        completions.append(row[: ends[0] + 1] if ends else row)  # the stop token is sampled too
    texts = [tokenizer.decode(ids, skip_special_tokens=True) for ids in completions]
    trajectories = [
        Trajectory(
            prompt=example.prompt,
            completion=[{"role": "assistant", "content": text}],
            answer=example.answer,
            info=example.info,
            token_ids=prompt_ids + ids,
            loss_mask=[0] * len(prompt_ids) + [1] * len(ids),
            turn_spans=[(len(prompt_ids), len(prompt_ids) + len(ids))],
            reward=reward,
            env_name=env.name,
            example_id=example.example_id,
        )
        for ids, text, reward in zip(completions, texts, scores(env, example, texts), strict=True)
    ]
    return RolloutGroup(example.example_id, env.name, trajectories)


# ---------------------------------------------------------------------------------------------
# The math: advantages, log-probs, losses
# ---------------------------------------------------------------------------------------------


def group_advantages(rewards: Tensor, std_normalize: bool, eps: float = 1e-6) -> Tensor:
    """A_i = R_i - mean(R), and / (std(R) + eps) with `std_normalize` (GRPO, Shao et al. 2024,
    section 4.1.2); `rewards`: [G], one group. No learned value function: the other samples of
    the same prompt are the baseline. A group whose rewards are all equal says nothing about
    which completion was better: its advantages are exactly 0 (not the rounding error of a mean).
    """
    if len(rewards) < 2 or rewards.max() == rewards.min():
        return torch.zeros_like(rewards)
    centered = rewards - rewards.mean()
    return centered / (rewards.std() + eps) if std_normalize else centered


@dataclass
class Batch:
    """A step's trajectories as right-padded rows."""

    input_ids: Tensor
    """[B, T] long, each row a prompt and its completion, then padding"""
    loss_mask: Tensor
    """[B, T] bool, True on sampled tokens"""
    advantages: Tensor
    """[B, 1] float32, each row's advantage (it broadcasts over the row's tokens)"""


def make_batch(groups: list[RolloutGroup], std_normalize: bool, device: str) -> Batch:
    trajectories = [t for group in groups for t in group.trajectories]
    # rewards in float64 as rlve's trainer takes them, then the advantages in the loss's float32
    advantages = torch.cat([
        group_advantages(torch.tensor(group.rewards, dtype=torch.float64), std_normalize)
        for group in groups
    ]).float()  # fmt: skip
    length = max(len(t.token_ids) for t in trajectories)
    # Padding goes after every real token, so causal attention never reads it and no attention
    # mask is needed; its value (0) does not matter, and the loss mask leaves it out.
    input_ids = torch.zeros(len(trajectories), length, dtype=torch.long)
    loss_mask = torch.zeros(len(trajectories), length, dtype=torch.bool)
    for row, t in enumerate(trajectories):
        input_ids[row, : len(t.token_ids)] = torch.tensor(t.token_ids)
        loss_mask[row, : len(t.loss_mask)] = torch.tensor(t.loss_mask, dtype=torch.bool)
    return Batch(input_ids.to(device), loss_mask.to(device), advantages[:, None].to(device))


def token_logprobs(model, input_ids: Tensor, loss_mask: Tensor, temperature: float) -> Tensor:
    """logp[b, t] = log pi(input_ids[b, t] | input_ids[b, :t]) at the sampling temperature,
    [B, T] float32, 0 off the loss mask. The logits at t - 1 predict token t. (rlve projects
    only the trained positions, in chunks, so [B, T, vocab] logits never exist at once.)"""
    logits = model(input_ids=input_ids, use_cache=False).logits.float() / temperature
    logp = torch.log_softmax(logits[:, :-1], dim=-1)
    taken = logp.gather(-1, input_ids[:, 1:, None]).squeeze(-1)
    taken = torch.cat([torch.zeros_like(taken[:, :1]), taken], dim=1)  # token 0: no prediction
    return torch.where(loss_mask, taken, torch.zeros_like(taken))


def cispo_loss(
    logp: Tensor, old_logp: Tensor, advantages: Tensor, mask: Tensor, is_cap: float
) -> Tensor:
    """CISPO (MiniMax-M1, 2025, section 3.1), token-level:

        L = -1/N * sum_{i,t} sg(min(r_it, is_cap)) * A_i * log pi(y_it),  r = pi / pi_old

    N = every sampled token of the batch, so each token weighs the same however long its
    completion. The capped weight is detached (sg): unlike PPO's clip, no token loses its
    gradient. logp, old_logp, mask: [B, T]; advantages: [B, 1].
    """
    ratio = torch.exp(logp - old_logp)  # 1 off the mask, where both are 0
    weight = ratio.clamp(max=is_cap).detach()
    per_token = -weight * advantages * logp
    return torch.where(mask, per_token, torch.zeros_like(per_token)).sum() / mask.sum()


def grpo_loss(
    logp: Tensor, old_logp: Tensor, advantages: Tensor, mask: Tensor, eps_low: float,
    eps_high: float,
) -> Tensor:  # fmt: skip
    """GRPO (Shao et al. 2024, DeepSeekMath eq. 3, without its KL term), sequence-level:

        L = -1/G * sum_i 1/|y_i| * sum_t min(r_it * A_i, clip(r_it, 1 - e_low, 1 + e_high) * A_i)

    Each completion's tokens are averaged, then the completions. The clip zeroes the gradient of
    a token whose ratio has already moved past the range in its advantage's direction.
    """
    ratio = torch.exp(logp - old_logp)
    clipped = ratio.clamp(1 - eps_low, 1 + eps_high)
    surrogate = torch.minimum(ratio * advantages, clipped * advantages)
    per_token = torch.where(mask, -surrogate, torch.zeros_like(surrogate))
    return (per_token.sum(dim=1) / mask.sum(dim=1)).mean()


# ---------------------------------------------------------------------------------------------
# One training step
# ---------------------------------------------------------------------------------------------


def make_optimizer(model, args: Args) -> torch.optim.Optimizer:
    # rlve's defaults; torch's own AdamW would decay weights by 0.01
    return torch.optim.AdamW(
        model.parameters(), lr=args.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0
    )


def policy_update(
    model, optimizer, batch: Batch, old_logp: Tensor | None, args: Args
) -> tuple[float, float]:
    """One optimizer step on `batch`; returns (loss, gradient norm before clipping)."""
    logp = token_logprobs(model, batch.input_ids, batch.loss_mask, args.temperature)
    if old_logp is None:  # the weights that sampled are these ones: r = 1 exactly
        old_logp = logp.detach()
    recipe = RECIPES[args.loss]
    if args.loss == "cispo":
        loss = cispo_loss(logp, old_logp, batch.advantages, batch.loss_mask, recipe["is_cap"])
    else:
        loss = grpo_loss(logp, old_logp, batch.advantages, batch.loss_mask,
                         recipe["eps_low"], recipe["eps_high"])  # fmt: skip
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
    optimizer.step()
    return loss.item(), grad_norm.item()


def train_step(model, optimizer, groups: list[RolloutGroup], args: Args) -> tuple[float, float]:
    """`epochs` optimizer steps on the step's groups; (loss, grad norm), means over the steps
    as rlve's train/loss and train/grad_norm."""
    batch = make_batch(groups, RECIPES[args.loss]["std_normalize"], args.device)
    old_logp = None
    if args.epochs > 1:  # the behaviour policy's log-probs, before the first step moves it
        with torch.no_grad():
            old_logp = token_logprobs(model, batch.input_ids, batch.loss_mask, args.temperature)
    results = [policy_update(model, optimizer, batch, old_logp, args) for _ in range(args.epochs)]
    return tuple(sum(values) / len(values) for values in zip(*results, strict=True))


# ---------------------------------------------------------------------------------------------
# The loop
# ---------------------------------------------------------------------------------------------


def parse_args() -> Args:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="Each option is documented in the Args dataclass at the top of this file.",
    )
    for field in fields(Args):
        flag = "--" + field.name.replace("_", "-")
        parser.add_argument(flag, type=type(field.default), default=field.default,
                            help=f"default: {field.default}")  # fmt: skip
    args = Args(**vars(parser.parse_args()))
    if args.loss not in RECIPES:
        parser.error(f"--loss must be one of {sorted(RECIPES)}, got {args.loss!r}")
    if args.group_size < 2 or args.steps < 1:
        parser.error("--group-size must be >= 2 (a group compares its samples), --steps >= 1")
    return args


def main(args: Args) -> None:
    torch.manual_seed(args.seed)
    tokenizer = load_tokenizer(args.model)
    model = load_causal_lm(args.model, dtype="float32", device=args.device)
    env = load_env(args.env)
    optimizer = make_optimizer(model, args)
    print(f"{args.loss} on {env.name} ({len(env)} prompts), model {args.model}, "
          f"{args.prompts_per_step} x {args.group_size} rollouts per step")  # fmt: skip
    for step in range(args.steps):
        started = time.perf_counter()
        model.eval()  # sampling: no dropout
        first = step * args.prompts_per_step
        examples = [env.example(first + i) for i in range(args.prompts_per_step)]
        groups = [sample_group(model, tokenizer, env, ex, args) for ex in examples]
        model.train()
        loss, grad_norm = train_step(model, optimizer, groups, args)
        rollouts = [t for group in groups for t in group.trajectories]
        reward = sum(t.reward for t in rollouts) / len(rollouts)
        length = sum(t.num_sampled_tokens for t in rollouts) / len(rollouts)
        # On-policy the loss's value is near 0 (a group's advantages add up to 0, and each
        # completion's log-probs are alike); its gradient, not its value, is what moves the policy.
        print(f"step {step + 1:3d}  reward {reward:.3f}  loss {loss:+.4f}  "
              f"grad_norm {grad_norm:.3f}  tokens {length:.1f}  "
              f"{time.perf_counter() - started:.1f}s")  # fmt: skip
    print(f"a completion of the last step: {rollouts[0].completion[-1]['content']!r}")


if __name__ == "__main__":
    main(parse_args())
