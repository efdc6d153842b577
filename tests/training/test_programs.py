"""The compiled programs of an ensemble (``iml.training.programs``): the failures of a large program
told apart as XLA words them."""

from __future__ import annotations

from pathlib import Path


def test_failures_of_a_large_program_are_told_apart_as_xla_words_them():
    from iml.training import is_gpu_kernel_failure, is_out_of_memory

    root = Path(__file__).resolve().parents[2] / "docs" / "results" / "gpu_h200"
    # the errors that 62 and 48 DenseNet-121 members at 224 px raised on an H200, as the logs
    # kept them: the autotuner's (62, 48), and the compiled program's illegal address (48 with
    # the autotuner off)
    raised = [
        line
        for log in ("2026-11-27/log_paper.txt", "2026-11-28/log_k48.txt")
        for line in (root / log).read_text().splitlines()
        if line.startswith("jax.errors.JaxRuntimeError")
    ]
    assert len(raised) == 3
    assert sum("Failed to get configs for" in line for line in raised) == 2
    assert sum("CUDA_ERROR_ILLEGAL_ADDRESS" in line for line in raised) >= 1
    memory = "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 9.10GiB."
    for line in raised:
        assert is_gpu_kernel_failure(RuntimeError(line)) and not is_out_of_memory(
            RuntimeError(line)
        )
    assert is_out_of_memory(RuntimeError(memory)) and not is_gpu_kernel_failure(
        RuntimeError(memory)
    )
    assert not is_gpu_kernel_failure(ZeroDivisionError("division by zero"))
