"""inference.cpu_cores -> VLLM_CPU_OMP_THREADS_BIND."""

import os

from rlve.inference.cpu_binding import VLLM_DEFAULT, worker_cores


def test_auto_gives_the_worker_every_core_of_a_two_core_machine():
    assert worker_cores("auto", usable={1, 0}) == "0,1"
    assert worker_cores("auto", usable={3}) == "3"


def test_auto_keeps_vllms_binding_on_larger_machines():
    assert worker_cores("auto", usable=range(16)) == VLLM_DEFAULT == "auto"


def test_auto_reads_this_process_affinity():
    cores = sorted(os.sched_getaffinity(0))
    expected = ",".join(map(str, cores)) if len(cores) <= 2 else VLLM_DEFAULT
    assert worker_cores("auto") == expected


def test_any_other_setting_is_passed_on_as_it_is():
    for setting in ("0", "0-3", "nobind", "0-1|2-3"):
        assert worker_cores(setting, usable={0, 1}) == setting


def test_vllm_names_vllms_own_binding():
    assert worker_cores("vllm", usable={0, 1}) == VLLM_DEFAULT


def test_the_loop_keeps_vllms_binding_when_sampling_overlaps_training():
    from rlve.loop import engine_settings
    from rlve.train import load_run_config

    overlapping = load_run_config(["+experiment=tictactoe_course", "rollout.async_level=1"])
    assert engine_settings(overlapping).cpu_cores == "vllm"
    alternating = load_run_config(["+experiment=tictactoe_course", "rollout.async_level=0"])
    assert engine_settings(alternating).cpu_cores == "auto"
    chosen = load_run_config(["+experiment=tictactoe_course", "inference.cpu_cores=0"])
    assert engine_settings(chosen).cpu_cores == "0"
