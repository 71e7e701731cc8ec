"""`rollout.*`, `env.*` (and its curriculum), `logging.*`, `hacking.*`: the run that holds them
(with `warmup.*` and `evaluation.*` from rlve.config.warmup)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from rlve.config.checks import is_int, require, require_choice
from rlve.config.inference import InferenceConfig, SyncConfig
from rlve.config.trainer import TrainerConfig
from rlve.config.warmup import EvaluationConfig, WarmupConfig
from rlve.sync.placement import check_placement, check_remote_placement, place_run

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
    """nucleus mass; 1.0 (the trainer's log-probs are of the whole distribution; temperature:
    `trainer.temperature`)"""
    max_concurrent: int = 256
    """most episodes in flight at once"""
    episode_time_limit_s: float | None = 600.0
    """wall-clock limit per episode, its setup included; past it the episode ends with stop
    reason 'timeout' (a fault: faults/timeout); None = no limit"""
    async_level: int = 0
    """0: strictly on-policy; 1: generate step n+1 while the trainer trains step n (each batch
    sampled by one weights version: the push waits for it)"""
    max_staleness: int = 0
    """k >= 1: generation runs up to k batches ahead of the trainer and goes on while it pushes,
    so an episode may continue under newer weights between turns; a rollout is trained while its
    oldest token is at most k versions old, else dropped (`async/*` metrics). Needs
    trainer.old_logprobs=sampler and async_level=0. 0 = off"""
    dynamic_sampling: bool | None = None
    """DAPO: drop groups whose rewards are all equal and sample more until the batch is full;
    None = the loss's own (on for dapo, off for the others)"""
    max_refills: int = 4
    """most extra sampling rounds per step when dynamic sampling is on; >= 0"""
    oversample: float = 1.0
    """with dynamic sampling, each refill asks for missing * oversample groups; >= 1"""
    overlong_buffer: int | None = None
    """DAPO overlong shaping: penalise completions in the last N tokens before max_tokens (each
    turn of a multi-turn episode on its own, charged at that turn under trainer.credit=turn)"""
    generate_time_limit_s: float | None = 300.0
    """longest wait for one generated problem (`make_example`); past it, or when the generator
    raises, the problem is replaced and counted under faults/generator_error (the hung call is left
    running in a daemon thread: Python cannot stop a thread); None = no limit"""
    max_fault_rate: float = 0.1
    """the run stops when more than this share of the last `fault_window` episodes and failed
    generations were faulty (faults/*: generator, environment, engine and verifier errors,
    timeouts); in [0, 1], 1.0 = never stop"""
    fault_window: int = 512
    """how many of the latest episodes and failed generations the fault rate is judged over, once
    that many were seen (a resumed run starts an empty window); >= 1"""

    @property
    def batches_ahead(self) -> int:
        """How many batches generation may run ahead of the trainer: 0, 1 or max_staleness."""
        return self.max_staleness or self.async_level

    def validate(self) -> None:
        require_choice("rollout.engine", self.engine, ENGINES)
        require(self.group_size >= 2, f"rollout.group_size must be >= 2, got {self.group_size}")
        require(
            self.groups_per_step >= 1,
            f"rollout.groups_per_step must be >= 1, got {self.groups_per_step}",
        )
        require(
            self.max_tokens is None or self.max_tokens >= 1,
            f"rollout.max_tokens must be None or >= 1, got {self.max_tokens}",
        )
        require(self.top_p == 1.0, f"rollout.top_p must be 1.0, got {self.top_p}: vLLM's log-probs "
                "would be the nucleus's, the trainer's the whole distribution's")  # fmt: skip
        require(
            self.max_concurrent >= 1,
            f"rollout.max_concurrent must be >= 1, got {self.max_concurrent}",
        )
        require_choice("rollout.async_level", self.async_level, ASYNC_LEVELS)
        k = self.max_staleness
        require(is_int(k) and k >= 0, f"rollout.max_staleness must be an integer >= 0, got {k}")
        require(not (self.max_staleness and self.async_level),
                f"rollout.max_staleness={self.max_staleness} replaces rollout.async_level (now "
                f"{self.async_level}): set rollout.async_level=0")  # fmt: skip
        require(self.max_refills >= 0, f"rollout.max_refills must be >= 0, got {self.max_refills}")
        require(self.oversample >= 1, f"rollout.oversample must be >= 1, got {self.oversample}")
        require(
            self.overlong_buffer is None or self.overlong_buffer >= 1,
            f"rollout.overlong_buffer must be None or >= 1, got {self.overlong_buffer}",
        )
        require(
            self.generate_time_limit_s is None or self.generate_time_limit_s > 0,
            f"rollout.generate_time_limit_s must be None or > 0, got {self.generate_time_limit_s}",
        )
        require(
            0 <= self.max_fault_rate <= 1,
            f"rollout.max_fault_rate must be in [0, 1], got {self.max_fault_rate}",
        )
        require(
            self.fault_window >= 1, f"rollout.fault_window must be >= 1, got {self.fault_window}"
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
    """environment names or globs (`rlve-gym/*`); see rlve.list_environments(); or one of your
    own as `package.module:function` (docs/environments.md, "From your environment to a run")"""
    weights: list[float] | None = None
    """sampling weight per entry of `names` (a glob's weight is shared by its matches); None =
    uniform over environments"""
    args: dict[str, dict[str, Any]] = field(default_factory=dict)
    """keyword arguments per environment name, e.g. {tictactoe: {max_turns: 7}} (a name with
    ':' only in a config file: the command line's grammar cannot write it as a key)"""
    default_args: dict[str, Any] = field(default_factory=dict)
    """keyword arguments for every environment of `names` (per-name `args` override them),
    e.g. {num_examples: 4} for a whole family loaded by a glob"""
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)
    """adaptive difficulty for environments that have one"""
    seed: int = 0
    """seed of the problem sampler (which environment, which example, which difficulty)"""

    def args_for(self, name: str) -> dict[str, Any]:
        """The keyword arguments environment `name` is loaded with: `default_args`, then its
        own `args` over them."""
        return {**self.default_args, **self.args.get(name, {})}

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
    """rollouts written as readable text to samples/step_<n>.txt each step (the best and the
    worst of the first groups); 0 = none"""
    rollout_table_every: int = 5
    """log W&B's `rollouts` table (step, environment, difficulty, prompt, completion, reward, each
    reward function's score, stop reason) every N steps; 0 = never"""
    rollout_table_rows: int = 8
    """rollouts in each such table, picked as samples/ picks them (the first rows are the same
    rollouts); >= 1"""
    console_every: int = 1
    """print a progress line every N steps"""
    vllm_log_file: bool = True
    """vLLM's log lines go to <run dir>/vllm.log instead of the console"""

    def validate(self) -> None:
        require_choice("logging.wandb_mode", self.wandb_mode, WANDB_MODES)
        every, rows = self.rollout_table_every, self.rollout_table_rows
        require(every >= 0, f"logging.rollout_table_every must be >= 0 (0 = never), got {every}")
        require(rows >= 1, f"logging.rollout_table_rows must be >= 1, got {rows}")


