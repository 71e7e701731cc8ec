"""The embedded default tokenizer: a byte-level BPE trained here, on text generated here.

Machines without a model hub still need a tokenizer, so rlve trains a small one (about 2,000
tokens) on text that looks like what its environments produce: tic-tac-toe boards and replies,
arithmetic, JSON tool calls and plain sentences. Same code, same tokenizer, on every run.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from rlve.envs.tictactoe.game import (
    EMPTY,
    EMPTY_BOARD,
    free_cells,
    is_over,
    place,
    render_board,
    winner,
)

PAD_TOKEN = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = [PAD_TOKEN, IM_START, IM_END]
"""ids 0, 1, 2 in that order: the trainer places special tokens first."""

# Qwen2's pre-tokenizer split (words with one leading non-letter, single digits, punctuation
# runs, whitespace). transformers 5 loads any model_type "qwen2" directory with its own
# Qwen2Tokenizer (vLLM does too), which rebuilds this split from scratch: using the same split
# here makes both tokenizers give the same ids on NFC text, and the same text for any ids.
PRETOKENIZE_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

TINY_VOCAB_SIZE = 2048
CORPUS_SEED = 0
CORPUS_DOCUMENTS = 6000

# ChatML as Qwen renders it: every turn is `<|im_start|>{role}\n{content}<|im_end|>\n`, so a
# longer conversation always renders to an extension of a shorter one (token-exact multi-turn).
# With `tools`, the system turn lists them as JSON and shows the <tool_call> format.
CHAT_TEMPLATE = """
{%- macro render_content(content) -%}
{%- if content is string -%}{{- content -}}
{%- elif content is iterable -%}
{%- for part in content if part.type == 'text' -%}{{- part.text -}}{%- endfor -%}
{%- endif -%}
{%- endmacro -%}
{%- set loop_messages = messages -%}
{%- if tools -%}
{{- '<|im_start|>system\\n' -}}
{%- if messages and messages[0].role == 'system' -%}
{{- render_content(messages[0].content) + '\\n\\n' -}}
{%- set loop_messages = messages[1:] -%}
{%- endif -%}
{{- 'You can call the following tools:\\n<tools>\\n' -}}
{%- for tool in tools -%}{{- tool | tojson -}}{{- '\\n' -}}{%- endfor -%}
{{- '</tools>\\n\\nTo call a tool, write one JSON object per call between tags, like this:\\n' -}}
{{- '<tool_call>{"name": "<tool name>", "arguments": {"<argument>": <value>}}</tool_call>' -}}
{{- '<|im_end|>\\n' -}}
{%- endif -%}
{%- for message in loop_messages -%}
{{- '<|im_start|>' + message.role + '\\n' + render_content(message.content) -}}
{%- if message.role == 'assistant' and message.tool_calls -%}
{%- for call in message.tool_calls -%}
{%- set function = call.function if call.function is defined else call -%}
{%- if message.content or not loop.first -%}{{- '\\n' -}}{%- endif -%}
{{- '<tool_call>{"name": ' + (function.name | tojson) + ', "arguments": ' -}}
{%- if function.arguments is string -%}{{- function.arguments -}}
{%- else -%}{{- function.arguments | tojson -}}{%- endif -%}
{{- '}</tool_call>' -}}
{%- endfor -%}
{%- endif -%}
{{- '<|im_end|>\\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}
"""

WORDS = (
    "the a an and or but if then so because while when where who what which this that these "
    "those is are was were be been being have has had do does did will would can could should "
    "may might must not no yes all any each every some many few more most less other such only "
    "own same than too very just also now here there up down in out on off over under again "
    "once about above after before between into through during with without for from to of at "
    "by as model player game board cell row column diagonal move turn win lose draw opponent "
    "center corner edge fork block threat line mark empty free taken number answer question "
    "problem solution step reason think check count sum product difference result value list "
    "array string tool call function argument expression compute evaluate return output input "
    "first second third last next previous left right top bottom middle good bad best better "
    "worst simple hard easy correct wrong valid invalid because therefore however since let me "
    "we you i it they he she one two three four five six seven eight nine ten zero hundred "
    "thousand time place way day year people world water work life part case point group "
    "system user assistant environment reward score play start end stop try again please "
    "I'll I'm it's don't can't won't you're let's "
    "able across add age ago air allow almost alone along already always among animal another "
    "area around ask away back base bear beat become begin behind believe below beside big "
    "bit black blue body book both box bring build buy car carry catch cause change child city "
    "class clear close cold color come common complete consider contain continue control cost "
    "could country cover cut dark data deal decide deep describe design detail develop die "
    "direct discover divide doctor dog door draw dream drive drop dry early earth east eat "
    "effect egg either else energy enough enter equal even event ever exact example expect "
    "explain face fact fall family far fast father feel field fight figure fill final find "
    "fine finish fire fish fit follow food foot force form found friend front full game "
    "garden general get give glass go gold great green ground grow guess half hand happen "
    "happy head hear heart heat heavy help high hold home hope horse hot hour house how idea "
    "important include increase indicate instead interest island keep key kind king know "
    "land language large late laugh lead learn leave letter level lie light like little live "
    "long look love low machine main make man map matter mean measure meet memory method "
    "mind minute miss moment money month moon morning mother mountain music name nation "
    "natural near need never new night north note nothing notice object observe ocean offer "
    "often old open order organize pair paper parent pass past path pattern pay perhaps "
    "period person picture piece plan plant position possible power practice prepare present "
    "press probable process produce program property prove provide pull push quick quiet "
    "rain raise range rate reach read ready real receive record region remember repeat reply "
    "report represent require rest rich river road rock room rule run safe sail save say "
    "science sea search season seat see seem select sense sentence separate serve set shape "
    "share short show side sign similar since sing single size skill sleep slow small snow "
    "soft soil solve sound space speak special speed spell spend stand star state stay still "
    "stone store story street strong student study subject success suggest summer sun supply "
    "support sure surface table take talk teach team tell test thank thing though thought "
    "through throw together total touch toward town track trade travel tree true type under "
    "unit until use usual village visit voice wait walk wall want warm watch wave weather "
    "week weight west wheel white whole why wide wild wind window winter wish woman wonder "
    "wood word write young"
).split()

SYLLABLES = (
    "ka ri to na mo lu se vi pa de ko ba zu ne ti ro ma fi go he ju la me no pu sa te vo wa yi "
    "an el in on un ar er or ur al il ol st tr pr br gr cl fl pl sh ch th qu"
).split()

THOUGHTS = (
    "I block the row.",
    "I block the column.",
    "I block the diagonal.",
    "I take the center.",
    "I take a corner.",
    "I complete my row and win.",
    "I create a fork.",
    "The opponent threatens to win, so I block.",
    "No threats yet, so I take the best free cell.",
    "Cell {cell} is free and it is a good move.",
)

TTT_SYSTEM_PROMPT = (
    "You are playing tic-tac-toe as X. Cells are numbered 0-8, left to right, top to bottom. "
    "Think briefly inside <think>...</think>, then give your move as <move>N</move>."
)


def _tic_tac_toe_game(rng: random.Random) -> str:
    """One random game in the environment's words, turn by turn, with some invalid moves."""
    board = EMPTY_BOARD
    parts = [TTT_SYSTEM_PROMPT]
    player = rng.choice(("X", "O"))
    while not is_over(board):
        free = free_cells(board)
        if player == "X":
            parts += [render_board(board), f"Available positions: {free}", "Your turn."]
            taken = [i for i in range(9) if board[i] != EMPTY]
            if taken and rng.random() < 0.15:
                cell = rng.choice(taken)
                parts.append(f"<think>I play {cell}.</think>\n<move>{cell}</move>")
                parts.append(f"Invalid move: cell {cell} is taken.")
                continue
            cell = rng.choice(free)
            thought = rng.choice(THOUGHTS).format(cell=cell)
            parts.append(f"<think>{thought}</think>\n<move>{cell}</move>")
        else:
            cell = rng.choice(free)
            parts.append(f"Opponent played {cell}.")
        board = place(board, cell, player)
        player = "O" if player == "X" else "X"
    parts.append(render_board(board))
    parts.append({"X": "You win!", "O": "You lose."}.get(winner(board), "It's a draw."))
    return "\n".join(parts)


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(4, 16))]
    return " ".join(words).capitalize() + rng.choice((".", ".", ".", "?", "!", ","))


