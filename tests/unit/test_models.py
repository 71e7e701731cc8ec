"""The embedded default: tiny tokenizer, tiny Qwen2 model, the on-disk cache, name resolution."""

import os
import random
import re

import pytest
import torch
from safetensors import safe_open
from transformers import AutoTokenizer

import rlve.models.tiny as tiny_module
from rlve.envs.tictactoe.game import board_from_string, render_board
from rlve.models import (
    TINY_MARKER_FILE,
    TinyModelConfig,
    build_tiny_model,
    load_causal_lm,
    load_tokenizer,
    model_cache_dir,
    resolve_model_path,
    tiny_model_dirname,
    tiny_model_path,
)
from rlve.models.loading import built_in_name
from rlve.models.tiny_tokenizer import TINY_VOCAB_SIZE

EMPTY_BOARD = render_board(board_from_string(" " * 9))
BOARD = render_board(board_from_string("XO  X   O"))
ROUND_TRIP_TEXTS = {
    "ascii": "Hello, world! 1 + 1 = 2\n\ttabs  and   spaces ",
    "unicode": "Grüße, naïve café, Ελληνικά, 日本語のテキスト, עברית",
    "not_nfc": "Cafe\u0301 and A\u030a",  # combining accents: NFC would compose them
    "emoji": "👍🏽 family 👨‍👩‍👧 flags 🇫🇷🇯🇵 ✨",
    "board": BOARD,
    "chat": "<|im_start|>user\nYour turn.<|im_end|>\n<|im_start|>assistant\n<move>4</move>",
    "empty": "",
}


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    """The default tiny model, built once into a private cache through tiny_model_path."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RLVE_CACHE", str(tmp_path_factory.mktemp("rlve_cache")))
        yield tiny_model_path()


@pytest.fixture(scope="module")
def tokenizer(tiny_dir):
    return load_tokenizer(tiny_dir)


# --- tokenizer -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(ROUND_TRIP_TEXTS))
def test_tokenizer_round_trips_text_exactly(tokenizer, name):
    text = ROUND_TRIP_TEXTS[name]
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert tokenizer.decode(ids, skip_special_tokens=False) == text


def test_tokenizer_round_trips_random_bytes(tokenizer):
    rng = random.Random(0)
    text = bytes(rng.randrange(256) for _ in range(10_000)).decode("latin-1")
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert tokenizer.decode(ids) == text


def test_tokenizer_vocabulary_and_special_tokens(tokenizer):
    assert len(tokenizer) == TINY_VOCAB_SIZE == 2048
    assert tokenizer.convert_tokens_to_ids(["<|endoftext|>", "<|im_start|>", "<|im_end|>"]) == [
        0,
        1,
        2,
    ]
    assert (tokenizer.eos_token, tokenizer.eos_token_id) == ("<|im_end|>", 2)
    assert (tokenizer.pad_token, tokenizer.pad_token_id) == ("<|endoftext|>", 0)
    assert tokenizer.encode("Hi", add_special_tokens=True) == tokenizer.encode(
        "Hi", add_special_tokens=False
    )  # no BOS/EOS added behind the caller's back


def test_board_token_count_is_the_pre_tokenizer_minimum(tokenizer):
    # The split isolates digits, so a free cell is " " + digit (2 pieces), a mark " X" (1), each
    # " |" (1), and between rows "\n" + "---------\n" (2). The corpus is full of boards, so BPE
    # merges every piece into one token and the count is exactly the number of pieces:
    # empty board: 3 rows * (3 cells * 2 + 2 bars) + 2 gaps * 2 = 28;
    # with 4 marks, each saves one: 28 - 4 = 24.
    assert len(tokenizer.encode(EMPTY_BOARD)) == 28
    assert len(tokenizer.encode(BOARD)) == 24


def test_auto_tokenizer_agrees_on_nfc_text_and_on_decoding(tiny_dir, tokenizer):
    # transformers loads model_type "qwen2" as Qwen2Tokenizer (so does vLLM): same ids on NFC
    # text thanks to the shared pre-tokenizer split; it differs only by normalising to NFC.
    auto = AutoTokenizer.from_pretrained(tiny_dir)
    for name, text in ROUND_TRIP_TEXTS.items():
        if name != "not_nfc":
            assert auto.encode(text) == tokenizer.encode(text), name
    ids = random.Random(1).choices(range(3, len(tokenizer)), k=500)
    assert auto.decode(ids) == tokenizer.decode(ids)
    assert auto.decode(auto.encode("Cafe\u0301")) == "Caf\u00e9"  # why load_tokenizer avoids it


# --- chat template ---------------------------------------------------------------------------


def test_chat_template_renders_chatml(tokenizer):
    messages = [
        {"role": "system", "content": "You play X."},
        {"role": "user", "content": "Your turn."},
    ]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == (
        "<|im_start|>system\nYou play X.<|im_end|>\n"
        "<|im_start|>user\nYour turn.<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_chat_template_only_appends_when_messages_are_appended(tokenizer):
    short = [{"role": "user", "content": "2 + 2?"}, {"role": "assistant", "content": "4"}]
    longer = short + [{"role": "user", "content": "And 3 + 3?"}]
    short_text = tokenizer.apply_chat_template(short, tokenize=False)
    longer_text = tokenizer.apply_chat_template(longer, tokenize=False)
    assert longer_text == short_text + "<|im_start|>user\nAnd 3 + 3?<|im_end|>\n"


def test_chat_template_lists_tools_and_renders_tool_turns(tokenizer):
    tool = {"type": "function", "function": {"name": "calculate", "parameters": {}}}
    messages = [
        {"role": "system", "content": "Be exact."},
        {"role": "user", "content": "3*4?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "calculate", "arguments": {"expression": "3*4"}}}],
        },
        {"role": "tool", "content": "12"},
    ]
    text = tokenizer.apply_chat_template(messages, tools=[tool], tokenize=False)
    system, user, assistant, tool_turn = text.split("<|im_end|>\n")[:4]
    assert system.startswith("<|im_start|>system\nBe exact.\n\n")
    assert '<tools>\n{"type": "function", "function": {"name": "calculate", ' in system
    assert "<tool_call>{" in system  # the format is explained
    assert user == "<|im_start|>user\n3*4?"
    assert assistant == (
        '<|im_start|>assistant\n<tool_call>{"name": "calculate", '
        '"arguments": {"expression": "3*4"}}</tool_call>'
    )
    assert tool_turn == "<|im_start|>tool\n12"


# --- model -----------------------------------------------------------------------------------


def test_model_files_and_config(tiny_dir):
    for name in ("config.json", "model.safetensors", "generation_config.json", "tokenizer.json"):
        assert os.path.isfile(os.path.join(tiny_dir, name)), name
    model = load_causal_lm(tiny_dir)
    config = model.config
    assert config.architectures == ["Qwen2ForCausalLM"]
    assert (config.hidden_size, config.num_hidden_layers, config.intermediate_size) == (128, 4, 512)
    assert (config.num_attention_heads, config.num_key_value_heads) == (4, 2)
    assert config.hidden_size // config.num_attention_heads == 32  # a vLLM CPU head size
    assert (config.vocab_size, config.eos_token_id, config.pad_token_id) == (2048, 2, 0)
    assert model.dtype == torch.float32


def test_model_ties_embeddings_and_saves_them_once(tiny_dir):
    model = load_causal_lm(tiny_dir)
    assert model.lm_head.weight is model.model.embed_tokens.weight
    with safe_open(os.path.join(tiny_dir, "model.safetensors"), "pt") as weights:
        names = set(weights.keys())
    assert "model.embed_tokens.weight" in names and "lm_head.weight" not in names
    # 4 layers * (2 norms + q, k, v weights and biases + o + gate, up, down) + embed + final norm
    assert len(names) == 4 * 12 + 2


def test_model_init_is_the_documented_one(tiny_dir):
    model = load_causal_lm(tiny_dir)
    params = dict(model.named_parameters())
    assert torch.equal(params["model.norm.weight"], torch.ones(128))
    assert torch.equal(params["model.layers.0.self_attn.q_proj.bias"], torch.zeros(128))
    embed = params["model.embed_tokens.weight"]  # 2048 * 128 draws of N(0, 0.02)
    assert embed.mean().item() == pytest.approx(0.0, abs=2e-4)
    assert embed.std().item() == pytest.approx(0.02, rel=0.01)


def test_forward_gives_logits_per_position(tiny_dir, tokenizer):
    model = load_causal_lm(tiny_dir)
    ids = torch.tensor([tokenizer.encode(BOARD)])
    with torch.no_grad():
        logits = model(ids).logits
    assert logits.shape == (1, 24, 2048)
    assert torch.isfinite(logits).all()


def test_build_is_deterministic(tiny_dir, tmp_path):
    again = build_tiny_model(str(tmp_path / "again"))
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        with (
            open(os.path.join(tiny_dir, name), "rb") as a,
            open(os.path.join(again, name), "rb") as b,
        ):
            assert a.read() == b.read(), name


def test_other_seed_gives_other_weights(tiny_dir, tmp_path):
    other = build_tiny_model(str(tmp_path / "seed1"), TinyModelConfig(seed=1))
    first = load_causal_lm(tiny_dir).model.embed_tokens.weight
    second = load_causal_lm(other).model.embed_tokens.weight
    assert not torch.equal(first, second)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"num_heads": 3}, "hidden_size"),
        ({"num_kv_heads": 3}, "num_kv_heads"),
        ({"hidden_size": 64}, "hidden_size / num_heads = 16"),
        ({"num_layers": 0}, "num_layers"),
    ],
)
def test_config_rejects_bad_shapes_naming_the_field(change, field):
    with pytest.raises(ValueError, match=re.escape(field)):
        TinyModelConfig(**change)


# --- cache and names -------------------------------------------------------------------------


def _fake_build(calls):
    def build(path, config=TinyModelConfig()):
        calls.append(path)
        with open(os.path.join(path, "model.safetensors"), "wb") as weights:
            weights.write(b"built")
        return path

    return build


def test_tiny_model_path_builds_once(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(tiny_module, "build_tiny_model", _fake_build(calls))
    first = tiny_model_path(cache_dir=str(tmp_path))
    second = tiny_model_path(cache_dir=str(tmp_path))
    assert first == second == os.path.join(tmp_path, tiny_model_dirname(TinyModelConfig()))
    assert len(calls) == 1
    assert os.listdir(tmp_path) == [os.path.basename(first)]  # no temporary folder left
    assert re.fullmatch(r"tiny-[0-9a-f]{12}", os.path.basename(first))


def test_tiny_model_path_survives_losing_the_race(tmp_path, monkeypatch):
    # Another process finishes first, while we are still building: our rename must fail
    # quietly, their model must stay, and our temporary folder must go.
    final = os.path.join(tmp_path, tiny_model_dirname(TinyModelConfig()))

    def build_and_lose(path, config=TinyModelConfig()):
        os.makedirs(final)
        with open(os.path.join(final, "model.safetensors"), "wb") as weights:
            weights.write(b"theirs")
        with open(os.path.join(path, "model.safetensors"), "wb") as weights:
            weights.write(b"ours")
        return path

    monkeypatch.setattr(tiny_module, "build_tiny_model", build_and_lose)
    assert tiny_model_path(cache_dir=str(tmp_path)) == final
    with open(os.path.join(final, "model.safetensors"), "rb") as weights:
        assert weights.read() == b"theirs"
    assert os.listdir(tmp_path) == [os.path.basename(final)]


def test_cache_key_changes_with_the_config():
    assert tiny_model_dirname(TinyModelConfig()) == tiny_model_dirname(TinyModelConfig(seed=0))
    assert tiny_model_dirname(TinyModelConfig()) != tiny_model_dirname(TinyModelConfig(seed=1))


def test_cache_dir_follows_rlve_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RLVE_CACHE", str(tmp_path))
    assert model_cache_dir() == os.path.join(tmp_path, "models")
    monkeypatch.delenv("RLVE_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert model_cache_dir() == os.path.join(tmp_path, ".cache", "rlve", "models")


def test_resolve_model_path(tiny_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("RLVE_CACHE", os.path.dirname(os.path.dirname(tiny_dir)))
    assert resolve_model_path("tiny") == tiny_dir
    assert resolve_model_path(str(tmp_path)) == str(tmp_path)
    assert os.path.isfile(os.path.join(tiny_dir, TINY_MARKER_FILE))


@pytest.mark.parametrize("spelling", ["smollm2-135m", "smollm2_135m", "SmolLM2-135M"])
def test_a_built_in_model_answers_to_the_hydra_group_spelling_too(spelling):
    assert built_in_name(spelling) == "smollm2-135m"
    assert built_in_name("tiny") == "tiny" and built_in_name("tinyy") is None


def test_a_name_that_is_nothing_known_fails_at_once_listing_the_built_in_models(monkeypatch):
    """Not a directory, not built in, not in the hub cache, and (offline, as here and on CI) not
    on the hub: the error says so instead of transformers retrying the hub."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(FileNotFoundError) as error:
        load_tokenizer("smolllm2_135m")
    message = str(error.value)
    assert "'smolllm2_135m' is not a directory, not a built-in model" in message
    assert "'tiny', 'smollm2-135m'" in message


