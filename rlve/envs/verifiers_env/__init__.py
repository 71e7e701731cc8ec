"""verifiers environments in rlve: `env.names=[verifiers:MODULE]`.

`MODULE` is an importable module, or an installed environment package (`vf-wordle` is imported
as `vf_wordle`), that has verifiers' `load_environment(**kwargs)`. Its dataset, system prompt,
parser, `env_response`, stop conditions, tools and rubric decide the episode and the reward;
rlve's engine plays the model, so every turn's tokens and log-probs are the sampled ones.

Needs the optional extra `pip install rlve[verifiers]` (verifiers 0.1.9.x, the line rlve is
tested with); another version fails at load with a message that names it.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal

from rlve.envs.verifiers_env.adapter import VerifiersEnv

SCHEME = "verifiers:"
SUPPORTED = "0.1.9"
"""the verifiers release line whose hooks the adapter drives (tested: 0.1.9.post3)"""


def load_verifiers_environment(name: str, **kwargs) -> VerifiersEnv:
    """`verifiers:MODULE` -> MODULE's environment, built by its `load_environment(**kwargs)`."""
    module_name = name.removeprefix(SCHEME).replace("-", "_")
    if not module_name:
        raise ValueError(
            f"{name!r} names no module; write verifiers:MODULE, e.g. verifiers:vf_gsm8k"
        )
    _check_version()
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(
            f"{name!r}: cannot import {module_name!r} ({exc}); install the environment package "
            "or put its module on the path"
        ) from exc
    loader = getattr(module, "load_environment", None)
    if not callable(loader):
        raise ValueError(f"{name!r}: module {module_name!r} has no load_environment function")
    with _signal_handlers_kept(), _no_dataset_bars():
        vf_env = loader(**kwargs)
    return VerifiersEnv(vf_env, name=name)


def _check_version() -> None:
    # verifiers logs at INFO to its own handler unless told otherwise; VF_LOG_LEVEL=INFO shows it
    os.environ.setdefault("VF_LOG_LEVEL", "WARNING")
    try:
        import verifiers
    except ImportError as exc:
        raise ImportError(
            "verifiers environments need the verifiers package: pip install 'rlve[verifiers]'"
        ) from exc
    version = getattr(verifiers, "__version__", "unknown")
    if version != SUPPORTED and not version.startswith(SUPPORTED + "."):
        raise ImportError(
            f"verifiers {version} is installed; rlve drives the hooks of verifiers {SUPPORTED}.x "
            f"(pip install 'verifiers>={SUPPORTED},<0.1.10')"
        )


@contextlib.contextmanager
def _no_dataset_bars():
    """verifiers formats its dataset with `datasets.map`: no progress bar per load."""
    from datasets.utils import logging as datasets_logging

    shown = datasets_logging.is_progress_bar_enabled()
    datasets_logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            datasets_logging.enable_progress_bar()


class _signal_handlers_kept:
    """verifiers' Environment installs its own SIGINT/SIGTERM handlers when it is built; rlve's
    (a checkpoint before stopping) stay in place."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __enter__(self):
        self.saved = {sig: signal.getsignal(sig) for sig in self.SIGNALS}

    def __exit__(self, *exc_info):
        for sig, handler in self.saved.items():
            if handler is not None:
                signal.signal(sig, handler)
        return False


__all__ = ["SCHEME", "SUPPORTED", "VerifiersEnv", "load_verifiers_environment"]
