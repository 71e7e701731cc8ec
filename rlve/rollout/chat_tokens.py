"""Token-exact multi-turn conversations.

Re-rendering a conversation with the chat template does not always reproduce the tokens that were
sampled (whitespace, stripped reasoning, different merges), so training would see other tokens
than the sampler produced. Instead the episode keeps one growing token sequence: the rendered
prompt, then each sampled completion exactly as sampled, then only the tokens of the
environment's reply. This module computes those reply tokens from the chat template, once per
reply, without touching what came before.
"""

from __future__ import annotations

import json
from typing import Any

from rlve.types import Message

_PROBE = "\x00rlve-probe\x00"

TOOLS_TEXT = """You can call the following tools:
<tools>
{tools}
</tools>

To call a tool, write one JSON object per call between tags, like this:
<tool_call>{{"name": "<tool name>", "arguments": {{"<argument>": <value>}}}}</tool_call>"""
"""the tool list put into the system message for chat templates that do not render tools"""


def with_tools_in_system(messages: list[Message], tools: list[dict[str, Any]]) -> list[Message]:
    """The conversation with the tool list (TOOLS_TEXT) at the end of its system message (one is
    added when there is none)."""
    text = TOOLS_TEXT.format(tools="\n".join(json.dumps(t) for t in tools))
    if messages and messages[0]["role"] == "system":
        return [{**messages[0], "content": f"{messages[0]['content']}\n\n{text}"}, *messages[1:]]
    return [{"role": "system", "content": text}, *messages]


class ChatTemplateError(ValueError):
    """The chat template cannot give the tokens of a reply on their own: the episode that needs
    them ends (stop reason `chat_template`), the batch goes on."""


class ChatTokens:
    """Turns a chat template into prompt tokens and per-reply continuation tokens."""

    def __init__(self, tokenizer: Any, tools: list[dict[str, Any]] | None = None):
        if getattr(tokenizer, "chat_template", None) is None:
            raise ValueError(
                f"tokenizer {getattr(tokenizer, 'name_or_path', tokenizer)!r} has no chat template"
            )
        self.tokenizer = tokenizer
        self.tools = tools
        self.tools_in_system = bool(tools) and not self._renders_tools()
        """the template ignores `tools` (SmolLM2's, for one): the prompt's system message lists
        them instead"""
        if self.tools_in_system:
            self.tools = None
            self._tool_list = tools
        self._base = [{"role": "user", "content": "."}, {"role": "assistant", "content": _PROBE}]
        rendered = self._render(self._base, generation_prompt=False)
        if _PROBE not in rendered:
            raise ChatTemplateError("the chat template does not render assistant content verbatim")
        # What the template writes after an assistant's content to close its turn (ChatML:
        # "<|im_end|>\n"). A sampled turn that stopped on the end-of-turn token already holds the
        # start of it; the rest is added, masked, before the environment's reply.
        self._turn_end = rendered.split(_PROBE, 1)[1]
        self.turn_end_ids = self._encode(self._turn_end)

    @property
    def end_of_turn_id(self) -> int:
        """The token a model writes to end its turn: the first of the template's closing marker
        (ChatML's <|im_end|>, Llama 3's <|eot_id|>), which need not be the tokenizer's eos; the
        eos when the template closes a turn with nothing."""
        return self.turn_end_ids[0] if self.turn_end_ids else self.tokenizer.eos_token_id

    def _render(self, messages: list[Message], generation_prompt: bool) -> str:
        try:
            return self.tokenizer.apply_chat_template(
                messages, tools=self.tools, tokenize=False, add_generation_prompt=generation_prompt
            )
        except Exception as exc:  # a template may raise on any conversation it does not expect
            raise ChatTemplateError(
                f"the chat template failed: {type(exc).__name__}: {exc}"
            ) from exc

    def _renders_tools(self) -> bool:
        """Whether the chat template writes anything for the tools (or accepts them at all)."""
        probe = [{"role": "user", "content": "."}]
        try:
            plain = self.tokenizer.apply_chat_template(probe, tokenize=False)
            with_tools = self.tokenizer.apply_chat_template(probe, tools=self.tools, tokenize=False)
        except Exception:
            return False
        return with_tools != plain

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def render(self, messages: list[Message], generation_prompt: bool) -> str:
        """The conversation as the template writes it (with the tool list in the system message
        when the template does not render tools), ending with the assistant's generation prompt
        or not."""
        if self.tools_in_system:
            messages = with_tools_in_system(messages, self._tool_list)
        return self._render(messages, generation_prompt)

    def encode(self, text: str) -> list[int]:
        """The token ids of rendered text (no special tokens added)."""
        return self._encode(text)

    def prompt_ids(self, messages: list[Message]) -> list[int]:
        """The token ids of the prompt, ending with the assistant's generation prompt."""
        return self._encode(self.render(messages, generation_prompt=True))

    def reply_ids(self, completion_ids: list[int], reply: list[Message]) -> list[int]:
        """Tokens to append after a sampled completion: the rest of its end-of-turn marker, the
        environment's reply messages, and the next generation prompt.

        The reply is rendered after a fixed one-turn conversation, never after the real history,
        and only what follows that turn's closing marker is taken: a template that rewrites
        earlier turns when more follow (Qwen3 drops their `<think>` blocks) changes nothing here.
        """
        full = self._render(self._base + list(reply), generation_prompt=True)
        _, found, after = full.partition(_PROBE)
        if not found or not after.startswith(self._turn_end):
            raise ChatTemplateError(
                "the chat template closes an assistant turn differently when messages follow it"
            )
        return self.turn_end_rest(completion_ids) + self._encode(after[len(self._turn_end) :])

    def turn_end_rest(self, completion_ids: list[int]) -> list[int]:
        """The part of the end-of-turn marker that the completion does not already end with."""
        end = self.turn_end_ids
        for overlap in range(min(len(end), len(completion_ids)), 0, -1):
            if completion_ids[-overlap:] == end[:overlap]:
                return end[overlap:]
        return end


def end_of_turn_id(tokenizer: Any) -> int:
    """The token that ends a turn in `tokenizer`'s chat template (ChatTokens.end_of_turn_id), or
    its eos when it has no template."""
    if getattr(tokenizer, "chat_template", None) is None:
        return tokenizer.eos_token_id
    return ChatTokens(tokenizer).end_of_turn_id


def conversation_tokens(
    tokenizer: Any, prompt: list[Message], completion: list[Message], tools=None
) -> tuple[list[int], list[int]]:
    """Token ids and loss mask of a finished text conversation, laid out exactly as a token-exact
    episode would have produced it (assistant turns: their text + end-of-turn token, mask 1).

    For text-only teachers (an OpenAI-compatible endpoint): their games become SFT data in the
    student's own chat format, each turn ended by the template's end-of-turn token (what the
    student must learn to write; not always the eos). A trailing non-assistant message is left
    out, as in an episode.
    """
    chat = ChatTokens(tokenizer, tools)
    ids = chat.prompt_ids(prompt)
    mask = [0] * len(ids)
    pending: list[Message] = []
    last_turn: list[int] = []
    for message in completion:
        if message["role"] != "assistant":
            pending.append(message)
            continue
        if pending:
            bridge = chat.reply_ids(last_turn, pending)
            ids += bridge
            mask += [0] * len(bridge)
            pending = []
        text = str(message.get("content") or "")
        last_turn = list(tokenizer.encode(text, add_special_tokens=False))
        last_turn.append(chat.end_of_turn_id)
        ids += last_turn
        mask += [1] * len(last_turn)
    return ids, mask
