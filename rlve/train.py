"""`python -m rlve.train +experiment=tictactoe_cispo`: the Hydra entry point of an RL run.

Hydra composes `RunConfig` from `rlve/configs/` (shipped inside the package) and the command
line; `rlve.loop.train` runs it. `load_run_config` gives the same config without starting a run.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import fields
from difflib import get_close_matches
from pathlib import Path
from typing import Any

import hydra
from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from rlve.config import RunConfig
from rlve.distributed.world import World, close_world
from rlve.loop import train
from rlve.training.playability import ModelCannotPlay

CONFIG_DIR = Path(__file__).resolve().parent / "configs"
"""the Hydra configs; shipped inside the package (`configs/` at the repository root links here)"""

CONFIG_GROUPS = ("model", "algorithm", "env", "experiment")


def has_cuda() -> bool:
    """Whether this machine has a GPU for the run (counted without starting CUDA here)."""
    from rlve.sync.placement import gpu_count

    return gpu_count() > 0


def cpu_or_gpu(on_cpu: Any, on_gpu: Any) -> Any:
    """`${cpu_or_gpu:A,B}` in a config: A on a machine without CUDA, B with it (the experiment
    configs' sizes for each)."""
    return on_gpu if has_cuda() else on_cpu


def register_configs() -> None:
    """Make `RunConfig` the schema Hydra validates `configs/config.yaml` against, and
    `${cpu_or_gpu:A,B}` known to it."""
    ConfigStore.instance().store(name="rlve_schema", node=RunConfig)
    OmegaConf.register_new_resolver("cpu_or_gpu", cpu_or_gpu, replace=True)


def check_override_keys(overrides: list[str]) -> None:
    """Refuse a command-line override whose key is not a config field, naming the closest
    field and the valid ones (Hydra alone names only the bad key)."""
    defaults = RunConfig()
    for item in overrides:
        key, has_value, _ = item.partition("=")
        key = key.lstrip("+~")
        if not has_value or key in CONFIG_GROUPS or key.startswith("hydra"):
            continue
        node: Any = defaults
        for depth, part in enumerate(key.split(".")):
            if isinstance(node, dict):  # env.args.<name>..., env.default_args...: free-form
                break
            names = [f.name for f in fields(node)]
            if part not in names:
                where = ".".join(key.split(".")[:depth]) or "the top level"
                close = get_close_matches(part, names, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise ValueError(
                    f"unknown config field {key!r}: {hint}the fields of {where} are {names}"
                )
            node = getattr(node, part)


def load_run_config(overrides: list[str] = ()) -> RunConfig:
    """The RunConfig `python -m rlve.train <overrides>` would run with (validated)."""
    check_override_keys(list(overrides))
    register_configs()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        cfg = compose(config_name="config", overrides=list(overrides))
    config = OmegaConf.to_object(cfg)
    config.validate()
    return config


register_configs()


@hydra.main(version_base=None, config_path=str(CONFIG_DIR), config_name="config")
def main(cfg: DictConfig) -> None:
    config: RunConfig = OmegaConf.to_object(cfg)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    if World.from_env().is_main:
        from rlve.models.precision import this_cpu_kind
        from rlve.sync.placement import gpu_count
        from rlve.training.run_plan import plan

        print(plan(config, gpu_count(), this_cpu_kind()), flush=True)
    try:
        run_dir = train(config)
    except KeyboardInterrupt:
        sys.exit(130)
    except ModelCannotPlay as error:
        sys.exit(f"error: {error}")
    finally:
        close_world()
    if not World.from_env().is_main:
        return
    print(f"metrics: {run_dir / 'metrics.jsonl'}")
    print(f"samples: {run_dir / 'samples'}")
    print(f"checkpoints: {run_dir / 'checkpoints'}")
    print(f"final model: {run_dir / 'model'}")


if __name__ == "__main__":
    try:
        check_override_keys(sys.argv[1:])
    except ValueError as exc:
        sys.exit(f"error: {exc}")
    from torch.distributed.elastic.multiprocessing.errors import record

    record(main)()  # under torchrun, a failing rank's traceback goes into torchrun's report