def test_load_tokenizer_by_the_name_tiny(tiny_dir, monkeypatch):
    monkeypatch.setenv("RLVE_CACHE", os.path.dirname(os.path.dirname(tiny_dir)))
    assert load_tokenizer("tiny").encode(BOARD) == load_tokenizer(tiny_dir).encode(BOARD)


@pytest.mark.parametrize("load", [load_tokenizer, load_causal_lm])
def test_missing_local_directory_is_named_in_the_error(load, tmp_path):
    missing = str(tmp_path / "no_such_model")
    with pytest.raises(FileNotFoundError) as error:
        load(missing)
    message = str(error.value)
    assert missing in message and "does not exist" in message and "'tiny'" in message


def test_load_causal_lm_rejects_unknown_dtype(tiny_dir):
    with pytest.raises(ValueError, match="dtype"):
        load_causal_lm(tiny_dir, dtype="float33")


# --- vLLM ------------------------------------------------------------------------------------


@pytest.mark.vllm
def test_vllm_loads_the_tiny_model_and_agrees_with_transformers(tiny_dir, tokenizer, monkeypatch):
    # about 40 s of engine start on two cores; the log-prob agreement (1e-6 measured) is what
    # weight sync later relies on, and vLLM's own tokenizer must decode the same text
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    vllm = pytest.importorskip("vllm")
    llm = vllm.LLM(model=tiny_dir, dtype="float32", max_model_len=256, seed=0)
    try:
        prompt = tokenizer.encode(BOARD + "\nYour turn.")
        params = vllm.SamplingParams(max_tokens=12, temperature=1.0, logprobs=0, seed=0)
        output = llm.generate([{"prompt_token_ids": prompt}], params)[0].outputs[0]
    finally:
        del llm
    sampled = list(output.token_ids)
    assert output.text == tokenizer.decode(sampled)
    vllm_logp = torch.tensor(
        [step[t].logprob for step, t in zip(output.logprobs, sampled, strict=True)]
    )
    with torch.no_grad():
        logits = load_causal_lm(tiny_dir)(torch.tensor([prompt + sampled])).logits[0]
    positions = torch.arange(len(prompt) - 1, len(prompt) - 1 + len(sampled))
    hf_logp = torch.log_softmax(logits, dim=-1)[positions, torch.tensor(sampled)]
    assert torch.allclose(vllm_logp, hf_logp, atol=1e-4)
