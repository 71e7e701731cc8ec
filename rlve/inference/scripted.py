"""A scripted engine: a Python policy plays the model's part.

`policy(messages) -> str` sees only the conversation, as a model would; a policy that also takes
`rng` gets a `random.Random` seeded from the request's seed, so scripted play is reproducible.
Used for tests, baselines, and scripted teachers (minimax) that produce SFT data.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import random
from collections.abc import Callable
from typing import Any

from rlve.inference.engine import Generation, GenerationRequest

Policy = Callable[..., str]


def load_policy(spec: str, what: str = "policy") -> Policy:
    """`package.module:function` -> the function, e.g. `rlve.envs.tictactoe:minimax_policy`.
    ValueError names `what` (the flag or config field the spec came from) and the problem."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ValueError(f"{what} must look like 'package.module:function', got {spec!r}")
    try:
        policy = getattr(importlib.import_module(module_name), attr)
    except ImportError as exc:
        raise ValueError(f"{what} {spec!r}: cannot import {module_name!r} ({exc})") from exc
    except AttributeError as exc:
        raise ValueError(f"{what} {spec!r}: module {module_name!r} has no {attr!r}") from exc
    if not callable(policy):
        raise ValueError(f"{what} {spec!r} is not callable")
    return policy


class ScriptedEngine:
    """Answers each request with `policy(messages)`.

    With a `tokenizer`, answers are token-exact like a real model's: the text's token ids plus
    `end_of_turn_id` (the chat template's, `rlve.rollout.chat_tokens.end_of_turn_id`; default the
    tokenizer's eos), cut to `max_tokens` (then finish_reason is 'length'), with log-prob 0.
    """

    def __init__(self, policy: Policy, tokenizer: Any = None, end_of_turn_id: int | None = None):
        self.policy = policy
        self.tokenizer = tokenizer
        self.end_of_turn_id = end_of_turn_id
        if tokenizer is not None and end_of_turn_id is None:
            self.end_of_turn_id = tokenizer.eos_token_id
        self._takes_rng = "rng" in inspect.signature(policy).parameters

    async def generate(self, request: GenerationRequest) -> Generation:
        await asyncio.sleep(0)  # a real engine's request yields: concurrent episodes interleave
        if self._takes_rng:
            text = self.policy(request.messages, rng=random.Random(request.sampling.seed))
        else:
            text = self.policy(request.messages)
        text = str(text)
        for stop in request.sampling.stop:
            if stop in text:
                text = text[: text.index(stop)]
        if self.tokenizer is None:
            return Generation(text=text)
        ids = self.tokenizer.encode(text, add_special_tokens=False) + [self.end_of_turn_id]
        finish = "stop"
        if len(ids) > request.sampling.max_tokens:
            ids, finish = ids[: request.sampling.max_tokens], "length"
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
        return Generation(text=text, token_ids=ids, logprobs=[0.0] * len(ids), finish_reason=finish)
