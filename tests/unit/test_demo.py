"""`make demo`'s first part, the scripted baselines' table (the recipe: test_recipe.py)."""

from rlve.cli.demo import main


def test_demo_baselines_show_the_known_results_of_the_scripted_policies(capsys):
    main(["--games", "20", "--rl-steps", "0"])
    rows = {line[:30].strip(): line.split() for line in capsys.readouterr().out.splitlines()}
    # minimax against the optimal opponent (minimax itself) draws every game with perfect format
    assert rows["minimax              optimal"][2:5] == ["0/100/0", "100.0", "0.0"]
    # the teacher's noise is the recipe's, and a policy that never answers with a move is invalid
    assert "minimax, 50% noise   optimal" in rows
    assert rows["says hello           random"][3:5] == ["0/0/0", "0.0"]
