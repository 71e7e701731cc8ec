"""OpenEnvEnv against a real OpenEnv server: the number-guessing game of
tests/fixtures/openenv_guess (openenv-core's `create_app`, run by uvicorn), played by scripted
policies. Rewards are checked against the same game driven in-process with the same guesses."""

import asyncio
import math
import re
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("openenv.core.env_server", reason="openenv-core serves the test game")

import rlve  # noqa: E402
from rlve.envs.openenv import OpenEnvEnv, load_environment  # noqa: E402
from rlve.envs.openenv.local_server import free_port, local_server  # noqa: E402
from rlve.envs.openenv.schema import action_text_field, observation_text  # noqa: E402
from rlve.rollout import EpisodeSettings, GroupJob, ScriptedEngine, play_groups  # noqa: E402
from rlve.rollout.chat_tokens import conversation_tokens  # noqa: E402

FIXTURES = Path(__file__).parents[1] / "fixtures"
sys.path.append(str(FIXTURES))  # the game itself, to play it in-process
from openenv_guess.game import MAX_GUESSES, MAX_NUMBER, GuessAction, GuessEnvironment  # noqa: E402

APP = "openenv_guess.app:app"
SYSTEM = "Guess the number. Reply with the number only."
OPENING = "I picked a number from 1 to 100. You have 7 guesses. Reply with one number."
SECRETS = [50, 18, 8, 31, 31, 80, 74, 42]
"""random.Random(seed).randint(1, 100) for seeds 0-7: the games of examples 0-7"""


@pytest.fixture(scope="module")
def server():
    with local_server(APP, app_dir=FIXTURES) as running:
        yield running


