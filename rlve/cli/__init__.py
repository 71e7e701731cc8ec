"""Command lines a user types, each a `main(argv)`, most behind a thin wrapper in `scripts/`.

`eval` (scripts/evaluate.py), `sft` (scripts/generate_sft_data.py, scripts/sft_warmup.py), `play`
(scripts/play.py), `plot` (scripts/plot_run.py), `compare` (scripts/compare_runs.py), `games`
(scripts/show_games.py), `dashboard` (the W&B workspace), `demo` (`make demo`), `smoke`
(`make smoke`) and `config_reference` (docs/config.md). The experiments the project ran live in
`rlve.experiments`. The top of the house: may import anything in rlve, `rlve.experiments`
included; nothing imports it.
"""
