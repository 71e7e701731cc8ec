"""A checkpoint is read as data: a pickle in it that would run code is refused, naming the file,
and nothing runs; the states rlve writes (rng, an async batch of rollouts) load as before."""

import os
import pickle

import pytest
import torch
import torch.distributed.checkpoint as dcp

import rlve.training.checkpoint as checkpoint
from rlve.rollout.collector import StepBatch
from rlve.training.data_only import UnsafeCheckpointError, load_dcp
from rlve.types import Fault, RolloutGroup, Trajectory


class RunsCode:
    """Unpickled by a plain unpickler, this creates a file: proof that code ran."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def saved(root, state):
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.randn(3, 4)).sum().backward()
    optimizer.step()
    path = checkpoint.save_checkpoint(str(root), 1, model, optimizer, state, keep=1)
    return path, model, optimizer


def async_batch() -> StepBatch:
    trajectory = Trajectory(prompt=[{"role": "user", "content": "hi"}], completion="ok",
                            token_ids=[1, 2], loss_mask=[0, 1], sampler_logprobs=[0.0, -0.5],
                            reward=1.0, fault=Fault("tool", "timed out"))  # fmt: skip
    group = RolloutGroup(example_id=3, env_name="t", trajectories=[trajectory])
    return StepBatch(groups=[group], played=[group], rounds=1, generate_s=0.5)


def test_the_states_rlve_writes_load_as_data(tmp_path):
    state = {"rng": checkpoint.capture_rng_state(), "extra": {"next_batch": async_batch()}}
    path, model, optimizer = saved(tmp_path, state)
    loaded = checkpoint.load_checkpoint(path, model, optimizer)
    assert (loaded["rng"]["numpy"][1] == state["rng"]["numpy"][1]).all()
    assert loaded["extra"]["next_batch"] == state["extra"]["next_batch"]


def test_a_trainer_state_that_would_run_code_is_refused_and_nothing_runs(tmp_path):
    marker = tmp_path / "ran"
    path, model, optimizer = saved(tmp_path / "run", {"step": 1})
    torch.save({"step": 1, "extra": RunsCode(marker)}, os.path.join(path, checkpoint.STATE_FILE))
    with pytest.raises(UnsafeCheckpointError, match=checkpoint.STATE_FILE):
        checkpoint.load_checkpoint(path, model, optimizer)
    assert not marker.exists()


def test_dcp_metadata_that_would_run_code_is_refused_and_nothing_runs(tmp_path):
    marker = tmp_path / "ran"
    path, model, optimizer = saved(tmp_path / "run", {"step": 1})
    with open(os.path.join(path, checkpoint.MODEL_AND_OPTIMIZER, ".metadata"), "wb") as out:
        pickle.dump(RunsCode(marker), out)
    with pytest.raises(UnsafeCheckpointError, match=".metadata"):
        checkpoint.load_checkpoint(path, model, optimizer)
    assert not marker.exists()


def test_a_dcp_entry_that_would_run_code_is_refused_and_nothing_runs(tmp_path):
    # an optimizer's non-tensor entries (lr, betas...) are such entries: torch.save'd pickles
    marker = tmp_path / "ran"
    dcp.save({"lr": RunsCode(marker)}, checkpoint_id=tmp_path / "dcp")  # pickled, not run
    with pytest.raises(UnsafeCheckpointError, match=r"dcp: its entry lr .*posix.system"):
        load_dcp({"lr": 0.1}, str(tmp_path / "dcp"))
    assert not marker.exists()
