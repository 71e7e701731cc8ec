"""One page with every field of `python -m rlve.train`'s config: docs/config.md.

The page is generated from the dataclasses themselves (the string under each field is its
documentation), so it cannot drift from the code; a test compares it with the committed copy.

    python -m rlve.cli.config_reference > docs/config.md
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap
from typing import Any

from rlve.config import RunConfig


def field_docs(cls: type) -> dict[str, str]:
    """The string literal under each annotated field of a dataclass, by field name."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body
    docs = {}
    for node, after in zip(body, body[1:], strict=False):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[node.target.id] = " ".join(after.value.value.split())
    return docs


@dataclasses.dataclass(frozen=True)
class FieldRow:
    key: str
    type: str
    default: str
    doc: str


def config_rows(instance: Any, prefix: str = "") -> list[tuple[str, str, list[FieldRow]]]:
    """(section key, section doc, rows) for a config dataclass and every dataclass inside it."""
    cls = type(instance)
    docs = field_docs(cls)
    rows, nested = [], []
    for f in dataclasses.fields(cls):
        key = f"{prefix}{f.name}"
        value = getattr(instance, f.name)
        if f.name not in docs:
            raise ValueError(f"{cls.__name__}.{f.name} has no documentation string")
        if dataclasses.is_dataclass(value):
            nested.extend(config_rows(value, f"{key}."))
        else:
            rows.append(FieldRow(key, str(f.type), repr(value), docs[f.name]))
    title = prefix.rstrip(".") or "(top level)"
    summary = " ".join((inspect.getdoc(cls) or "").split("\n\n")[0].split())
    return [(title, summary, rows), *nested]


def render() -> str:
    lines = [
        "# Config reference",
        "",
        "Every field of `python -m rlve.train`, generated from the dataclasses by "
        "`python -m rlve.cli.config_reference > docs/config.md`.",
        "Set any of them on the command line (`rollout.group_size=4`), in an experiment file "
        "under `rlve/configs/`, or print the composed config with `--cfg job`.",
        "Groups set several at once: `model=`, `env=`, `+experiment=`, and `algorithm=X`, which "
        "is `trainer.loss=X` (a default of `None` on a loss setting means the loss's own: "
        "[training.md](training.md#choosing-a-loss)).",
        "",
    ]
    for title, summary, rows in config_rows(RunConfig()):
        if not rows:
            continue
        lines += [f"## `{title}`", "", summary, "", "| field | type | default | meaning |"]
        lines.append("|---|---|---|---|")
        for row in rows:
            doc = row.doc.replace("|", "\\|")
            lines.append(f"| `{row.key}` | `{row.type}` | `{row.default}` | {doc} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    print(render(), end="")
