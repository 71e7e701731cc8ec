"""Policy losses: hand-derived single-token values, a naive loop as a second implementation,
gradient-accumulation invariance, importance-sampling weights, the k3 KL and input checks."""

import math

import pytest
import torch

from rlve.algorithms import LOSSES, LossStats, kl_penalty, policy_loss

E = math.e


def one_token(logp: float, old_logp: float, dtype=torch.float64):
    """[1, 1] inputs for a single sampled token; logp is a leaf that collects the gradient."""
    leaf = torch.tensor([[logp]], dtype=dtype, requires_grad=True)
    return leaf, torch.tensor([[old_logp]], dtype=dtype), torch.ones(1, 1, dtype=torch.bool)


# ---------------------------------------------------------------------------------------------
# Hand-derived single tokens
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["grpo", "dapo"])
def test_high_ratio_is_clipped_at_one_plus_eps_high(kind):
    # logp - old_logp = 1 -> r = e = 2.718; A = 1, eps_high = 0.2:
    # -min(2.718 * 1, clip(2.718, 0.8, 1.2) * 1) = -min(2.718, 1.2) = -1.2; clipped, so no gradient.
    logp, old, mask = one_token(-1.0, -2.0)
    loss, stats = policy_loss(kind, logp, old, torch.tensor([1.0]), mask, eps_high=0.2)
    loss.backward()
    assert loss.item() == pytest.approx(-1.2)
    assert logp.grad.item() == 0.0
    assert (stats.clip_frac_high, stats.clip_frac_low, stats.num_tokens) == (1.0, 0.0, 1)


@pytest.mark.parametrize("kind", ["grpo", "dapo"])
def test_low_ratio_with_negative_advantage_is_clipped_at_one_minus_eps_low(kind):
    # logp - old_logp = -1 -> r = e^-1 = 0.3679; A = -1, eps_low = 0.2:
    # -min(0.3679 * -1, clip(0.3679, 0.8, 1.28) * -1) = -min(-0.3679, -0.8) = 0.8.
    logp, old, mask = one_token(-2.0, -1.0)
    loss, stats = policy_loss(kind, logp, old, torch.tensor([-1.0]), mask, eps_low=0.2)
    loss.backward()
    assert loss.item() == pytest.approx(0.8)
    assert logp.grad.item() == 0.0
    assert (stats.clip_frac_low, stats.clip_frac_high) == (1.0, 0.0)


def test_low_ratio_with_positive_advantage_is_not_clipped():
    # r = e^-1, A = +1: -min(0.3679, 0.8) = -0.3679; the unclipped term wins, so the gradient is
    # d(-r * A)/dlogp = -r * A = -0.3679 and no clip is counted.
    logp, old, mask = one_token(-2.0, -1.0)
    loss, stats = policy_loss("dapo", logp, old, torch.tensor([1.0]), mask)
    loss.backward()
    assert loss.item() == pytest.approx(-1 / E)
    assert logp.grad.item() == pytest.approx(-1 / E)
    assert (stats.clip_frac_low, stats.clip_frac_high) == (0.0, 0.0)


def test_on_policy_token_is_the_plain_policy_gradient():
    # r = 1, A = 2: loss -2, gradient -r * A = -2.
    logp, old, mask = one_token(-0.7, -0.7)
    loss, _ = policy_loss("grpo", logp, old, torch.tensor([2.0]), mask)
    loss.backward()
    assert (loss.item(), logp.grad.item()) == (pytest.approx(-2.0), pytest.approx(-2.0))


def test_cispo_caps_the_detached_weight_and_keeps_the_gradient():
    # r = e > is_cap = 2 -> coefficient 2. One masked token, num_tokens = 4 (the step's count):
    # loss = -2 * A * logp / 4 = -2 * 1 * (-0.5) / 4 = 0.25; d loss / d logp = -2 * A / 4 = -0.5.
    # (PPO's clip would have zeroed this gradient.)
    logp, old, mask = one_token(-0.5, -1.5)
    loss, stats = policy_loss(
        "cispo", logp, old, torch.tensor([1.0]), mask, is_cap=2.0, num_tokens=4
    )
    loss.backward()
    assert loss.item() == pytest.approx(0.25)
    assert logp.grad.item() == pytest.approx(-0.5)
    assert (stats.clip_frac_high, stats.clip_frac_low) == (1.0, 0.0)


