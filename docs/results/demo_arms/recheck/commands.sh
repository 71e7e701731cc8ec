#!/bin/bash
# Re-check of the demo-size students on other games: 200 games per opponent, env seed 54321
# (the recipe evaluates on 12345), sampling seed 1, the recipe's decoding (temperature 1.0,
# 48 tokens a turn, short rules, grid board). Optimal opponent first, then an imperfect one.
cd "$(dirname "$0")/../../../.."  # the repository root
for job in sft_model:optimal:0.0 regret/seed0/model:optimal:0.0 regret/seed1/model:optimal:0.0 \
           regret/seed2/model:optimal:0.0 sft_model:imperfect:0.3 regret/seed1/model:imperfect:0.3 \
           regret/seed0/model:imperfect:0.3 regret/seed2/model:imperfect:0.3; do
  model=${job%%:*}; rest=${job#*:}; name=${rest%%:*}; prob=${rest##*:}
  out=runs/recheck/$(echo $model | tr / _)_$name
  [ -f $out/summary.json ] && continue
  .venv/bin/python scripts/evaluate.py --env tictactoe --model runs/demo_arms/$model \
    --env-args "{\"seed\": 54321, \"num_examples\": 200, \"min_random_move_prob\": $prob, \"max_random_move_prob\": $prob, \"rules\": \"short\", \"board\": \"grid\"}" \
    --num-examples 200 --seed 1 --temperature 1.0 --max-tokens 48 --dtype bfloat16 \
    --max-model-len 1024 --wandb-mode disabled --out $out > $out.log 2>&1
  echo "$model $name done $(date +%T)"
done
