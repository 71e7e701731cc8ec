"""OpenEnv environments: episodes played on an OpenEnv server (openenv-core's HTTP/WebSocket
protocol, as TRL, torchforge and SkyRL use it), the server left as it is.

`OpenEnvEnv` (env.py) plays them through our own small client (client.py); schema.py turns the
server's schemas into the action's text field and the observation's text; local_server.py runs
a server on this machine for tests. Only the server needs openenv-core; rlve does not.
"""

from typing import Any

from rlve.envs.openenv.client import OpenEnvFailure, OpenEnvSession, StepResult
from rlve.envs.openenv.env import OpenEnvEnv, episode_reward

__all__ = [
    "OpenEnvEnv",
    "OpenEnvFailure",
    "OpenEnvSession",
    "StepResult",
    "episode_reward",
    "load_environment",
]


def load_environment(url: str, **kwargs: Any) -> OpenEnvEnv:
    """Play episodes on the OpenEnv server at `url` (http://host:port); `kwargs` as for
    `OpenEnvEnv` (num_examples, max_turns, system_prompt, action_field, observation_field,
    reward_mode, timeout_s, max_observation_chars, and MultiTurnEnv's)."""
    return OpenEnvEnv(url, **kwargs)