HACKING_ACTIONS = ("off", "warn", "stop")


@dataclass
class HackingConfig:
    """The reward-hacking monitor (rlve.training.hacking_monitor): it compares the signals a
    policy escaping its task moves (invalid answers, truncated answers, unfinished episodes,
    answer length, and the metrics an environment declares as escapes) with their values in the
    run's first steps."""

    action: str = "warn"
    """what a tripped signal does: "warn" (console, `hacking/*` metrics, a W&B alert), "stop"
    (that too, then a checkpoint and an error that ends the run), or "off" (no monitor)"""
    baseline_steps: int = 2
    """the first steps whose mean is each signal's baseline; nothing trips before they are
    over; >= 1"""
    max_rise: float = 0.15
    """how far a share (of invalid answers, truncated answers...) may rise above its baseline
    before it trips, when the mean reward has not risen by as much over its own; > 0"""
    max_length_rise: float = 0.5
    """the same bound for the mean answer length, relative to its baseline (0.5: 50% longer;
    a curriculum's harder problems lengthen answers honestly); > 0"""
    noise_sigmas: float = 3.0
    """a share's bound is at least this many standard errors of the difference between the
    step's share and the baseline's, from the episodes behind each (`episode/count`): a share
    of 16 episodes moves by about 0.11 by chance; the answer length's, from the spread of the
    groups' mean lengths (`completion/len_mean_se`); > 0"""

    def validate(self) -> None:
        require_choice("hacking.action", self.action, HACKING_ACTIONS)
        require(
            is_int(self.baseline_steps) and self.baseline_steps >= 1,
            f"hacking.baseline_steps must be an integer >= 1, got {self.baseline_steps!r}",
        )
        for name in ("max_rise", "max_length_rise", "noise_sigmas"):
            value = getattr(self, name)
            require(value > 0, f"hacking.{name} must be > 0, got {value}")


