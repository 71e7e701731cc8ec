"""What the project measured: the experiments behind docs/results.md, each a runner over seeds
with its tables and plots (`python -m rlve.experiments.<name>`).

`experiment` runs arms of RL runs over seeds; `recipe` is the tic-tac-toe recipe (`make recipe`,
its sizes in `recipe_sizes`, its RL arms in `recipe_arms`, its table in `recipe_table`);
`curriculum_arms`, `loss_arms`, `sft_curve`, `smollm2_rl` and `env_scaling` (with `scaling_pool`,
`scaling_power`, `scaling_plot`, `worked_start`) are the other experiments. `run_metrics`,
`figures` and `seed_spread` read runs' metrics back and draw them; `stage_clock` times stages.
Sits under `rlve.cli` (`make demo` runs the recipe, the plot commands use the figures): may import
anything in rlve but `rlve.cli`; only `rlve.cli` imports it.
"""
