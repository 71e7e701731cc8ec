"""Per-token log-probs and entropies of the taken tokens at the sampling temperature.

The sampler (vLLM with processed log-probs) samples from softmax(logits / T), so the trainer's
log-probs must be log_softmax(logits / T) too, or every importance ratio is off. The vocabulary
projection runs in chunks of tokens, each recomputed in the backward pass when there are several,
so [tokens, vocab] logits (151,936 wide for Qwen3) never exist for a whole micro-batch at once;
and it runs only on the positions whose next token is trained on, which skips every prompt token.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from rlve.training.packed_attention import check_tree_attention, packed_decoder_inputs
from rlve.training.sequence_attention import prepared_mask
from rlve.types import PrefixTree


def _chunk_logprobs(
    features: Tensor, targets: Tensor, head: Callable[[Tensor], Tensor], temperature: float,
    entropies: list[Tensor] | None = None,
) -> Tensor:  # fmt: skip
    """The taken tokens' log-probs; their entropies appended to `entropies` when it is given."""
    logits = head(features).float() / temperature  # fp32 softmax even for bf16 weights
    logp_all = torch.log_softmax(logits, dim=-1)
    taken = logp_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    if entropies is not None:  # a metric only: no graph kept for it
        detached = logp_all.detach()
        entropies.append(-(detached.exp() * detached).sum(-1))
    return taken


def _recomputed_chunk_logprobs(
    features: Tensor, targets: Tensor, head: Callable[[Tensor], Tensor], temperature: float
) -> tuple[Tensor, Tensor]:
    """`_chunk_logprobs` with its logits recomputed in the backward pass instead of kept; the
    entropy is taken in the forward pass only (the recomputation has no use for it)."""
    entropies: list[Tensor] = []

    def taken_logprobs(features: Tensor, targets: Tensor) -> Tensor:
        first_call = not entropies
        return _chunk_logprobs(
            features, targets, head, temperature, entropies if first_call else None
        )

    taken = checkpoint(taken_logprobs, features, targets, use_reentrant=False)
    return taken, entropies[0]


