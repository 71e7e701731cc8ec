"""`trainer.distill.*`: on-policy distillation, a teacher's per-token score of the student's
own samples added to the environment's advantage (rlve.algorithms.distill; docs/algorithms.md,
"On-policy distillation")."""

from __future__ import annotations

from dataclasses import dataclass

from rlve.config.checks import require

OWN_TEACHERS = ("initial", "self")
"""teachers that are the student itself: its starting weights, or its live weights"""


@dataclass
class DistillConfig:
    """A teacher model scoring every token the student sampled."""

    teacher: str | None = None
    """None: no distillation. A model named as `trainer.model` names one (a local directory, a
    run's exported `model/`, "smollm2_135m", "tiny"), held beside the trainer on its device and
    dtype; "initial": a frozen copy of the student's starting weights (with LoRA: the base with
    the adapter off); "self": the live policy, scored before the step's update (no second model
    held; with `privileged` this is self-distillation from a privileged view). A teacher whose
    tokenizer differs from the student's is refused at start"""
    teacher_server: str | None = None
    """URL of an `rlve.serve` server (or vLLM's own OpenAI-compatible server) serving `teacher`:
    its log-probs come from the server's /v1/completions with `prompt_logprobs` instead of a
    copy held beside the trainer, which keeps the trainer's memory for the student (GPU users
    with a teacher too large to share it). `teacher` still names the model, for the tokenizer
    check; the server's secret is read from RLVE_SERVE_SECRET. None: the teacher is held here"""
    coef: float = 1.0
    """weight of the teacher's signal: a sampled token's advantage is reward_weight x the
    environment's advantage + coef x d_t, d_t = log p_teacher - log p_sampler (clipped); > 0"""
    reward_weight: float = 1.0
    """weight of the environment's (group-normalized) advantage; 0 = pure on-policy
    distillation (the reward is still computed and logged); >= 0"""
    clip_low: float = -5.0
    """d_t below this is raised to it: a token the teacher finds nearly impossible is pushed
    down, but by no more than this; < 0"""
    clip_high: float = 5.0
    """d_t above this is lowered to it; > 0"""
    privileged: bool = False
    """the teacher reads each turn as the environment's `privileged_view` shows it (tic-tac-toe:
    the threats line of the position), the student as played; the teacher scores the student's
    own sampled ids after it. Needs environments that define a privileged view"""

    @property
    def enabled(self) -> bool:
        return self.teacher is not None

    def validate(self) -> None:
        if not self.enabled:
            require(self.teacher_server is None,
                    "trainer.distill.teacher_server needs trainer.distill.teacher (the model it "
                    "serves)")  # fmt: skip
            require(not self.privileged,
                    "trainer.distill.privileged=true needs a teacher: set trainer.distill.teacher "
                    f"(a model, or one of {list(OWN_TEACHERS)})")  # fmt: skip
            return
        require(
            bool(str(self.teacher).strip()),
            "trainer.distill.teacher is empty: name a model, 'initial' or 'self', or null",
        )
        require(self.coef > 0, f"trainer.distill.coef must be > 0, got {self.coef}")
        weight = self.reward_weight
        require(weight >= 0, f"trainer.distill.reward_weight must be >= 0, got {weight}")
        require(self.clip_low < 0 < self.clip_high,
                "trainer.distill.clip_low must be < 0 < clip_high, got "
                f"[{self.clip_low}, {self.clip_high}]")  # fmt: skip
        require(self.teacher_server is None or self.teacher not in OWN_TEACHERS,
                f"trainer.distill.teacher_server serves a model: teacher={self.teacher!r} is the "
                "student itself; name the served model (for the tokenizer check)")  # fmt: skip
        require(self.teacher != "self" or self.privileged,
                "trainer.distill.teacher=self without privileged=true scores the student's tokens "
                "with the weights that sampled them: d_t is 0 up to sampler noise, nothing to "
                "learn; set trainer.distill.privileged=true, or teacher=initial")  # fmt: skip
