"""Case 6, GPU (only with CUDA; never in CI): trainer vs plain loop, bf16 and fp16, and MFU.

One process on one GPU under torchrun, the bundled transformer at a GPT-2-small-like size
(d_model 768, 12 layers, 12 heads, context 256, batch 32, windows every 16 characters of
the bundled corpus). Contenders, interleaved: plain bf16, trainer bf16, plain fp16 (with a
GradScaler), trainer fp16. Model FLOP utilisation = achieved model FLOP/s / the GPU's
dense bf16 peak, with model FLOPs per token = 6 * (parameters without the embeddings)
+ 12 * layers * d_model * context (attention), as in the PaLM paper's appendix B. With
several GPUs, also the trainer in bf16 on all of them (one rank each, the same batch per
rank): samples/s on N GPUs against 1 (ideal N).
Without CUDA the case reports "skipped: no CUDA". bench/gpu.sh runs it with the GPU tests.
"""

from __future__ import annotations

from collections.abc import Mapping

from bench.case import CaseResult, Context, target
from bench.cases.trainer import TARGET_RATIO, plain_args, torchrun, trainer_args
from bench.measure import interleave, paired_median, ratio, stats
from bench.procs import run_timed

NAME = "gpu"
TITLE = "GPU: trainer vs plain loop (bf16, fp16) and model FLOP utilisation"
D_MODEL, LAYERS, HEADS, CONTEXT = 768, 12, 12, 256
MODEL = {"d_model": D_MODEL, "n_layers": LAYERS, "n_heads": HEADS, "dropout": 0.0}
DATA = {"context": CONTEXT, "batch": 32, "stride": 16}

PEAK_BF16_TFLOPS = {
    "H200": 989.0,
    "H100 SXM": 989.0,
    "H100 80GB HBM3": 989.0,
    "H100 PCIe": 756.0,
    "H100 NVL": 835.0,
    "H100": 756.0,
    "GH200": 989.0,
    "A100": 312.0,
    "L40S": 362.0,
    "L40": 181.0,
    "A10G": 70.0,
    "A10": 125.0,
    "L4": 121.0,
    "RTX 4090": 165.0,
}
"""Dense (no sparsity) bf16 tensor-core peaks from the vendor's data sheets; first match wins."""


def gpu_name(ctx: Context) -> str | None:
    """The first CUDA device's name, or None without CUDA."""
    done = run_timed(
        [
            ctx.python,
            "-c",
            "import warnings; warnings.simplefilter('ignore'); import torch;"
            " print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')",
        ],
        check=False,
        timeout=120,
    )
    name = done.stdout.strip()
    return name or None


def gpu_count(ctx: Context) -> int:
    """How many CUDA devices torch sees (0 without CUDA)."""
    done = run_timed(
        [
            ctx.python,
            "-c",
            "import warnings; warnings.simplefilter('ignore'); import torch;"
            " print(torch.cuda.device_count() if torch.cuda.is_available() else 0)",
        ],
        check=False,
        timeout=120,
    )
    text = done.stdout.strip()
    return int(text) if text.isdigit() else 0


def scaling(one: float, many: float, gpus: int) -> float | None:
    """Samples/s on `gpus` GPUs against one, from steps/s with the same batch per rank."""
    return ratio(many * gpus, one)


def peak_flops(name: str) -> float | None:
    """The dense bf16 peak of a GPU by its name, or None when it is not in the table."""
    for key, tflops in PEAK_BF16_TFLOPS.items():
        if key.lower() in name.lower():
            return tflops * 1e12
    return None


def vocab_size(ctx: Context) -> int:
    """Characters in the bundled corpus (the model's vocabulary)."""
    text = (ctx.repo / "train" / "data" / "corpus.txt").read_text(encoding="utf-8")
    return len(set(text))


def flops_per_token(vocab: int, d: int, layers: int, context: int) -> float:
    """Training FLOPs per token: 6 N (embeddings left out) + 12 L d T."""
    block = (3 * d * d + 3 * d) + (d * d + d) + (d * 4 * d + 4 * d) + (4 * d * d + d) + 4 * d
    params = layers * block + 2 * d + d * vocab + vocab
    return 6.0 * params + 12.0 * layers * d * context


