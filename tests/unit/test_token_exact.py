"""Token-exact trajectories: the episode's tokens are exactly what was sampled plus the
environment's reply tokens, never a re-rendering of the conversation."""

import rlve
from rlve.envs.tictactoe import minimax_policy
from rlve.inference.engine import Generation
from rlve.rollout import ChatTokens, ScriptedEngine


def tictactoe(**kwargs):
    return rlve.load_environment("tictactoe", num_examples=20, **kwargs)


def test_tokens_are_prompt_then_sampled_turns_then_masked_replies(tiny_tokenizer):
    tok = tiny_tokenizer
    env = tictactoe()
    result = rlve.evaluate(env, ScriptedEngine(minimax_policy, tok), 10, rollouts_per_example=2)
    chat = ChatTokens(tok)
    for t in (t for g in result.groups for t in g.trajectories):
        ids, mask = t.token_ids, t.loss_mask
        assert len(ids) == len(mask) == len(t.sampler_logprobs)
        assert ids[: t.prompt_len] == chat.prompt_ids(t.prompt)
        assistant = [m["content"] for m in t.completion if m["role"] == "assistant"]
        assert len(t.turn_spans) == len(assistant) == t.num_turns
        for (start, end), text in zip(t.turn_spans, assistant, strict=True):
            # exactly the generated tokens: the text's tokens and the end-of-turn token
            assert ids[start:end] == tok.encode(text, add_special_tokens=False) + [tok.eos_token_id]
        sampled = {i for start, end in t.turn_spans for i in range(start, end)}
        assert [i for i, m in enumerate(mask) if m] == sorted(sampled)
        # between two turns: only the environment's reply, rendered by the chat template
        replies = [m["content"] for m in t.completion if m["role"] == "user"]
        for (_, end), (next_start, _), reply in zip(
            t.turn_spans, t.turn_spans[1:], replies, strict=False
        ):
            bridge = tok.decode(ids[end:next_start])
            assert bridge == f"\n<|im_start|>user\n{reply}<|im_end|>\n<|im_start|>assistant\n"
        # the trajectory ends on the last sampled token: the final reply is text only
        assert t.turn_spans[-1][1] == len(ids)
        # and the whole sequence reads as the rendered conversation
        shown = t.prompt + t.completion[: 2 * t.num_turns - 1]
        rendered = tok.apply_chat_template(shown, tokenize=False)
        assert tok.decode(ids) + "\n" == rendered


def test_truncated_turn_gets_the_whole_end_of_turn_marker_masked(tiny_tokenizer):
    tok = tiny_tokenizer
    env = tictactoe(max_tokens=4)
    engine = ScriptedEngine(lambda m: "<think>" + "long " * 50 + "</think><move>4</move>", tok)
    (group,) = rlve.evaluate(env, engine, 1).groups
    t = group.trajectories[0]
    assert t.truncated_turns == t.num_turns == 7
    (s0, e0), (s1, _) = t.turn_spans[:2]
    assert e0 - s0 == 4 and tok.eos_token_id not in t.token_ids[s0:e0]
    assert tok.decode(t.token_ids[e0:s1]).startswith("<|im_end|>\n<|im_start|>user\nInvalid move")
    assert all(m == 0 for m in t.loss_mask[e0:s1])


class CharLevelEngine:
    """Samples a non-canonical tokenization (one token per character), as a model may."""

    def __init__(self, tokenizer, text):
        self.tokenizer = tokenizer
        self.text = text
        self.calls = []

    async def generate(self, request):
        self.calls.append(list(request.prompt_ids))
        ids = [self.tokenizer.convert_tokens_to_ids(c) for c in self.text]
        ids.append(self.tokenizer.eos_token_id)
        return Generation(text=self.text, token_ids=ids, logprobs=[-0.5] * len(ids))


def test_sampled_tokens_are_kept_even_when_retokenizing_would_differ(tiny_tokenizer):
    tok = tiny_tokenizer
    text = "<move>4</move>"
    canonical = tok.encode(text, add_special_tokens=False)
    engine = CharLevelEngine(tok, text)
    assert len(canonical) < len(text)  # re-tokenizing would merge characters
    (group,) = rlve.evaluate(tictactoe(max_turns=3), engine, 1).groups
    t = group.trajectories[0]
    for start, end in t.turn_spans:
        assert t.token_ids[start:end] == [tok.convert_tokens_to_ids(c) for c in text] + [2]
        assert t.sampler_logprobs[start:end] == [-0.5] * (end - start)
    # each request's prompt is the previous request's prompt + its sample + the reply tokens
    for previous, current, (start, end) in zip(
        engine.calls, engine.calls[1:], t.turn_spans, strict=False
    ):
        assert current[: len(previous)] == previous
        assert current[len(previous) : len(previous) + end - start] == t.token_ids[start:end]


def test_text_conversations_tokenize_like_a_token_exact_episode(tiny_tokenizer):
    from rlve.rollout.chat_tokens import conversation_tokens

    tok = tiny_tokenizer
    result = rlve.evaluate(tictactoe(), ScriptedEngine(minimax_policy, tok), 5)
    for t in (t for g in result.groups for t in g.trajectories):
        ids, mask = conversation_tokens(tok, t.prompt, t.completion)
        assert ids == t.token_ids and mask == t.loss_mask
