"""Tic-tac-toe games of a rollouts file, board by board; see rlve/cli/games.py or --help.

python scripts/show_games.py runs/eval/rollouts.jsonl --result loss --games 3
"""

from rlve.cli.games import main

if __name__ == "__main__":
    main()