def test_cispo_below_the_cap_uses_the_ratio():
    # r = e^-1 < 5: coefficient 0.3679, A = -3: gradient -0.3679 * -3 = 1.1036 (one token).
    logp, old, mask = one_token(-2.0, -1.0)
    loss, stats = policy_loss("cispo", logp, old, torch.tensor([-3.0]), mask)
    loss.backward()
    assert loss.item() == pytest.approx(-(1 / E) * -3.0 * -2.0)
    assert logp.grad.item() == pytest.approx(3 / E)
    assert stats.clip_frac_high == 0.0


# ---------------------------------------------------------------------------------------------
# Aggregation: per-sequence mean (grpo) vs token mean (dapo)
# ---------------------------------------------------------------------------------------------


def two_lengths_batch():
    # On-policy (r = 1), so each token's loss is -A. Sequence 0: 1 token, A = 2 -> -2.
    # Sequence 1: 3 tokens, A = -1 -> +1 each. Sequence 2: no sampled token at all.
    logp = torch.zeros(3, 3, dtype=torch.float64)
    mask = torch.tensor([[1, 0, 0], [1, 1, 1], [0, 0, 0]])
    return logp, logp.clone(), torch.tensor([2.0, -1.0, 5.0]), mask


def test_grpo_averages_sequences_and_skips_empty_ones():
    # (-2 / 1 + 3 / 3) / 2 sequences = -0.5; the empty sequence is not counted (else -1/3).
    logp, old, advantages, mask = two_lengths_batch()
    loss, stats = policy_loss("grpo", logp, old, advantages, mask)
    assert loss.item() == pytest.approx(-0.5)
    assert stats.num_tokens == 4


def test_grpo_tells_the_sequences_of_a_packed_row_apart():
    # The same three sequences end to end in one row: [seq 0 (1 token), seq 1 (3), seq 2 (2,
    # none sampled)]. Per-sequence means again: (-2 / 1 + 3 / 3) / 2 = -0.5; without the ids the
    # row would be one sequence: (-2 + 3) / 4 = 0.25.
    logp = torch.zeros(1, 6, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 1, 0, 0]])
    advantages = torch.tensor([[2.0, -1.0, -1.0, -1.0, 5.0, 5.0]])
    ids = torch.tensor([[0, 1, 1, 1, 2, 2]])
    loss, _ = policy_loss("grpo", logp, logp.clone(), advantages, mask, sequence_ids=ids)
    assert loss.item() == pytest.approx(-0.5)
    loss, _ = policy_loss("grpo", logp, logp.clone(), advantages, mask)
    assert loss.item() == pytest.approx(0.25)
    with pytest.raises(ValueError, match=r"sequence_ids has shape \(6,\), logp has \(1, 6\)"):
        policy_loss("grpo", logp, logp.clone(), advantages, mask, sequence_ids=ids[0])


def test_dapo_averages_tokens():
    # (-2 + 1 + 1 + 1) / 4 tokens = 0.25: the long sequence weighs three times as much.
    logp, old, advantages, mask = two_lengths_batch()
    loss, _ = policy_loss("dapo", logp, old, advantages, mask)
    assert loss.item() == pytest.approx(0.25)
    # With the step's count (say 10 tokens over all micro-batches): 1 / 10.
    loss, _ = policy_loss("dapo", logp, old, advantages, mask, num_tokens=10)
    assert loss.item() == pytest.approx(0.1)


def test_per_token_advantages_are_accepted():
    # Same batch with A given per token: identical to the [B] form.
    logp, old, advantages, mask = two_lengths_batch()
    per_token = advantages[:, None].expand(3, 3).clone()
    for kind in LOSSES:
        expected, _ = policy_loss(kind, logp, old, advantages, mask)
        got, _ = policy_loss(kind, logp, old, per_token, mask)
        assert got.item() == pytest.approx(expected.item())


# ---------------------------------------------------------------------------------------------
# Truncated importance sampling against the sampler's log-probs
# ---------------------------------------------------------------------------------------------


