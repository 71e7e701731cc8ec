"""The smoke task's reward: the share of vowels among the letters, nothing else earns it."""

import pytest

import rlve
from rlve.cli.smoke import reward_rise
from rlve.envs.vowels import vowel_share


def answer(text):
    return [{"role": "assistant", "content": text}]


def test_the_share_of_vowels_among_the_letters_by_hand():
    assert vowel_share(answer("banana")) == pytest.approx(3 / 6)
    assert vowel_share(answer("Sky, 42!")) == 0.0  # three letters, no vowel
    assert vowel_share(answer("ea ea")) == 1.0


@pytest.mark.parametrize(
    "junk",
    ["", "   ", "\x00\x1b[2J 123 !!!", "\ud800\ud800", "{[(" * 10_000, "aжжжжжжжжж"],
)
def test_stalling_digits_control_text_and_other_scripts_earn_less_than_plain_words(junk):
    # non-Latin letters count as letters but never as vowels, so they cannot pad the share
    assert vowel_share(answer(junk)) < vowel_share(answer("a quiet evening"))


def test_an_empty_completion_earns_nothing():
    assert vowel_share([]) == 0.0


def test_the_environment_is_loaded_by_name_and_refuses_a_bad_size():
    env = rlve.load_environment("vowels", num_examples=3)
    assert len(env.dataset) == 3
    with pytest.raises(ValueError, match="num_examples must be an integer >= 1, got 0"):
        rlve.load_environment("vowels", num_examples=0)


def test_the_rise_compares_the_first_and_last_three_steps(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text("".join(f'{{"reward/mean": {r}}}\n' for r in [0.1, 0.2, 0.3, 0.5, 0.6, 0.7]))
    assert reward_rise(metrics) == pytest.approx((0.2, 0.6))
    metrics.write_text('{"reward/mean": 0.1}\n')
    with pytest.raises(ValueError, match="1 steps, fewer than 2 x 3"):
        reward_rise(metrics)
