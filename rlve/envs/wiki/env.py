"""`wiki_search`: answer questions by searching and reading a local encyclopedia with tools.

Tools: `search_pages(query)` (BM25 over titles and text, 5 hits), `view_sections(page_id)`,
`read_section(section_id)`. The default corpus is generated here (`corpus.py`) with questions
that need difficulty + 1 pages, so the environment also makes problems on the fly for the
curriculum (`make_example`). A user corpus (id/title/content rows) with user questions
(question/answer rows) replaces both.

Reward: `exact` (the normalised `<answer>` equals the answer) or `f1` (word overlap), weight 1,
plus 0.1 when the final message holds an `<answer>` (the format reward).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from rlve.envs.base import require_int
from rlve.envs.parsers import XMLParser, assistant_texts
from rlve.envs.rubric import Rubric
from rlve.envs.tools import ToolEnv
from rlve.envs.wiki.corpus import MAX_DIFFICULTY, generate_pages, make_question
from rlve.envs.wiki.index import WikiIndex, load_rows, pages_from_rows
from rlve.types import Example, Message

SYSTEM_PROMPT = """Answer the question using the encyclopedia tools: search for pages, look at \
a page's sections, read the sections you need. Questions may need several pages. When you know \
the answer, reply without a tool call and put only the answer inside <answer>...</answer>."""


def wiki_tools(index: WikiIndex) -> list[Callable[..., str]]:
    """The three tools, bound to `index`."""

    def search_pages(query: str) -> str:
        """Search the encyclopedia; returns up to 5 pages as `page_id: title`, best first.

        Args:
            query: words to look for in page titles and text.
        """
        hits = index.search(query)
        return "\n".join(f"{page_id}: {title}" for page_id, title in hits) or "no pages found"

    def view_sections(page_id: str) -> str:
        """The sections of a page as `section_id: title`.

        Args:
            page_id: a page id from search_pages.
        """
        page = index.page(page_id)
        return "\n".join(f"{page_id}#{i}: {s.title}" for i, s in enumerate(page.sections))

    def read_section(section_id: str) -> str:
        """The text of one section.

        Args:
            section_id: a section id from view_sections.
        """
        page, section = index.section(section_id)
        return f"{page.title} / {section.title}\n{section.text}"

    return [search_pages, view_sections, read_section]


def normalize(text: str) -> list[str]:
    """Lower-case words without punctuation and articles."""
    return [w for w in re.findall(r"\w+", text.lower()) if w not in ("a", "an", "the")]


def final_answer(completion: list[Message], parser: XMLParser) -> str | None:
    """The `<answer>` of the last assistant message (earlier guesses do not count)."""
    texts = assistant_texts(completion)
    return parser.parse(texts[-1]) if texts else None


def exact_match(completion: list[Message], answer: str, parser: XMLParser) -> float:
    given = final_answer(completion, parser)
    return float(given is not None and normalize(given) == normalize(answer))