def tis_batch(ratios: list[float]):
    """One on-policy sequence (r = 1, A = 1: each token's loss is -1) whose sampler log-probs
    give exp(old_logp - sampler_logp) = the given ratios."""
    count = len(ratios)
    logp = torch.zeros(1, count, dtype=torch.float64, requires_grad=True)
    old = torch.zeros(1, count, dtype=torch.float64)
    sampler = -torch.log(torch.tensor([ratios], dtype=torch.float64))
    return logp, old, sampler, torch.ones(1, count, dtype=torch.bool)


def test_tis_truncate_multiplies_by_the_capped_ratio():
    # Ratios 3 and 0.5, cap 2 -> weights 2 and 0.5: (-1 * 2 + -1 * 0.5) / 2 = -1.25.
    logp, old, sampler, mask = tis_batch([3.0, 0.5])
    loss, stats = policy_loss(
        "dapo", logp, old, torch.tensor([1.0]), mask, sampler_logp=sampler, tis_cap=2.0
    )
    loss.backward()
    assert loss.item() == pytest.approx(-1.25)
    torch.testing.assert_close(logp.grad, torch.tensor([[-1.0, -0.25]], dtype=torch.float64))
    assert stats.is_ratio_mean == pytest.approx(1.75)  # (3 + 0.5) / 2
    assert stats.is_ratio_max == pytest.approx(3.0)
    assert stats.logprob_diff_mean == pytest.approx((math.log(3) + math.log(2)) / 2)  # 0.8959
    assert stats.logprob_diff_max == pytest.approx(math.log(3))  # 1.0986
    assert stats.tis_masked_frac == 0.0


def test_tis_mask_zeroes_tokens_outside_the_range_but_counts_them():
    # Cap 2 keeps ratios in [0.5, 2]: 3 and 0.25 are dropped, 0.6 and 1.5 kept with weight 1.
    # Loss = (0 - 1 - 1 + 0) / 4 tokens = -0.5 (dropped tokens stay in the denominator).
    logp, old, sampler, mask = tis_batch([3.0, 0.6, 1.5, 0.25])
    loss, stats = policy_loss(
        "dapo",
        logp,
        old,
        torch.tensor([1.0]),
        mask,
        sampler_logp=sampler,
        tis_cap=2.0,
        tis_mode="mask",
    )
    loss.backward()
    assert loss.item() == pytest.approx(-0.5)
    torch.testing.assert_close(
        logp.grad, torch.tensor([[0.0, -0.25, -0.25, 0.0]], dtype=torch.float64)
    )
    assert stats.tis_masked_frac == 0.5


def test_sampler_logp_without_tis_cap_only_reports():
    logp, old, sampler, mask = tis_batch([3.0, 0.5])
    loss, stats = policy_loss("dapo", logp, old, torch.tensor([1.0]), mask, sampler_logp=sampler)
    assert loss.item() == pytest.approx(-1.0)
    assert stats.is_ratio_max == pytest.approx(3.0)


def test_no_sampler_logp_gives_neutral_stats():
    logp, old, mask = one_token(-1.0, -1.0)
    _, stats = policy_loss("dapo", logp, old, torch.tensor([1.0]), mask)
    assert (stats.is_ratio_mean, stats.is_ratio_max) == (1.0, 1.0)
    assert (stats.logprob_diff_mean, stats.logprob_diff_max, stats.tis_masked_frac) == (0, 0, 0)


# ---------------------------------------------------------------------------------------------
# Parity with a naive per-token loop
# ---------------------------------------------------------------------------------------------


def naive_weight(old, sampler, b, t, tis_cap, tis_mode) -> float:
    """The sampler correction's weight of one token, from python floats."""
    if tis_cap is None:
        return 1.0
    w = math.exp(float(old[b, t]) - float(sampler[b, t]))
    return min(w, tis_cap) if tis_mode == "truncate" else float(1 / tis_cap <= w <= tis_cap)


