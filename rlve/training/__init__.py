"""The learning side: the torch trainer and what it needs around it.

`trainer` takes RL and SFT optimizer steps, `logprobs` computes token log-probs in chunks,
`checkpoint` saves and restores runs atomically and exports models, `sft` turns a teacher's games
into an SFT warm-up, `metrics_logger` writes a run's metrics (jsonl, W&B, console) and samples.
May import `rlve.algorithms`, `rlve.models`, `rlve.evaluation`, `rlve.rollout`, `rlve.inference`,
`rlve.envs`, `rlve.config` and `rlve.types`.
"""
