"""A procedurally generated encyclopedia and multi-hop questions about it.

Four kinds of pages (cities, people, rivers, events), each with sections of facts, all drawn
from one seed. Entities point at each other through six one-valued relations (a city's founder
and its river, a person's birthplace, the person who first mapped a river, where an event took
place and who led it), so a question can chain them: "What is the main export of the
birthplace of the founder of Velmora?" needs three pages. A question of difficulty d needs
d + 1 pages; the answer is a fact of the last one.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

SYLLABLES = ("ar", "bel", "cor", "dan", "el", "fen", "gar", "hal", "is", "jor", "kel", "lin",
             "mor", "nal", "or", "pel", "quin", "ros", "sel", "tam", "ul", "ven", "wyn",
             "zor")  # fmt: skip
GOODS = ("salt", "copper", "wool", "glass", "timber", "honey", "silk", "tin", "amber", "olives")
TRADES = ("explorer", "architect", "merchant", "poet", "engineer", "cartographer", "judge")
SEAS = ("the Grey Sea", "the Lake of Orun", "the Southern Gulf", "the Pale Lake")
EVENTS = ("Siege", "Treaty", "Great Fair", "Flood", "Council", "Festival")

MAX_DIFFICULTY = 5
"""questions chain at most 6 pages"""


@dataclass
class Section:
    title: str
    text: str


@dataclass
class Page:
    """One encyclopedia page: `page_id` is what the tools name it by."""

    page_id: str
    title: str
    sections: list[Section]
    kind: str = ""
    facts: dict[str, str] = field(default_factory=dict)
    """attribute -> value (the answers questions ask for)"""
    links: dict[str, str] = field(default_factory=dict)
    """relation -> page_id of the entity it names"""


# relation: (from kind, to kind, phrase around the description of the "from" entity)
RELATIONS = {
    "founder": ("city", "person", "the founder of {}"),
    "river": ("city", "river", "the river that runs through {}"),
    "birthplace": ("person", "city", "the birthplace of {}"),
    "mapper": ("river", "person", "the person who first mapped {}"),
    "place": ("event", "city", "the city where {} took place"),
    "leader": ("event", "person", "the leader of {}"),
}
# attribute: (kind, phrase of the question)
ATTRIBUTES = {
    "export": ("city", "What is the main export of {}?"),
    "founded": ("city", "In which year was {} founded?"),
    "born": ("person", "In which year was {} born?"),
    "trade": ("person", "What was the profession of {}?"),
    "length": ("river", "How long, in kilometres, is {}?"),
    "mouth": ("river", "Into which body of water does {} flow?"),
    "year": ("event", "In which year did {} take place?"),
    "attendance": ("event", "How many people attended {}?"),
}


def _names(rng: random.Random, count: int, taken: set[str]) -> list[str]:
    names = []
    while len(names) < count:
        name = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()
        if name not in taken:
            taken.add(name)
            names.append(name)
    return names


def generate_pages(seed: int = 0, per_kind: int = 24) -> list[Page]:
    """`per_kind` cities, people, rivers and events with their facts, links and page text."""
    if per_kind < 2:
        raise ValueError(f"per_kind must be at least 2, got {per_kind}")
    rng = random.Random(seed)
    taken: set[str] = set()
    cities, rivers = _names(rng, per_kind, taken), _names(rng, per_kind, taken)
    people = [f"{a} {b}" for a, b in zip(_names(rng, per_kind, taken),
                                         _names(rng, per_kind, taken), strict=True)]  # fmt: skip
    events = [f"{rng.choice(EVENTS)} of {name}" for name in _names(rng, per_kind, taken)]
    ids = {name: f"p{i:03d}" for i, name in enumerate(cities + people + rivers + events)}
    pages = []
    for name in cities:
        founder, river = rng.choice(people), rng.choice(rivers)
        facts = {"export": rng.choice(GOODS), "founded": str(rng.randint(900, 1890)),
                 "population": str(rng.randint(2, 900) * 1000)}  # fmt: skip
        sections = [
            Section("Overview", f"{name} is a city on the river {river}, with a population of "
                                f"about {facts['population']}."),
            Section("History", f"{name} was founded in {facts['founded']} by {founder}."),
            Section("Economy", f"The main export of {name} is {facts['export']}."),
        ]  # fmt: skip
        pages.append(Page(ids[name], name, sections, "city", facts,
                          {"founder": ids[founder], "river": ids[river]}))  # fmt: skip
    for name in people:
        birthplace = rng.choice(cities)
        facts = {"born": str(rng.randint(900, 1890)), "trade": rng.choice(TRADES)}
        sections = [
            Section("Overview", f"{name} was a {facts['trade']}."),
            Section("Early life", f"{name} was born in {birthplace} in {facts['born']}."),
        ]
        pages.append(Page(ids[name], name, sections, "person", facts,
                          {"birthplace": ids[birthplace]}))  # fmt: skip
    for name in rivers:
        mapper = rng.choice(people)
        facts = {"length": str(rng.randint(40, 2400)), "mouth": rng.choice(SEAS)}
        sections = [
            Section("Overview", f"The {name} is a river {facts['length']} km long."),
            Section("Course", f"The {name} flows into {facts['mouth']}."),
            Section("Exploration", f"The {name} was first mapped by {mapper}."),
        ]
        pages.append(Page(ids[name], name, sections, "river", facts, {"mapper": ids[mapper]}))
    for name in events:
        place, leader = rng.choice(cities), rng.choice(people)
        facts = {"year": str(rng.randint(900, 1890)), "attendance": str(rng.randint(2, 90) * 100)}
        sections = [
            Section("Overview", f"The {name} took place in {place} in {facts['year']}."),
            Section("People", f"The {name} was led by {leader}; about {facts['attendance']} "
                              "people attended."),
        ]  # fmt: skip
        pages.append(Page(ids[name], name, sections, "event", facts,
                          {"place": ids[place], "leader": ids[leader]}))  # fmt: skip
    return pages


@dataclass(frozen=True)
class Question:
    question: str
    answer: str
    pages: tuple[str, ...]
    """the page ids the answer needs, in reading order"""


def _describe(page: Page) -> str:
    return {"river": f"the river {page.title}", "event": f"the {page.title}"}.get(
        page.kind, page.title
    )


def make_question(pages: list[Page], seed: int, difficulty: int) -> Question:
    """A question whose answer needs `difficulty + 1` pages: a named start page, `difficulty`
    relations followed from it, then a fact of the last page."""
    if not 0 <= difficulty <= MAX_DIFFICULTY:
        raise ValueError(f"difficulty must be in 0..{MAX_DIFFICULTY}, got {difficulty}")
    rng = random.Random(seed)
    by_id = {p.page_id: p for p in pages}
    page = rng.choice(pages)
    description, path = _describe(page), [page.page_id]
    for _ in range(difficulty):
        relation = rng.choice(sorted(page.links))
        description = RELATIONS[relation][2].format(description)
        page = by_id[page.links[relation]]
        path.append(page.page_id)
    attribute = rng.choice([a for a, (kind, _) in ATTRIBUTES.items() if kind == page.kind])
    text = ATTRIBUTES[attribute][1].format(description)
    return Question(text[0].upper() + text[1:], page.facts[attribute], tuple(path))
