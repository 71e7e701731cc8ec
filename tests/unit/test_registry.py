import pytest

import rlve
from rlve.envs import (
    Environment,
    EnvironmentSource,
    SingleTurnEnv,
    expand_env_names,
    register_source,
)
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


# An environment of your own, as a user writes it: a package on sys.path, no install.
GAMES = """
from rlve.envs import SingleTurnEnv


def load_environment(num_examples: int = 2, word: str = "hi"):
    return SingleTurnEnv([{"question": f"say {word}", "answer": word}] * num_examples)


NOT_A_FUNCTION = 3


def returns_text():
    return "not an environment"
"""


@pytest.fixture
def user_package(tmp_path, monkeypatch) -> str:
    """`user_envs_b.games` importable from tmp_path, plus `user_envs_b.broken`, whose own import
    of a missing dependency fails."""
    package = tmp_path / "user_envs_b"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "games.py").write_text(GAMES)
    (package / "broken.py").write_text("import rlve_missing_dependency_b\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return "user_envs_b.games"


def test_an_environment_loads_from_its_module_and_function(user_package):
    env = rlve.load_environment(f"{user_package}:load_environment", num_examples=3, word="yo")
    assert isinstance(env, SingleTurnEnv) and len(env) == 3
    assert env.name == "user_envs_b.games:load_environment"  # metrics: env/<this name>/reward
    assert env.example(0).prompt[-1]["content"] == "say yo"
    # never listed (nothing enumerates sys.path), passed through as it is by the glob expansion
    assert f"{user_package}:load_environment" not in rlve.list_environments()
    assert expand_env_names(["tictactoe", f"{user_package}:load_environment"]) == [
        "tictactoe", "user_envs_b.games:load_environment"]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "error", "message"),
    [
        ("no_such_pkg_b.games:load_environment", ValueError,
         r"environment 'no_such_pkg_b.games:load_environment': no module 'no_such_pkg_b' on "
         r"sys.path. Make it importable: run from the folder that holds no_such_pkg_b.py or "
         r"no_such_pkg_b/ "),
        ("user_envs_b.nothing:load_environment", ValueError, r"no module 'user_envs_b.nothing'"),
        ("user_envs_b.games:load_env", ValueError,
         r"module 'user_envs_b.games' \(.*games.py\) has no attribute 'load_env'"),
        ("user_envs_b.games:NOT_A_FUNCTION", ValueError,
         r"user_envs_b.games.NOT_A_FUNCTION is a int, not a function that returns an Environment"),
        ("user_envs_b.games:returns_text", TypeError,
         r"the loader of 'user_envs_b.games:returns_text' returned str, not an Environment"),
        ("user_envs_b.games:", ValueError, r"is named 'package.module:function'"),
        # the module is there and its own import fails: its own error, naming what is missing
        ("user_envs_b.broken:load_environment", ModuleNotFoundError, "rlve_missing_dependency_b"),
    ],
)  # fmt: skip
def test_a_bad_module_path_names_what_is_wrong(user_package, name, error, message):
    with pytest.raises(error, match=message):
        rlve.load_environment(name)


def test_a_module_environments_arguments_are_checked_by_name(user_package):
    with pytest.raises(TypeError, match=r"no argument\(s\) \['words'\]; its arguments are \["):
        rlve.load_environment(f"{user_package}:load_environment", words="yo")


def test_a_run_builds_a_module_environment_with_its_arguments(user_package, tmp_path):
    from rlve.loop import build_environments
    from rlve.train import load_run_config

    name = f"{user_package}:load_environment"
    # on the command line: env.default_args (Hydra's override grammar reads no ':' in a key, so
    # `+env.args.<module:function>.word=...` cannot be written there)
    config = load_run_config([f"env.names=[{name}]", "+env.default_args.word=yo"])
    envs, _ = build_environments(config)
    assert list(envs) == [name] and envs[name].example(0).prompt[-1]["content"] == "say yo"
    with pytest.raises(Exception, match="missing EQUAL at ':'"):
        load_run_config([f"env.names=[{name}]", f"+env.args.{name}.word=yo"])
    # in a config file, args per name take any name: an experiment of your own, found through
    # `hydra.searchpath` (`--config-dir` on the command line)
    (tmp_path / "configs" / "experiment").mkdir(parents=True)
    (tmp_path / "configs" / "experiment" / "my_games.yaml").write_text(
        "# @package _global_\n"
        f"env:\n  names: [tictactoe, '{name}']\n"
        f"  args:\n    '{name}': {{word: hey, num_examples: 4}}\n"
    )
    search = f"hydra.searchpath=[file://{tmp_path / 'configs'}]"
    config = load_run_config([search, "+experiment=my_games"])
    envs, _ = build_environments(config)
    assert list(envs) == ["tictactoe", name]
    assert len(envs[name]) == 4 and envs[name].example(0).prompt[-1]["content"] == "say hey"


def test_an_installed_package_lists_and_loads_its_environment_by_name(user_package, tmp_path):
    # what `pip install -e ./my_env` leaves on sys.path for importlib.metadata: a dist-info
    # folder whose entry_points.txt holds the pyproject's [project.entry-points."rlve.environments"]
    info = tmp_path / "user_envs_b-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: user-envs-b\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[rlve.environments]\nuser_game_b = user_envs_b.games:load_environment\n"
    )
    assert "user_game_b" in rlve.list_environments()
    assert expand_env_names(["user_game_*"]) == ["user_game_b"]
    env = rlve.load_environment("user_game_b", word="yo")
    assert env.name == "user_game_b" and env.example(1).prompt[-1]["content"] == "say yo"
