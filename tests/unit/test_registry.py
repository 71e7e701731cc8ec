import pytest

import rlve
from rlve.envs import Environment, EnvironmentSource, SingleTurnEnv, register_source
from rlve.envs.registry import _SOURCES


def test_builtin_environments_are_listed_and_load_by_name():
    names = rlve.list_environments()
    assert {"tictactoe", "reverse_text", "double_check", "calculator"} <= set(names)
    env = rlve.load_environment("tictactoe", num_examples=3)
    assert isinstance(env, Environment) and env.name == "tictactoe" and len(env) == 3


def test_unknown_name_lists_close_matches():
    with pytest.raises(
        ValueError, match=r"unknown environment 'tictactoo'; did you mean \['tictactoe'\]"
    ):
        rlve.load_environment("tictactoo")


def test_unknown_argument_names_the_argument_and_the_valid_ones():
    with pytest.raises(TypeError, match=r"no argument\(s\) \['max_turn'\]; its arguments are \["):
        rlve.load_environment("tictactoe", max_turn=3)


def test_sources_add_whole_families():
    def load(name, **kwargs):
        return SingleTurnEnv([{"question": name}], **kwargs)

    register_source(EnvironmentSource("toy/", lambda: ["toy/a", "toy/b"], load))
    try:
        assert {"toy/a", "toy/b"} <= set(rlve.list_environments())
        env = rlve.load_environment("toy/b")
        assert env.name == "toy/b" and env.example(0).prompt[-1]["content"] == "toy/b"
    finally:
        _SOURCES[:] = [s for s in _SOURCES if s.prefix != "toy/"]
