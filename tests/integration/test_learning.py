"""Learning, end to end: a short RL run through vLLM must raise the reward it is trained on.

The run is `make smoke`'s (rlve/configs/experiment/smoke.yaml): the vowels environment, whose
reward is the share of vowels among the letters of a short answer, and the embedded tiny model
from its random initialisation, where that share varies from rollout to rollout, so every group
carries a learning signal. Seeded and deterministic (vLLM's per-request seeds, the sampler's
seed, the trainer's seed), so the margins below are exact measurements, not a lucky draw.
"""

import pytest

from rlve.cli import smoke

pytestmark = pytest.mark.vllm


@pytest.mark.parametrize("loss", ["cispo", "dapo", "grpo"])
def test_the_smoke_run_raises_the_reward_it_trains_on(tmp_path, loss):
    overrides = [f"algorithm={loss}", "logging.console_every=0", f"output_dir={tmp_path}"]
    first, last = smoke.main(overrides)
    # measured: cispo 0.382 -> 0.538, dapo 0.384 -> 0.577, grpo 0.382 -> 0.518
    assert last > first + 0.1, (first, last)


@pytest.mark.parametrize("loss", ["cispo", "dapo", "grpo"])
def test_the_smoke_run_through_an_agent_program_raises_its_reward(tmp_path, loss):
    """The same run with each episode an agent (examples/one_call_agent.py, the openai SDK)
    calling the model through the run's endpoint: what the agent was served is what trains."""
    overrides = [f"algorithm={loss}", "logging.console_every=0", f"output_dir={tmp_path}"]
    first, last = smoke.main(overrides, experiment="agent_smoke")
    # measured: cispo 0.383 -> 0.620, dapo 0.383 -> 0.684, grpo 0.383 -> 0.693
    assert last > first + 0.1, (first, last)
