"""An engine on `rlve.serve` servers: vLLM replicas on other nodes (or processes), over HTTP.

Generation goes through each server's OpenAI-compatible `/v1/completions` with the prompt as
token ids; the answer carries the sampled ids and their log-probs, so trajectories stay
token-exact. A request goes to the server with the fewest requests in flight. Weights reach every
server in one push: the trainer (this process) is rank 0 of a broadcast group joined by every
server's workers through `/collective_rpc`, or, for servers on this machine, a shared-memory file.
Every request carries the secret in this process's RLVE_SERVE_SECRET (rlve.inference.serve_guard).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from typing import Any

import httpx

from rlve.config import InferenceConfig
from rlve.inference.capped_http import send_capped
from rlve.inference.engine import Generation, GenerationRequest
from rlve.inference.serve_guard import SECRET_ENV, bearer_headers
from rlve.inference.version_gate import VersionGate
from rlve.sync.broadcast import WeightBroadcaster
from rlve.sync.push import connect_broadcaster, gather, push_weights
from rlve.sync.shared_memory import NamedTensors, SharedMemoryTransport

WHOLE_DISTRIBUTION = {"top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0,
                      "presence_penalty": 0.0, "frequency_penalty": 0.0}  # fmt: skip
"""sent with every request: vLLM's server fills a field left out from the model's
generation_config.json (Qwen3: top_k 20), and a truncated or penalised distribution gives
log-probs that are not the trainer's, biasing every importance ratio"""


class ServerError(RuntimeError):
    """A server did not answer, or answered with an error; the message names it."""


