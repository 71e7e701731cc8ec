"""Soak: a few hundred steps of the tiny model through vLLM on the CPU, recording the memory of
every process of the run and the step time after every step, to find anything that grows.

    python benchmarks/bench_soak.py [--steps 300] [--out runs/soak] [--groups 8] [--group-size 4]
    python benchmarks/bench_soak.py --report-only --out runs/soak   # re-read a finished/crashed run

The run is `train()` of `+experiment=tictactoe_course` in this process (real vLLM, LoRA, one step
off-policy, a checkpoint every `--save-every` steps). After every step the `on_step` callback
samples, through psutil (/proc), the main process and all its descendants (vLLM's EngineCore,
multiprocessing's resource tracker, anything else): RSS, USS (private) and PSS; and of the main
process its threads, open file descriptors and the blocks Python's allocator holds. Every
`--census-every` steps it also counts the gc-tracked objects, live torch tensors and objects per
type. Each sample is one line of soak.jsonl, fsynced at once (a crash loses nothing); at the end
steps.csv, processes.csv (written atomically), soak.png and the summary tables are made from it.
Growth is the least-squares slope per 100 steps, after `--warmup` and over the last 100 steps;
the floor (lowest RSS of a window) separates steady growth from transient peaks. Step times:
mean and median of the first vs the last 50 steps.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import psutil

MIB = 2**20
MIN_TYPE_COUNT = 20
"""object types rarer than this are left out of the census (keeps soak.jsonl small)"""


# ----------------------------------------------------------------------------------------------
# Sampling the processes of the run
# ----------------------------------------------------------------------------------------------


def process_label(proc: psutil.Process) -> str:
    """A short, stable name: what the process is, not its full command line."""
    if proc.pid == os.getpid():
        return "main (trainer + vLLM client)"
    name, command = proc.name(), " ".join(proc.cmdline())
    if "resource_tracker" in command:
        return "resource_tracker"
    if not name.startswith("python"):
        return name  # vLLM renames its processes: VLLM::EngineCore, VLLM::Worker...
    return "python " + command.split("python", 1)[-1].strip()[:40]


def sample_processes() -> list[dict]:
    """Memory of the main process and every descendant alive now (MiB)."""
    main = psutil.Process()
    rows = []
    for proc in [main, *main.children(recursive=True)]:
        try:
            with proc.oneshot():
                full = proc.memory_full_info()  # uss/pss from /proc/<pid>/smaps_rollup
                rows.append({
                    "pid": proc.pid, "label": process_label(proc),
                    "rss_mib": full.rss / MIB, "uss_mib": full.uss / MIB,
                    "pss_mib": full.pss / MIB, "threads": proc.num_threads(),
                })  # fmt: skip
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue  # it exited between the listing and the read
    return rows


def object_census() -> dict:
    """gc-tracked objects, live torch tensors (distinct storages) and the count of each object
    type with at least MIN_TYPE_COUNT instances, in this process."""
    import torch

    objects = gc.get_objects()
    storages: dict[int, int] = {}
    tensors = 0
    types: Counter[str] = Counter()
    for obj in objects:
        kind = type(obj)
        types[f"{kind.__module__}.{kind.__qualname__}"] += 1
        # issubclass on type(), not isinstance: isinstance falls back to `obj.__class__`, which
        # openai's lazy module proxies answer by importing their module (the census would grow
        # the heap it measures)
        if issubclass(kind, torch.Tensor):
            tensors += 1
            try:
                storage = obj.untyped_storage()
                storages[storage.data_ptr()] = storage.nbytes()
            except (RuntimeError, NotImplementedError):  # meta / sparse tensors hold no storage
                pass
    common = {name: n for name, n in types.items() if n >= MIN_TYPE_COUNT}
    return {"gc_objects": len(objects), "tensors": tensors,
            "tensor_mib": sum(storages.values()) / MIB, "types": common}  # fmt: skip


class SoakRecorder:
    """The on_step callback: one fsynced soak.jsonl line and one progress line per step."""

    def __init__(self, path: Path, steps: int, census_every: int):
        self.file = path.open("w")
        self.steps = steps
        self.census_every = census_every
        self.started = self.last = time.perf_counter()

    def on_start(self, trainer, engine) -> None:
        self._record(0, {})

    def on_step(self, step: int, trainer, engine, metrics: dict[str, float]) -> None:
        self._record(step, metrics)

    def _record(self, step: int, metrics: dict[str, float]) -> None:
        now = time.perf_counter()
        main = psutil.Process()
        row = {
            "step": step, "elapsed_s": now - self.started, "interval_s": now - self.last,
            **{k: metrics.get(f"perf/{k}") for k in ("step_s", "sync_s", "train_s", "generate_s")},
            "reward": metrics.get("reward/mean"), "main_threads": main.num_threads(),
            "main_fds": main.num_fds(), "py_blocks": sys.getallocatedblocks(),
            "dev_shm_mib": shutil.disk_usage("/dev/shm").used / MIB,
            "processes": sample_processes(),
        }  # fmt: skip
        if step % self.census_every == 0:
            row.update(object_census())
        row["probe_s"] = time.perf_counter() - now
        self.file.write(json.dumps(row) + "\n")
        self.file.flush()
        os.fsync(self.file.fileno())
        self.last = time.perf_counter()
        self._progress(row)

    def _progress(self, row: dict) -> None:
        procs = row["processes"]
        total_pss = sum(p["pss_mib"] for p in procs)
        done = max(row["step"], 1)
        eta = (self.steps - row["step"]) * row["elapsed_s"] / done / 60
        step_s = row["step_s"] or 0.0
        print(f"step {row['step']}/{self.steps} | {step_s:.2f} s | "
              f"main RSS {procs[0]['rss_mib']:.0f} MiB | {len(procs)} procs, PSS "
              f"{total_pss:.0f} MiB | fds {row['main_fds']} | threads {row['main_threads']} | "
              f"ETA {eta:.1f} min", flush=True)  # fmt: skip

    def close(self) -> None:
        self.file.close()


def run_overrides(args) -> list[str]:
    return ["+experiment=tictactoe_course", "stop_if_unplayable=false",
            "rollout.engine=vllm", f"trainer.model={args.model}",
            f"trainer.max_steps={args.steps}", f"rollout.groups_per_step={args.groups}",
            f"rollout.group_size={args.group_size}", f"rollout.max_tokens={args.max_tokens}",
            f"env.args.tictactoe.max_turns={args.max_turns}",
            f"rollout.async_level={args.async_level}", "inference.max_model_len=1024",
            "logging.wandb_mode=disabled", "logging.console_every=0",
            f"save_every={args.save_every}", f"output_dir={args.out / 'run'}",
            *args.override]  # fmt: skip


def soak(args) -> None:
    from rlve.loop import train
    from rlve.train import load_run_config

    if (args.out / "run" / "checkpoints").exists():
        sys.exit(f"{args.out / 'run'} holds a finished run: choose another --out or remove it")
    args.out.mkdir(parents=True, exist_ok=True)
    overrides = run_overrides(args)
    print("python -m rlve.train " + " ".join(overrides), flush=True)
    recorder = SoakRecorder(args.out / "soak.jsonl", args.steps, args.census_every)
    try:
        train(load_run_config(overrides), on_step=recorder.on_step, on_start=recorder.on_start)
    finally:
        recorder.close()


# ----------------------------------------------------------------------------------------------
# Reading the samples back: CSVs, table, plot
# ----------------------------------------------------------------------------------------------


def read_samples(path: Path) -> list[dict]:
    """soak.jsonl's rows; a half-written last line (a crash mid-write) is skipped."""
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def write_csv_atomically(path: Path, rows: list[dict]) -> None:
    columns = list(dict.fromkeys(k for row in rows for k in row))
    lines = [",".join(columns)]
    lines += [",".join("" if row.get(c) is None else str(row[c]) for c in columns) for row in rows]
    tmp = path.with_suffix(".csv.tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(path)


def write_csvs(rows: list[dict], out: Path) -> None:
    steps = [{k: v for k, v in row.items() if k not in ("processes", "types")} for row in rows]
    procs = [{"step": row["step"], **p} for row in rows for p in row["processes"]]
    write_csv_atomically(out / "steps.csv", steps)
    write_csv_atomically(out / "processes.csv", procs)


def per_process(rows: list[dict]) -> dict[str, dict[str, np.ndarray]]:
    """Per "label (pid)": arrays of step, rss_mib, uss_mib, pss_mib over the steps it lived."""
    series: dict[str, dict[str, list]] = {}
    for row in rows:
        for p in row["processes"]:
            one = series.setdefault(f"{p['label']} ({p['pid']})", {})
            for key in ("rss_mib", "uss_mib", "pss_mib"):
                one.setdefault(key, []).append(p[key])
            one.setdefault("step", []).append(row["step"])
    total = {"step": [r["step"] for r in rows]}
    for key in ("rss_mib", "uss_mib", "pss_mib"):
        total[key] = [sum(p[key] for p in r["processes"]) for r in rows]
    series["all processes (sum)"] = total
    return {
        name: {k: np.asarray(v, dtype=float) for k, v in s.items()} for name, s in series.items()
    }


def growth_per_100(steps: np.ndarray, values: np.ndarray, warmup: int) -> float:
    """Least-squares slope of values over steps > warmup, times 100; NaN with < 3 points."""
    keep = steps > warmup
    if keep.sum() < 3:
        return float("nan")
    return 100 * float(np.polyfit(steps[keep], values[keep], 1)[0])


def value_at(one: dict[str, np.ndarray], step: float, key: str) -> float:
    """The value at the sampled step closest to `step`."""
    return float(one[key][np.abs(one["step"] - step).argmin()])


def memory_table(rows: list[dict], warmup: int) -> list[str]:
    """Per process: RSS at three steps; slopes after the warm-up and over the last 100 steps
    (a curve that levels off has a large first and a nil second); and the floor, the lowest
    RSS of the first and of the last 50 steps after the warm-up (transient peaks, such as a
    train step's activations, move the slopes but not the floor)."""
    last = rows[-1]["step"]
    marks = (min(10, last), last // 2, last)
    window = min(50, max(1, (last - warmup) // 2))
    head = ("| process | RSS step {} | RSS step {} | RSS step {} | RSS MiB / 100 steps | "
            "USS MiB / 100 steps | RSS MiB / 100 steps, last 100 | floor RSS, steps {}-{} | "
            "floor RSS, last {} |").format(*marks, warmup + 1, warmup + window, window)  # fmt: skip
    lines = [head, "|---|" + "---:|" * 8]
    for name, one in per_process(rows).items():
        steps, rss = one["step"], one["rss_mib"]
        cells = [f"{value_at(one, m, 'rss_mib'):,.0f}" for m in marks]
        cells += [f"{growth_per_100(steps, one[k], warmup):+.1f}" for k in ("rss_mib", "uss_mib")]
        cells.append(f"{growth_per_100(steps, rss, max(warmup, last - 100)):+.1f}")
        early = rss[(steps > warmup) & (steps <= warmup + window)]
        late = rss[steps > last - window]
        cells += [f"{w.min():,.0f}" if len(w) else "" for w in (early, late)]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def scalar_table(rows: list[dict], warmup: int) -> list[str]:
    """Step times first vs last 50 steps; main-process counters at start vs end and slope."""
    steps = [r for r in rows if r["step"] >= 1]
    n = min(50, len(steps) // 2) or 1
    lines = [
        f"| quantity | first {n} steps | last {n} steps | last / first |",
        "|---|---:|---:|---:|",
    ]
    for key in ("step_s", "interval_s", "generate_s", "train_s", "sync_s", "probe_s"):
        values = [r[key] for r in steps if r.get(key) is not None]
        if len(values) >= 2:
            for how in (statistics.mean, statistics.median):  # the median shrugs off outliers
                a, b = how(values[:n]), how(values[-n:])
                lines.append(f"| {key} {how.__name__} | {a:.3f} | {b:.3f} | {b / a:.2f} |")
    lines += [
        "",
        "| main process | first step | last step | per 100 steps |",
        "|---|---:|---:|---:|",
    ]
    for key in ("main_threads", "main_fds", "py_blocks", "gc_objects", "tensors", "tensor_mib",
                "dev_shm_mib"):  # fmt: skip
        have = [r for r in steps if r.get(key) is not None]
        if len(have) >= 2:
            x = np.array([r["step"] for r in have], dtype=float)
            y = np.array([r[key] for r in have], dtype=float)
            lines.append(f"| {key} | {y[0]:,.1f} | {y[-1]:,.1f} | "
                         f"{growth_per_100(x, y, warmup):+,.1f} |")  # fmt: skip
    return lines


def type_growth(rows: list[dict], warmup: int, top: int = 8) -> list[str]:
    """The object types whose count grew most between the first census after the warm-up and
    the last one."""
    censuses = [r for r in rows if "types" in r and r["step"] > warmup]
    if len(censuses) < 2:
        return []
    first, last = censuses[0], censuses[-1]
    names = set(first["types"]) | set(last["types"])
    grown = sorted(((last["types"].get(n, 0) - first["types"].get(n, 0), n) for n in names),
                   reverse=True)[:top]  # fmt: skip
    lines = [f"| object type (grown most) | step {first['step']} | step {last['step']} |",
             "|---|---:|---:|"]  # fmt: skip
    for growth, name in grown:
        if growth > 0:
            lines.append(f"| {name} | {first['types'].get(name, 0):,} | "
                         f"{last['types'].get(name, 0):,} |")  # fmt: skip
    return lines if len(lines) > 2 else []


def plot(rows: list[dict], path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(13, 8), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    (rss_ax, uss_ax), (time_ax, count_ax) = figure.subplots(2, 2)
    for name, one in per_process(rows).items():
        if one["rss_mib"].max() >= 20 or name.startswith("all"):  # tiny helpers clutter it
            rss_ax.plot(one["step"], one["rss_mib"], label=name, lw=1)
            uss_ax.plot(one["step"], one["uss_mib"], label=name, lw=1)
    steps = np.array([r["step"] for r in rows[1:]], dtype=float)
    for key in ("step_s", "interval_s", "sync_s"):
        time_ax.plot(steps, [r.get(key) or np.nan for r in rows[1:]], label=key, lw=0.8)
    all_steps = [r["step"] for r in rows]
    count_ax.plot(all_steps, [r["main_fds"] for r in rows], label="open fds")
    count_ax.plot(all_steps, [r["main_threads"] for r in rows], label="threads")
    blocks_ax = count_ax.twinx()
    blocks_ax.plot(all_steps, [r["py_blocks"] / 1e3 for r in rows], color="grey", lw=0.8,
                   label="Python blocks (thousands, right)")  # fmt: skip
    titles = ("RSS per process (MiB)", "USS per process (MiB)", "step time (s)",
              "main process: fds, threads; Python blocks")  # fmt: skip
    for ax, title in zip((rss_ax, uss_ax, time_ax, count_ax), titles, strict=True):
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    for ax in (rss_ax, uss_ax, time_ax):
        ax.legend(fontsize=7, loc="best")
    handles = [h for ax in (count_ax, blocks_ax) for h in ax.get_legend_handles_labels()[0]]
    count_ax.legend(handles=handles, fontsize=7, loc="lower right")
    figure.savefig(path)


def report(out: Path, warmup: int) -> None:
    rows = read_samples(out / "soak.jsonl")
    if len(rows) < 2:
        sys.exit(f"{out / 'soak.jsonl'} holds {len(rows)} sample(s): nothing to report")
    write_csvs(rows, out)
    plot(rows, out / "soak.png")
    print(f"\n{len(rows) - 1} steps; cores: {os.cpu_count()}; growth = least-squares slope over "
          f"steps > {warmup}\n")  # fmt: skip
    print("\n".join(memory_table(rows, warmup)) + "\n")
    print("\n".join(scalar_table(rows, warmup)))
    if growth := type_growth(rows, warmup):
        print("\n" + "\n".join(growth))
    print(f"\n{out}/soak.jsonl, steps.csv, processes.csv, soak.png")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--out", type=Path, default=Path("runs/soak"))
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--groups", type=int, default=8, help="problems per step")
    parser.add_argument("--group-size", type=int, default=4, help="games per problem")
    parser.add_argument("--max-tokens", type=int, default=32, help="tokens per model turn")
    parser.add_argument("--max-turns", type=int, default=4, help="turns per tic-tac-toe game")
    parser.add_argument("--async-level", type=int, default=1, help="the recipe's: 1")
    parser.add_argument("--save-every", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=20, help="steps left out of the slopes")
    parser.add_argument("--census-every", type=int, default=25, help="gc/tensor census period")
    parser.add_argument("--override", nargs="*", default=[], help="more Hydra overrides")
    parser.add_argument("--report-only", action="store_true",
                        help="only rebuild the CSVs, plot and table from soak.jsonl")  # fmt: skip
    args = parser.parse_args()
    if not args.report_only:
        soak(args)
    report(args.out, args.warmup)


if __name__ == "__main__":
    main()
