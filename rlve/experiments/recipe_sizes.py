"""How much the tic-tac-toe recipe plays and trains: `RecipeSize`, and the sizes the commands
start from (`make recipe`'s RECIPE, `make demo`'s DEMO, the tiny model's TINY, one per board).
Every field is documented once, here; docs/results.md names the sizes each result ran with."""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class RecipeSize:
    """The model, and how much of everything the recipe plays and trains."""

    model: str = "smollm2-135m"
    """the student: a built-in name, a directory or a hub id"""
    dtype: str = "auto"
    """compute dtype of the trainer (float32 weights either way) and of vLLM; auto = bfloat16
    where the CPU or GPU has it natively (every result in docs/results.md ran in bfloat16)"""
    rules: str = "short"
    """the tic-tac-toe system prompt: 'short' has the same rules in half the tokens"""
    board: str = "grid"
    """how the tic-tac-toe messages show the board: 'grid' (every result so far), 'compact'
    (three rows "X O 2", no list of free cells: a third fewer tokens per teacher game) or
    'threats' (the grid, then "O can win at 8." for each side that could complete a line)"""
    teacher_noise: float = 0.5
    """share of the teacher's moves played at random (the rest are minimax moves). At 0.5 the
    teacher draws 42% of its games against the optimal opponent: beatable, where a perfect one
    (noise 0, every game drawn) could only be matched"""
    teacher_games: int = 600
    """games the teacher plays; the won and drawn ones (with every turn well formed) are kept"""
    teacher_reasons: str = "verdict"
    """how the teacher words the think block of its SFT answers (policies.REASONS): 'verdict'
    names the cell, then why ("Cell 8 blocks O's line."); 'lines' first names the two marks of
    a line to complete or block, then the cell ("O has 0 and 4: 8 blocks."); 'threats' first
    states the position's threats in the threats board's words ("O can win at 8."), then the
    verdict"""
    sft_best_moves_only: bool = True
    """the teacher's moves off best play (its deliberate random ones) stay in the SFT games but
    out of the loss; False learns every move it made (every SFT student before this field)"""
    sft_steps: int = 60
    """SFT optimizer steps (full fine-tuning, cosine schedule, 10% warm-up)"""
    sft_lr: float = 3e-5
    """SFT peak learning rate"""
    sft_batch: int = 8
    """games per SFT step"""
    rl_steps: int = 15
    """CISPO steps (full fine-tuning: LoRA is no faster on the CPU, see docs/benchmarks.md)"""
    rl_lr: float = 2e-5
    """RL learning rate (at 3e-5 without overlong shaping, answers ran on past their move to
    the token limit after 7 steps: docs/results/history.md, section 2)"""
    groups_per_step: int = 8
    """problems per RL step; each is played group_size times"""
    group_size: int = 8
    """rollouts per problem"""
    min_random_move_prob: float = 0.2
    """the RL (and teacher) opponent's random-move probability range, stratified per example"""
    max_random_move_prob: float = 0.7
    temperature: float = 1.0
    """sampling temperature of RL and of every evaluation"""
    max_tokens: int = 48
    """most tokens per model turn, in RL and evaluation"""
    overlong_buffer: int | None = 16
    """DAPO's overlong shaping in RL: a turn that reaches into the last 16 tokens before
    max_tokens loses up to 1 (an answer is ~22 tokens); None = off"""
    invalid_penalty: str = "per_move"
    """the RL rubric's invalid-move penalty: 'per_move' (-0.1 each; measured better, see
    docs/results/history.md, section 5) or 'flat' (-0.1 once per game, the seed's rubric)"""
    async_level: int = 0
    """1 overlaps sampling with training; on two shared cores that is slower (benchmarks.md)"""
    max_tokens_per_microbatch: int = 2048
    """tokens per forward pass of SFT and RL: on two CPU cores 2048 trains SmolLM2 1.4x faster
    than 8192 and peaks at 6 GB instead of 14 (docs/benchmarks.md)"""
    save_every: int = 3
    """RL checkpoint interval: a run that dies resumes from its last checkpoint"""
    eval_games: int = 200
    """games per opponent in each evaluation"""
    eval_opponents: tuple[str, ...] = ("optimal", "random")
    """the evaluation's opponents (recipe_table.OPPONENTS: optimal, random, imperfect)"""


RECIPE = RecipeSize()
"""`make recipe`: SmolLM2-135M-Instruct"""
GRID_RECIPE = replace(RECIPE, sft_steps=30)
"""the plain grid board's best measured sizes (with the regret arm: 25.5% draws vs optimal,
docs/results.md)"""
STATED_THREATS_TOKENS = 64
"""tokens a turn when the teacher states the threats: its answers take 22-43 SmolLM2 tokens
(mean 31.6; the verdicts 19-25), and 64 keeps every one clear of the 16-token overlong buffer"""


def with_reasons(size: RecipeSize, reasons: str) -> RecipeSize:
    """`size` with the teacher's reasons `reasons`, and the turn limit the stated threats need
    when they are "threats"."""
    size = replace(size, teacher_reasons=reasons)
    return replace(size, max_tokens=STATED_THREATS_TOKENS) if reasons == "threats" else size


THREATS_RECIPE = replace(RECIPE, board="threats", sft_steps=30)
"""the board that states the threats: `make recipe`'s, with the 30 SFT steps its results used"""
DEMO = replace(RECIPE, sft_steps=30, rl_steps=6)
"""`make demo`: one seed of the recipe, shorter (the SFT loss is flat after about 30 steps)"""
TINY = RecipeSize(model="tiny", dtype="float32", rules="full", teacher_noise=0.3,
                  teacher_games=1000, sft_steps=400, sft_lr=5e-3, sft_batch=16, rl_steps=20,
                  rl_lr=2e-4, groups_per_step=16, overlong_buffer=None)  # fmt: skip
"""the embedded tiny model (it does not learn which cells are free: docs/results.md section 5)"""
SIZES = {"smollm2-135m": RECIPE, "tiny": TINY}
BOARD_SIZES = {"grid": GRID_RECIPE, "threats": THREATS_RECIPE,
               "compact": replace(RECIPE, board="compact")}  # fmt: skip
"""the sizes `--board` starts from (the other flags change them)"""