class RemoteVLLMEngine:
    """An rlve `Engine` on the servers at `urls` ("http://host:port"), all serving one model."""

    def __init__(self, urls: list[str], tokenizer: Any, settings: InferenceConfig):
        if not urls:
            raise ValueError("inference.servers lists no server")
        self.urls = [url.rstrip("/") for url in urls]
        self.tokenizer = tokenizer
        self.settings = settings
        self.weight_version = 0
        self.max_seq_len = settings.max_model_len
        self._gate = VersionGate(len(self.urls))
        self._files: SharedMemoryTransport | None = None
        self._broadcaster: WeightBroadcaster | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="servers", daemon=True)
        self._thread.start()
        self._client: httpx.AsyncClient = self._call(_new_client(settings.request_timeout_s))
        try:
            self._models = [self._call(self._wait_until_up(i)) for i in range(len(self.urls))]
            # one answer per worker: the servers' worker counts, and the dtype a push travels
            # in (half the bytes from a float32 trainer to bf16 servers)
            per_server = [self._call(self._rpc(i, "rlve_model_dtype"))
                          for i in range(len(self.urls))]  # fmt: skip
            self._workers = [len(workers) for workers in per_server]
            self.served_dtype = served_dtype(per_server)
            if settings.weight_transport == "shared_memory":
                self._files = SharedMemoryTransport()
            else:
                self._broadcaster = connect_broadcaster(
                    settings.weight_transport, self._workers, self._on_replica,
                    settings.request_timeout_s, settings.weight_sync_host,
                )  # fmt: skip
        except BaseException:
            self.shutdown()
            raise

    # ---- plumbing -----------------------------------------------------------------------------

    def _submit(self, coroutine) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    def _call(self, coroutine, timeout: float | None = None):
        return self._submit(coroutine).result(timeout or self.settings.request_timeout_s)

    async def _post(self, replica: int, path: str, body: dict) -> Any:
        url = self.urls[replica] + path
        try:
            response = await send_capped(self._client, "POST", url, json=body)
        except httpx.HTTPError as exc:
            raise ServerError(f"server {replica} ({url}) did not answer: {exc!r}") from exc
        if response.status_code != 200:
            raise ServerError(f"server {replica} ({url}) answered {response.status_code}: "
                              f"{response.text[:500]}")  # fmt: skip
        return response.json() if response.content else None

    async def _wait_until_up(self, replica: int) -> str:
        """The server's model name, once it answers (it may still be starting)."""
        deadline = time.monotonic() + self.settings.start_timeout_s
        while True:
            try:
                response = await send_capped(self._client, "GET", self.urls[replica] + "/v1/models")
                if response.status_code == 200:
                    return response.json()["data"][0]["id"]
                if response.status_code == 401:
                    raise ServerError(
                        f"server {replica} ({self.urls[replica]}) refused this trainer (401): "
                        f"set {SECRET_ENV} to the secret the server was started with"
                    )
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise ServerError(
                    f"server {replica} ({self.urls[replica]}) is not up after "
                    f"{self.settings.start_timeout_s:.0f} s (start_timeout_s)"
                )
            await asyncio.sleep(1.0)

    async def _rpc(self, replica: int, method: str, *args) -> list:
        answer = await self._post(
            replica, "/collective_rpc", {"method": method, "args": list(args)}
        )
        return answer["results"]

    def _on_replica(self, replica: int, method: str, *args) -> concurrent.futures.Future:
        return self._submit(self._rpc(replica, method, *args))

    def _everywhere(self, method: str, *args) -> concurrent.futures.Future:
        async def every() -> list:
            calls = [self._rpc(i, method, *args) for i in range(len(self.urls))]
            return await asyncio.gather(*calls)

        return self._submit(every())

    # ---- generation ---------------------------------------------------------------------------

    @property
    def requests_per_replica(self) -> list[int]:
        """requests sent to each server so far"""
        return self._gate.requests_per_replica

    async def generate(self, request: GenerationRequest) -> Generation:
        if request.prompt_ids is None:
            raise ValueError(
                "RemoteVLLMEngine generates from token ids: the request has no prompt_ids"
            )
        return await asyncio.wrap_future(self._submit(self._generate(request)))

    async def _generate(self, request: GenerationRequest) -> Generation:
        s = request.sampling
        body = {"prompt": list(request.prompt_ids), "max_tokens": s.max_tokens,
                "temperature": s.temperature, "top_p": s.top_p, "seed": s.seed,
                "stop": list(s.stop) or None, "logprobs": 0, "return_token_ids": True,
                "skip_special_tokens": True, **WHOLE_DISTRIBUTION}  # fmt: skip
        async with self._gate.request() as index:  # one version for the whole turn
            version = self.weight_version
            body = {"model": self._models[index], **body}
            answer = await self._post(index, "/v1/completions", body)
        choice = answer["choices"][0]
        ids = list(choice["token_ids"])
        logprobs = list(choice["logprobs"]["token_logprobs"])
        finish = "length" if choice["finish_reason"] == "length" else "stop"
        return Generation(choice["text"], ids, logprobs, finish, weight_version=version)

    def prompt_logprobs(self, token_ids: list[int], replica: int = 0) -> list[float]:
        """Server `replica`'s log-prob of each token given the ones before (temperature 1)."""
        return self._call(self._prompt_logprobs(token_ids, replica))

    def many_prompt_logprobs(self, sequences: list[list[int]]) -> list[list[float]]:
        """`prompt_logprobs` of each sequence, all in flight at once, spread over the servers."""

        async def every() -> list[list[float]]:
            return await asyncio.gather(*(self._prompt_logprobs(ids, i % len(self.urls))
                                          for i, ids in enumerate(sequences)))  # fmt: skip

        return self._call(every())

    async def _prompt_logprobs(self, token_ids: list[int], replica: int) -> list[float]:
        body = {"model": self._models[replica], "prompt": list(token_ids), "max_tokens": 1,
                "temperature": 1.0, "top_p": 1.0, "prompt_logprobs": 0,
                **WHOLE_DISTRIBUTION}  # fmt: skip
        answer = await self._post(replica, "/v1/completions", body)
        steps = answer["choices"][0]["prompt_logprobs"][1:]
        return [
            step[str(token)]["logprob"] for step, token in zip(steps, token_ids[1:], strict=True)
        ]

    # ---- weights and lifecycle ----------------------------------------------------------------

    def push_weights(self, named_tensors: NamedTensors, version: int) -> float:
        """Load new weights into every server once this engine's requests in flight have
        finished (new ones wait: rlve.inference.version_gate); returns the seconds it took."""
        start = time.perf_counter()
        timeout = self.settings.request_timeout_s
        self._call(self._gate.close(), timeout)
        try:
            push_weights(named_tensors, version, self._everywhere, timeout, files=self._files,
                         broadcaster=self._broadcaster, engine_dtype=self.served_dtype)  # fmt: skip
            resets = [self._post(i, "/reset_prefix_cache", {}) for i in range(len(self.urls))]
            self._call(gather(*resets))
            self.weight_version = version
        finally:
            self._loop.call_soon_threadsafe(self._gate.reopen)
        return time.perf_counter() - start

    def shutdown(self) -> None:
        """Leave the weight group and close the connections; the servers keep running."""
        if self._broadcaster is not None:
            self._broadcaster.close()
            self._broadcaster = None
        if self._files is not None:
            self._files.close()
            self._files = None
        if self._loop.is_running():
            self._call(self._client.aclose(), 10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)

    def __enter__(self) -> RemoteVLLMEngine:
        return self

    def __exit__(self, *exc_info) -> None:
        self.shutdown()


def served_dtype(per_server: list[list[str]]) -> str | None:
    """The one dtype every worker of every server reports, or None when they differ (then each
    tensor travels in the trainer's dtype and every server rounds it to its own)."""
    dtypes = {dtype for workers in per_server for dtype in workers}
    return dtypes.pop() if len(dtypes) == 1 else None


async def _new_client(timeout_s: float) -> httpx.AsyncClient:
    """Made on the engine's loop, where it is used."""
    return httpx.AsyncClient(timeout=timeout_s, limits=httpx.Limits(max_connections=1024),
                             headers=bearer_headers())  # fmt: skip
