"""The RL loop behind `python -m rlve.train`, top to bottom: build the pieces, step, checkpoint.

Each step: the inference worker (vLLM) plays rollout groups of problems drawn from the
environments (dynamic sampling drops groups without signal and draws more), the trainer takes its
optimizer step(s) on them, the new weights go back into vLLM, metrics go to metrics.jsonl / W&B /
the console, and every `save_every` steps a checkpoint (weights, optimizer, rng, data position,
curriculum) is written atomically. With `rollout.async_level=1` the next batch is generated while
the trainer trains on this one (one step off-policy; the sampler's log-probs feed the importance
correction); with `rollout.max_staleness=k` up to k batches are, and pushes land while they are
played (rlve.rollout.batch_queue). Checkpoints keep the batches started, so a resumed run trains
on exactly them. Ctrl-C saves a checkpoint and exits; `resume=true` continues the run.

Under `torchrun --nproc-per-node N -m rlve.train ...` every rank builds a trainer (FSDP2-sharded);
rank 0 alone builds the rest and drives the run, and the other ranks `follow` its orders.
"""

from __future__ import annotations

import logging
import shutil
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from rlve.config import InferenceConfig, RunConfig
from rlve.config.loss_settings import warn_about_loss_departures
from rlve.curriculum import DifficultyController
from rlve.distributed import Crew, follow, init_world
from rlve.envs import expand_env_names, load_environment
from rlve.envs.base import Environment, require_privileged_views
from rlve.inference.cpu_binding import VLLMS_OWN
from rlve.inference.engine import ServingEngine
from rlve.inference.scripted import ScriptedEngine, load_policy
from rlve.inference.vllm_logs import send_vllm_logs_to
from rlve.reliability.run_guard import run_guard
from rlve.rollout.batch_queue import BatchQueue
from rlve.rollout.chat_tokens import end_of_turn_id
from rlve.rollout.collector import BatchCollector, StepBatch
from rlve.rollout.episode import EpisodeSettings
from rlve.rollout.problems import ProblemSampler
from rlve.rollout.runner import env_sampling
from rlve.rollout.step_summary import step_metrics
from rlve.rollout.summary import staleness, weight_lag, within_lag
from rlve.sync.adapter_push import PolicyPush
from rlve.sync.placement import place_run
from rlve.training.allocator import keep_freed_memory
from rlve.training.checkpoint import intact_checkpoint_for_errors, latest_intact_checkpoint
from rlve.training.hacking_monitor import HackingMonitor, RewardHackingSuspected
from rlve.training.metrics_logger import MetricsLogger
from rlve.training.playability import check_playable
from rlve.training.run_evaluation import EVALUATION_FILE, evaluate_stage
from rlve.training.trainer import Trainer
from rlve.training.warmup import mark_trained_on, needs_warmup, warmed_up

log = logging.getLogger(__name__)

CHECKPOINTS = "checkpoints"
RUN_OUTPUTS = (CHECKPOINTS, "metrics.jsonl", "samples", "model", EVALUATION_FILE)
"""what a run writes into output_dir; a fresh run refuses to start over them without overwrite
(the warm-up's sft_model/ is not among them: the same warm-up settings reuse it)"""

BATCH_TIMEOUT_S = 3600.0
"""longest wait for one step's rollouts before the run stops with an error (never hang)"""


# ----------------------------------------------------------------------------------------------
# Building the pieces
# ----------------------------------------------------------------------------------------------


def build_environments(config: RunConfig) -> tuple[dict[str, Environment], dict[str, float]]:
    """The environments of the mixture and their sampling weights."""
    envs: dict[str, Environment] = {}
    weights: dict[str, float] = {}
    for i, pattern in enumerate(config.env.names):
        names = expand_env_names([pattern])
        for name in names:
            envs[name] = load_environment(name, **config.env.args_for(name))
            if config.env.weights is not None:
                weights[name] = config.env.weights[i] / len(names)
    if config.trainer.distill.privileged:
        require_privileged_views(envs)
    return envs, weights


