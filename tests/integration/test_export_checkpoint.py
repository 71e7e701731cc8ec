"""A checkpoint becomes the model directory the trainer itself would export at that step:
`rlve.cli.export_checkpoint` on a full and on a LoRA run of the tiny model."""

import pytest
from safetensors.torch import load_file
from test_trainer import LORA, make_group

from rlve.cli.export_checkpoint import export_checkpoint, main
from rlve.config import TrainerConfig
from rlve.training.trainer import Trainer


@pytest.mark.parametrize("lora", [False, True])
def test_a_checkpoint_exports_the_weights_the_trainer_had(tmp_path, lora):
    config = TrainerConfig(loss="cispo", lr=1e-2)
    if lora:
        config.lora = LORA
    trainer = Trainer(config)
    trainer.train_step([make_group()])
    checkpoint = trainer.save(str(tmp_path / "checkpoints"))
    trainer.train_step([make_group()])  # the weights move on after the checkpoint ...
    exported = load_file(f"{export_checkpoint(checkpoint, str(tmp_path / 'exported'))}/"
                         "model.safetensors")  # fmt: skip
    again = Trainer(config)
    again.resume(checkpoint)  # ... the export is the checkpoint's step
    expected = load_file(f"{again.export(str(tmp_path / 'expected'))}/model.safetensors")
    assert exported.keys() == expected.keys()
    for name, tensor in expected.items():
        assert exported[name].equal(tensor), name


def test_a_directory_that_is_no_checkpoint_is_refused_by_name(tmp_path, capsys):
    with pytest.raises(SystemExit, match=f"{tmp_path} is not a checkpoint"):
        main([str(tmp_path), "--out", str(tmp_path / "out")])
