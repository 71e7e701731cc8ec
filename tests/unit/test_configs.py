"""Every config file composes into a valid RunConfig: a broken yaml fails here, not in a run."""

from pathlib import Path

import pytest

from rlve.train import CONFIG_DIR, check_override_keys, load_run_config

GROUPS = {
    group: sorted(p.stem for p in (CONFIG_DIR / group).glob("*.yaml"))
    for group in ("model", "algorithm", "env", "experiment")
}


@pytest.mark.parametrize("experiment", GROUPS["experiment"])
def test_every_experiment_composes_and_validates(experiment):
    config = load_run_config([f"+experiment={experiment}"])
    assert config.run_name == experiment
    assert config.trainer.max_steps >= 1


@pytest.mark.parametrize("algorithm", GROUPS["algorithm"])
def test_every_algorithm_sets_its_loss(algorithm):
    assert load_run_config([f"algorithm={algorithm}"]).trainer.loss == algorithm


@pytest.mark.parametrize("model", [m for m in GROUPS["model"] if m != "local"])
def test_every_model_config_names_a_model(model):
    assert load_run_config([f"model={model}"]).trainer.model


def test_the_course_s_tictactoe_settings():
    config = load_run_config(["+experiment=tictactoe_course"])
    args = config.env.args["tictactoe"]
    assert (args["min_random_move_prob"], args["max_random_move_prob"], args["max_turns"]) == (
        0.2, 0.7, 7,
    )  # fmt: skip
    assert args["num_groups"] == config.rollout.groups_per_step == 32
    assert config.rollout.group_size == 8 and config.rollout.max_tokens == 128
    assert config.trainer.lora.enabled and config.trainer.lora.rank == 8
    assert config.trainer.lr == 5e-5 and config.trainer.temperature == 1.0
    assert config.trainer.loss == "cispo" and config.rollout.async_level == 1


def test_the_rlve_recipe_settings():
    config = load_run_config(["+experiment=rlve_gym_dapo"])
    assert config.env.names == ["rlve-gym/*"] and config.env.curriculum.enabled
    c = config.env.curriculum
    assert (c.tau_acc, c.tau_num, c.d_delta) == (0.9, 128, 4)
    assert (config.trainer.eps_low, config.trainer.eps_high, config.trainer.tis_cap) == (
        0.2,
        0.28,
        2.0,
    )
    assert config.rollout.dynamic_sampling and config.rollout.group_size == 16
    assert (config.trainer.lr, config.trainer.beta2, config.trainer.weight_decay) == (
        2e-6,
        0.98,
        0.01,
    )


def test_unknown_group_option_lists_the_choices():
    with pytest.raises(Exception, match="cispo"):
        load_run_config(["algorithm=cispx"])


def test_configs_ship_inside_the_package_and_the_root_links_to_them():
    assert CONFIG_DIR == Path(__file__).resolve().parents[2] / "rlve" / "configs"
    assert (CONFIG_DIR.parents[1] / "configs").resolve() == CONFIG_DIR  # the root link


def test_a_misspelt_field_names_the_closest_field_and_all_valid_ones():
    with pytest.raises(ValueError, match=r"'rollout.grop_size': did you mean 'group_size'\?"):
        load_run_config(["rollout.grop_size=4"])
    with pytest.raises(ValueError, match=r"fields of trainer.lora are \['enabled', 'rank',"):
        load_run_config(["trainer.lora.rnak=4"])
    with pytest.raises(ValueError, match="'zzz': the fields of the top level are"):
        check_override_keys(["+zzz=1"])


def test_groups_free_form_args_and_hydra_flags_pass_the_key_check():
    check_override_keys(
        ["model=qwen3_0.6b", "env=tictactoe", "+experiment=tictactoe_cispo", "--cfg", "job",
         "env.args.tictactoe.max_turns=3", "env.default_args.num_examples=4",
         "hydra.run.dir=/tmp/x", "inference.gpus=[0]"]
    )  # fmt: skip


def test_tis_against_the_sampler_when_the_ratio_already_is_is_refused():
    with pytest.raises(ValueError, match="with old_logprobs=sampler the ratio is already against"):
        load_run_config(["+experiment=tictactoe_cispo", "trainer.tis_cap=2.0"])