def build_engine(config: RunConfig, tokenizer):
    """The inference engine: vLLM serving `config.trainer.model` (here, or on `rlve.serve`
    servers), or a scripted policy (tests)."""
    if config.rollout.engine == "scripted":
        policy = load_policy(config.rollout.scripted_policy, "rollout.scripted_policy")
        return ScriptedEngine(policy, tokenizer, end_of_turn_id(tokenizer))
    if config.inference.servers:
        from rlve.inference.remote_engine import RemoteVLLMEngine

        return RemoteVLLMEngine(config.inference.servers, tokenizer, config.inference)
    from rlve.inference.vllm_engine import VLLMEngine
    from rlve.models import resolve_model_path

    if config.logging.vllm_log_file:
        send_vllm_logs_to(config.output_dir)
    adapter = config.trainer.lora.rank if config.sync.lora == "adapter" else None
    return VLLMEngine(resolve_model_path(config.trainer.model), tokenizer, engine_settings(config),
                      lora_rank=adapter)  # fmt: skip


def engine_settings(config: RunConfig) -> InferenceConfig:
    """`config.inference`, with vLLM's own core binding in place of "auto" when the trainer
    computes while vLLM samples (rlve.inference.cpu_binding.VLLMS_OWN)."""
    if config.rollout.batches_ahead > 0 and config.inference.cpu_cores == "auto":
        return replace(config.inference, cpu_cores=VLLMS_OWN)
    return config.inference


def build_sampler(config: RunConfig, envs: dict[str, Environment], weights) -> ProblemSampler:
    curriculum = config.env.curriculum
    controller = None
    if curriculum.enabled:
        controller = DifficultyController(
            tau_acc=curriculum.tau_acc,
            tau_num=curriculum.tau_num,
            d_delta=curriculum.d_delta,
            lower_floor=curriculum.lower_floor,
            variance_weighting=curriculum.variance_weighting,
        )
    sampling = {
        name: env_sampling(
            env,
            temperature=config.trainer.temperature,
            top_p=config.rollout.top_p,
            max_tokens=config.rollout.max_tokens,
        )
        for name, env in envs.items()
    }
    return ProblemSampler(envs, weights or None, controller, sampling, seed=config.env.seed)


# ----------------------------------------------------------------------------------------------
# The loop
# ----------------------------------------------------------------------------------------------


StepCallback = Callable[[int, Trainer, Any, dict[str, float]], None]
"""on_step(step, trainer, engine, metrics): called after each step's weight push"""

StartCallback = Callable[[Trainer, Any], None]
"""on_start(trainer, engine): called once the engine serves the trainer's weights, before step 1"""


def train(
    config: RunConfig,
    on_step: StepCallback | None = None,
    on_start: StartCallback | None = None,
    engine=None,
) -> Path:
    """Run (or resume) a training run; returns its directory.

    The callbacks see the live trainer and engine, e.g. to evaluate the model before the first
    step and after the last one on the engine the run already started. `engine`: one started
    beforehand (e.g. on its own GPU while an SFT made `config.trainer.model`) on a model with the
    same architecture and tokenizer; the run pushes its weights into it before anything else and
    shuts it down at the end, as it does with an engine of its own (but its processes, started
    outside the run, are not among those the run's watchdog ends if this process is killed).
    """
    config = place_run(config)
    log.info(
        "placed: trainer.device=%s inference.gpus=%s inference.gpu_memory_utilization=%s",
        config.trainer.device,
        config.inference.gpus,
        config.inference.gpu_memory_utilization,
    )
    config.validate()
    world, device = init_world(config.trainer.device)
    if world.is_main:
        warn_about_loss_departures(config)  # e.g. grpo without std normalisation: Dr. GRPO-like
    if config.trainer.cpu_keep_freed_memory and str(device).startswith("cpu"):
        keep_freed_memory()
    run_dir = Path(config.output_dir)
    if not world.is_main:
        latest = world.broadcast(None)
        model = world.broadcast(None)  # rank 0's, after its warm-up
        trainer = Trainer(replace(config.trainer, device=device, model=model), world)
        if latest:
            trainer.resume(latest)
        follow(trainer, world)
        return run_dir
    try:
        with run_guard(run_dir):  # one run per directory; its processes end with it
            latest = world.broadcast(_checkpoint_to_resume(config, run_dir))
            asked = config.trainer.model
            if needs_warmup(config.warmup, asked):
                config = warmed_up(config, run_dir, str(device))
            world.broadcast(config.trainer.model)
            trainer = Trainer(replace(config.trainer, device=device), world)
            _drive(config, Crew(trainer, world), latest, run_dir, on_step, on_start, engine,
                   asked)  # fmt: skip
    finally:
        # a given engine ends with the run even if it failed before _drive took it (when _drive
        # did, it is shut down already, and a second shutdown does nothing)
        if isinstance(engine, ServingEngine):
            engine.shutdown()
    return run_dir


