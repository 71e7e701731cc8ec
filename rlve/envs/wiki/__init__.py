"""wiki-search offline: a generated encyclopedia (corpus.py), a SQLite FTS5 index (index.py) and
the tool environment over them (env.py)."""

from rlve.envs.wiki.env import GeneratedWikiEnv, WikiSearchEnv, load_environment
from rlve.envs.wiki.index import WikiIndex

__all__ = ["GeneratedWikiEnv", "WikiIndex", "WikiSearchEnv", "load_environment"]
