"""Adaptive difficulty: RLVE's per-environment windows and stratified parameter draws.

`controller` moves each environment's difficulty window with the accuracy at its top level;
`stratified` spreads a per-example parameter evenly over its range. Plain Python, no model: may
import `rlve.config` only. The problem sampler that draws from the windows is
`rlve.rollout.problems`.
"""

from rlve.curriculum.controller import DifficultyController, EnvWindow
from rlve.curriculum.stratified import stratified_probabilities

__all__ = ["DifficultyController", "EnvWindow", "stratified_probabilities"]
