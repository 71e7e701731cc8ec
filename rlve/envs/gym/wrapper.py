"""Any verifiable environment as a normal single-turn rlve environment.

`VerifiableSingleTurnEnv` has a deterministic `dataset` (row i: seed + i, difficulty
difficulties[i % len]) for evaluation, and `make_example(seed, difficulty)` for training, where
the curriculum picks the difficulty. Scoring runs the environment's verifier in a `VerifierPool`
(worker processes with a time and memory limit): a verifier that hangs, crashes or raises gives
the format-failure reward, counts under `verify/timeouts`, `verify/crashes`, `verify/errors`, and
makes its episode a `verifier_error` fault (`state["verifier_error"]`).
"""

from __future__ import annotations

import asyncio
import atexit
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any, Literal

from rlve.envs.base import SingleTurnEnv, State, require_int
from rlve.envs.gym.sandbox import CallResult, VerifierPool
from rlve.envs.gym.verifiable import (
    GenerationStats,
    Problem,
    Verdict,
    VerifiableEnv,
    check_in_worker,
    checked_verdict,
    generate_in_worker,
    generate_with_retries,
    preload_modules,
)
from rlve.envs.parsers import XMLParser, assistant_texts
from rlve.envs.rubric import Rubric
from rlve.types import Example, Trajectory

PoolPurpose = Literal["verify", "generate"]

WORKER_MODULES = [
    "Gym.environments",
    "Gym.parameter_controllers",
    "reasoning_gym",
    "rlve.envs.gym.rlve_gym",
    "rlve.envs.gym.reasoning_gym",
    "rlve.envs.gym.builtin",
]
"""imported by each shared-pool worker when the pool starts, so that the time limit of a call
measures the verifier, not the imports (about 6 s of them)"""


@dataclass(frozen=True)
class PoolSettings:
    """How the process-wide pools are built (change before the first call to take effect)."""

    num_workers: int = 2
    """worker processes per pool"""
    verify_timeout_s: float = 10.0
    """time limit of one verification (upstream's sympy verifiers stop themselves at 10 s)"""
    generate_timeout_s: float = 30.0
    """time limit of one problem generation; the seed is then skipped"""
    memory_limit_mb: int = 2048
    """address space a worker may add after start (Gym's import alone takes about 550 MB)"""
    startup_timeout_s: float = 180.0
    """time allowed for the first call, which imports `WORKER_MODULES`"""


POOL_SETTINGS = PoolSettings()
_POOLS: dict[str, VerifierPool] = {}
_POOLS_LOCK = threading.Lock()


def shared_pool(purpose: PoolPurpose) -> VerifierPool:
    """The process's pool for verification or for generation, created (and warmed) on first use
    and closed at exit."""
    with _POOLS_LOCK:
        if purpose not in _POOLS:
            if not _POOLS:
                atexit.register(close_shared_pools)
            settings = POOL_SETTINGS
            timeout = (
                settings.verify_timeout_s if purpose == "verify" else settings.generate_timeout_s
            )
            _POOLS[purpose] = warmed_pool(
                VerifierPool(
                    settings.num_workers, settings.startup_timeout_s, settings.memory_limit_mb
                ),
                WORKER_MODULES,
                timeout,
            )
        return _POOLS[purpose]


def warmed_pool(pool: VerifierPool, modules: list[str], timeout_s: float) -> VerifierPool:
    """Have every worker import `modules` (all at once, one call each), then set the pool's time
    limit to `timeout_s`. A worker replaced later starts cold and imports on its first call."""
    with ThreadPoolExecutor(pool.num_workers) as threads:
        list(threads.map(lambda _: pool.call(preload_modules, modules), range(pool.num_workers)))
    pool.timeout_s = timeout_s
    return pool


def close_shared_pools() -> None:
    with _POOLS_LOCK:
        pools = list(_POOLS.values())
        _POOLS.clear()
    for pool in pools:
        pool.close()


# ---------------------------------------------------------------- verification


_FAILURE_METRICS = {
    "timeout": "verify/timeouts",
    "crash": "verify/crashes",
    "error": "verify/errors",
}


def _verdict_from_call(env: VerifiableEnv, result: CallResult) -> tuple[Verdict, str]:
    """(verdict, failure kind or "ok") from a pool call of `check_in_worker`."""
    if result.ok:
        reward, accuracy, format_ok, detail = result.value
        return Verdict(float(reward), bool(accuracy), bool(format_ok), str(detail)), "ok"
    return env.format_failure(f"verifier {result.kind}: {result.error}"), result.kind


REWARDS = {
    "shaped": "the verifier's reward in [-1, 1]: partial credit, -1 for a missing answer",
    "binary": "1 when the verifier counts the answer correct, else 0 (RLVE's own default)",
}
"""what `verified_reward` pays, by the environment argument `reward`"""