@dataclass
class RunConfig:
    """A training run: `python -m rlve.train +experiment=tictactoe_cispo`."""

    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    """the learning side: model, LoRA, optimizer, loss, temperature, max_steps"""
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    """rollout generation"""
    env: EnvConfig = field(default_factory=EnvConfig)
    """environments and curriculum"""
    inference: InferenceConfig = field(default_factory=InferenceConfig)
    """the vLLM engine"""
    sync: SyncConfig = field(default_factory=SyncConfig)
    """what a push sends into vLLM"""
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    """metrics sinks"""
    hacking: HackingConfig = field(default_factory=HackingConfig)
    """the reward-hacking monitor"""
    warmup: WarmupConfig = field(default_factory=WarmupConfig)
    """the SFT warm-up before RL"""
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)
    """games played before the first step and after the last"""
    stop_if_unplayable: bool = True
    """stop before the first optimizer step when under `min_legal_answers` of the first batch's
    answers were legal (the environments' `legal_answer_metric`: a legal move in tic-tac-toe),
    naming the warm-up that fixes it; false trains on regardless (tests and benchmarks on the
    tiny model, which never plays a legal move)"""
    min_legal_answers: float = 0.05
    """the share of legal answers under which the first batch counts as unplayable; in [0, 1]"""
    run_name: str = "run"
    """name of the run (W&B run name; part of the default output directory)"""
    output_dir: str = "runs/${run_name}"
    """run directory: metrics.jsonl, samples/, checkpoints/, wandb/, config.yaml"""
    save_every: int = 10
    """checkpoint every N steps (and at the end, and on Ctrl-C); >= 1"""
    resume: bool = False
    """continue the run in output_dir from its newest intact checkpoint (metrics.jsonl and
    samples/ are rewound to that step)"""
    overwrite: bool = False
    """start afresh in an output_dir that holds an earlier run, deleting its checkpoints,
    metrics.jsonl, samples/ and model/ (without it, and without resume, such a run is refused)"""

    def validate(self) -> None:
        from rlve.config.loss_settings import fill_loss_settings

        fill_loss_settings(self.trainer, self.rollout)  # None: the loss's own
        self.trainer.validate()
        self.rollout.validate()
        self.env.validate()
        self.logging.validate()
        self.hacking.validate()
        self._check_adapter_push()
        self.warmup.validate(self.env.names)
        self.evaluation.validate()
        require(0 <= self.min_legal_answers <= 1,
                f"min_legal_answers must be in [0, 1], got {self.min_legal_answers}")  # fmt: skip
        require(self.save_every >= 1, f"save_every must be >= 1, got {self.save_every}")
        self._check_off_policy_correction()
        require(not (self.trainer.distill.enabled and self.trainer.distill.reward_weight == 0
                     and self.rollout.dynamic_sampling),
                "rollout.dynamic_sampling=true drops groups whose rewards are all equal, but with "
                "trainer.distill.reward_weight=0 (pure distillation) every group carries the "
                "teacher's signal: set rollout.dynamic_sampling=false")  # fmt: skip
        require(not (self.resume and self.overwrite),
                "resume=true and overwrite=true contradict each other: choose one")  # fmt: skip
        placed = place_run(self)  # "auto" as this machine resolves it at start
        i = placed.inference
        if self.rollout.engine == "vllm" and i.servers:
            check_remote_placement(placed.trainer.device, i.weight_transport)
        elif self.rollout.engine == "vllm":
            check_placement(placed.trainer.device, i.gpus, i.tensor_parallel_size,
                            i.weight_transport, i.gpu_memory_utilization, i.replicas,
                            int(os.environ.get("LOCAL_WORLD_SIZE", "1")))  # fmt: skip

    def _check_adapter_push(self) -> None:
        """sync.lora=adapter: vLLM started by this run loads the trainer's one adapter."""
        self.sync.validate()
        if self.sync.lora != "adapter":
            return
        instead = "; sync.lora=merged pushes every weight instead"
        require(self.trainer.lora.enabled,
                "sync.lora=adapter pushes the LoRA adapter alone, but trainer.lora.enabled is "
                "false: there is no adapter" + instead)  # fmt: skip
        require(not self.inference.servers,
                "sync.lora=adapter is built for vLLM started by the run, not for rlve.serve "
                f"servers ({self.inference.servers})" + instead)  # fmt: skip
        sharded = int(os.environ.get("WORLD_SIZE", "1")) > 1
        require(
            not sharded, "sync.lora=adapter is not built for a sharded trainer (torchrun)" + instead
        )

    def _check_off_policy_correction(self) -> None:
        """async_level 1 trains on rollouts of the weights one step back; recomputed old log-probs
        are the current weights', so the ratio is 1 by construction and only TIS corrects."""
        t = self.trainer
        uncorrected = t.old_logprobs == "recompute" and t.tis_cap is None
        require(
            not (self.rollout.async_level == 1 and uncorrected),
            "rollout.async_level=1 trains on rollouts sampled one step before, but with "
            "trainer.old_logprobs=recompute and trainer.tis_cap=null nothing corrects for that "
            "(the recomputed ratio is 1): set trainer.old_logprobs=sampler (the ratio spans the "
            "lag) or trainer.tis_cap=2.0, or use rollout.async_level=0",
        )
        k = self.rollout.max_staleness
        require(
            not (k and t.old_logprobs == "recompute"),
            f"rollout.max_staleness={k} trains on rollouts whose tokens were sampled by up to "
            f"{k + 1} weights versions, but trainer.old_logprobs=recompute recomputes one old "
            "policy for the whole sequence (wrong for tokens of other versions): set "
            "trainer.old_logprobs=sampler (the ratio against each token's own sampler)",
        )
