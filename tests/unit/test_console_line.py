"""The console's step line: its ETA is the steps left times the time per step seen so far."""

from rlve.config import LoggingConfig
from rlve.training import metrics_logger
from rlve.training.metrics_logger import MetricsLogger


def test_the_eta_is_the_steps_left_times_the_measured_time_per_step(tmp_path, monkeypatch, capsys):
    now = [0.0]
    monkeypatch.setattr(metrics_logger.time, "time", lambda: now[0])
    config = LoggingConfig(wandb_mode="disabled", console_every=1)
    logger = MetricsLogger(tmp_path, config, {}, "run", max_steps=6)
    for step, at in ((1, 10.0), (2, 110.0), (3, 210.0)):  # when each step's line is written
        now[0] = at
        logger.log(step, {"reward/mean": 0.5, "perf/step_s": 90.0})
    logger.close()
    lines = capsys.readouterr().err.splitlines()
    # step 1: 5 left x its own step time (90 s); then 100 s a step: 4 x 100 s, 3 x 100 s
    assert [line.rsplit("ETA ", 1)[1] for line in lines] == ["7.5 min", "6.7 min", "5.0 min"]
