"""rlve can be used and contributed to: a license, its field in the package, a contributor guide."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_the_apache_license_is_shipped_and_declared():
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]


def test_the_contributor_guide_says_how_to_test_and_extend():
    guide = (ROOT / "CONTRIBUTING.md").read_text()
    for needed in ("make setup", "make test", "scripts/gpu_check.sh", "An environment",
                   "A loss", "An engine", "A reward function"):  # fmt: skip
        assert needed in guide, needed