def _drive(config, crew, latest, run_dir, on_step, on_start, engine=None, asked=None):
    """Rank 0's part: environments, engine, logger, the loop, the export. `asked`: the model
    the command line named (the run trains the warm-up's SFT student of it where they differ)."""
    trainer = crew.trainer
    if crew.world.sharded:  # torchrun stops every rank when one fails: shut the engine down first
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
    resolved = OmegaConf.to_container(OmegaConf.structured(config), resolve=True)
    OmegaConf.save(OmegaConf.create(resolved), run_dir / "config.yaml")

    envs, weights = build_environments(config)
    sampler = build_sampler(config, envs, weights)
    generated: list[StepBatch] = []
    extra: dict[str, Any] = {}
    if latest:
        extra = trainer.resume(latest)
        if config.rollout.batches_ahead:  # none after Ctrl-C; older checkpoints: next_batch
            generated = extra.get("next_batches") or [b for b in [extra.get("next_batch")] if b]
        sampler.load_state_dict(generated[-1].sampler_state if generated else extra["sampler"])
        log.info("resumed %s at step %d", latest, trainer.step)
    started_elsewhere = engine is not None
    engine = engine if started_elsewhere else build_engine(config, trainer.tokenizer)
    logger = MetricsLogger(
        run_dir,
        config.logging,
        resolved,
        config.run_name,
        config.trainer.max_steps,
        resume_step=trainer.step if latest else None,
    )
    monitor = None
    if config.hacking.action != "off":
        escapes = [metric for env in envs.values() for metric in env.escape_metrics]
        monitor = HackingMonitor(
            config.hacking,
            escapes,
            alert=lambda text: logger.alert("reward hacking suspected", text),
        )
        if "hacking" in extra:  # the resumed run's baseline
            monitor.load_state_dict(extra["hacking"])
    collector = BatchCollector(
        engine,
        sampler,
        config.rollout,
        EpisodeSettings(
            max_seq_len=getattr(engine, "max_seq_len", None),
            time_limit_s=config.rollout.episode_time_limit_s,
            privileged_view=config.trainer.distill.privileged,
        ),
    )
    collector.next_step = trainer.step + 1 + len(generated)
    checkpoints = run_dir / CHECKPOINTS
    push = PolicyPush(crew, engine, adapter=config.sync.lora == "adapter")
    try:
        if (latest or started_elsewhere) and isinstance(engine, ServingEngine):
            push(trainer.version)
        if on_start is not None:
            on_start(trainer, engine)

        def first_batch(metrics: dict[str, float]) -> None:
            """Before the first optimizer step: stop a model that cannot play, or evaluate it."""
            if config.stop_if_unplayable:
                model = asked or config.trainer.model
                check_playable(metrics, envs, model, config.min_legal_answers,
                               warmed_up=model != config.trainer.model)  # fmt: skip
            if config.evaluation.games:
                evaluate_stage(config, engine, run_dir, "start", step=0)

        _loop(config, crew, engine, BatchQueue(collector, config.rollout.batches_ahead, generated),
              push, logger, checkpoints, on_step, monitor, first_batch)  # fmt: skip
        if config.evaluation.games:
            evaluate_stage(config, engine, run_dir, "end", step=trainer.step)
        crew.export(str(run_dir / "model"))
        mark_trained_on(run_dir / "model", list(envs), config.trainer.model)
        crew.dismiss()
    except Exception as error:
        last = intact_checkpoint_for_errors(str(checkpoints))
        where = f"after step {trainer.step}" if isinstance(error, RewardHackingSuspected) else (
            f"in step {trainer.step + 1}")  # fmt: skip
        log.error("the run stopped %s; last checkpoint: %s", where,
                  f"{last} (resume=true continues from it)" if last else "none")  # fmt: skip
        raise
    finally:
        collector.close()
        push.close()
        logger.close()
        if isinstance(engine, ServingEngine):
            engine.shutdown()