def test_a_position_baseline_without_turn_credit_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="turn_baseline=position .* needs trainer.credit=turn"):
        load_run_config(["+experiment=tictactoe_course", "trainer.turn_baseline=position"])
    config = load_run_config(["+experiment=tictactoe_course", "trainer.turn_baseline=position",
                              "trainer.credit=turn"])  # fmt: skip
    assert config.trainer.turn_baseline == "position"


@pytest.mark.parametrize("experiment", ["tictactoe_cispo", "tictactoe_dapo", "tictactoe_grpo"])
def test_the_tictactoe_recipes_take_the_ratio_against_the_sampler(experiment):
    trainer = load_run_config([f"+experiment={experiment}"]).trainer
    assert (trainer.old_logprobs, trainer.tis_cap) == ("sampler", None)


def test_async_rollouts_without_any_off_policy_correction_are_refused():
    """One step stale, old log-probs recomputed under the current weights, no TIS: the ratio is 1
    and the stale rollouts would be trained as on-policy."""
    uncorrected = [
        "rollout.async_level=1",
        "trainer.old_logprobs=recompute",
        "trainer.tis_cap=null",
    ]
    with pytest.raises(ValueError, match="nothing corrects for that"):
        load_run_config(uncorrected)
    for fix in ("trainer.old_logprobs=sampler", "trainer.tis_cap=2.0", "rollout.async_level=0"):
        load_run_config([*uncorrected, fix])


def test_rollouts_spanning_pushes_need_the_sampler_s_log_probs_and_replace_async_level():
    spanning = ["rollout.max_staleness=2", "trainer.old_logprobs=recompute"]
    with pytest.raises(ValueError, match="recomputes one old policy for the whole sequence"):
        load_run_config(spanning)
    config = load_run_config([*spanning, "trainer.old_logprobs=sampler", "trainer.tis_cap=null"])
    assert config.rollout.batches_ahead == 2
    with pytest.raises(ValueError, match="max_staleness=2 replaces rollout.async_level"):
        load_run_config([*spanning, "trainer.old_logprobs=sampler", "trainer.tis_cap=null",
                         "rollout.async_level=1"])  # fmt: skip
    with pytest.raises(ValueError, match="max_staleness must be an integer >= 0, got -1"):
        load_run_config(["rollout.max_staleness=-1"])


def test_nucleus_sampling_in_training_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="rollout.top_p must be 1.0, got 0.9: vLLM's log-probs"):
        load_run_config(["rollout.top_p=0.9"])


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("rollout.max_fault_rate=1.5", r"rollout.max_fault_rate must be in \[0, 1\], got 1.5"),
        ("rollout.fault_window=0", "rollout.fault_window must be >= 1, got 0"),
        ("rollout.generate_time_limit_s=0", "rollout.generate_time_limit_s must be None or > 0"),
    ],
)
def test_fault_settings_out_of_range_are_refused_naming_the_field(override, message):
    with pytest.raises(ValueError, match=message):
        load_run_config([override])


def test_the_adapter_push_needs_an_adapter_and_vllm_started_by_the_run():
    with pytest.raises(ValueError, match="trainer.lora.enabled is false: there is no adapter"):
        load_run_config(["sync.lora=adapter", "trainer.lora.enabled=false"])
    with pytest.raises(ValueError, match="not for rlve.serve servers"):
        load_run_config(["sync.lora=adapter", "trainer.lora.enabled=true",
                         "inference.servers=[http://10.0.0.2:8000]"])  # fmt: skip
    with pytest.raises(ValueError, match="sync.lora must be one of"):
        load_run_config(["sync.lora=delta"])
    assert (
        load_run_config(["sync.lora=adapter", "trainer.lora.enabled=true"]).sync.lora == "adapter"
    )


def test_an_adapter_takes_the_smallest_lora_rank_slot_vllm_offers():
    from rlve.sync.adapter_push import vllm_max_lora_rank

    assert [vllm_max_lora_rank(r) for r in (1, 2, 8, 12, 16, 500)] == [1, 8, 8, 16, 16, 512]
    with pytest.raises(ValueError, match="up to 512; use sync.lora=merged"):
        vllm_max_lora_rank(513)
