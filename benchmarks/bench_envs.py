"""Problems generated + verified per second, per family of verifiable environments.

Each problem is generated, then its reference answer (or "0" where there is none) verified:
once in this process (one core), once the way training does it, through two `VerifierPool`
workers (generation and verification both in workers, two calls in flight).

    .venv/bin/python benchmarks/bench_envs.py --envs-per-source 20 --difficulties 0 1 2 3
"""

from __future__ import annotations

import argparse
import fnmatch
import time
from concurrent.futures import ThreadPoolExecutor

from rlve.envs import expand_env_names
from rlve.envs.gym.sandbox import VerifierPool
from rlve.envs.gym.sources import verifiable_env
from rlve.envs.gym.verifiable import Problem, check_in_worker, generate_in_worker
from rlve.envs.gym.wrapper import WORKER_MODULES, warmed_pool

SOURCES = ("rlve-gym/", "reasoning-gym/", "rlve/")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envs-per-source", type=int, default=20, help="environments sampled")
    parser.add_argument("--difficulties", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--seeds", type=int, default=2, help="problems per (env, difficulty)")
    parser.add_argument("--workers", type=int, default=2, help="pool workers (cores)")
    parser.add_argument(
        "--exclude", nargs="*", default=["reasoning-gym/jugs"], help="globs left out (slow gens)"
    )
    return parser.parse_args()


def sample(prefix: str, count: int, exclude: list[str]) -> list[str]:
    names = [
        n
        for n in expand_env_names([prefix + "*"])
        if not any(fnmatch.fnmatch(n, g) for g in exclude)
    ]
    step = max(1, len(names) // count)
    return names[::step][:count]


def jobs_of(names: list[str], difficulties: list[int], seeds: int) -> list[tuple[str, int, int]]:
    return [(n, d, s) for n in names for d in difficulties for s in range(seeds)]


def answer_for(problem: Problem) -> str:
    return problem.reference_answer if problem.reference_answer is not None else "0"


def run_in_process(jobs: list[tuple[str, int, int]]) -> tuple[int, float]:
    """(problems done, seconds), generation and verification in this process."""
    envs = {name: verifiable_env(name) for name, _, _ in jobs}
    done, started = 0, time.perf_counter()
    for name, difficulty, seed in jobs:
        try:
            problem = envs[name].generate(seed, difficulty)
        except Exception:
            continue
        envs[name].check(problem, answer_for(problem))
        done += 1
    return done, time.perf_counter() - started


def run_in_pool(jobs: list[tuple[str, int, int]], pool: VerifierPool) -> tuple[int, float]:
    """(problems done, seconds), both steps as pool calls, `pool.num_workers` in flight."""
    envs = {name: verifiable_env(name) for name, _, _ in jobs}

    def one(job: tuple[str, int, int]) -> bool:
        name, difficulty, seed = job
        generated = pool.call(generate_in_worker, envs[name], seed, difficulty)
        if not generated.ok:
            return False
        problem = Problem(**generated.value)
        return pool.call(check_in_worker, envs[name], problem, answer_for(problem)).ok

    started = time.perf_counter()
    with ThreadPoolExecutor(pool.num_workers) as threads:
        done = sum(threads.map(one, jobs))
    return done, time.perf_counter() - started


def main() -> None:
    args = parse_args()
    pool = warmed_pool(VerifierPool(args.workers, 180.0, 2048), WORKER_MODULES, 60.0)
    rows = []
    try:
        for prefix in SOURCES:
            names = sample(prefix, args.envs_per_source, args.exclude)
            jobs = jobs_of(names, args.difficulties, args.seeds)
            run_in_process(jobs[: len(names)])  # warm this process's imports and caches
            local_done, local_s = run_in_process(jobs)
            pool_done, pool_s = run_in_pool(jobs, pool)
            rows.append((prefix, len(names), len(jobs), local_done / local_s, pool_done / pool_s))
    finally:
        pool.close()
    print(
        f"{'source':<16}{'envs':>6}{'problems':>10}{'1 core/s':>12}{'pool/s':>10}{'pool/1core':>12}"
    )
    for prefix, envs, problems, local, pooled in rows:
        ratio = pooled / local
        print(f"{prefix:<16}{envs:>6}{problems:>10}{local:>12.1f}{pooled:>10.1f}{ratio:>12.2f}")
    builtin = rows[-1][4]
    print(
        "pool throughput relative to rlve/: "
        + ", ".join(f"{r[0]} {r[4] / builtin:.3f}" for r in rows)
    )


if __name__ == "__main__":
    main()
