"""Python REPL environments for recursive language models: the worker process and its sandbox
(worker.py), the parent's side (process.py), the environment (env.py) and a long-context task
(ledger.py)."""

from rlve.envs.repl.env import PythonREPLEnv
from rlve.envs.repl.process import CellResult, REPLLimits, REPLWorker

__all__ = ["CellResult", "PythonREPLEnv", "REPLLimits", "REPLWorker"]
