"""The configuration of a training run: every field documented once, validated at start.

`RunConfig` is the schema of `python -m rlve.train`; Hydra fills it from `rlve/configs/` and the
command line. The trainer's own settings (model, LoRA, optimizer, loss) are `TrainerConfig` in
`rlve.config`; the inference engine's are `VLLMSettings` in `rlve.rollout.vllm_engine`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from difflib import get_close_matches
from pathlib import Path
from typing import Any

from rlve.config import TrainerConfig, require
from rlve.placement import check_placement
from rlve.rollout.vllm_engine import VLLMSettings

ASYNC_LEVELS = (0, 1)
ENGINES = ("vllm", "scripted")
WANDB_MODES = ("offline", "online", "disabled")


@dataclass
class RolloutConfig:
    """How rollouts are generated each step."""

    engine: str = "vllm"
    """"vllm" (the model) or "scripted" (a scripted policy named by `scripted_policy`, for tests)"""
    scripted_policy: str = "rlve.envs.tictactoe:random_policy"
    """module:function of the policy when engine is "scripted\""""
    group_size: int = 8
    """rollouts per problem (the group of group-relative advantages); >= 2"""
    groups_per_step: int = 32
    """problems per optimizer step; games per step = groups_per_step * group_size"""
    max_tokens: int | None = None
    """most tokens per model turn; None = each environment's own default"""
    top_p: float = 1.0
    """nucleus sampling mass; in (0, 1] (the temperature is `trainer.temperature`)"""
    max_concurrent: int = 256
    """most episodes in flight at once"""
    episode_time_limit_s: float | None = 600.0
    """wall-clock limit per episode; a timed-out episode ends as truncated; None = no limit"""
    async_level: int = 0
    """0: strictly on-policy; 1: generate step n+1 while the trainer trains step n"""
    dynamic_sampling: bool = False
    """DAPO: drop groups whose rewards are all equal and sample more until the batch is full"""
    max_refills: int = 4
    """most extra sampling rounds per step when dynamic sampling is on; >= 0"""
    oversample: float = 1.0
    """with dynamic sampling, each refill asks for missing * oversample groups; >= 1"""
    overlong_buffer: int | None = None
    """DAPO overlong shaping: penalise completions in the last N tokens before max_tokens"""

    def validate(self) -> None:
        require(
            self.engine in ENGINES,
            f"rollout.engine must be one of {list(ENGINES)}, got {self.engine!r}",
        )
        require(self.group_size >= 2, f"rollout.group_size must be >= 2, got {self.group_size}")
        require(
            self.groups_per_step >= 1,
            f"rollout.groups_per_step must be >= 1, got {self.groups_per_step}",
        )
        require(
            self.max_tokens is None or self.max_tokens >= 1,
            f"rollout.max_tokens must be None or >= 1, got {self.max_tokens}",
        )
        require(0 < self.top_p <= 1, f"rollout.top_p must be in (0, 1], got {self.top_p}")
        require(
            self.max_concurrent >= 1,
            f"rollout.max_concurrent must be >= 1, got {self.max_concurrent}",
        )
        require(
            self.async_level in ASYNC_LEVELS,
            f"rollout.async_level must be one of {list(ASYNC_LEVELS)}, got {self.async_level}",
        )
        require(self.max_refills >= 0, f"rollout.max_refills must be >= 0, got {self.max_refills}")
        require(self.oversample >= 1, f"rollout.oversample must be >= 1, got {self.oversample}")
        require(
            self.overlong_buffer is None or self.overlong_buffer >= 1,
            f"rollout.overlong_buffer must be None or >= 1, got {self.overlong_buffer}",
        )


@dataclass
class CurriculumConfig:
    """Adaptive difficulty (RLVE): a window [low, high] per environment (rlve.curriculum)."""

    enabled: bool = False
    """draw each problem's difficulty from its environment's adaptive window"""
    tau_acc: float = 0.9
    """accuracy at `high` that raises the window; in (0, 1]"""
    tau_num: int = 128
    """rollouts at `high` counted before each check; >= 1"""
    d_delta: int = 4
    """widest window (high - low + 1); >= 1"""
    lower_floor: float | None = None
    """beyond the paper: lower `low` when accuracy there falls under this; None = off"""
    variance_weighting: bool = False
    """beyond the paper: favour environments whose recent groups had the most reward variance"""


