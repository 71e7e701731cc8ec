"""Damaged checkpoints are found by their checksums and skipped; a full disk leaves the previous
checkpoint intact; a resumed run's metrics.jsonl is rewound to the resumed step."""

import errno
import json
import logging
import os

import pytest
import torch

import rlve.training.checkpoint as checkpoint
from rlve.config import LoggingConfig
from rlve.training.metrics_logger import MetricsLogger


def save_steps(root, steps, keep=3):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.AdamW(model.parameters())
    for step in steps:
        model(torch.randn(3, 4)).sum().backward()
        optimizer.step()
        checkpoint.save_checkpoint(str(root), step, model, optimizer, {"step": step}, keep)
    return model, optimizer


def tensor_file(path):
    """The largest file of the checkpoint's tensors (DCP's data file)."""
    files = [os.path.join(d, f) for d, _, names in os.walk(path) for f in names]
    return max((f for f in files if checkpoint.MODEL_AND_OPTIMIZER in f), key=os.path.getsize)


def test_a_fresh_checkpoint_passes_its_checksums(tmp_path):
    save_steps(tmp_path, [1])
    path = checkpoint.latest_checkpoint(str(tmp_path))
    assert checkpoint.checkpoint_damage(path) is None
    sums = json.loads(open(os.path.join(path, checkpoint.CHECKSUM_FILE)).read())
    assert {checkpoint.STATE_FILE, checkpoint.META_FILE} <= set(sums)
    assert all(len(entry["sha256"]) == 64 for entry in sums.values())


@pytest.mark.parametrize("damage", ["flip", "truncate", "remove", "no_checksums"])
def test_a_damaged_newest_checkpoint_falls_back_to_the_one_before(tmp_path, caplog, damage):
    save_steps(tmp_path, [1, 2])
    newest = checkpoint.latest_checkpoint(str(tmp_path))
    target = tensor_file(newest)
    if damage == "flip":
        data = bytearray(open(target, "rb").read())
        data[len(data) // 2] ^= 0xFF
        open(target, "wb").write(bytes(data))
    elif damage == "truncate":
        os.truncate(target, os.path.getsize(target) // 2)
    elif damage == "remove":
        os.remove(os.path.join(newest, checkpoint.STATE_FILE))
    else:
        os.remove(os.path.join(newest, checkpoint.CHECKSUM_FILE))
    with caplog.at_level(logging.WARNING):
        intact = checkpoint.latest_intact_checkpoint(str(tmp_path))
    assert intact.endswith("step_00000001")
    assert f"checkpoint {newest} is damaged" in caplog.text
    assert f"falling back to {intact}" in caplog.text


def test_every_checkpoint_damaged_is_an_error_naming_each(tmp_path):
    save_steps(tmp_path, [1, 2])
    for path in checkpoint.list_checkpoints(str(tmp_path)):
        os.truncate(tensor_file(path), 10)
    with pytest.raises(checkpoint.CheckpointDamaged, match="step_00000002.*bytes.*step_00000001"):
        checkpoint.latest_intact_checkpoint(str(tmp_path))
    assert checkpoint.latest_intact_checkpoint(str(tmp_path / "none")) is None


@pytest.mark.parametrize("while_writing", ["tensors", "trainer_state"])
def test_a_full_disk_stops_the_save_and_leaves_the_previous_checkpoint_intact(
    tmp_path, monkeypatch, while_writing
):
    model, optimizer = save_steps(tmp_path, [1])
    real_save = torch.save

    def fill_the_disk(obj, target, *args, **kwargs):
        in_dcp = not isinstance(target, (str, os.PathLike))  # DCP serializes into a buffer
        if in_dcp != (while_writing == "tensors"):
            return real_save(obj, target, *args, **kwargs)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(checkpoint.torch, "save", fill_the_disk)
    with pytest.raises(checkpoint.DiskFullError, match="step 2 .* previous checkpoint .*step_"):
        checkpoint.save_checkpoint(str(tmp_path), 2, model, optimizer, {"step": 2}, keep=1)
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["step_00000001"]  # no staging directory, the old one kept
    assert checkpoint.checkpoint_damage(str(tmp_path / "step_00000001")) is None


def test_a_resumed_logger_drops_the_rows_and_samples_after_the_checkpoint(tmp_path):
    rows = [json.dumps({"step": step, "reward/mean": step / 10}) for step in range(1, 6)]
    (tmp_path / "metrics.jsonl").write_text("\n".join(rows) + '\n{"step": 6, "rew')  # torn row
    (tmp_path / "samples").mkdir()
    for step in range(1, 6):
        (tmp_path / "samples" / f"step_{step:06d}.txt").write_text("...")
    logger = MetricsLogger(tmp_path, LoggingConfig(wandb_mode="disabled", console_every=0),
                           {}, "run", max_steps=8, resume_step=3)  # fmt: skip
    logger.log(4, {"reward/mean": 0.9})
    logger.close()
    logged = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in logged] == [1, 2, 3, 4]
    assert logged[3]["reward/mean"] == 0.9
    assert sorted(p.name for p in (tmp_path / "samples").iterdir()) == [
        "step_000001.txt", "step_000002.txt", "step_000003.txt"]  # fmt: skip
