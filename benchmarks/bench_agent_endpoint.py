"""The agent endpoint's cost: a model call through it against the same call made on the engine.

    .venv/bin/python benchmarks/bench_agent_endpoint.py                # scripted engine
    .venv/bin/python benchmarks/bench_agent_endpoint.py --engine vllm  # the tiny model in vLLM

`sessions` conversations at once, each `calls` calls long (every call sends the whole
conversation, as agents do). Direct: the episode's own path, the conversation rendered to ids by
the chat template and `engine.generate` awaited. Through the endpoint, two clients: plain JSON
posts (`json`: the endpoint's own cost) and the openai SDK (`openai`: what an agent pays, the
SDK's own work included), each on the HTTP client agent environments share. Client and endpoint
share this process and its cores, as a Python agent does in a run. The scripted engine answers
at once, so its rows are the endpoint's cost alone; vLLM's rows show it beside a model's. Prints
per-call latency (mean over calls), calls/s and sampled tokens/s, and what each client adds to
a direct call.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import openai

from rlve.envs.agent import shared_http_client
from rlve.inference.engine import GenerationRequest, SamplingConfig
from rlve.inference.scripted import ScriptedEngine
from rlve.models import load_tokenizer, tiny_model_path
from rlve.rollout.agent_episode import running_gateway
from rlve.rollout.chat_tokens import ChatTokens, end_of_turn_id

SAMPLING = SamplingConfig(temperature=1.0, max_tokens=16)
QUESTION = [{"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": "Say something about the number 7."}]  # fmt: skip


async def direct(engine, sessions: int, calls: int) -> tuple[list[float], int]:
    chat = ChatTokens(engine.tokenizer)

    async def one(session: int) -> tuple[list[float], int]:
        messages, latencies, tokens = list(QUESTION), [], 0
        for call in range(calls):
            start = time.perf_counter()
            ids = chat.prompt_ids(messages)
            sampling = SAMPLING.with_overrides(seed=session * 100 + call)
            request = GenerationRequest(messages, sampling, prompt_ids=ids)
            generation = await engine.generate(request)
            latencies.append(time.perf_counter() - start)
            tokens += len(generation.token_ids)
            messages += [{"role": "assistant", "content": generation.text},
                         {"role": "user", "content": "Go on."}]  # fmt: skip
        return latencies, tokens

    return _merged(await asyncio.gather(*(one(s) for s in range(sessions))))


async def through_endpoint(
    engine, sessions: int, calls: int, sdk: bool = True
) -> tuple[list[float], int]:
    """Each session's calls through the endpoint: with the openai SDK, or (`sdk=False`) as plain
    JSON posts, which leaves the endpoint's own cost."""
    gateway = await running_gateway()
    http = shared_http_client()

    async def one(session_index: int) -> tuple[list[float], int]:
        session = gateway.open(engine, SAMPLING, seed=session_index)
        endpoint = gateway.endpoint(session)
        client = openai.AsyncOpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key,
                                    max_retries=0, http_client=http)  # fmt: skip
        headers = {"Authorization": f"Bearer {endpoint.api_key}"}
        messages, latencies, tokens = list(QUESTION), [], 0
        try:
            for _ in range(calls):
                start = time.perf_counter()
                if sdk:
                    reply = await client.chat.completions.create(model="m", messages=messages)
                    text, used = reply.choices[0].message.content, reply.usage.completion_tokens
                else:
                    body = {"model": "m", "messages": messages}
                    posted = await http.post(f"{endpoint.base_url}/chat/completions", json=body,
                                             headers=headers)  # fmt: skip
                    reply = posted.json()
                    text = reply["choices"][0]["message"]["content"]
                    used = reply["usage"]["completion_tokens"]
                latencies.append(time.perf_counter() - start)
                tokens += used
                messages += [{"role": "assistant", "content": text},
                             {"role": "user", "content": "Go on."}]  # fmt: skip
        finally:
            gateway.close(session)
        return latencies, tokens

    return _merged(await asyncio.gather(*(one(s) for s in range(sessions))))


async def through_endpoint_json(engine, sessions: int, calls: int) -> tuple[list[float], int]:
    return await through_endpoint(engine, sessions, calls, sdk=False)


def _merged(results) -> tuple[list[float], int]:
    return [lat for lats, _ in results for lat in lats], sum(tokens for _, tokens in results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=["scripted", "vllm"], default="scripted")
    parser.add_argument("--sessions", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--calls", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    tokenizer = load_tokenizer(tiny_model_path())
    if args.engine == "vllm":
        from rlve.config import InferenceConfig
        from rlve.inference.vllm_engine import VLLMEngine

        engine = VLLMEngine(tiny_model_path(), tokenizer, InferenceConfig(max_model_len=1024))
    else:
        engine = ScriptedEngine(lambda messages: "Seven is a prime number, odd and small.",
                                tokenizer, end_of_turn_id(tokenizer))  # fmt: skip

    async def run() -> None:
        await through_endpoint(engine, 1, 1)  # warm: the server, the template, the client
        print(f"engine {args.engine}, {args.calls} calls a session, {SAMPLING.max_tokens} tokens "
              f"at most a call, median of {args.repeats} interleaved repeats")  # fmt: skip
        print(f"{'sessions':>8} {'client':>9} {'ms/call':>8} {'calls/s':>8} {'tokens/s':>9}")
        paths = {"direct": direct, "json": through_endpoint_json, "openai": through_endpoint}
        for sessions in args.sessions:
            runs = {name: [] for name in paths}
            for _ in range(args.repeats):  # each path in turn, so a slow spell hits all three
                for name, path in paths.items():
                    start = time.perf_counter()
                    latencies, tokens = await path(engine, sessions, args.calls)
                    wall = time.perf_counter() - start
                    runs[name].append((sum(latencies) / len(latencies),
                                       len(latencies) / wall, tokens / wall))  # fmt: skip
            rows = {name: [statistics.median(column) for column in zip(*measured, strict=True)]
                    for name, measured in runs.items()}  # fmt: skip
            for name, (latency, calls_per_s, tokens_per_s) in rows.items():
                print(f"{sessions:>8} {name:>9} {latency * 1e3:>8.2f} {calls_per_s:>8.1f} "
                      f"{tokens_per_s:>9.1f}")  # fmt: skip
            for name in ("json", "openai"):
                added, direct_latency = rows[name][0] - rows["direct"][0], rows["direct"][0]
                print(f"{sessions:>8} {name:>9} adds {added * 1e3:.2f} ms a call "
                      f"({rows[name][0] / direct_latency:.2f}x the direct latency)")  # fmt: skip

    asyncio.run(run())
    if args.engine == "vllm":
        engine.shutdown()


if __name__ == "__main__":
    main()