def naive_sequence_loss(kind, logp, old, advantages, mask, *, sampler, tis_cap, tis_mode, **hp):
    """GSPO and GMPO one sequence at a time: its tokens' mean log-ratio (GMPO: each clipped in
    log space by its own advantage's sign, a clipped one a constant), its mean advantage and
    its mean correction weight."""
    terms = []
    for b in range(logp.shape[0]):
        tokens = [t for t in range(logp.shape[1]) if mask[b, t]]
        if not tokens:
            continue
        token_adv = [float(advantages[b] if advantages.dim() == 1 else advantages[b, t])
                     for t in tokens]  # fmt: skip
        a = sum(token_adv) / len(tokens)
        weight = sum(naive_weight(old, sampler, b, t, tis_cap, tis_mode) for t in tokens)
        weight /= len(tokens)
        if kind == "gspo":
            s = torch.exp(sum(logp[b, t] - old[b, t] for t in tokens) / len(tokens))
            clipped = min(max(s.item(), 1 - hp["eps_low"]), 1 + hp["eps_high"])
            term = -(s * a) if s.item() * a <= clipped * a else -clipped * a
        else:
            chosen = []
            for t, token_a in zip(tokens, token_adv, strict=True):
                log_ratio = logp[b, t] - old[b, t]
                value = log_ratio.item()
                if token_a >= 0 and value > hp["eps_high"]:
                    log_ratio = logp.new_tensor(hp["eps_high"])
                elif token_a < 0 and value < -hp["eps_low"]:
                    log_ratio = logp.new_tensor(-hp["eps_low"])
                chosen.append(log_ratio)
            term = -a * torch.exp(sum(chosen) / len(tokens))
        terms.append(weight * term)
    return sum(terms) / len(terms)


def naive_policy_loss(kind, logp, old, advantages, mask, *, sampler, tis_cap, tis_mode, **hp):
    """The spec written as python loops, one token at a time, branching on python floats."""
    if kind in ("gspo", "gmpo"):
        return naive_sequence_loss(kind, logp, old, advantages, mask, sampler=sampler,
                                   tis_cap=tis_cap, tis_mode=tis_mode, **hp)  # fmt: skip
    batch, length = logp.shape
    sequence_sums, sequence_counts = [], []
    for b in range(batch):
        total, count = logp.new_zeros(()), 0
        for t in range(length):
            if not mask[b, t]:
                continue
            a = float(advantages[b] if advantages.dim() == 1 else advantages[b, t])
            ratio = torch.exp(logp[b, t] - old[b, t])
            r = ratio.item()
            if kind == "cispo":
                term = -min(r, hp["is_cap"]) * a * logp[b, t]
            elif kind.startswith("dppo"):
                masked = naive_dppo_masked(kind, logp[b, t].item(), old[b, t].item(), a, hp)
                term = 0.0 * logp[b, t] if masked else -min(r, hp["is_cap"]) * a * logp[b, t]
            else:
                clipped = min(max(r, 1 - hp["eps_low"]), 1 + hp["eps_high"])
                # The min picks the unclipped term (gradient flows) or a constant (none).
                term = -(ratio * a) if r * a <= clipped * a else -clipped * a
            weight = naive_weight(old, sampler, b, t, tis_cap, tis_mode)
            total, count = total + weight * term, count + 1
        sequence_sums.append(total)
        sequence_counts.append(count)
    if kind == "grpo":
        means = [s / c for s, c in zip(sequence_sums, sequence_counts, strict=True) if c > 0]
        return sum(means) / len(means)
    if kind == "dr_grpo":
        sequences = sum(c > 0 for c in sequence_counts)
        return sum(sequence_sums) / (sequences * hp["length_norm"])
    return sum(sequence_sums) / sum(sequence_counts)


def naive_dppo_masked(kind: str, logp: float, old: float, a: float, hp: dict) -> bool:
    """DPPO's mask for one token, from its probabilities as python floats."""
    pi, mu = math.exp(logp), math.exp(old)
    if kind == "dppo_tv":
        rose, fell = pi - mu > hp["eps_high"], mu - pi > hp["eps_low"]
    else:
        # the random batch's "probabilities" pass 1 here and there: torch's log gives NaN
        # there, and a NaN divergence masks nothing
        ratio = (1 - mu + 1e-8) / (1 - pi + 1e-8)
        kl = mu * math.log(mu / pi) + (1 - mu) * (math.log(ratio) if ratio > 0 else math.nan)
        rose, fell = kl > hp["eps_high"] and pi > mu, kl > hp["eps_low"] and pi < mu
    return (a > 0 and rose) or (a < 0 and fell)


def random_batch(seed: int, batch: int = 5, length: int = 7):
    generator = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=generator, dtype=torch.float64)

    old = -torch.rand(batch, length, generator=generator, dtype=torch.float64) * 3
    logp = old + 0.4 * randn(batch, length)  # ratios around 1, many beyond the clip range
    sampler = old + 0.6 * randn(batch, length)
    mask = torch.rand(batch, length, generator=generator) < 0.7
    mask[1] = False  # a sequence without sampled tokens
    mask[0, 0] = True
    return logp, old, sampler, mask, randn(batch), randn(batch, length)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("kind", sorted(LOSSES))
