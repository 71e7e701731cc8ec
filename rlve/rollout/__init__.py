"""Inference engines, the episode runner, and (later) weight sync."""

from rlve.rollout.chat_tokens import ChatTokens
from rlve.rollout.engine import Engine, Generation, GenerationRequest, SamplingConfig
from rlve.rollout.episode import EpisodeSettings, play_episode
from rlve.rollout.runner import GroupJob, env_sampling, play_group, play_groups
from rlve.rollout.scripted import ScriptedEngine
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
