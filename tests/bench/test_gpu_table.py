"""bench/gpu_table.py: the GPU section of bench's Markdown goes between its markers in the
document (replaced on a later run, appended on the first); no GPU needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.gpu_table import BEGIN, END, HEADING, gpu_section, main, splice

RESULTS = """Run of 2026-11-26T09:00:00+00:00; NVIDIA H100, 16 cores, 128 GiB; load average [0.1, 0.2, 0.3].
Versions: python 3.11.7, torch 2.13.0+cu124, jobkit 0.1.0, slurm -, torchx -.

### CLI start-up (cold process)

| measurement | median | min | max | n |
|---|---:|---:|---:|---:|
| jobkit render wall_s | 150 ms | 140 ms | 160 ms | 5 |

### GPU: trainer vs plain loop (bf16, fp16) and model FLOP utilisation

| measurement | median | min | max | n |
|---|---:|---:|---:|---:|
| plain bf16 steps_per_s | 9.5 steps/s | 9.4 steps/s | 9.6 steps/s | 5 |

| ratio | value |
|---|---:|
| samples/s, 8 GPUs / 1 GPU (ideal 8) | 7.1x |
"""  # noqa: E501


def test_the_gpu_case_alone_is_taken_one_level_down() -> None:
    section = gpu_section(RESULTS)
    assert section.startswith("Run of 2026-11-26T09:00:00+00:00; NVIDIA H100")
    assert "Versions: python 3.11.7, torch 2.13.0+cu124" in section
    assert "#### GPU: trainer vs plain loop" in section
    assert "| samples/s, 8 GPUs / 1 GPU (ideal 8) | 7.1x |" in section
    assert "CLI start-up" not in section and "jobkit render" not in section


def test_results_without_the_gpu_case_are_refused() -> None:
    with pytest.raises(ValueError, match="no '### GPU' section"):
        gpu_section(RESULTS.split("### GPU")[0])


def test_first_run_appends_and_a_later_run_replaces_only_the_section() -> None:
    doc = "# Benchmarks\n\ntext before\n"
    first = splice(doc, "old figures\n")
    assert first == f"# Benchmarks\n\ntext before\n\n{BEGIN}\n{HEADING}\n\nold figures\n{END}\n"
    later = splice(first + "\n## After\n\ntext after\n", "new figures\n")
    assert "old figures" not in later
    assert later.count(BEGIN) == 1 and later.count(END) == 1
    assert later.startswith("# Benchmarks\n\ntext before\n\n")
    assert later.endswith(f"new figures\n{END}\n\n## After\n\ntext after\n")


def test_a_document_with_one_marker_is_left_alone() -> None:
    with pytest.raises(ValueError, match="only one of the markers"):
        splice(f"# Benchmarks\n{BEGIN}\nno end\n", "figures")


def test_main_writes_the_document(tmp_path: Path) -> None:
    results, doc = tmp_path / "gpu.md", tmp_path / "benchmarks.md"
    results.write_text(RESULTS)
    doc.write_text("# Benchmarks\n")
    assert main([str(results), str(doc)]) == 0
    assert "| plain bf16 steps_per_s | 9.5 steps/s" in doc.read_text()
    results.write_text("no gpu here\n")
    assert main([str(results), str(doc)]) == 1  # the document keeps its last GPU section
    assert "| plain bf16 steps_per_s | 9.5 steps/s" in doc.read_text()