@pytest.mark.parametrize("tis", [None, ("truncate", 1.5), ("mask", 1.5)])
@pytest.mark.parametrize("per_token_advantages", [False, True])
def test_vectorised_matches_naive_loop(seed, kind, tis, per_token_advantages):
    logp, old, sampler, mask, seq_adv, token_adv = random_batch(seed)
    advantages = token_adv if per_token_advantages else seq_adv
    tis_mode, tis_cap = tis if tis else ("truncate", None)
    hp = {"eps_low": 0.2, "eps_high": 0.28, "is_cap": 1.3, "length_norm": 6}

    fast_leaf = logp.clone().requires_grad_()
    fast, _ = policy_loss(
        kind,
        fast_leaf,
        old,
        advantages,
        mask,
        sampler_logp=sampler,
        tis_cap=tis_cap,
        tis_mode=tis_mode,
        **hp,
    )
    fast.backward()
    naive_leaf = logp.clone().requires_grad_()
    naive = naive_policy_loss(
        kind,
        naive_leaf,
        old,
        advantages,
        mask,
        sampler=sampler,
        tis_cap=tis_cap,
        tis_mode=tis_mode,
        **hp,
    )
    naive.backward()
    assert fast.item() == pytest.approx(naive.item(), abs=1e-6)
    torch.testing.assert_close(fast_leaf.grad, naive_leaf.grad, atol=1e-6, rtol=0)


def test_clip_fractions_count_masked_tokens():
    logp, old, sampler, mask, advantages, _ = random_batch(3)
    _, stats = policy_loss("dapo", logp, old, advantages, mask)
    ratio, a = torch.exp(logp - old), advantages[:, None].expand_as(logp)
    low = ((ratio < 0.8) & (a < 0))[mask].double().mean().item()
    high = ((ratio > 1.28) & (a > 0))[mask].double().mean().item()
    assert (stats.clip_frac_low, stats.clip_frac_high) == (pytest.approx(low), pytest.approx(high))
    assert 0 < stats.clip_frac_low + stats.clip_frac_high < 1  # the example exercises both sides