def word_f1(completion: list[Message], answer: str, parser: XMLParser) -> float:
    given, truth = normalize(final_answer(completion, parser) or ""), normalize(answer)
    common = sum((Counter(given) & Counter(truth)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(given), common / len(truth)
    return 2 * precision * recall / (precision + recall)


def answered(completion: list[Message], parser: XMLParser) -> float:
    """1 when the last assistant message holds an answer: the format reward."""
    return float(final_answer(completion, parser) is not None)


REWARDS = {"exact": exact_match, "f1": word_f1}


class WikiSearchEnv(ToolEnv):
    """Questions over a page collection, answered with the three wiki tools."""

    def __init__(self, rows, index: WikiIndex, *, reward: str = "exact", **kwargs):
        if reward not in REWARDS:
            raise ValueError(f"reward must be one of {sorted(REWARDS)}, got {reward!r}")
        parser = XMLParser(["answer"])
        rubric = Rubric(parser=parser)
        rubric.add(REWARDS[reward], 1.0).add(answered, 0.1)
        self.index = index
        super().__init__(rows, tools=wiki_tools(index), system_prompt=SYSTEM_PROMPT,
                         parser=parser, rubric=rubric, **kwargs)  # fmt: skip


class GeneratedWikiEnv(WikiSearchEnv):
    """The generated encyclopedia; `make_example(seed, difficulty)` for the curriculum."""

    def __init__(self, pages, *, num_examples: int, seed: int, difficulties: Sequence[int],
                 **kwargs):  # fmt: skip
        self._pages = pages
        rows = [self._row(seed + i, difficulties[i % len(difficulties)], i)
                for i in range(num_examples)]  # fmt: skip
        super().__init__(rows, WikiIndex(pages), **kwargs)

    def _row(self, seed: int, difficulty: int, example_id: int) -> dict[str, Any]:
        question = make_question(self._pages, seed, difficulty)
        info = {"difficulty": difficulty, "seed": seed, "pages": list(question.pages)}
        return {"question": question.question, "answer": question.answer, "info": info,
                "example_id": example_id}  # fmt: skip

    def make_example(self, seed: int, difficulty: int, example_id: int | None = None) -> Example:
        """A fresh question needing difficulty + 1 pages (difficulties above the corpus's
        longest chain are capped at it)."""
        row = self._row(seed, min(difficulty, MAX_DIFFICULTY), seed)
        prompt = [{"role": "system", "content": SYSTEM_PROMPT},
                  {"role": "user", "content": row["question"]}]  # fmt: skip
        return Example(seed if example_id is None else example_id, prompt, row["answer"],
                       row["info"])  # fmt: skip


def load_environment(
    num_examples: int = 200,
    seed: int = 0,
    difficulties: Sequence[int] = (0, 1, 2),
    corpus_seed: int = 0,
    pages_per_kind: int = 24,
    corpus: Iterable[Mapping[str, Any]] | str | None = None,
    questions: Iterable[Mapping[str, Any]] | str | None = None,
    reward: str = "exact",
    max_turns: int = 8,
    max_tokens: int = 256,
) -> WikiSearchEnv:
    """Multi-hop questions over an encyclopedia searched with tools.

    Args:
        num_examples: questions in the dataset (generated corpus; a user's questions: at most).
        seed: seed of the generated questions.
        difficulties: difficulties of the generated questions, in turn (d needs d + 1 pages;
            0..5).
        corpus_seed: seed of the generated encyclopedia.
        pages_per_kind: cities, people, rivers and events each in the generated encyclopedia.
        corpus: a user corpus instead: rows with id/title/content, or a JSON lines file.
        questions: with `corpus`: rows with question/answer, or a JSON lines file.
        reward: 'exact' (normalised exact match) or 'f1' (word overlap).
        max_turns: most model turns, tool calls and the answer together.
        max_tokens: default most tokens per model turn.
    """
    require_int("num_examples", num_examples, 1)
    require_int("max_turns", max_turns, 1)
    require_int("max_tokens", max_tokens, 1)
    common = {"reward": reward, "max_turns": max_turns, "name": "wiki_search",
              "sampling": {"max_tokens": max_tokens}}  # fmt: skip
    if corpus is not None:
        if questions is None:
            raise ValueError("a user corpus needs questions (rows with question and answer)")
        rows = load_rows(questions)[:num_examples]
        return WikiSearchEnv(rows, WikiIndex(pages_from_rows(corpus)), **common)
    if questions is not None:
        raise ValueError("questions are for a user corpus; pass corpus as well")
    difficulties = list(difficulties)
    if not difficulties or any(not 0 <= d <= MAX_DIFFICULTY for d in difficulties):
        raise ValueError(f"difficulties must be in 0..{MAX_DIFFICULTY}, got {difficulties!r}")
    pages = generate_pages(corpus_seed, pages_per_kind)
    return GeneratedWikiEnv(pages, num_examples=num_examples, seed=seed,
                            difficulties=difficulties, **common)  # fmt: skip