def _made_up_names(rng: random.Random) -> str:
    # pseudo-words give the BPE trainer enough distinct pairs to reach its vocabulary size
    names = ["".join(rng.choices(SYLLABLES, k=rng.randint(2, 4))) for _ in range(8)]
    return " ".join(name.capitalize() if rng.random() < 0.3 else name for name in names) + "."


def _arithmetic(rng: random.Random) -> str:
    a, b = rng.randint(0, 999), rng.randint(1, 99)
    op = rng.choice(("+", "-", "*", "/"))
    if op == "/":
        a = a - a % b  # keep answers whole numbers
    answer = {"+": a + b, "-": a - b, "*": a * b, "/": a // b}[op]
    question = f"What is {a} {op} {b}?"
    if rng.random() < 0.5:
        return f"{question}\n<think>{a} {op} {b} = {answer}</think>\n\\boxed{{{answer}}}"
    return f"{question}\n<think>{_sentence(rng)}</think>\n<answer>{answer}</answer>"


def _tool_call(rng: random.Random) -> str:
    expression = f"{rng.randint(0, 99)}{rng.choice('+-*/')}{rng.randint(1, 99)}"
    call = {"name": "calculate", "arguments": {"expression": expression}}
    return f"{_sentence(rng)}\n<tool_call>{json.dumps(call)}</tool_call>"


def _chat_roles(rng: random.Random) -> str:
    # special tokens never reach the BPE trainer, but the role lines that follow them do
    role = rng.choice(("system", "user", "assistant", "tool"))
    return f"{role}\n{_sentence(rng)}\n"


def tiny_corpus(seed: int = CORPUS_SEED, num_documents: int = CORPUS_DOCUMENTS) -> Iterator[str]:
    """The training text: a fixed mix of documents drawn with one seeded rng."""
    rng = random.Random(seed)
    makers = (_tic_tac_toe_game, _sentence, _arithmetic, _tool_call, _chat_roles, _made_up_names)
    for i in range(num_documents):
        yield makers[i % len(makers)](rng)


def train_tiny_bpe(vocab_size: int = TINY_VOCAB_SIZE) -> Tokenizer:
    """A byte-level BPE: every byte is in the base alphabet, so any text round-trips exactly."""
    tokenizer = Tokenizer(models.BPE())
    # No normalizer: NFC (which Qwen2's tokenizer adds) would break decode(encode(s)) == s.
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(tiny_corpus(), trainer=trainer)
    return tokenizer


def build_tiny_tokenizer(path: str | None = None) -> PreTrainedTokenizerFast:
    """Train the tiny tokenizer, wrap it for transformers and, given a path, save it there."""
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=train_tiny_bpe(),
        eos_token=IM_END,
        pad_token=PAD_TOKEN,
        additional_special_tokens=[IM_START],
        clean_up_tokenization_spaces=False,  # would turn "a ." into "a." and break round-trips
        chat_template=CHAT_TEMPLATE,
    )
    if path is not None:
        tokenizer.save_pretrained(path)
    return tokenizer
