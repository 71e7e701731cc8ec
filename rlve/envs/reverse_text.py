"""Reverse Text: one turn, the model writes a paragraph backwards, character by character.

The answer goes inside `<reversed_text>...</reversed_text>` (one field, no required reasoning
block: at 256 tokens a reasoning trace would crowd out the answer). The reward is difflib's
similarity ratio between the parsed answer and the true reversal, so near misses earn partial
credit. The default dataset is 1,000 paragraphs generated here from a seeded word grammar: nothing
is downloaded.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from difflib import SequenceMatcher
from typing import Any

from datasets import Dataset

from rlve.envs.base import SingleTurnEnv, require_int
from rlve.envs.parsers import XMLParser
from rlve.envs.rubric import Rubric
from rlve.types import Message

SYSTEM_PROMPT = """Reverse the text the user gives you, character by character: the last \
character comes first. Keep every space, letter case and punctuation mark.
Write only the reversed text, inside tags:
<reversed_text>
...
</reversed_text>"""

# ---- the paragraph generator -----------------------------------------------------------------
# A small grammar over a fixed vocabulary: sentences read as English (so a model's knowledge of
# words helps, as with real text) while the seed alone decides every paragraph.

NOUNS = """
cat dog bird horse child teacher farmer doctor painter sailor baker river mountain forest garden
city village house window door table chair book letter song story road bridge tower castle
island ocean lake field valley storm cloud rain wind sun moon star tree flower stone lamp clock
ship train market school kitchen library museum festival lesson journey question answer friend
neighbor stranger king queen soldier student writer singer pilot fisherman hunter merchant
traveler machine engine camera letterbox candle blanket basket bottle ladder mirror orchard
meadow harbor desert canyon glacier owl fox rabbit wolf bear goat sheep parrot turtle whale
painting violin piano drum map compass lantern kettle gate fountain chimney cottage palace
tunnel path hill cliff beach wave shell feather ribbon coin key puzzle riddle secret promise
dream memory""".split()

ADJECTIVES = """
old young quiet loud bright dark small large tall short warm cold gentle brave clever curious
happy tired busy lonely careful patient strange famous ancient modern golden silver green blue
red yellow wooden narrow wide heavy light sleepy hungry honest proud shy calm wild friendly
distant hidden empty crowded gray purple orange soft rough smooth noisy silent clumsy graceful
cheerful grumpy polite stubborn generous humble""".split()

VERBS = """
found painted watched followed carried opened closed visited built crossed helped remembered
answered cleaned repaired described noticed guarded borrowed chased greeted measured counted
explored studied lifted pushed pulled collected planted discovered admired ignored protected
climbed carved copied drew fixed hid kept lost loved missed moved named packed passed praised
sold taught tested traded wrapped wrote""".split()

ADVERBS = """
slowly quickly quietly carefully gladly suddenly finally often rarely always gently proudly
bravely calmly eagerly patiently""".split()

PREPOSITIONS = """
near behind beside under above across beyond inside outside toward through around""".split()

OPENERS = """
yesterday today later meanwhile afterward sometimes tonight""".split()

CONJUNCTIONS = ["and", "but", "while", "because", "so", "before", "after"]

VOCABULARY_SIZE = len(
    set(NOUNS + ADJECTIVES + VERBS + ADVERBS + PREPOSITIONS + OPENERS + CONJUNCTIONS)
)


def _noun_phrase(rng: random.Random) -> str:
    article = rng.choice(["the", "the", "the", "a", "a", "one", "every"])
    if rng.random() < 0.5:
        return f"{article} {rng.choice(ADJECTIVES)} {rng.choice(NOUNS)}"
    return f"{article} {rng.choice(NOUNS)}"


def _clause(rng: random.Random) -> str:
    words = [_noun_phrase(rng)]
    if rng.random() < 0.3:
        words.append(rng.choice(ADVERBS))
    words += [rng.choice(VERBS), _noun_phrase(rng)]
    if rng.random() < 0.4:
        words += [rng.choice(PREPOSITIONS), _noun_phrase(rng)]
    return " ".join(words)


def _sentence(rng: random.Random) -> str:
    text = _clause(rng)
    if rng.random() < 0.25:
        text = f"{rng.choice(OPENERS)}, {text}"
    if rng.random() < 0.3:
        text = f"{text}, {rng.choice(CONJUNCTIONS)} {_clause(rng)}"
    return text[0].upper() + text[1:] + rng.choice(".....!?")


def random_paragraph(rng: random.Random) -> str:
    """Two to four sentences of grammatical (if whimsical) English from a fixed word list."""
    return " ".join(_sentence(rng) for _ in range(rng.randint(2, 4)))


def generated_texts(num_examples: int, seed: int) -> list[str]:
    """`num_examples` paragraphs; the same seed gives the same paragraphs in the same order."""
    rng = random.Random(seed)
    return [random_paragraph(rng) for _ in range(num_examples)]


# ---- the environment ---------------------------------------------------------------------------


def user_texts(
    dataset: Dataset | Iterable[Mapping[str, Any]], text_column: str, num_examples: int
) -> list[str]:
    """The first `num_examples` texts of a user's dataset (all of them if it has fewer)."""
    if isinstance(dataset, Dataset) and text_column not in dataset.column_names:
        raise ValueError(
            f"text_column {text_column!r} is not a column of the dataset {dataset.column_names}"
        )
    texts = []
    for i, row in enumerate(dataset):
        if len(texts) == num_examples:
            break
        if text_column not in row:
            raise ValueError(f"text_column {text_column!r} is missing from dataset row {i}")
        text = row[text_column]
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"dataset row {i} has no text in column {text_column!r}: {text!r}")
        texts.append(text.strip())
    if not texts:
        raise ValueError("dataset has no rows")
    return texts


