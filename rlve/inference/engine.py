"""The inference engine protocol: what the episode runner needs from a model.

Every engine (vLLM, an OpenAI-compatible endpoint, a scripted policy) answers one request at a
time, asynchronously, so the runner can keep many episodes in flight. Engines that work on token
ids take `prompt_ids` and return the sampled ids with their log-probs; text-only engines read
`messages` and leave the token fields empty. A request that fails or times out ends only its
episode (stop reason `engine_error`); an `EngineFatalError` stops the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from rlve.types import Message


@dataclass(frozen=True)
class SamplingConfig:
    """Per-request sampling settings."""

    temperature: float = 1.0
    """softmax temperature; the returned log-probs are taken after it (processed log-probs)"""
    top_p: float = 1.0
    """nucleus sampling mass"""
    max_tokens: int = 128
    """most tokens sampled in one turn; a turn that hits it ends with finish_reason 'length'"""
    stop: tuple[str, ...] = ()
    """strings that end a turn early (not included in the output)"""
    seed: int | None = None
    """per-request seed, for reproducible sampling"""

    def __post_init__(self):
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")

    def with_overrides(self, **overrides: Any) -> SamplingConfig:
        known = {k: v for k, v in overrides.items() if v is not None}
        if "stop" in known:
            known["stop"] = tuple(known["stop"])
        return replace(self, **known)


@dataclass
class GenerationRequest:
    """One model turn to generate: the conversation so far, and its token ids if known."""

    messages: list[Message]
    sampling: SamplingConfig
    prompt_ids: list[int] | None = None
    tools: list[dict[str, Any]] | None = None


@dataclass
class Generation:
    """One sampled turn. `token_ids` and `logprobs` are empty for text-only engines."""

    text: str
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish_reason: str = "stop"
    """'stop' (end of turn or a stop string) or 'length' (hit max_tokens)"""
    weight_version: int = 0
    """the version of the weights that sampled it (see rlve.sync.shared_memory)"""
    tool_calls: list[dict[str, Any]] | None = None
    """structured tool calls, for engines that return them apart from the text"""


@dataclass
class PromptTokenCounts:
    """Prompt tokens of the generation requests so far: all, and those the prefix cache held
    (the rest were computed again)."""

    total: int = 0
    cached: int = 0

    def add(self, total: int, cached: int) -> None:
        self.total += total
        self.cached += cached

    def since(self, earlier: PromptTokenCounts) -> PromptTokenCounts:
        """The counts of the requests made after `earlier` was taken (a copy of this one)."""
        return PromptTokenCounts(self.total - earlier.total, self.cached - earlier.cached)


class EngineFatalError(RuntimeError):
    """The engine can serve no more requests (it never started, or its process died): the run
    stops, where any other error of a request ends only that episode."""


@runtime_checkable
class Engine(Protocol):
    """An async text/token generator. `tokenizer` is None for text-only engines."""

    tokenizer: Any

    async def generate(self, request: GenerationRequest) -> Generation: ...


@runtime_checkable
class ServingEngine(Engine, Protocol):
    """An engine that serves the trainer's weights (vLLM here or in `rlve.serve` servers):
    every push loads them in place, and its processes end with `shutdown`. Engines without
    these (scripted policies, an OpenAI endpoint) play with weights of their own."""

    def push_weights(self, named_tensors: Any, version: int) -> float: ...

    def shutdown(self) -> None: ...
