"""Episodes and rollout groups: playing environments against an inference engine.

`episode` plays one token-exact episode (`chat_tokens` keeps the conversation's token ids),
`runner` plays and scores groups, `problems` draws each step's problems from the environment
mixture (with the curriculum's difficulties), `collector` gathers a training step's groups (DAPO
dynamic sampling, overlong shaping), `summary` and `records` turn rollouts into metrics and files.
May import `rlve.inference`, `rlve.envs`, `rlve.curriculum`, `rlve.algorithms`, `rlve.config`
and `rlve.types`. The engine protocol and the scripted engine are re-exported from
`rlve.inference` for convenience.
"""

from rlve.inference.engine import Engine, Generation, GenerationRequest, SamplingConfig
from rlve.inference.scripted import ScriptedEngine
from rlve.rollout.chat_tokens import ChatTokens
from rlve.rollout.episode import EpisodeSettings, play_episode
from rlve.rollout.runner import GroupJob, env_sampling, play_group, play_groups
from rlve.rollout.summary import summarize

__all__ = [
    "ChatTokens",
    "Engine",
    "EpisodeSettings",
    "Generation",
    "GenerationRequest",
    "GroupJob",
    "SamplingConfig",
    "ScriptedEngine",
    "env_sampling",
    "play_episode",
    "play_group",
    "play_groups",
    "summarize",
]