def binary_search(messages) -> str:
    """Halve the range the game's answers leave: at most floor(log2(100)) + 1 = 7 guesses."""
    low, high = 1, MAX_NUMBER
    for message in messages:
        if message["role"] != "user":
            continue
        told = re.match(r"(\d+) is wrong: the number is (higher|lower)", message["content"])
        if told:
            guess = int(told.group(1))
            low, high = (guess + 1, high) if told.group(2) == "higher" else (low, guess - 1)
    return str((low + high) // 2)


def guesses(trajectory) -> list[str]:
    return [m["content"] for m in trajectory.completion if m["role"] == "assistant"]


def in_process_rewards(seed: int, actions: list[str]) -> list[float]:
    """The step rewards the game's own Environment gives these guesses, without a server."""
    game = GuessEnvironment()
    game.reset(seed=seed)
    rewards = []
    for action in actions:
        observation = game.step(GuessAction(guess=action))
        rewards.append(observation.reward)
        if observation.done:
            break
    return rewards


def play(env, policy, examples, group_size=1, max_concurrent=64):
    jobs = [GroupJob(env, env.example(i), seed=i) for i in examples]
    groups = asyncio.run(play_groups(ScriptedEngine(policy), jobs, group_size, EpisodeSettings(),
                                     max_concurrent=max_concurrent))  # fmt: skip
    return [t for g in groups for t in g.trajectories]


def test_binary_search_wins_every_game_as_the_game_itself_scores_it(server):
    env = load_environment(server.url, num_examples=8, max_turns=MAX_GUESSES,
                           system_prompt=SYSTEM)  # fmt: skip
    assert (env.action_field, env.observation_field) == ("guess", "message")
    result = rlve.evaluate(env, ScriptedEngine(binary_search), 8)
    played = sorted((t for g in result.groups for t in g.trajectories), key=lambda t: t.example_id)
    assert [t.num_turns for t in played] == [1, 4, 7, 4, 4, 7, 7, 7]
    assert guesses(played[2]) == ["50", "25", "12", "6", "9", "7", "8"]  # the secret is 8
    assert all(t.num_turns <= math.floor(math.log2(MAX_NUMBER)) + 1 for t in played)
    for t in played:
        assert t.prompt == [{"role": "system", "content": SYSTEM},
                            {"role": "user", "content": OPENING}]  # fmt: skip
        assert guesses(t)[-1] == str(SECRETS[t.example_id])
        assert t.completion[-1] == {
            "role": "user",
            "content": f"Correct, it is {SECRETS[t.example_id]}!",
        }
        assert t.reward == sum(in_process_rewards(t.example_id, guesses(t))) == 1.0
        assert (t.stop_reason, t.fault) == ("env_done", None)
        assert t.metrics["openenv/steps"] == t.num_turns
    assert result.summary["reward/mean"] == 1.0
    assert result.summary["episode/turns_mean"] == 41 / 8


def test_the_reward_is_the_sum_of_step_rewards_or_the_last_one(server):
    def unsure_first(messages):  # "no idea" holds no number: -0.1, then the search
        return "no idea" if len(messages) == 1 else binary_search(messages)

    for mode, expected in (("sum", -0.1 + 1.0), ("last", 1.0)):
        env = OpenEnvEnv(server.url, num_examples=2, max_turns=MAX_GUESSES, reward_mode=mode)
        (t,) = play(env, unsure_first, [1])
        assert guesses(t) == ["no idea", "50", "25", "12", "18"]
        step_rewards = in_process_rewards(1, guesses(t))
        assert step_rewards == [-0.1, 0.0, 0.0, 0.0, 1.0]
        assert t.reward == pytest.approx(expected)
        assert t.reward == (sum(step_rewards) if mode == "sum" else step_rewards[-1])
    env = OpenEnvEnv(server.url, num_examples=2, max_turns=10)
    (lost,) = play(env, lambda messages: "1", [0])  # the secret is 50
    assert (lost.num_turns, lost.reward, lost.stop_reason) == (MAX_GUESSES, 0.0, "env_done")
    assert lost.completion[-1]["content"].endswith("No guesses left; it was 50.")


def test_concurrent_episodes_keep_their_own_games(server):
    env = OpenEnvEnv(server.url, num_examples=12, max_turns=MAX_GUESSES, timeout_s=20)
    # 24 episodes at once on a server that allows 16 sessions: 8 wait for a free one.
    played = play(env, binary_search, range(12), group_size=2, max_concurrent=24)
    assert len(played) == 24
    assert all((t.reward, t.fault) == (1.0, None) for t in played)
    secrets = [int(guesses(t)[-1]) for t in played]
    assert secrets[:16:2] == SECRETS and secrets[16::2] == [30, 60, 74, 58]
    assert secrets[::2] == secrets[1::2]  # a group's two rollouts play the same game


def test_token_exact_episodes_start_from_the_reset_observation(server, tiny_tokenizer):
    env = OpenEnvEnv(server.url, num_examples=2, max_turns=MAX_GUESSES, system_prompt=SYSTEM)
    (t,) = play_with_tokens(env, tiny_tokenizer, example=1)
    assert t.prompt[-1] == {"role": "user", "content": OPENING}
    ids, mask = conversation_tokens(tiny_tokenizer, t.prompt, t.completion)
    assert (t.token_ids, t.loss_mask) == (ids, mask)
    assert t.num_turns == 4 and sum(t.loss_mask) > 0


def play_with_tokens(env, tokenizer, example):
    engine = ScriptedEngine(binary_search, tokenizer=tokenizer)
    jobs = [GroupJob(env, env.example(example), seed=0)]
    (group,) = asyncio.run(play_groups(engine, jobs, 1, EpisodeSettings()))
    return group.trajectories


def test_a_refused_action_is_told_and_the_game_goes_on(server):
    def too_long_first(messages):
        return "7" * 300 if len(messages) == 1 else binary_search(messages)

    env = OpenEnvEnv(server.url, num_examples=2, max_turns=MAX_GUESSES + 1)
    (t,) = play(env, too_long_first, [0])
    assert t.completion[1]["content"].startswith(
        f"The environment refused that action: OpenEnv server {server.url}, step: server error "
        "VALIDATION_ERROR: Invalid message"
    )
    assert "string_too_long" in t.completion[1]["content"]
    assert (t.num_turns, t.reward, t.fault) == (2, 1.0, None)
    assert (t.metrics["openenv/rejected_actions"], t.metrics["openenv/steps"]) == (1.0, 1.0)


def test_a_server_killed_mid_run_fails_only_the_episodes_it_leaves(tmp_path):
    with local_server(APP, app_dir=FIXTURES) as doomed:
        env = OpenEnvEnv(doomed.url, num_examples=8, max_turns=MAX_GUESSES, timeout_s=5)
        first_turns = []

        def killer(messages):  # the third episode's second guess finds the server dead
            if len(messages) == 1:
                first_turns.append(messages)
            if len(first_turns) == 3 and len(messages) == 3:
                doomed.kill()
            return binary_search(messages)

        started = time.monotonic()
        played = play(env, killer, [1, 2, 3, 4, 5], max_concurrent=1)
        assert time.monotonic() - started < 10
    assert [t.fault.kind if t.fault else None for t in played] == [
        None, None, "env_error", "env_error", "env_error"]  # fmt: skip
    assert [t.reward for t in played[:2]] == [1.0, 1.0]
    dying, after = played[2], played[3:]
    assert (dying.stop_reason, dying.num_turns) == ("openenv_server_failed", 2)
    assert f"OpenEnv server {doomed.url} failed during step" in dying.fault.message
    for t in after:
        assert (t.stop_reason, t.num_turns, t.completion) == ("openenv_server_failed", 0, [])
        assert t.fault.message.startswith(f"cannot connect to ws://{doomed.url[7:]}/ws")
        assert t.prompt == [{"role": "user", "content": f"(no observation: {t.fault.message})"}]


def test_a_hung_server_ends_the_episode_at_the_time_limit():
    with local_server(APP, app_dir=FIXTURES, env={"GUESS_STEP_DELAY_S": "3"}) as hung:
        env = OpenEnvEnv(hung.url, num_examples=2, max_turns=MAX_GUESSES, timeout_s=0.5)
        started = time.monotonic()
        played = play(env, binary_search, [0, 1], max_concurrent=2)
        assert time.monotonic() - started < 2.5
    for t in played:
        assert (t.stop_reason, t.num_turns, t.fault.kind) == ("openenv_server_failed", 1,
                                                             "env_error")  # fmt: skip
        assert t.fault.message == f"OpenEnv server {hung.url} did not answer step within 0.5 s"
        assert t.metrics["openenv/failed"] == 1.0


def test_a_bad_action_field_fails_naming_the_fields(server):
    fields = "metadata: object, guess (required): string, note: string"
    with pytest.raises(ValueError) as raised:
        OpenEnvEnv(server.url, action_field="answer")
    assert str(raised.value) == (
        f"action_field 'answer' is not a field of GuessAction; its fields: {fields}"
    )
    with pytest.raises(ValueError, match=r"GuessAction requires \['guess'\] besides 'note'"):
        OpenEnvEnv(server.url, action_field="note")
    two = {"title": "Move", "required": ["a", "b"],
           "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}  # fmt: skip
    with pytest.raises(ValueError, match="Move has 2 required string fields.*a \\(required\\)"):
        action_text_field(two)


def test_an_unreachable_server_fails_when_the_environment_is_built():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ValueError, match=f"cannot read the OpenEnv server's schemas: GET {url}"):
        OpenEnvEnv(url)
    with pytest.raises(ValueError, match="looks like http://host:port, got 'ws://x'"):
        OpenEnvEnv("ws://x")


def test_observations_read_as_one_field_or_compact_json():
    observation = {"message": "hi", "guesses_left": 3}
    assert observation_text(observation, "message", 100) == "hi"
    assert observation_text(observation, "guesses_left", 100) == "3"
    assert observation_text(observation, None, 100) == '{"guesses_left":3,"message":"hi"}'
    assert observation_text({"message": "x" * 12}, "message", 5) == (
        "xxxxx\n[... 7 more characters cut]"
    )