def _loop(config, crew, engine, queue: BatchQueue, push: PolicyPush, logger, checkpoints, on_step,
          monitor, first_batch=None) -> None:  # fmt: skip
    """`queue`: the batches started (a resumed async run's first ones already generated);
    `monitor`: the reward-hacking monitor, or None; `first_batch(metrics)`: called on a fresh
    run's first batch before its optimizer step (it raises to stop the run)."""
    trainer = crew.trainer
    rollout = config.rollout
    serves_trainer = isinstance(engine, ServingEngine)
    batch: StepBatch | None = None
    saved_step = trainer.step
    try:
        while trainer.step < config.trainer.max_steps:
            step_started = time.perf_counter()
            batch = queue.take(BATCH_TIMEOUT_S)  # with batches ahead, starts one more
            waited_s = time.perf_counter() - step_started
            metrics = step_metrics(batch, queue.collector.sampler, waited_s)
            if trainer.step == 0 and first_batch is not None:
                first_batch(metrics)
            groups = batch.groups
            if serves_trainer:  # its weights come from this trainer: check the lag
                metrics.update(weight_lag(groups, trainer.version))
                if rollout.max_staleness:
                    metrics.update(staleness(groups, trainer.version, rollout.max_staleness))
                groups, stale = within_lag(groups, trainer.version, rollout.batches_ahead)
                metrics["batch/stale_groups_dropped"] = float(stale)
            metrics.update(crew.train_step(groups))
            if rollout.async_level == 1:
                queue.generated(BATCH_TIMEOUT_S)  # keep each batch on one version
            metrics["perf/sync_s"] = 0.0
            if serves_trainer:  # with max_staleness, lands between the turns being played
                pushed = push(trainer.version)
                metrics["perf/sync_s"] = pushed.seconds
                metrics["perf/sync_mb"] = pushed.bytes / 1e6
            if not rollout.batches_ahead and trainer.step < config.trainer.max_steps:
                queue.start()
            metrics["perf/step_s"] = time.perf_counter() - step_started
            tripped = monitor.observe(metrics) if monitor is not None else []
            logger.log(trainer.step, metrics)
            if on_step is not None:
                on_step(trainer.step, trainer, engine, metrics)
            logger.save_samples(trainer.step, batch.played)
            stop = bool(tripped) and config.hacking.action == "stop"
            last = trainer.step == config.trainer.max_steps
            if trainer.step % config.save_every == 0 or last or stop:
                extra = _checkpoint_extra(batch, monitor)
                if rollout.batches_ahead:  # a resumed run trains on them as they are
                    extra["next_batches"] = queue.generated(BATCH_TIMEOUT_S)
                crew.save(str(checkpoints), extra=extra)
                saved_step = trainer.step
            if stop:
                raise RewardHackingSuspected(
                    f"step {trainer.step}: "
                    + "; ".join(t.describe() for t in tripped)
                    + " (hacking.action=stop; hacking.action=warn lets such a run go on)"
                )
    except KeyboardInterrupt:
        if batch is not None and trainer.step > saved_step:
            path = crew.save(str(checkpoints), extra=_checkpoint_extra(batch, monitor))
            print(f"\ninterrupted: checkpoint saved to {path}", file=sys.stderr)
        raise


def _checkpoint_extra(batch: StepBatch, monitor: HackingMonitor | None) -> dict[str, Any]:
    """What a checkpoint keeps beside the trainer: the data position, the monitor's baseline."""
    extra: dict[str, Any] = {"sampler": batch.sampler_state}
    if monitor is not None:
        extra["hacking"] = monitor.state_dict()
    return extra


def _checkpoint_to_resume(config: RunConfig, run_dir: Path) -> str | None:
    """The newest intact checkpoint when `resume` is set; with `overwrite`, an earlier run's
    outputs deleted; otherwise an earlier run's outputs are an error."""
    earlier = [name for name in RUN_OUTPUTS if (run_dir / name).exists()]
    if config.overwrite:
        for name in earlier:
            path = run_dir / name
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        log.warning("overwrite=true: deleted %s of an earlier run in %s", earlier, run_dir)
        return None
    latest = latest_intact_checkpoint(str(run_dir / CHECKPOINTS))
    if config.resume and not latest:
        raise FileNotFoundError(f"resume=true but {run_dir / CHECKPOINTS} holds no checkpoint; "
                                "overwrite=true starts the run afresh")  # fmt: skip
    if earlier and not config.resume:
        raise FileExistsError(
            f"{run_dir} holds an earlier run's {', '.join(earlier)}: pass resume=true to continue "
            "it, overwrite=true to delete it and start afresh, or choose another output_dir"
        )
    return latest


def _exit_on_sigterm(signum, frame) -> None:
    raise SystemExit("rank 0 stopped by SIGTERM: torchrun stops every rank when one fails, "
                     "and its report above names the rank and its error")  # fmt: skip