def reversal_similarity(completion: list[Message], answer: str, parser: XMLParser) -> float:
    """difflib's ratio 2*M/T between the parsed reversal and the true one; 0 when none is parsed.

    difflib's default `autojunk` is kept, as in the reference environment: on answers of 200+
    characters it skips very common characters as match anchors, which lowers the credit an
    unreversed copy gets for sharing letters (0.11 on average over generated paragraphs, against
    0.18 without it).
    """
    parsed = parser.parse_answer(completion)
    if parsed is None:
        return 0.0
    return SequenceMatcher(None, parsed, answer).ratio()


def load_environment(
    num_examples: int = 1000,
    seed: int = 0,
    dataset: Dataset | Iterable[Mapping[str, Any]] | None = None,
    text_column: str = "text",
    max_tokens: int = 256,
) -> SingleTurnEnv:
    """Reverse a paragraph; reward = difflib similarity to the exact reversal.

    Args:
        num_examples: paragraphs to generate, or rows to take from `dataset` (at least 1).
        seed: seed of the generated paragraphs; ignored when `dataset` is given.
        dataset: texts to reverse instead of generated ones: a `datasets.Dataset` or a list of
            dicts, with the text in the column `text_column`.
        text_column: the column of `dataset` that holds the text.
        max_tokens: default most tokens of the model's answer.
    """
    require_int("num_examples", num_examples, 1)
    require_int("max_tokens", max_tokens, 1)
    if dataset is None:
        texts, source = generated_texts(num_examples, seed), "generated"
    else:
        texts, source = user_texts(dataset, text_column, num_examples), "user"
    rows = [
        {"question": text, "answer": text[::-1], "info": {"source": source, "num_chars": len(text)}}
        for text in texts
    ]
    parser = XMLParser(["reversed_text"])
    rubric = Rubric(parser=parser)
    rubric.add(reversal_similarity, 1.0).add(parser.format_reward_func(), 0.0)
    return SingleTurnEnv(
        rows,
        system_prompt=SYSTEM_PROMPT,
        parser=parser,
        rubric=rubric,
        name="reverse_text",
        sampling={"max_tokens": max_tokens},
    )
