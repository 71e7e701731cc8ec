"""The recipe's RL arms: each the recipe's CISPO run plus a few `python -m rlve.train`
overrides (credit per turn or per move, penalties, self-play, rewards and hints about the
threats), and the arm measured best on each board."""

TURN_CREDIT = ("trainer.credit=turn",)
MISTAKE_PENALTY = ("+env.args.tictactoe.mistake_penalty=0.25",)
REGRET = TURN_CREDIT + (
    "trainer.turn_gamma=0",
    "trainer.turn_baseline=position",
    "+env.args.tictactoe.regret_penalty=1.0",
)
THREATS_REWARD = ("+env.args.tictactoe.threats_weight=0.2",)
FADING_HINTS = (
    "+env.args.tictactoe.hint_levels=4",
    "env.curriculum.enabled=true",
    "env.curriculum.tau_acc=0.5",
    "env.curriculum.tau_num=64",
    "env.curriculum.d_delta=1",
)
ARMS = {
    "cispo": (),
    "turn": TURN_CREDIT + MISTAKE_PENALTY,
    "self": ("+env.args.tictactoe.opponent=self", "+env.args.tictactoe.scripted_fraction=0.5"),
    "turn_only": TURN_CREDIT,
    "penalty_only": MISTAKE_PENALTY,
    "regret": REGRET,
    "threats_reward": REGRET + THREATS_REWARD,
    "fading_hints": REGRET + THREATS_REWARD + FADING_HINTS,
}
"""the RL arms, each the recipe's CISPO run plus these overrides:
- cispo: every token gets its game's advantage (the recipe);
- turn: each move gets the advantage of its own return, and a mistake (a move that gives up a
  won or drawn result, `game.mistake_kind`) costs 0.25 at the move that made it, half a draw;
- self: half the games are played against the policy itself in the O seat (both seats
  trained, zero-sum), half against the scripted opponent range;
- turn_only, penalty_only: the two halves of turn apart (per-turn advantages without the
  penalty; the penalty inside the game's reward, with whole-game advantages);
- regret: each move is charged 1.0 per result level it gives up under minimax (its regret; an
  answer without a legal move as losing from there), undiscounted by later moves (gamma 0: the
  game's result falls on the last move only), and compared with the group's moves from the
  same position;
- threats_reward: regret, plus 0.2 for the share of answers whose think block states the
  position's threats right where it has one (the environment's `threats_weight`), each
  answer's part at its turn;
- fading_hints: threats_reward on a curriculum whose difficulty is the threats line: shown at
  every turn at level 0, with probability 0.75, 0.5, 0.25 at levels 1-3, never from level 4
  (the plain grid board); one level up each time at least half of a step's 64 games had no
  move that gave a result up (regret 0) and no invalid answer"""

BEST_ARMS = {"grid": ("regret",), "threats": ("regret",), "compact": ("regret",)}
"""the arms `--arms` defaults to on each board: the best measured there (docs/results.md)"""
