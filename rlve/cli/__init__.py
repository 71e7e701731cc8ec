"""Command lines, each a `main(argv)` behind a thin wrapper in `scripts/`.

`eval` (scripts/evaluate.py), `sft` (scripts/generate_sft_data.py, scripts/sft_warmup.py), `play`
(scripts/play.py), `plot` (scripts/plot_run.py), `dashboard` (the W&B workspace), `demo`
(`make demo`) and `config_reference` (docs/config.md). The top of the house: may import anything
in rlve; nothing imports it.
"""
