"""Adaptive difficulty: RLVE's per-environment windows and stratified parameter draws."""

from rlve.curriculum.controller import DifficultyController, EnvWindow
from rlve.curriculum.stratified import stratified_probabilities

__all__ = ["DifficultyController", "EnvWindow", "stratified_probabilities"]
