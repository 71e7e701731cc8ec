"""The problem sampler drops an environment whose generator keeps failing, and a resumed
sampler drops it again."""

import pytest

import rlve
from rlve.curriculum import DifficultyController
from rlve.envs.gym.verifiable import GenerationFailed, Problem, VerifiableEnv
from rlve.envs.gym.wrapper import VerifiableSingleTurnEnv
from rlve.rollout.problems import ProblemSampler


class BrokenAfterTheDataset(VerifiableEnv):
    """Generates the seeds of its fixed dataset (0-9), fails for every other seed."""

    name = "broken"

    def generate(self, seed, difficulty):
        if seed >= 10:
            raise GenerationFailed(f"no problem for seed {seed}")
        return Problem(f"say {seed}", {"seed": seed})

    def check(self, problem, answer):
        return self.verdict(1.0 if answer == str(problem.data["seed"]) else 0.0)


def mixture(seed=0, with_sorting=True):
    envs = {"broken": VerifiableSingleTurnEnv(BrokenAfterTheDataset(), num_examples=2,
                                              sandbox=False)}  # fmt: skip
    if with_sorting:
        envs["rlve/sorting"] = rlve.load_environment("rlve/sorting", num_examples=2, sandbox=False)
    return ProblemSampler(envs, controller=DifficultyController(), seed=seed)


def test_a_failing_generator_is_disabled_and_stays_disabled_after_resume():
    sampler = mixture()
    jobs = sampler.draw(6)
    assert len(jobs) == 6 and {job.env.name for job in jobs} == {"rlve/sorting"}
    assert sampler.disabled == ["broken"] and sampler.names == ["rlve/sorting"]
    resumed = mixture()
    resumed.load_state_dict(sampler.state_dict())
    assert resumed.disabled == ["broken"]
    assert (resumed.names, resumed.weights) == (["rlve/sorting"], [1.0])
    assert [j.example.info for j in resumed.draw(3)] == [j.example.info for j in sampler.draw(3)]


def test_a_mixture_whose_every_environment_fails_stops_with_the_reason():
    with pytest.raises(RuntimeError, match="every environment of the mixture is disabled"):
        mixture(with_sorting=False).draw(1)
