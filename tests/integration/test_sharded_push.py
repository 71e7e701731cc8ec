"""Under FSDP2 a weight push and the export gather one tensor at a time: rank 0 never holds the
whole unsharded model (2 gloo ranks on the CPU, the tiny model)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from test_sharded_trainer import torchrun

SCRIPT = Path(__file__).parent / "scripts" / "sharded_push.py"


def check_held(report: dict) -> None:
    largest, model = report["largest_tensor"], report["model_bytes"]
    assert model > 4 * largest  # holding the model would show
    for action, peak in report["peaks"].items():
        # the tensor being copied, and a small one gathered before it was freed at most
        assert largest <= peak < 2 * largest, (action, peak, largest, model)
    assert report["pushed_equal_model"] and report["exported_equal_pushed"]
    assert report["pushed_tensors"] == report["exported_tensors"] + 1  # lm_head: tied, pushed


def test_rank_0_holds_about_one_gathered_tensor_in_a_push_and_the_export(tmp_path):
    subprocess.run(torchrun(2, str(SCRIPT), str(tmp_path)), check=True)
    check_held(json.loads((tmp_path / "held.json").read_text()))
