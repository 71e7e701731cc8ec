"""The problem sampler drops an environment whose generator keeps failing, and a resumed
sampler drops it again; a generator that raises for one problem costs one draw, counted, and is
replaced the same way in a resumed run."""

import pytest

import rlve
from rlve.curriculum import DifficultyController
from rlve.envs.gym.builtin import SortingEnv
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


class RaisesOnSomeSeeds(VerifiableSingleTurnEnv):
    """rlve/sorting, except that its generator raises for every seed divisible by `every`."""

    def __init__(self, every: int):
        super().__init__(SortingEnv(), num_examples=1, sandbox=False)
        self.every = every
        self.raised = 0

    def make_example(self, seed, difficulty, example_id=None):
        if example_id is None and seed % self.every == 0:  # not the fixed dataset's rows
            self.raised += 1
            raise ValueError(f"seed {seed} makes no problem")
        return super().make_example(seed, difficulty, example_id)


def raising_sampler(every: int) -> ProblemSampler:
    env = RaisesOnSomeSeeds(every)
    return ProblemSampler({env.name: env}, controller=DifficultyController(), seed=0)


def test_a_generator_that_raises_is_counted_and_replaced_the_same_way_after_resume():
    sampler = raising_sampler(every=3)
    first = sampler.draw(4)
    state = sampler.state_dict()
    rest = sampler.draw(4)
    faults = sampler.take_generator_faults()
    assert len(faults) == sampler.envs["rlve/sorting"].raised > 0
    assert {f.kind for f in faults} == {"generator_error"} and sampler.generator_faults == []
    assert "ValueError: seed" in faults[0].message
    assert all(job.seed % 3 != 0 for job in first + rest)
    seeds = [job.seed for job in first + rest]
    assert [job.seed for job in raising_sampler(every=3).draw(8)] == seeds  # same seed, same draws
    resumed = raising_sampler(every=3)
    resumed.load_state_dict(state)
    assert [job.seed for job in resumed.draw(4)] == seeds[4:]


def test_a_generator_that_always_raises_stops_the_draw_after_twenty_in_a_row():
    with pytest.raises(RuntimeError, match=r"20 problem generators failed in a row; last: "
                       r"rlve/sorting \(seed \d+, difficulty 0\): ValueError"):  # fmt: skip
        raising_sampler(every=1).draw(1)