# ---------------------------------------------------------------------------------------------
# Gradient accumulation: micro-batches with the step's num_tokens == one big batch
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["dapo", "cispo"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_micro_batches_sum_to_the_whole_batch(kind, dtype):
    logp, old, sampler, _, advantages, _ = random_batch(7, batch=8, length=8)
    logp, old, sampler, advantages = (x.to(dtype) for x in (logp, old, sampler, advantages))
    lengths = torch.tensor([1, 2, 3, 4, 5, 6, 7, 8])
    mask = torch.arange(8)[None, :] < lengths[:, None]  # sequences of 1..8 tokens, 36 in all
    options = {"sampler_logp": sampler, "tis_cap": 2.0, "is_cap": 1.3}

    whole_leaf = logp.clone().requires_grad_()
    whole, _ = policy_loss(kind, whole_leaf, old, advantages, mask, **options)
    whole.backward()

    micro_leaf = logp.clone().requires_grad_()
    summed = 0.0
    for i in range(8):
        rows = slice(i, i + 1)
        micro, _ = policy_loss(
            kind,
            micro_leaf[rows],
            old[rows],
            advantages[rows],
            mask[rows],
            sampler_logp=sampler[rows],
            tis_cap=2.0,
            is_cap=1.3,
            num_tokens=36,
        )
        micro.backward()
        summed += micro.item()
    assert summed == pytest.approx(whole.item(), abs=1e-6)
    torch.testing.assert_close(micro_leaf.grad, whole_leaf.grad, atol=1e-6, rtol=0)


def test_all_masked_micro_batch_with_num_tokens_gives_zero():
    logp = torch.zeros(1, 3, requires_grad=True)
    loss, stats = policy_loss(
        "dapo", logp, torch.zeros(1, 3), torch.ones(1), torch.zeros(1, 3), num_tokens=5
    )
    loss.backward()
    assert loss.item() == 0.0 and logp.grad.abs().sum().item() == 0.0
    assert stats.num_tokens == 0


def test_padding_with_extreme_log_probs_stays_finite():
    # Masked positions hold garbage (-inf / huge gaps); exp() there must not leak NaN.
    logp = torch.tensor([[-0.5, -float("inf")]], requires_grad=True)
    old = torch.tensor([[-0.5, 0.0]])
    sampler = torch.tensor([[-0.5, -1e4]])
    mask = torch.tensor([[1, 0]])
    for kind in LOSSES:
        logp.grad = None
        loss, stats = policy_loss(
            kind, logp, old, torch.tensor([1.0]), mask, sampler_logp=sampler, tis_cap=2.0
        )
        loss.backward()
        assert torch.isfinite(loss) and torch.isfinite(logp.grad).all()
        assert stats.is_ratio_max == 1.0


# ---------------------------------------------------------------------------------------------
# Stats of several micro-batches
# ---------------------------------------------------------------------------------------------


def test_combine_weights_by_tokens_and_takes_max_of_maxes():
    a = LossStats(1.0, 0.0, 2.0, 3.0, 0.5, 1.0, 0.0, num_tokens=1)
    b = LossStats(0.0, 0.4, 1.0, 1.5, 0.1, 2.0, 0.2, num_tokens=3)
    merged = LossStats.combine([a, b])
    assert merged.clip_frac_low == pytest.approx(0.25)  # (1 * 1 + 0 * 3) / 4
    assert merged.clip_frac_high == pytest.approx(0.3)  # (0 + 0.4 * 3) / 4
    assert merged.is_ratio_mean == pytest.approx(1.25)  # (2 + 3) / 4
    assert (merged.is_ratio_max, merged.logprob_diff_max) == (3.0, 2.0)
    assert merged.logprob_diff_mean == pytest.approx(0.2)  # (0.5 + 0.3) / 4
    assert merged.tis_masked_frac == pytest.approx(0.15)  # 0.6 / 4
    assert merged.num_tokens == 4


def test_ratio_stats_by_hand():
    # two tokens: logp - old = ln 2 and -ln 2 -> r = 2 and 0.5; mean 1.25; the padding is ignored
    logp = torch.tensor([[math.log(2.0), -math.log(2.0), 9.0]], dtype=torch.float64)
    old = torch.zeros(1, 3, dtype=torch.float64)
    mask = torch.tensor([[True, True, False]])
    _, stats = policy_loss("cispo", logp, old, torch.tensor([1.0]), mask)
    assert (stats.ratio_mean, stats.ratio_min, stats.ratio_max) == pytest.approx((1.25, 0.5, 2.0))


def test_combine_takes_min_of_ratio_mins():
    a = LossStats(0, 0, 1, 1, 0, 0, 0, num_tokens=1, ratio_mean=2.0, ratio_min=2.0, ratio_max=2.0)
    b = LossStats(0, 0, 1, 1, 0, 0, 0, num_tokens=3, ratio_mean=1.0, ratio_min=0.5, ratio_max=1.5)
    merged = LossStats.combine([a, b])
    assert merged.ratio_mean == pytest.approx(1.25)  # (2 * 1 + 1 * 3) / 4
    assert (merged.ratio_min, merged.ratio_max) == (0.5, 2.0)


# ---------------------------------------------------------------------------------------------
# KL penalty (k3)
# ---------------------------------------------------------------------------------------------


def test_k3_by_hand():
    # ref - logp = 1: e - 1 - 1 = 0.71828; = -1: e^-1 + 1 - 1 = 0.36788; = 0: 0; masked: 0.
    logp = torch.tensor([[-1.0, -1.0, -1.0, -3.0]], dtype=torch.float64, requires_grad=True)
    ref = torch.tensor([[0.0, -2.0, -1.0, 50.0]], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 0]])
    k3 = kl_penalty(logp, ref, mask)
    torch.testing.assert_close(k3, torch.tensor([[E - 2, 1 / E, 0.0, 0.0]], dtype=torch.float64))
    # d k3 / d logp = 1 - exp(ref - logp): 1 - e = -1.71828, 1 - e^-1 = 0.63212, 0, 0.
    k3.sum().backward()
    torch.testing.assert_close(
        logp.grad, torch.tensor([[1 - E, 1 - 1 / E, 0.0, 0.0]], dtype=torch.float64)
    )