class VerifiableSingleTurnEnv(SingleTurnEnv):
    """A verifiable environment behind the rlve environment API.

    Rubric: `verified_reward` (weight 1, the verifier's reward, or its accuracy with
    `reward="binary"`: REWARDS), `accuracy` and `format` (weight 0, metrics only);
    `episode_metrics` adds `verify/timeouts|crashes|errors`.
    `sandbox=False` verifies in this process (for trusted verifiers in tests: no time limit).
    """

    def __init__(
        self,
        verifiable: VerifiableEnv,
        *,
        num_examples: int = 100,
        seed: int = 0,
        difficulties: tuple[int, ...] | list[int] = (0,),
        sandbox: bool = True,
        verify_pool: VerifierPool | None = None,
        generate_pool: VerifierPool | None = None,
        max_tokens: int = 4096,
        reward: str = "shaped",
    ):
        require_int("num_examples", num_examples, 1)
        if reward not in REWARDS:
            raise ValueError(f"reward must be one of {list(REWARDS)}, got {reward!r}")
        self.reward = reward
        if not difficulties or any(not isinstance(d, int) or d < 0 for d in difficulties):
            raise ValueError(f"difficulties must be integers >= 0, got {difficulties!r}")
        self.verifiable = verifiable
        self.sandbox = sandbox
        self._verify_pool = verify_pool
        self._generate_pool = generate_pool
        self.generation_stats = GenerationStats()
        parser = XMLParser(["answer"])
        rubric = Rubric(parser=parser, time_limit_s=None)  # the pool bounds each verification
        rubric.add_group(self.verified_reward, 1.0)
        rubric.add(accuracy, 0.0).add(format_score, 0.0)
        examples = [
            self.make_example(seed + i, difficulties[i % len(difficulties)], example_id=i)
            for i in range(num_examples)
        ]
        rows = [asdict(e) for e in examples]
        super().__init__(
            rows,
            parser=parser,
            rubric=rubric,
            name=verifiable.name,
            sampling={"max_tokens": max_tokens},
        )

    # ---- problems -----------------------------------------------------------------------------

    def make_example(self, seed: int, difficulty: int, example_id: int | None = None) -> Example:
        """A fresh problem at `difficulty` (the next seeds are tried if this one fails;
        EnvironmentDisabled after five failures in a row). `info` holds difficulty, seed (the
        one used) and the problem as JSON."""
        problem, used_seed = generate_with_retries(
            self.verifiable,
            seed,
            difficulty,
            stats=self.generation_stats,
            timeout_s=None if self.sandbox else POOL_SETTINGS.generate_timeout_s,
            generate=self._generate_in_pool if self.sandbox else None,
        )
        prompt = [
            {"role": "system", "content": self.verifiable.answer_instruction},
            {"role": "user", "content": problem.prompt},
        ]
        info = {"difficulty": difficulty, "seed": used_seed, "problem": problem.to_json()}
        return Example(
            example_id=used_seed if example_id is None else example_id,
            prompt=prompt,
            answer=problem.reference_answer or "",
            info=info,
        )

    def _generate_in_pool(self, seed: int, difficulty: int) -> Problem:
        pool = self._generate_pool or shared_pool("generate")
        result = pool.call(generate_in_worker, self.verifiable, seed, difficulty)
        if not result.ok:
            if result.kind == "timeout":
                raise TimeoutError(result.error)
            raise RuntimeError(f"generation {result.kind}: {result.error}")
        return Problem(**result.value)

    # ---- scoring ------------------------------------------------------------------------------

    async def verify(self, completion: Any, info: dict[str, Any]) -> tuple[Verdict, str]:
        """(verdict, "ok" or the pool's failure kind) for one completion."""
        texts = assistant_texts(completion)
        answer = self.verifiable.extract_answer(texts[-1]) if texts else None
        if answer is None:
            return self.verifiable.format_failure("no answer found"), "ok"
        problem = Problem.from_json(info["problem"])
        if not self.sandbox:
            try:
                return checked_verdict(self.verifiable, problem, answer), "ok"
            except Exception as error:  # a verifier bug must not crash the batch
                return self.verifiable.format_failure(f"verifier raised {error!r}"), "error"
        pool = self._verify_pool or shared_pool("verify")
        return _verdict_from_call(
            self.verifiable, await pool.acall(check_in_worker, self.verifiable, problem, answer)
        )

    async def verified_reward(self, completions, states, infos) -> list[float]:
        """The verifier's reward of every rollout of a group, verified concurrently."""
        outcomes = await asyncio.gather(
            *(self.verify(c, i) for c, i in zip(completions, infos, strict=True))
        )
        for state, (verdict, kind) in zip(states, outcomes, strict=True):
            state["verdict"], state["verify_failure"] = verdict, kind
            if kind != "ok":
                state["verifier_error"] = verdict.detail
        if self.reward == "binary":
            return [float(verdict.accuracy) for verdict, _ in outcomes]
        return [verdict.reward for verdict, _ in outcomes]

    def accuracy(self, trajectory: Trajectory) -> float:
        """Solved means the verifier's accuracy (reward >= the passing threshold)."""
        return trajectory.metrics.get("reward/accuracy", 0.0)

    def episode_metrics(self, state: State) -> dict[str, float]:
        kind = state.get("verify_failure", "ok")
        return {name: float(kind == k) for k, name in _FAILURE_METRICS.items()}


def accuracy(state: State) -> float:
    """1 when the verifier counts the answer as correct (a zero-weight metric)."""
    return float(state["verdict"].accuracy)


def format_score(state: State) -> float:
    """1 when the answer was found in the expected format (a zero-weight metric)."""
    return float(state["verdict"].format_ok)