def _say_run(index: int, name: str, result: Mapping[str, float]) -> None:
    """One line per finished run, so that a run cut short by its timeout shows how far it got."""
    print(f"gpu: round {index + 1} {name}: {result['steps_per_s']:.2f} steps/s", flush=True)


def run(ctx: Context) -> CaseResult:
    """Measure the case; see the module docstring."""
    result = CaseResult(NAME, TITLE)
    name = gpu_name(ctx)
    if name is None:
        result.status, result.reason = "skipped", "no CUDA"
        return result
    steps = 20 if ctx.quick else 100
    result.facts["gpu"] = name

    def make(args: list[str]):  # type: ignore[no-untyped-def]
        return lambda: {"steps_per_s": torchrun(ctx, 1, args)}

    contenders = {}
    for amp in ("bf16", "fp16"):
        contenders[f"plain {amp}"] = make(
            plain_args(ctx.repo, steps, amp, "cuda", model=MODEL, data=DATA)
        )
        contenders[f"trainer {amp}"] = make(
            trainer_args(steps, amp, 0, "cuda", model=MODEL, data=DATA)
        )
    gpus = gpu_count(ctx)
    result.facts["gpus"] = gpus
    all_gpus = f"trainer bf16, {gpus} GPUs"
    if gpus > 1:
        bf16 = trainer_args(steps, "bf16", 0, "cuda", model=MODEL, data=DATA)
        contenders[all_gpus] = lambda: {"steps_per_s": torchrun(ctx, gpus, bf16)}
    else:
        result.notes.append("scaling: one GPU here, no N-GPU figure")
    # No warm-up round: steps/s is timed inside each process after its start-up, and on an
    # H200 (2026-11-26) the first round was no different from the later ones. A run there
    # takes ~17 s (13 s of it start-up), so a warm-up round would cost a minute of the
    # 8-minute budget. Each run is printed as it ends, so a timeout still shows progress.
    data = interleave(contenders, ctx.rounds, warmup=0, on_run=_say_run, deadline=ctx.deadline)
    if data.rounds < ctx.rounds:
        result.notes.append(
            f"{data.rounds} of {ctx.rounds} rounds kept: the next would have ended past"
            " --budget-s (bench/gpu.sh's 8-minute limit)"
        )
    for contender in contenders:
        result.stats.append(data.stats(contender, "steps_per_s", "steps/s"))
    per_token = flops_per_token(vocab_size(ctx), D_MODEL, LAYERS, CONTEXT)
    tokens_per_step = DATA["batch"] * CONTEXT
    peak = peak_flops(name)
    result.facts.update(
        {
            "model": MODEL,
            "data": DATA,
            "steps": steps,
            "model_flops_per_token": per_token,
            "peak_bf16_flops": peak,
        }
    )
    for amp in ("bf16", "fp16"):
        mine = data.get(f"trainer {amp}", "steps_per_s")
        theirs = data.get(f"plain {amp}", "steps_per_s")
        value = ratio(stats("", "", mine).median, stats("", "", theirs).median)
        result.ratios[f"trainer / plain, {amp}"] = value
        result.ratios[f"trainer / plain, {amp} (paired median)"] = paired_median(mine, theirs)
        result.targets.append(
            target(
                f"trainer / plain loop, {amp} on {name}",
                f">= {TARGET_RATIO}x",
                value,
                "x",
                None if value is None else value >= TARGET_RATIO,
            )
        )
        for who in ("trainer", "plain"):
            rate = stats("", "", data.get(f"{who} {amp}", "steps_per_s")).median
            achieved = rate * tokens_per_step * per_token
            result.facts[f"{who} {amp} model TFLOP/s"] = round(achieved / 1e12, 2)
            if peak:
                result.facts[f"{who} {amp} MFU %"] = round(100 * achieved / peak, 2)
    if gpus > 1:
        one = stats("", "", data.get("trainer bf16", "steps_per_s")).median
        many = stats("", "", data.get(all_gpus, "steps_per_s")).median
        result.ratios[f"samples/s, {gpus} GPUs / 1 GPU (ideal {gpus})"] = scaling(one, many, gpus)
    if not peak:
        result.notes.append(f"MFU: no peak FLOP/s known for {name!r} (add it to PEAK_BF16_TFLOPS)")
    return result
