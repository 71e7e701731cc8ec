"""Tic-tac-toe against a seeded minimax opponent (the LFM2 tic-tac-toe RL recipe): the game
(`game`), its prompts, the dataset rows (`dataset`), the environment (`env`, loaded by
`loading`) and scripted policies (minimax, noisy, random)."""

from rlve.envs.tictactoe.env import TicTacToeEnv
from rlve.envs.tictactoe.loading import load_environment
from rlve.envs.tictactoe.policies import minimax_policy, noisy_minimax_policy, random_policy

__all__ = [
    "TicTacToeEnv",
    "load_environment",
    "minimax_policy",
    "noisy_minimax_policy",
    "random_policy",
]
