"""Play tic-tac-toe against a model in the terminal; see rlve/cli/play.py or --help.

python scripts/play.py                       # the embedded tiny model on vLLM
python scripts/play.py --model runs/x/final  # a trained checkpoint
python scripts/play.py --policy rlve.envs.tictactoe:minimax_policy --human-first
"""

from rlve.cli.play import main

if __name__ == "__main__":  # vLLM starts worker processes that re-import this file
    main()
