import os

import pytest

# `dtype: auto` (the default of trainer.dtype and inference.dtype) is float32 in the tests, on any
# CPU: their tolerances are float32's. Tests of bf16 say so; tests of `auto` set the variable.
os.environ["RLVE_AUTO_DTYPE"] = "float32"


@pytest.fixture(scope="session")
def tiny_path() -> str:
    """The embedded tiny model directory (built once per machine, then cached)."""
    from rlve.models import tiny_model_path

    return tiny_model_path()


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_path):
    from rlve.models import load_tokenizer

    return load_tokenizer(tiny_path)
