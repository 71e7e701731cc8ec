import pytest


@pytest.fixture(scope="session")
def tiny_path() -> str:
    """The embedded tiny model directory (built once per machine, then cached)."""
    from rlve.models import tiny_model_path

    return tiny_model_path()


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_path):
    from rlve.models import load_tokenizer

    return load_tokenizer(tiny_path)
