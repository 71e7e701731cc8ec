"""Evaluate a model or a scripted policy on an environment; see rlve/cli/eval.py or --help.

    python scripts/evaluate.py --env tictactoe --policy rlve.envs.tictactoe:minimax_policy \
        --env-args '{"min_random_move_prob": 0.0, "max_random_move_prob": 0.0}' --out runs/eval/mm
"""

from rlve.cli.eval import main

if __name__ == "__main__":  # vLLM starts worker processes that re-import this file
    main()
