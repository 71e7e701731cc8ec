import asyncio
import json

import pytest

import rlve
from rlve.envs.wiki.corpus import generate_pages, make_question
from rlve.envs.wiki.index import WikiIndex, fts_query, pages_from_rows, split_sections
from rlve.rollout import EpisodeSettings, GroupJob, ScriptedEngine, play_groups
from rlve.rollout.problems import is_adaptive

PAGES = generate_pages(0)
BY_ID = {p.page_id: p for p in PAGES}


def call(name, **arguments):
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def play(env, replies, example=0):
    replies = iter(replies)
    jobs = [GroupJob(env, env.example(example), seed=0)]
    (group,) = asyncio.run(
        play_groups(ScriptedEngine(lambda m: next(replies)), jobs, 1, EpisodeSettings())
    )
    return group.trajectories[0]


def test_generated_pages_are_seeded_and_linked():
    assert [p.title for p in generate_pages(0)] == [p.title for p in PAGES]
    assert [p.title for p in generate_pages(1)] != [p.title for p in PAGES]
    assert len(PAGES) == 96 and {p.kind for p in PAGES} == {"city", "person", "river", "event"}
    city = PAGES[0]  # hand-checked: the page text says what the links and facts say
    founder = BY_ID[city.links["founder"]]
    assert f"founded in {city.facts['founded']} by {founder.title}." in city.sections[1].text
    assert founder.kind == "person"


@pytest.mark.parametrize("difficulty", [0, 1, 2, 3, 5])
def test_a_question_of_difficulty_d_needs_d_plus_1_linked_pages(difficulty):
    question = make_question(PAGES, seed=11, difficulty=difficulty)
    assert len(question.pages) == difficulty + 1
    for here, there in zip(question.pages, question.pages[1:], strict=False):
        assert there in BY_ID[here].links.values()
    assert question.answer in BY_ID[question.pages[-1]].facts.values()
    assert BY_ID[question.pages[0]].title in question.question


def test_search_ranks_the_page_named_in_the_query_first():
    index = WikiIndex(PAGES)
    for page in PAGES[:10]:
        assert index.search(f"where is {page.title}")[0] == (page.page_id, page.title)
    assert index.search("") == [] and index.search('"NEAR( AND OR *') == []
    assert fts_query('x" OR y') == '"x" OR "or" OR "y"'
    assert len(fts_query("word " * 10_000).split(" OR ")) == 32


def test_tools_read_pages_and_name_bad_ids():
    env = rlve.load_environment("wiki_search", num_examples=1)
    city = PAGES[0]
    assert env.tools["view_sections"](city.page_id) == (
        f"{city.page_id}#0: Overview\n{city.page_id}#1: History\n{city.page_id}#2: Economy"
    )
    assert env.tools["read_section"](f"{city.page_id}#2") == (
        f"{city.title} / Economy\nThe main export of {city.title} is {city.facts['export']}."
    )
    with pytest.raises(ValueError, match="no page 'p999'"):
        env.tools["view_sections"]("p999")
    with pytest.raises(ValueError, match="no section 'p000#9'"):
        env.tools["read_section"]("p000#9")


def test_a_two_page_question_solved_with_the_tools_earns_1_1():
    env = rlve.load_environment("wiki_search", num_examples=2, difficulties=[1])
    example = env.example(0)
    first, second = example.info["pages"]
    replies = [call("search_pages", query=BY_ID[first].title), call("view_sections", page_id=first)]
    replies += [call("read_section", section_id=f"{first}#{i}") for i in range(3)]
    replies += [call("read_section", section_id=f"{second}#{i}") for i in range(2)]
    replies += [f"<answer>{example.answer}</answer>"]
    t = play(env, replies)
    tool_texts = [m["content"] for m in t.completion if m["role"] == "tool"]
    assert tool_texts[0].splitlines()[0] == f"{first}: {BY_ID[first].title}"
    assert not any(text.startswith("Error") for text in tool_texts)
    assert t.reward == pytest.approx(1.1) and t.stop_reason == "no_tool_call"
    wrong = play(env, [call("read_section", section_id="p000#0"), "<answer>nowhere</answer>"])
    assert wrong.reward == pytest.approx(0.1)
    silent = play(env, ["I do not know."])
    assert silent.reward == 0.0


def test_bad_calls_get_tool_errors():
    env = rlve.load_environment("wiki_search", num_examples=1)
    t = play(env, [call("read_page", page_id="p000"), call("view_sections", page_id="../etc"),
                   call("search_pages", query="x" * 100_000), "<answer>?</answer>"])  # fmt: skip
    texts = [m["content"] for m in t.completion if m["role"] == "tool"]
    assert texts[0].startswith("Error: unknown tool 'read_page'")
    assert texts[1] == "Error: ValueError: no page '../etc'; search_pages gives page ids"
    assert texts[2] == "no pages found"
    assert t.metrics["tools/calls"] == 3.0 and t.metrics["tools/errors"] == 2.0


def test_make_example_serves_the_curriculum():
    env = rlve.load_environment("wiki_search", num_examples=1)
    assert is_adaptive(env)
    example = env.make_example(seed=5, difficulty=3)
    assert len(example.info["pages"]) == 4 and example.info["difficulty"] == 3
    assert env.make_example(seed=5, difficulty=3).prompt == example.prompt
    assert len(env.make_example(seed=5, difficulty=40).info["pages"]) == 6  # capped at 5


def test_a_user_corpus_with_markdown_sections_and_f1_reward(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    rows = [{"id": "kiwi", "title": "Kiwi", "content": "A bird.\n# Habitat\nForests of New "
             "Zealand.\n## Diet\nInsects and worms."}]  # fmt: skip
    corpus.write_text("\n".join(json.dumps(r) for r in rows))
    assert [s.title for s in pages_from_rows(corpus)[0].sections] == [
        "Introduction", "Habitat", "Diet"]  # fmt: skip
    assert split_sections("no headings")[0].text == "no headings"
    questions = [{"question": "Where do kiwis live?", "answer": "the forests of New Zealand"}]
    env = rlve.load_environment("wiki_search", corpus=str(corpus), questions=questions,
                                reward="f1")  # fmt: skip
    assert not is_adaptive(env)
    assert env.tools["read_section"]("kiwi#1") == "Kiwi / Habitat\nForests of New Zealand."
    t = play(env, ["<answer>New Zealand</answer>"])  # 2 of 2 words right, 2 of 4 found
    assert t.reward == pytest.approx(2 * 1.0 * 0.5 / 1.5 + 0.1)
    with pytest.raises(ValueError, match=r"corpus row 0 lacks \['content'\]"):
        pages_from_rows([{"id": 1, "title": "t"}])
    with pytest.raises(ValueError, match="a user corpus needs questions"):
        rlve.load_environment("wiki_search", corpus=str(corpus))