def test_k3_rejects_shape_mismatch():
    with pytest.raises(ValueError, match="same"):
        kl_penalty(torch.zeros(2, 3), torch.zeros(2, 3), torch.ones(2, 4))


# ---------------------------------------------------------------------------------------------
# Input checks
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"kind": "ppo"},
            r"unknown loss 'ppo': use one of \['cispo', 'dapo', 'dppo_kl', 'dppo_tv', 'dr_grpo', "
            r"'gmpo', 'grpo', 'gspo'\] or an import path",
        ),
        ({"eps_low": 1.0}, r"eps_low must be in \[0, 1\), got 1.0"),
        ({"eps_low": -0.1}, r"eps_low must be in \[0, 1\), got -0.1"),
        ({"eps_high": -0.5}, "eps_high must be >= 0, got -0.5"),
        ({"is_cap": 0.0}, "is_cap must be > 0, got 0.0"),
        ({"tis_cap": 1.0}, "tis_cap must be None or > 1 .*got 1.0"),
        ({"tis_cap": 0.5, "tis_mode": "mask"}, "tis_cap must be None or > 1 .*mask.*got 0.5"),
        ({"tis_mode": "clip"}, "tis_mode must be one of .*got 'clip'"),
        ({"num_tokens": 0}, "num_tokens must be > 0 when given, got 0"),
        ({"num_tokens": 1}, "num_tokens=1 is smaller than this batch's 2 masked tokens"),
        ({"old_logp": torch.zeros(2, 4)}, r"old_logp has shape \(2, 4\), logp has \(2, 3\)"),
        ({"mask": torch.ones(3, 3)}, r"mask has shape \(3, 3\)"),
        ({"sampler_logp": torch.zeros(2)}, r"sampler_logp has shape \(2,\)"),
        ({"advantages": torch.zeros(3)}, r"advantages must be \[B\].*got \(3,\)"),
        ({"mask": torch.tensor([[1, 0, 2], [0, 0, 0]])}, "mask must hold only 0 and 1"),
        ({"mask": torch.zeros(2, 3)}, "all tokens are masked out"),
        ({"tis_cap": 2.0, "sampler_logp": None}, "tis_cap=2.0 needs sampler_logp"),
    ],
)
def test_bad_inputs_are_named(overrides, message):
    inputs = {
        "kind": "dapo",
        "logp": torch.zeros(2, 3),
        "old_logp": torch.zeros(2, 3),
        "advantages": torch.ones(2),
        "mask": torch.tensor([[1, 1, 0], [0, 0, 0]]),
        "sampler_logp": torch.zeros(2, 3),
    }
    inputs.update(overrides)
    kind, logp, old, advantages, mask = (
        inputs.pop(name) for name in ("kind", "logp", "old_logp", "advantages", "mask")
    )
    with pytest.raises(ValueError, match=message):
        policy_loss(kind, logp, old, advantages, mask, **inputs)


def test_dr_grpo_divides_each_sequence_by_a_constant_not_its_length():
    # On-policy (r = 1) each token's loss is -A. Row 0: 3 tokens, A = 1; row 1: 1 token, A = -1.
    # GRPO: mean of the sequences' means, (-1 + 1) / 2 = 0. Dr. GRPO with length_norm 4:
    # (-3 + 1) / (2 sequences * 4) = -0.25, and every token's gradient is -A / 8, whatever the
    # length of its sequence (GRPO's: -A / (2 * |y_i|): -1/6 in row 0, +1/2 in row 1).
    logp = torch.zeros(2, 3, dtype=torch.float64, requires_grad=True)
    old = torch.zeros(2, 3, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]], dtype=torch.bool)
    advantages = torch.tensor([1.0, -1.0], dtype=torch.float64)
    loss, _ = policy_loss("dr_grpo", logp, old, advantages, mask, length_norm=4)
    loss.backward()
    assert loss.item() == pytest.approx(-0.25)
    assert logp.grad.tolist() == [[-0.125, -0.125, -0.125], [0.125, 0.0, 0.0]]
    grpo, _ = policy_loss("grpo", logp, old, advantages, mask)
    assert grpo.item() == pytest.approx(0.0)
    with pytest.raises(ValueError, match="length_norm must be >= 1, got 0"):
        policy_loss("dr_grpo", logp, old, advantages, mask, length_norm=0)