@dataclass
class EnvConfig:
    """The environments to train on, and how problems are drawn from them."""

    names: list[str] = field(default_factory=lambda: ["tictactoe"])
    """environment names or globs (`rlve-gym/*`); see rlve.list_environments()"""
    weights: list[float] | None = None
    """sampling weight per entry of `names` (a glob's weight is shared by its matches); None =
    uniform over environments"""
    args: dict[str, dict[str, Any]] = field(default_factory=dict)
    """keyword arguments per environment name, e.g. {tictactoe: {max_turns: 7}}"""
    default_args: dict[str, Any] = field(default_factory=dict)
    """keyword arguments for every environment of `names` (per-name `args` override them),
    e.g. {num_examples: 4} for a whole family loaded by a glob"""
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)
    """adaptive difficulty for environments that have one"""
    seed: int = 0
    """seed of the problem sampler (which environment, which example, which difficulty)"""

    def validate(self) -> None:
        require(len(self.names) > 0, "env.names must name at least one environment")
        if self.weights is not None:
            require(
                len(self.weights) == len(self.names),
                f"env.weights has {len(self.weights)} entries but env.names has {len(self.names)}",
            )
            require(all(w >= 0 for w in self.weights), f"env.weights must be >= 0: {self.weights}")
            require(sum(self.weights) > 0, "env.weights must not all be 0")
        c = self.curriculum
        require(0 < c.tau_acc <= 1, f"env.curriculum.tau_acc must be in (0, 1], got {c.tau_acc}")
        require(c.tau_num >= 1, f"env.curriculum.tau_num must be >= 1, got {c.tau_num}")
        require(c.d_delta >= 1, f"env.curriculum.d_delta must be >= 1, got {c.d_delta}")


@dataclass
class LoggingConfig:
    """Where metrics go: metrics.jsonl always, W&B, the console."""

    wandb_mode: str = "offline"
    """"offline" (files under the run directory, sync later), "online" or "disabled\""""
    project: str = "rlve"
    """W&B project"""
    tags: list[str] = field(default_factory=list)
    """W&B tags"""
    samples_per_step: int = 2
    """rollouts written as readable text to samples/step_<n>.txt each step; 0 = none"""
    console_every: int = 1
    """print a progress line every N steps"""

    def validate(self) -> None:
        require(
            self.wandb_mode in WANDB_MODES,
            f"logging.wandb_mode must be one of {list(WANDB_MODES)}, got {self.wandb_mode!r}",
        )


@dataclass
class RunConfig:
    """A training run: `python -m rlve.train +experiment=tictactoe_cispo`."""

    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    """the learning side: model, LoRA, optimizer, loss, temperature, max_steps (rlve.config)"""
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    """rollout generation"""
    env: EnvConfig = field(default_factory=EnvConfig)
    """environments and curriculum"""
    inference: VLLMSettings = field(default_factory=VLLMSettings)
    """the vLLM engine (rlve.rollout.vllm_engine.VLLMSettings)"""
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    """metrics sinks"""
    run_name: str = "run"
    """name of the run (W&B run name; part of the default output directory)"""
    output_dir: str = "runs/${run_name}"
    """run directory: metrics.jsonl, samples/, checkpoints/, wandb/, config.yaml"""
    save_every: int = 10
    """checkpoint every N steps (and at the end, and on Ctrl-C); >= 1"""
    resume: bool = False
    """continue the run in output_dir from its latest checkpoint"""
    seed: int = 0
    """seed of everything not seeded elsewhere"""

    def validate(self) -> None:
        self.trainer.validate()
        self.rollout.validate()
        self.env.validate()
        self.logging.validate()
        require(self.save_every >= 1, f"save_every must be >= 1, got {self.save_every}")
        if self.rollout.engine == "vllm":
            check_placement(
                self.trainer.device,
                self.inference.gpus,
                self.inference.tensor_parallel_size,
                self.inference.weight_transport,
                self.inference.gpu_memory_utilization,
            )


def register_configs() -> None:
    """Make `RunConfig` the schema Hydra validates `configs/config.yaml` against."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name="rlve_schema", node=RunConfig)


CONFIG_DIR = Path(__file__).resolve().parent / "configs"
"""the Hydra configs; shipped inside the package (`configs/` at the repository root links here)"""


CONFIG_GROUPS = ("model", "algorithm", "env", "experiment")


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
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    check_override_keys(list(overrides))
    register_configs()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        cfg = compose(config_name="config", overrides=list(overrides))
    config = OmegaConf.to_object(cfg)
    config.validate()
    return config
