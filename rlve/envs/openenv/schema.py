"""From an OpenEnv server's JSON schemas to text: which action field gets the model's reply, and
how an observation reads as the next user message.

The action is the model's text in one string field. Default: the only required string field of
the action schema; any other required field makes the action impossible to build. The
observation is shown as its only string field (or the field `observation_field` names), else as
compact JSON of all its fields; reward, done and metadata never reach the text (the server keeps
them apart from the observation's own fields).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

PROTOCOL_FIELDS = frozenset({"done", "reward", "metadata"})
"""fields every OpenEnv observation has; the protocol sends them beside the observation"""


def is_string_field(schema: Mapping[str, Any]) -> bool:
    """A property schema that admits a string (`"type": "string"`, also within anyOf/oneOf)."""
    kind = schema.get("type")
    if kind == "string" or (isinstance(kind, list) and "string" in kind):
        return True
    options = [*schema.get("anyOf", ()), *schema.get("oneOf", ())]
    return any(isinstance(o, Mapping) and is_string_field(o) for o in options)


def _properties(schema: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    properties = schema.get("properties")
    return dict(properties) if isinstance(properties, Mapping) else {}


def action_text_field(action_schema: Mapping[str, Any], requested: str | None = None) -> str:
    """The action field that receives the model's text: `requested`, or the only required
    string field. ValueError, naming the fields, when there is none, more than one, the
    requested one is missing or not a string, or another field is required too."""
    properties = _properties(action_schema)
    required = [str(name) for name in action_schema.get("required", ())]
    described = ", ".join(
        f"{name}{' (required)' if name in required else ''}: "
        f"{'string' if is_string_field(prop) else prop.get('type', 'any')}"
        for name, prop in properties.items()
    )  # fmt: skip
    title = action_schema.get("title", "the action")
    if requested is None:
        strings = [name for name in required if is_string_field(properties.get(name, {}))]
        if len(strings) != 1:
            raise ValueError(
                f"action_field: {title} has {len(strings)} required string fields, so which one "
                f"gets the model's text is unclear; name it with action_field. Its fields: "
                f"{described or 'none'}"
            )
        requested = strings[0]
    elif requested not in properties:
        raise ValueError(f"action_field {requested!r} is not a field of {title}; its fields: "
                         f"{described or 'none'}")  # fmt: skip
    elif not is_string_field(properties[requested]):
        raise ValueError(f"action_field {requested!r} of {title} takes no string; its fields: "
                         f"{described}")  # fmt: skip
    others = [name for name in required if name != requested]
    if others:
        raise ValueError(
            f"{title} requires {others} besides {requested!r}; an action built from the model's "
            f"text alone would be refused. Its fields: {described}"
        )
    return requested


def observation_text_field(
    observation_schema: Mapping[str, Any], requested: str | None = None
) -> str | None:
    """The observation field shown as text: `requested`, else its only string field, else None
    (the whole observation is shown as JSON). ValueError, naming the fields, when `requested`
    is not one of them."""
    fields = {n: p for n, p in _properties(observation_schema).items() if n not in PROTOCOL_FIELDS}
    if requested is not None:
        if requested not in fields:
            title = observation_schema.get("title", "the observation")
            raise ValueError(f"observation_field {requested!r} is not a field of {title}; its "
                             f"fields: {sorted(fields)}")  # fmt: skip
        return requested
    strings = [name for name, prop in fields.items() if is_string_field(prop)]
    return strings[0] if len(strings) == 1 else None


def observation_text(observation: Mapping[str, Any], field: str | None, max_chars: int) -> str:
    """An observation as the model reads it: the value of `field` (a string as it is, anything
    else as JSON), or without a field the whole observation as compact JSON with sorted keys;
    cut to `max_chars` characters (and saying so)."""
    if field is None:
        value: Any = {k: v for k, v in observation.items() if k not in PROTOCOL_FIELDS}
    else:
        value = observation.get(field)
    if isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    if len(text) <= max_chars:
        return text
    return text[:max_chars] + f"\n[... {len(text) - max_chars} more characters cut]"
