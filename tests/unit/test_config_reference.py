"""docs/config.md is generated from the config dataclasses and kept in step with them."""

from dataclasses import dataclass
from pathlib import Path

import pytest

from rlve.cli.config_reference import config_rows, field_docs, render
from rlve.config import RunConfig

PAGE = Path(__file__).resolve().parents[2] / "docs" / "config.md"


def test_the_committed_page_is_what_the_code_generates():
    assert PAGE.read_text() == render(), (
        "regenerate: python -m rlve.cli.config_reference > docs/config.md"
    )


def test_every_field_of_every_section_is_on_the_page():
    sections = {title: rows for title, _, rows in config_rows(RunConfig())}
    assert list(sections) == [
        "(top level)", "trainer", "trainer.lora", "trainer.distill", "rollout", "env",
        "env.curriculum", "inference", "sync", "logging", "hacking", "warmup", "evaluation",
    ]  # fmt: skip
    keys = {row.key for rows in sections.values() for row in rows}
    assert {"trainer.lora.rank", "rollout.group_size", "inference.weight_transport"} <= keys
    assert len(keys) == PAGE.read_text().count("\n| `")
    (transport,) = [r for r in sections["inference"] if r.key == "inference.weight_transport"]
    assert (transport.type, transport.default) == ("str", "'shared_memory'")
    assert transport.doc.startswith('how pushes reach vLLM: "shared_memory"')


def test_a_field_without_documentation_is_refused():
    @dataclass
    class Half:
        documented: int = 1
        """a documented field"""
        silent: int = 2

    assert field_docs(Half) == {"documented": "a documented field"}
    with pytest.raises(ValueError, match="Half.silent has no documentation string"):
        config_rows(Half())