def token_logprobs(
    features: Tensor,
    targets: Tensor,
    *,
    head: Callable[[Tensor], Tensor] | None = None,
    temperature: float = 1.0,
    chunk_tokens: int = 1024,
) -> tuple[Tensor, Tensor]:
    """log pi_T(target) and the entropy of pi_T per token, pi_T = softmax(head(features) / T).

    Args:
        features: [N, D] hidden states (with `head`, e.g. the lm_head) or logits [N, V] (no head).
        targets: [N] long, the token taken at each position.
        temperature: T > 0, the sampling temperature.
        chunk_tokens: rows per chunk; with gradients on and more than one chunk, each chunk is
            recomputed in backward, so only one chunk's [chunk, V] logits are alive at a time.
            A single chunk is kept instead: recomputing it would hold as much at its peak.

    Returns:
        (logp [N], entropy [N]) in float32; entropy = -sum_v pi_T(v) log pi_T(v), detached.
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if chunk_tokens < 1:
        raise ValueError(f"chunk_tokens must be >= 1, got {chunk_tokens}")
    if features.shape[:1] != targets.shape:
        raise ValueError(f"features {tuple(features.shape)} and targets {tuple(targets.shape)}")
    apply_head = head if head is not None else nn.Identity()
    several_chunks = features.shape[0] > chunk_tokens
    recompute = torch.is_grad_enabled() and features.requires_grad and several_chunks
    taken, entropies = [], []
    for start in range(0, features.shape[0], chunk_tokens):
        chunk = (features[start : start + chunk_tokens], targets[start : start + chunk_tokens])
        if recompute:
            logp, entropy = _recomputed_chunk_logprobs(*chunk, apply_head, temperature)
            entropies.append(entropy)
        else:
            logp = _chunk_logprobs(*chunk, apply_head, temperature, entropies)
        taken.append(logp)
    if not taken:
        empty = features.new_zeros(0, dtype=torch.float32)
        return empty, empty
    return torch.cat(taken), torch.cat(entropies)


def sequence_logprobs(
    causal_lm: nn.Module,
    input_ids: Tensor,
    attention_mask: Tensor,
    loss_mask: Tensor,
    *,
    temperature: float = 1.0,
    chunk_tokens: int = 1024,
    position_ids: Tensor | None = None,
    prefix_tree: PrefixTree | None = None,
) -> tuple[Tensor, Tensor]:
    """Log-prob and entropy of each trained token of a right-padded batch, or of packed rows.

    Runs the model's decoder once, then the output head on the hidden state before every token
    where `loss_mask` is True (position t - 1 predicts token t; in a packed row that never
    reaches back into the previous sequence, whose first token is never trained). Assumes
    logits = lm_head(hidden), true of Qwen/Llama/Mistral; models that soft-cap or scale logits
    are not supported.

    Args:
        causal_lm: a transformers causal LM (a peft model's base model has its LoRA layers).
        input_ids, attention_mask: [B, T] long.
        loss_mask: [B, T] bool, never True at t = 0.
        position_ids: [B, T] long for packed rows (0 where each sequence starts), attended
            through `packed_decoder_inputs`; None for right-padded rows.
        prefix_tree: for packed rows, the tree of their distinct prefixes: the decoder runs on
            its nodes (rlve.training.tree_attention) and each token takes its node's hidden
            state, which equals the one it gets in its row up to float rounding.

    Returns:
        (logp [B, T], entropy [B, T]) float32, 0 where `loss_mask` is False.
    """
    if bool(loss_mask[:, 0].any()):
        raise ValueError("loss_mask is True on the first token, which no earlier token predicts")
    decoder = causal_lm.get_decoder()
    if prefix_tree is not None:
        check_tree_attention(causal_lm.config)
        tree_positions = prefix_tree.position_ids
        hidden = decoder(
            input_ids=prefix_tree.input_ids, attention_mask=prepared_mask(tree_positions),
            position_ids=tree_positions, prefix_tree=prefix_tree,
        ).last_hidden_state  # fmt: skip
    elif position_ids is None:
        hidden = decoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    else:
        dtype = causal_lm.get_input_embeddings().weight.dtype
        inputs = packed_decoder_inputs(causal_lm.config, position_ids, dtype)
        hidden = decoder(input_ids=input_ids, **inputs).last_hidden_state
    predicts_trained = torch.zeros_like(loss_mask)
    predicts_trained[:, :-1] = loss_mask[:, 1:]  # hidden[t - 1] predicts token t
    if prefix_tree is None:
        features = hidden[predicts_trained]
    else:  # each token's node; index_select's backward adds up a shared node's gradients in a
        # fixed order, where advanced indexing's (index_put_) does not on several CPU threads
        features = hidden[0].index_select(0, prefix_tree.node_index[predicts_trained])
    logp, entropy = token_logprobs(
        features,
        input_ids[loss_mask],
        head=causal_lm.get_output_embeddings(),
        temperature=temperature,
        chunk_tokens=chunk_tokens,
    )
    logp_full = torch.zeros(loss_mask.shape, dtype=torch.float32, device=input_ids.device)
    if torch.is_grad_enabled() and not bool(loss_mask.any()):
        # Nothing to train here (a sharded rank's idle micro-batch), yet its backward must reach
        # every parameter: FSDP reduces a layer's gradients only when they were computed, and
        # all ranks must take part in every reduction. Zero times the head on one position.
        head = causal_lm.get_output_embeddings()
        logp_full = logp_full + 0.0 * head(hidden[:, :1]).float().sum()
    entropy_full = torch.zeros_like(logp_full)
    # boolean-mask order is row-major on both sides, so values land on their own tokens
    logp_full = logp_full.masked_scatter(loss_mask, logp)
    entropy_full[loss_mask] = entropy
    return logp_full, entropy_full


class TokenScorer(nn.Module):
    """`sequence_logprobs` of a causal LM, as a module that holds it.

    Under FSDP2 the scorer is the root unit: calling it gathers the embedding, final norm and
    output head, which `sequence_logprobs` uses outside the model's own forward (the decoder,
    then the head in chunks), and reduces their gradients after the backward.
    """

    def __init__(self, causal_lm: nn.Module, autocast_bf16: bool = False) -> None:
        super().__init__()
        self.causal_lm = causal_lm
        self.autocast_bf16 = autocast_bf16
        """run the model under bf16 autocast (float32 weights, bf16 matrix products)"""

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor, loss_mask: Tensor, *,
        temperature: float, chunk_tokens: int, position_ids: Tensor | None = None,
        prefix_tree: PrefixTree | None = None,
    ) -> tuple[Tensor, Tensor]:  # fmt: skip
        device = input_ids.device.type
        with torch.autocast(device, dtype=torch.bfloat16, enabled=self.autocast_bf16):
            return sequence_logprobs(
                self.causal_lm, input_ids, attention_mask, loss_mask,
                temperature=temperature, chunk_tokens=chunk_tokens, position_ids=position_ids,
                prefix_tree=prefix_tree,
            )  # fmt: skip


def one_sequence_logprobs(scorer: TokenScorer, token_ids: list[int]) -> Tensor:
    """The log-prob of each token of one sequence after its first, as `scorer` computes it in
    training (its precision, temperature 1): what vLLM's `prompt_logprobs` serves, to compare."""
    ids = torch.tensor([token_ids], device=next(scorer.causal_lm.parameters()).device)
    trained = torch.ones_like(ids, dtype=torch.bool)
    trained[0, 0] = False
    with torch.no_grad():
        logp, _ = scorer(ids, torch.ones_like(ids), trained, temperature=1.0, chunk_tokens=1024)
    return logp[0, 1:].cpu()
