"""SFT warm-up data and steps."""

import copy

import rlve
from rlve.config import TrainerConfig
from rlve.envs.tictactoe import minimax_policy
from rlve.envs.tictactoe.game import X_MARK, best_moves, parse_board, parse_move
from rlve.rollout import ScriptedEngine
from rlve.training.sft import (
    load_examples,
    save_examples,
    sft_warmup,
    teacher_games,
    tictactoe_teacher_data,
)


def test_teacher_games_keep_wins_and_draws_with_perfect_format(tiny_tokenizer):
    games, summary = tictactoe_teacher_data(tiny_tokenizer, 100, noise=0.3)
    # measured: a 30%-noise minimax loses some games; those are dropped
    assert summary["game/loss"] > 0 and 0 < len(games) < 100
    assert len(games) == round(100 * (summary["game/win"] + summary["game/draw"]))
    assert all(t.metrics["reward/win_reward"] > 0 and t.metrics["game/format"] == 1 for t in games)
    assert all(t.is_token_exact and sum(t.loss_mask) > 0 for t in games)


def test_the_teacher_s_moves_off_best_play_stay_in_the_game_but_out_of_the_loss(tiny_tokenizer):
    noisy, _ = tictactoe_teacher_data(tiny_tokenizer, 60, noise=0.5)
    clean, summary = tictactoe_teacher_data(tiny_tokenizer, 60, noise=0.5, best_moves_only=True)
    assert [t.token_ids for t in clean] == [t.token_ids for t in noisy]  # the same games
    masked = 0
    for game in clean:
        boards = [m["content"] for m in [*game.prompt, *game.completion] if m["role"] == "user"]
        answers = [m["content"] for m in game.completion if m["role"] == "assistant"]
        for (start, end), board, answer in zip(game.turn_spans, boards, answers, strict=False):
            best = parse_move(answer) in best_moves(parse_board(board), X_MARK)
            assert set(game.loss_mask[start:end]) == {int(best)}, answer
            masked += not best
    turns = sum(len(t.turn_spans) for t in clean)
    assert masked > 0 and summary["sft/masked_turns"] == masked / turns
    # a random move of the teacher reads "looks good to me"; a masked move is always one of them
    assert masked <= sum(str(m["content"]).count("looks good") for t in clean for m in t.completion)


def test_text_only_teacher_games_are_tokenized_like_episodes(tiny_tokenizer, tmp_path):
    env = rlve.load_environment("tictactoe", num_examples=8, min_random_move_prob=1.0,
                                max_random_move_prob=1.0)  # fmt: skip
    text_games, _ = teacher_games(env, ScriptedEngine(minimax_policy), 8, tiny_tokenizer)
    token_games, _ = teacher_games(env, ScriptedEngine(minimax_policy, tiny_tokenizer), 8,
                                   tiny_tokenizer)  # fmt: skip
    assert [t.token_ids for t in text_games] == [t.token_ids for t in token_games]
    assert [t.loss_mask for t in text_games] == [t.loss_mask for t in token_games]
    assert save_examples(tmp_path / "d.jsonl", text_games) == len(text_games)
    loaded = load_examples(tmp_path / "d.jsonl")
    assert [e.token_ids for e in loaded] == [t.token_ids for t in text_games]


def test_teacher_turns_end_with_the_templates_end_of_turn_token_not_the_eos(tiny_tokenizer):
    """A tokenizer whose eos is another token than the one that closes a chat turn (Llama 3:
    <|end_of_text|> against <|eot_id|>): the student must learn to write the end of its turn."""
    tokenizer = copy.deepcopy(tiny_tokenizer)
    tokenizer.eos_token = "<|endoftext|>"
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    env = rlve.load_environment("tictactoe", num_examples=4)
    text_games, _ = teacher_games(env, ScriptedEngine(minimax_policy), 4, tokenizer)
    token_games, _ = tictactoe_teacher_data(tokenizer, 4, noise=0.0)
    for game in [*text_games, *token_games]:
        mask = game.loss_mask
        ends = [token for token, m, after in zip(game.token_ids, mask, [*mask[1:], 0], strict=True)
                if m and not after]  # fmt: skip
        assert ends and set(ends) == {im_end}


def test_sft_warmup_lowers_the_loss_and_exports_a_loadable_model(tiny_tokenizer, tmp_path):
    from rlve.models import load_causal_lm, load_tokenizer

    games, _ = tictactoe_teacher_data(tiny_tokenizer, 16, noise=0.0)
    save_examples(tmp_path / "d.jsonl", games)
    config = TrainerConfig(model="tiny", lr=3e-3, max_steps=6)
    path, losses = sft_warmup(load_examples(tmp_path / "d.jsonl"), config, tmp_path / "m", 8)
    assert losses[-1] < losses[0] - 1.0  # measured: 7.6 -> about 5
    assert load_causal_lm(str(path)) is not None
    text = "<move>4</move> ünïcödé"
    assert load_tokenizer(str(path)).decode(tiny_tokenizer.encode(text)) == text


def test_reference_answers_of_a_generated_environment_are_masked_answer_turns(tiny_tokenizer):
    from rlve.training.sft import reference_answer_data

    env = rlve.load_environment("rlve-gym/Sorting", num_examples=1, sandbox=False)
    data = reference_answer_data(env, tiny_tokenizer, difficulties=[0, 2], per_difficulty=3)
    assert len(data) == 6
    learned = [
        tiny_tokenizer.decode([i for i, m in zip(d.token_ids, d.loss_mask, strict=True) if m])
        for d in data
    ]
    # the learned tokens are exactly the answer turn (and its end-of-turn token)
    sorted_lists = [text.split("<answer>")[1].split("</answer>")[0].split() for text in learned]
    assert all(s == sorted(s, key=int) for s in sorted_lists)
    assert [len(s) for s in sorted_lists] == [3, 3, 3, 5, 5, 5]  # 3 + difficulty numbers
    assert all(text.startswith("<answer>") for text in learned)
