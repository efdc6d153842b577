"""The figures and tables that the documents state, each declared with its source.

Read by :mod:`experiments.sync_docs`, which writes them into the documents and checks that they
agree (``python -m experiments.sync_docs --check``). A measured result comes from the stored
record it was written to (``docs/results``), a number about data from the data (the built-in
digits; UCI Adult and Letter from the shared data folder), and a default from the code. Numbers
that no stored record holds (wall times of runs, ad-hoc profiles, runs that were not committed)
are not declared.
"""

import contextlib
import functools
import inspect
import io
import json
import math
import re
import statistics
import tempfile
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import iml
import iml.recalibration.newton
from experiments.benchmarks import sweep_train
from experiments.sync_docs import Figure, Item, Table, formatted, stated
from iml import losses, plots
from iml.calibration import (
    calibration_curve,
    clopper_pearson_interval,
    expected_calibration_error,
)
from iml.config import to_dict
from iml.data import load_dataset
from iml.data.builders.pneumoniamnist import NATIVE_SIZES
from iml.data.datasets import DEFAULT_POSITIVE_DIGIT
from iml.data.folds import cycle_length, rotation_folds
from iml.data.tabular import read_adult, read_letter
from iml.models import densenet_small
from iml.pipeline.runner import default_config
from iml.pipeline.sweep import sweep_config
from iml.training import TrainConfig
from iml.training.member import end_of_epoch
from iml.training.tabular import TABULAR_DEFAULTS

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"

# ----------------------------------------------------------------------------------------------
# The sources: stored records, the data, the code
# ----------------------------------------------------------------------------------------------


@functools.cache
def record(path: str) -> Any:
    """A JSON record under docs/results (a .jsonl file: its lines)."""
    text = (RESULTS / path).read_text()
    if path.endswith(".jsonl"):
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return json.loads(text)


def record_line(path: str, regex: str) -> tuple[str, ...]:
    """The groups of the one line of the text record ``path`` that ``regex`` matches."""
    found = [m.groups() for m in re.finditer(regex, (RESULTS / path).read_text())]
    assert len(found) == 1, f"{path}: {len(found)} lines match {regex!r}"
    return found[0]


def table(run: str, beta: str, method: str, metric: str = "ece") -> float:
    """One cell of a reproduction's ``table.json``: ``table[beta][method][metric]``."""
    return record(f"{run}/table.json")[beta][method][metric]


def over_betas(run: str, method: str, metric: str = "ece") -> list[float]:
    return [cells[method][metric] for cells in record(f"{run}/table.json").values()]


@functools.cache
def sweep(run: str) -> dict[float, dict]:
    """A sweep's ``table.json``, keyed by beta."""
    return {float(beta): cells for beta, cells in record(f"{run}/table.json").items()}


def sweep_at(run: str, beta: float) -> dict:
    """The cells of the grid's beta nearest ``beta`` (the READMEs round the grid's betas)."""
    return sweep(run)[min(sweep(run), key=lambda b: abs(b - beta))]


def sweep_values(
    run: str, method: str, metric: str, where: Callable[[float], bool] = lambda b: True
) -> list[float]:
    return [cells[method][metric] for b, cells in sorted(sweep(run).items()) if where(b)]


def min_max(values: list[float]) -> tuple[float, float]:
    return min(values), max(values)


def manifest(run: str) -> dict:
    return record(f"{run}/manifest.json")


def stored_labels(run: str) -> np.ndarray:
    """The labels of every observation of a stored reproduction run."""
    with np.load(RESULTS / run / "data" / "folds.npz") as folds:
        return folds["labels"]


def stopped_epochs(run: str) -> list[int]:
    """Each member's early-stopping epoch (-1: it ran to the epoch cap), over the run's batches."""
    epochs = []
    for path in sorted((RESULTS / run / "batches").glob("batch-*.npz")):
        with np.load(path) as batch:
            epochs += batch["stopped_epoch"].tolist()
    return epochs


@functools.cache
def decile_curves() -> dict[float, Any]:
    """The default reproduction's decile calibration curves of the raw scores, per beta."""
    with np.load(RESULTS / "reproduce_digits" / "ensemble_scores.npz") as z:
        return {
            float(b): calibration_curve(s, z["labels"])
            for b, s in zip(z["betas"], z["scores"], strict=True)
        }


def decile_rates() -> list[float]:
    return [float(r) for c in decile_curves().values() for r in np.asarray(c.event_rate)]


def empty_deciles(beta: float) -> int:
    return int(np.sum(np.asarray(decile_curves()[beta].event_rate) == 0))


def sweep_work(path: str) -> dict[str, float]:
    """The counts a sweep_train record's ``work`` field names (betas, seeds, models, rows, ...)."""
    work = record(f"sweep_train/{path}")["work"]
    counts = {
        name: float(value)
        for value, name in re.findall(r"(\d+) (betas|seeds|rotations|models|rows|features)", work)
    }
    counts["l2"] = float(re.search(r"l2 = ([\d.e-]+)", work).group(1))
    return counts


def baseline_fits(path: str) -> tuple[int, float, int]:
    """(fits timed, seconds, cores) of a sweep_train record's baseline slice."""
    text = record(f"sweep_train/{path}")["baseline_measured"]
    fits, seconds, cores = re.fullmatch(
        r"(\d+) scikit-learn fits in ([\d.]+) s on (\d+) .*", text
    ).groups()
    return int(fits), float(seconds), int(cores)


def sweep_train_row(path: str) -> tuple[float, float, float]:
    r = record(f"sweep_train/{path}")
    return r["ours_s"], r["baseline_s"], r["ratio"]


def train_step(path: str, size: str) -> tuple[float, float, float]:
    """(Flax img/s, torch img/s, ratio) of a train_step record at ``size`` (``b16_224px``, ...)."""
    r = record(path)
    return r["images_per_s"][size]["flax"], r["images_per_s"][size]["torch"], r["ratios"][size]


def train_step_log(path: str, batch: int, size: int) -> tuple[float, float, float, float]:
    """(Flax img/s, compile s, torch img/s, ratio) of a train_step log line."""
    line = (
        rf"batch +{batch} @ {size}px: flax +([\d.]+) img/s \(compile ([\d.]+)s\), "
        r"torch +([\d.]+) img/s, ratio ([\d.]+)"
    )
    return tuple(float(x) for x in record_line(path, line))


def ensemble_ratios(path: str) -> dict[str, float]:
    """A CPU ensemble record's ratio per strategy; ``default`` is the one on the trainer's mesh."""
    r = record(f"cpu_ensemble/{path}")
    ratios = {k: v["ratio"] for k, v in r["details"].items() if k != "baseline"}
    default = ratios.pop(r["default_strategy"])
    return {**{k: v for k, v in ratios.items() if not k.startswith("mesh")}, "default": default}


def ensemble_speed(path: str, strategy: str) -> float:
    """Member-images/s of one strategy of an ensemble record (``baseline``: the single steps)."""
    details = record(path)["details"]
    return details[strategy]["member_images_per_second"]


CPU_ENSEMBLE_RUNS = (  # the four full runs of 2026-11-26, oldest first
    "ensemble.json",
    "ensemble_2026-11-26_moments.json",
    "ensemble_2026-11-26_stem.json",
    "ensemble_2026-11-26_keep_memory.json",
)


def over_ensemble_runs(strategy: str) -> tuple[float, float]:
    return min_max([ensemble_ratios(run)[strategy] for run in CPU_ENSEMBLE_RUNS])


def compare_densenet(rev: str, batch: int) -> tuple:
    """(batch, size, seconds per step at ``rev``, after the change, ratio, repeats) of the run at
    ``batch`` of a compare_densenet record."""
    (run,) = [
        r for r in record(f"cpu_train_step/compare_densenet_{rev}.jsonl") if r["batch"] == batch
    ]
    steps = run["median_step_s"]
    return batch, run["size"], steps[rev], steps["checkout"], run["ratio"], run["repeats"]


def profile_conv(side: int) -> tuple[float, float]:
    """(lax.conv ms, taps ms) of the convolution profile's row for ``side`` x ``side`` maps."""
    (row,) = [r for r in _profile_conv_rows() if r["side"] == side]
    return row["conv_ms"], row["taps_ms"]


@functools.cache
def _profile_conv_rows() -> list[dict]:
    text = (RESULTS / "cpu_train_step" / "profile_conv.txt").read_text()
    return json.loads(text[text.index("{") :])["rows"]


def mib(n_bytes: float) -> float:
    """Bytes in MiB (the records' ``*_mb`` fields count MiB)."""
    return n_bytes / 2**20


def gigabytes(n_mib: float) -> float:
    """A record's MiB in GB (10^9 bytes)."""
    return n_mib * 2**20 / 1e9


def file_date(name: str) -> str:
    return re.search(r"\d{4}-\d\d-\d\d", name).group(0)


def markdown_table(header: list[str], rows: list[list[str]], spaced_rule: bool = False) -> str:
    """A Markdown table of ``header`` and ``rows`` of cells, its rule ``|---|`` (or ``| --- |``)."""

    def line(cells: list[str]) -> str:
        return "|" + "".join(f" {cell} |" if cell else " |" for cell in cells)

    rule = line(["---"] * len(header)) if spaced_rule else "|" + "---|" * len(header)
    return "\n".join([line(header), rule, *map(line, rows)])


def f(value: Any, spec: str) -> str:
    """``value`` in format ``spec`` (:func:`experiments.sync_docs.formatted`), for a table."""
    return formatted(value, spec)


# The data -------------------------------------------------------------------------------------


@functools.cache
def _scratch() -> tempfile.TemporaryDirectory:
    return tempfile.TemporaryDirectory(prefix="iml-sync-docs-")  # removed at exit


@functools.cache
def digits():
    """The built-in digits at their native size (prepared in a scratch folder, not the cache,
    without the preparation's progress output)."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return load_dataset("digits", data_dir=_scratch().name)


@functools.cache
def adult(folder: Path):
    return read_adult(folder)[0]


@functools.cache
def letter(folder: Path):
    return read_letter(folder)[0]


# The code -------------------------------------------------------------------------------------


def reproduce_folds() -> tuple[int, int, int, int, int]:
    """(folds, train, validation, test folds of a rotation, rotations) of the default run."""
    d = default_config().data
    train, val, test = rotation_folds(
        0, n_folds=d.n_folds, n_val_folds=d.n_val_folds, n_test_folds=d.n_test_folds
    )
    rotations = len(d.rotations) or cycle_length(d.n_folds, d.n_test_folds)
    return d.n_folds, len(train), len(val), len(test), rotations


def reproduce_members() -> int:
    c = default_config()
    return reproduce_folds()[-1] * len(c.loss.betas) * len(c.train.seeds)


def sweep_folds(n_folds: int) -> tuple[int, int, int]:
    """(train, validation, test) folds of a sweep's rotation."""
    return tuple(len(folds) for folds in rotation_folds(0, n_folds=n_folds))


def sweep_grid(run: str) -> tuple:
    """(betas, smallest, largest, seeds, folds, train, val, test, models, chunks, per chunk)."""
    c = manifest(run)["config"]
    betas, seeds, folds = len(c["betas"]), len(c["seeds"]), c["n_folds"]
    chunk = c["betas_per_chunk"]
    return (
        betas,
        min(c["betas"]),
        max(c["betas"]),
        seeds,
        folds,
        *sweep_folds(folds),
        betas * seeds * folds,
        math.ceil(betas / chunk),
        chunk * seeds * folds,
    )


def sweep_training(run: str) -> tuple:
    """(learning rate, batch, 1 / decay factor, decay patience, stopping patience, max epochs)."""
    t = manifest(run)["config"]["train"]
    return (
        t["learning_rate"],
        t["batch_size"],
        1 / t["lr_factor"],
        t["plateau_patience"],
        t["patience"],
        t["max_epochs"],
    )


def argparse_default(module: str, flag: str) -> float:
    """The default of ``flag`` in a benchmark script's argument parser."""
    text = (ROOT / "experiments" / "benchmarks" / f"{module}.py").read_text()
    found = re.findall(rf'"{flag}", type=\w+, default=([\d_.e-]+)', text)
    assert len(found) == 1, f"{module}.py: no single default for {flag}"
    return float(found[0].replace("_", ""))


def loss_corrected_tour() -> tuple:

    return tuple(iml.loss_corrected_score(jnp.array([0.02, 0.5, 0.9, 0.999]), 0.99).tolist())


def first_order_residual() -> float:
    def focal(a, y):
        return losses.focal_loss(a, y, gamma=2.0)

    report = iml.check_first_order_conditions(
        focal, lambda g: iml.optimal_score_for_loss(focal, g), jnp.linspace(0.01, 0.99, 99)
    )
    assert report.passed()
    return float(report.residual)


def multiclass_tour() -> tuple:
    """The tour's one-vs-rest posteriors, their sum, the residual (bounded) and the sum of the
    renormalised ones."""
    B = jnp.array([[1.0, 2.0, 1.0], [0.5, 1.0, 1.0], [3.0, 1.0, 1.0]])
    a = jnp.array([0.2, 0.5, 0.4])
    gamma, residual = iml.loss_corrected_score_multiclass(a, B, return_residual=True)
    renormalised = iml.loss_corrected_score_multiclass(a, B, renormalise=True)
    return (
        *gamma.tolist(),
        float(gamma.sum()),
        float(residual),
        float(renormalised.sum()),
    )


def mixed_over_xla() -> tuple[float, float]:
    """How much faster ``mixed`` convolutions made the CPU DenseNet-121 step than ``xla``: the
    ``mixed`` record's ratios over torch against the ``xla`` ratios its README gives."""
    xla = stated(
        CPU_STEP, 'With `conv_impl="xla"`, the ratios were {}-{} (224 px) and {}-{} (64 px)'
    )
    lo224, hi224, lo64, hi64 = (float(x) for x in xla)
    _, _, mixed224 = train_step(MIXED, "b16_224px")
    _, _, mixed64 = train_step(MIXED, "b64_64px")
    speedups = [mixed224 / hi224, mixed224 / lo224, mixed64 / hi64, mixed64 / lo64]
    return min(speedups), max(speedups)


# ----------------------------------------------------------------------------------------------
# The cases
# ----------------------------------------------------------------------------------------------

README = "README.md"
DIGITS_RUN = "docs/results/reproduce_digits/README.md"
PNEUMONIA_RUN = "docs/results/pneumoniamnist/README.md"
ADULT_RUN = "docs/results/sweep_adult/README.md"
LETTER_RUN = "docs/results/sweep_letter/README.md"
SWEEP_TRAIN = "docs/results/sweep_train/README.md"
GPU = "docs/results/gpu_h200/README.md"
CPU_ENSEMBLE = "docs/results/cpu_ensemble/README.md"
CPU_STEP = "docs/results/cpu_train_step/README.md"

KEEP = "cpu_train_step/train_step_2026-11-26_keep_memory.json"
RERUN = "cpu_train_step/train_step_2026-11-26_rerun.json"
MIXED = "cpu_train_step/train_step_mixed.json"
CPU_SWEEP = "2026-11-27_cpu_2core_exact_reference.json"  # with the exact reference
CPU_SWEEP_EQUAL = "2026-11-28_cpu_2core_equal_work_2.json"  # 640 fits on both sides
CPU_SWEEP_NOW = "2026-11-28_cpu_2core.json"  # the solver as it stands, with its compile time
CPU_SWEEP_REPEAT = "2026-11-28_cpu_2core_repeat.json"
GPU_SWEEP = "2026-11-28_h200.json"
GPU_FIRST_LOG = "gpu_h200/log_first_call.txt"
GPU_THIRD_LOG = "gpu_h200/log_third_call.txt"
GPU_F32 = "gpu_h200/ensemble_f32.json"
GPU_BF16 = "gpu_h200/ensemble_bf16.json"
GPU_MAXK_F32 = "gpu_h200/ensemble_maxk_f32.json"
GPU_MAXK_BF16 = "gpu_h200/2026-11-26_bf16/ensemble_maxk_bf16.json"
GPU_STEP_64 = "gpu_h200/train_step_f32_64px.json"
GPU_STEP_BF16_64 = "gpu_h200/2026-11-26_bf16/train_step_bf16_64px.json"
GPU5 = "gpu_h200/2026-11-27"  # run 5: the current trainer, and DenseNet-121 at 224 px
GPU5_STEP = f"{GPU5}/train_step_f32.json"
GPU5_F32 = f"{GPU5}/ensemble_f32.json"
GPU5_PAPER = f"{GPU5}/paper_scale.json"
GPU5_K32 = f"{GPU5}/paper_scale_k32.json"
GPU6 = "gpu_h200/2026-11-28"  # run 6: 48 and 41 DenseNet-121 members at 224 px


def _positive_digit() -> int:
    # The dataset's labels are its classes equal to the default digit.
    d = digits()
    assert np.array_equal(d.labels, (d.classes == DEFAULT_POSITIVE_DIGIT).astype(d.labels.dtype))
    return DEFAULT_POSITIVE_DIGIT


def _tour_grid_shape() -> tuple[int, int]:
    scores = jnp.array([0.02, 0.5, 0.9, 0.999])
    betas = jnp.linspace(0.01, 0.99, 1000)
    return iml.loss_corrected_score(scores[None, :], betas[:, None]).shape


def _loss_spec_batch_shape() -> tuple[int, ...]:
    return iml.loss_spec(jnp.linspace(0.01, 0.99, 1000)).batch_shape


def _test_processes() -> int:
    """The processes of the tests' multi-process ensemble (``tests/_training_helpers.py``)."""
    text = (ROOT / "tests" / "_training_helpers.py").read_text()
    return int(re.search(r"num_processes=(\d+)", text).group(1))


def _test_devices() -> list[int]:
    """The CPU devices that ``tests/conftest.py`` asks for, before JAX starts, in both ways."""
    text = (ROOT / "tests" / "conftest.py").read_text()
    return [
        int(re.search(r"chex\.set_n_cpu_devices\((\d+)\)", text).group(1)),
        int(re.search(r'"jax_num_cpu_devices", (\d+)\)', text).group(1)),
    ]


def _default_page_faults() -> int:
    """Page faults of a 224 px step under the allocator's defaults (cpu_train_step's table)."""
    faults = stated(CPU_STEP, "| defaults | {}-{} s / {}-{} s / {} |")[-1]
    return int(faults.replace(",", ""))


def _cpu_sweep_records() -> list[str]:
    """The sweep_train records made on the 2-core CPU, by name."""
    return sorted(path.name for path in (RESULTS / "sweep_train").glob("*_cpu_2core*.json"))


def _keep_ensemble() -> dict:
    return record(f"cpu_ensemble/{CPU_ENSEMBLE_RUNS[-1]}")


def _densenet_small() -> tuple[int, ...]:
    p = inspect.signature(densenet_small).parameters
    return (*p["block_config"].default, p["growth_rate"].default)


def _lr_decay_divisor() -> float:
    return 1 / TrainConfig().lr_factor


ANY_LOSS_WEIGHTED = {  # the multiclass runs of sweep_any_loss that weight one class
    "digits_matrix": "B[8,8]=10",
    "digits_softmax": "w[8]=10",
    "letter_matrix": "B[14,14]=10",
    "letter_softmax": "w[14]=10",
}


def any_loss(run: str, name: str = "manifest.json") -> Any:
    return record(f"sweep_any_loss/{run}/{name}")


def any_loss_weights(run: str) -> np.ndarray:
    """A multiclass run's grid of weights: matrices B, or class-weight vectors."""
    loss = any_loss(run)["config"]["loss"]
    return np.asarray(loss["B"] if "B" in loss else loss["class_weights"])


def weighted_class_ece_ratios() -> list[float]:
    """The weighted class's binary ECE (raw) over its ECE in the unweighted model, per run."""
    ratios = []
    for run, weighted in ANY_LOSS_WEIGHTED.items():
        ece = any_loss(run, "weighted_class.json")
        ratios.append(ece[weighted]["ece_raw"] / ece["ones"]["ece_raw"])
    return ratios


def _readme() -> list[Item]:
    c = default_config
    ensemble = _keep_ensemble
    recal = functools.partial(record, "recalibration_vs_size/results.json")
    return [
        Figure(
            "multiclass reproduce: command",
            README,
            "all {} digits, one ensemble per class weighting in a grid",
            "d",
            lambda: len(digits().class_names),
        ),
        Figure(
            "multiclass reproduce: grid example",
            README,
            "over the grid `weights`, `'ones;w[{}]={}'`",
            "d d",
            lambda: _mc_weighting(to_dict(_multiclass_config())),
        ),
        Figure(
            "multiclass reproduce: results",
            README,
            "DenseNets on all {} digits under the class-weighted softmax cross-entropy, the {}s "
            "weighted {}×. The correction brings the ECE of class {}'s scores from {} to {}",
            "d d d d .3f .3f",
            lambda: (
                len(digits().class_names),
                *_mc_weighting(to_dict(_multiclass_config())),
                _mc_weighting(to_dict(_multiclass_config()))[0],
                _class_ece(_mc_series()[1], 8),
                _class_ece(_mc_series()[2], 8),
            ),
        ),
        Figure(
            "python version",
            README,
            "On a fresh machine with Python ≥ {}",
            "s",
            lambda: tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
                "requires-python"
            ].removeprefix(">="),
        ),
        Figure(
            "reproduce betas",
            README,
            "It trains β-ensembles (β = {}, {}, {})",
            ".1f .1f .2f",
            lambda: tuple(c().loss.betas),
        ),
        Figure(
            "reproduce task",
            README,
            "handwritten digits ({} against the rest, a {} % class",
            "d .0f",
            lambda: (_positive_digit(), 100 * digits().prevalence),
        ),
        Figure(
            "reproduce image size",
            README,
            "shrunk from {} to {} pixels",
            "d d",
            lambda: (digits().input_shape[0], c().data.image_size),
        ),
        Figure(
            "reproduce folds",
            README,
            "nested cross-validation ({} folds rotated {} train / {} validation / {} test: {} "
            "members)",
            "d d d d d",
            lambda: (
                *reproduce_folds()[:4],
                [reproduce_members(), manifest("reproduce_digits")["num_members"]],
            ),
        ),
        Figure(
            "reproduce AUROC at 4 px",
            README,
            "at 4 px the classes overlap (AUROC about {})",
            ".2f",
            lambda: statistics.median(over_betas("reproduce_digits", "raw", "auroc")),
        ),
        Figure(
            "figure intervals",
            README,
            "every decile drawn with its {} %",
            ".0f",
            lambda: 100 * plots._CONFIDENCE,
        ),
        Figure(
            "CI workers",
            README,
            "with test files spread over up to {} cores",
            "words",
            lambda: int(re.search(r"--maxprocesses=(\d+)", (ROOT / ".ci/run").read_text())[1]),
        ),
        Figure(
            "tour: loss-corrected scores",
            README,
            "scores = jnp.array([0.02, 0.5, 0.9, 0.999]) # outputs of a model trained with beta = "
            "0.99 … iml.loss_corrected_score(scores, 0.99) # -> probabilities: [{}, {}, {}, {}]",
            ".1es .2f .4f .2f",
            loss_corrected_tour,
        ),
        Figure(
            "tour: grid shape",
            README,
            "betas = jnp.linspace(0.01, 0.99, 1000) # a sweep over weights is one call grid = "
            "iml.loss_corrected_score(scores[None, :], betas[:, None]) # shape [{}, {}]",
            "d d",
            _tour_grid_shape,
        ),
        Figure(
            "tour: first-order residual",
            README,
            "report.residual, report.passed() # ~{}, True",
            ".0es",
            first_order_residual,
        ),
        Figure(
            "tour: multiclass one-vs-rest posteriors",
            README,
            "jnp.array([0.2, 0.5, 0.4]), B, return_residual=True ) # gamma [{}, {}, {}] (sum {}), "
            "residual below {} iml.loss_corrected_score_multiclass(jnp.array([0.2, 0.5, 0.4]), B, "
            "renormalise=True) # sum {}",
            ".3f .3f .1f .2f < .0f",
            multiclass_tour,
        ),
        Figure(
            "tour: batch shape",
            README,
            "iml.loss_spec(jnp.linspace(0.01, 0.99, 1000)) # batched: batch_shape ({},)",
            "d",
            lambda: _loss_spec_batch_shape()[0],
        ),
        Figure(
            "reproduce config sections",
            README,
            "returns an `ml_collections.ConfigDict` in {} sections",
            "words",
            lambda: len(c().keys()),
        ),
        Figure(
            "exact solver tolerance",
            README,
            "batched Newton steps to a gradient below {}, every member at once",
            ".0es",
            lambda: TABULAR_DEFAULTS.tol,
        ),
        Figure(
            "sweep ridge grid",
            README,
            "at each penalty of `--l2-grid` ({} to {}, by decades)",
            ".0es .0f",
            lambda: (min(TABULAR_DEFAULTS.l2_grid), max(TABULAR_DEFAULTS.l2_grid)),
        ),
        Figure(
            "PneumoniaMNIST file sizes",
            README,
            "`pneumoniamnist.npz` (or `_{}`, `_{}`, `_{}`)",
            "d d d",
            lambda: NATIVE_SIZES[1:],
        ),
        Figure(
            "simulated devices",
            README,
            "The tests run the ensemble on {} simulated CPU devices and across {} processes",
            "d words",
            lambda: (_test_devices(), _test_processes()),
        ),
        Figure(
            "DenseNet-121 step memory",
            README,
            "({} GB and about {} page faults per DenseNet-121 step at batch {}, {} px)",
            ".1f ,d d d",
            lambda: (
                gigabytes(record(KEEP)["results"][0]["flax"]["xla_temporaries_mb"]),
                round(_default_page_faults(), -4),
                record(KEEP)["results"][0]["batch"],
                record(KEEP)["results"][0]["size"],
            ),
        ),
        Figure(
            "sweeps' grids",
            README,
            "({}-beta sweeps on UCI Letter and Adult, the latter {} betas x {} seeds)",
            "d d d",
            lambda: (
                len(sweep("sweep_letter")),
                len(sweep("sweep_adult")),
                len(manifest("sweep_adult")["config"]["seeds"]),
            ),
        ),
        Figure(
            "digits ECE at 0.99",
            README,
            "at β = {} the raw ensemble's ECE is {} and the loss-corrected scores' {})",
            ".2f .2f .3f",
            lambda: (
                max(manifest("reproduce_digits")["config"]["betas"]),
                table("reproduce_digits", "0.99", "raw"),
                table("reproduce_digits", "0.99", "loss_corrected"),
            ),
        ),
        Figure(
            "PneumoniaMNIST run",
            README,
            "`pneumoniamnist/` (all {} PneumoniaMNIST X-rays at {} px, at most {} epochs per "
            "member)",
            ",d d d",
            lambda: (
                manifest("pneumoniamnist")["num_examples"],
                manifest("pneumoniamnist")["config"]["image_size"],
                manifest("pneumoniamnist")["config"]["epochs"],
            ),
        ),
        Figure(
            "PneumoniaMNIST ECE at 0.99",
            README,
            "On PneumoniaMNIST at β = {} the raw ECE is {} and the loss-corrected ECE {}.",
            ".2f .2f .3f",
            lambda: (
                max(manifest("pneumoniamnist")["config"]["betas"]),
                table("pneumoniamnist", "0.99", "raw"),
                table("pneumoniamnist", "0.99", "loss_corrected"),
            ),
        ),
        Figure(
            "PneumoniaMNIST Platt ECE",
            README,
            "Cross-fitted Platt recalibration, which uses labels, reaches {}.",
            ".3f",
            lambda: table("pneumoniamnist", "0.99", "platt"),
        ),
        Figure(
            "focal sweep",
            README,
            "**Focal loss (γ = {}) on UCI Adult.** Raw ECE is {}–{} across α. The focal loss's own "
            "inverse rule brings it to {}–{}.",
            ".0f .2f .2f .3f .3f",
            lambda: (
                any_loss("adult_focal")["config"]["loss"]["gamma"],
                *min_max(sweep_values("sweep_any_loss/adult_focal", "raw", "ece")),
                *min_max(sweep_values("sweep_any_loss/adult_focal", "loss_corrected", "ece")),
            ),
        ),
        Figure(
            "multiclass sweeps",
            README,
            "**Multiclass weights on digits ({} classes) and UCI Letter ({}).** Weighting one "
            "class {}×",
            "d d .0f",
            lambda: (
                [any_loss_weights(run).shape[-1] for run in ANY_LOSS_WEIGHTED if "digits" in run],
                [any_loss_weights(run).shape[-1] for run in ANY_LOSS_WEIGHTED if "letter" in run],
                [any_loss_weights(run).max() for run in ANY_LOSS_WEIGHTED],
            ),
        ),
        Figure(
            "multiclass weighted class after the correction",
            README,
            "After the correction its ECE differs from the unweighted model's by {} (95% paired "
            "interval {} to {}) on digits under the B-weighted loss, not significant but too wide "
            "an interval to bound the gap; elsewhere a significant excess remains: {} ({} to {}) "
            "on Letter under the B-weighted loss, {} ({} to {}) under the softmax loss, and {} "
            "({} to {}) on nearly separable digits under the softmax loss.",
            " ".join([".3f"] * 12),
            lambda: (
                *_weighted_difference("digits_matrix", "B[8,8]=10"),
                *_weighted_difference("letter_matrix", "B[14,14]=10"),
                *_weighted_difference("letter_softmax", "w[14]=10"),
                *_weighted_difference("digits_softmax", "w[8]=10"),
            ),
        ),
        Figure(
            "multiclass top label in the README",
            README,
            "on Letter the top-label ECE goes from {} [{}, {}] to {} [{}, {}].",
            " ".join([".3f"] * 6),
            lambda: tuple(
                v
                for m in ("raw", "loss_corrected")
                for v in _top_label_with_interval(
                    any_loss("letter_matrix", "table.json")["B[14,14]=10"][m]
                )
            ),
        ),
        Figure(
            "multiclass weighted class",
            README,
            "Weighting one class … raises its ECE {}–{}×",
            ">= <=",
            lambda: (
                min(weighted_class_ece_ratios()),
                max(weighted_class_ece_ratios()),
            ),
        ),
        Figure(
            "simulation",
            README,
            "On data simulated from the paper's model ({} % prevalence, β = {})",
            ".1f .2f",
            lambda: (
                100 * recal()["test_positives"] / recal()["n_test"],
                recal()["config"]["beta"],
            ),
        ),
        Figure(
            "PneumoniaMNIST figures",
            README,
            "PneumoniaMNIST ({} px, {} small DenseNets)",
            "d d",
            lambda: (
                manifest("pneumoniamnist")["config"]["image_size"],
                manifest("pneumoniamnist")["num_members"],
            ),
        ),
        Figure(
            "scoring benchmark size",
            README,
            "loss-corrected scores for {} betas × {} scores ({} MB)",
            ",.0f ,.0f .0f",
            lambda: (
                argparse_default("scoring", "--betas"),
                argparse_default("scoring", "--scores"),
                argparse_default("scoring", "--betas")
                * argparse_default("scoring", "--scores")
                * np.dtype(np.float32).itemsize
                / 1e6,
            ),
        ),
        Figure(
            "sweep benchmark size",
            README,
            "`beta_sweep` at {} scores × {} betas × {} bootstrap replicates, … (timed on {} "
            "betas, scaled)",
            ",.0f ,.0f .0f .0f",
            lambda: tuple(
                argparse_default("sweep", flag)
                for flag in ("--n", "--betas", "--bootstrap", "--baseline-betas")
            ),
        ),
        Figure(
            "tests at XLA level 0",
            "tests/_training_helpers.py",
            "the suite's tests took {} s of work against … {} s at level {}",
            ".0f ,.0f d",
            lambda: (
                record("test_suite/2026-11-27_xla_levels.json")["level_0"]["summed_test_seconds"],
                record("test_suite/2026-11-27_xla_levels.json")["level_1"]["summed_test_seconds"],
                1,
            ),
        ),
        Figure(
            "test suite time",
            README,
            "The suite took {} s on a quiet {}-core machine ({}, `docs/results/test_suite/`).",
            ".0f d date",
            lambda: (
                record("test_suite/2026-11-29_slimmer.json")["pytest_seconds"],
                2,
                record("test_suite/2026-11-29_slimmer.json")["date"],
            ),
        ),
        Figure(
            "sweep_train benchmark",
            README,
            "UCI Adult at equal work, {} betas × {} rotations = {} models, each a distinct fit "
            "(exact fits, ridge {}), … ({} fits timed, scaled); equal quality checked | three "
            "single runs in a row ({}; the records name no CPU model, {} cores; "
            "`docs/results/sweep_train/`), each ours once, then the baseline's {} fits once: {}× "
            "with an empty compilation cache, then {}× ({} s vs {} s) and {}× ({} s vs {} s) "
            "with JAX's programs loaded from it. Not a median of interleaved runs: the baseline's "
            "{} fits took {} and {} s in the two warm runs ({} to {} s across this folder's CPU "
            "records). Corrected ECEs within {} |",
            ".0f .0f .0f .0es d date d d .1f .1f .2f .1f .1f .2f .1f d .2f .2f .2f .2f .4f",
            lambda: (
                *(sweep_work(CPU_SWEEP_EQUAL)[k] for k in ("betas", "rotations", "models", "l2")),
                baseline_fits(CPU_SWEEP_EQUAL)[0],
                record(f"sweep_train/{CPU_SWEEP_EQUAL}")["date"],
                baseline_fits(CPU_SWEEP_EQUAL)[2],
                baseline_fits(CPU_SWEEP_EQUAL)[0],
                record("sweep_train/2026-11-28_cpu_2core_equal_work_cold.json")["ratio"],
                record("sweep_train/2026-11-28_cpu_2core_equal_work_1.json")["ratio"],
                *sweep_train_row("2026-11-28_cpu_2core_equal_work_1.json")[:2],
                record(f"sweep_train/{CPU_SWEEP_EQUAL}")["ratio"],
                *sweep_train_row(CPU_SWEEP_EQUAL)[:2],
                baseline_fits(CPU_SWEEP_EQUAL)[0],
                baseline_fits("2026-11-28_cpu_2core_equal_work_1.json")[1],
                baseline_fits(CPU_SWEEP_EQUAL)[1],
                *min_max([baseline_fits(name)[1] for name in _cpu_sweep_records()]),
                record(f"sweep_train/{CPU_SWEEP_EQUAL}")["corrected_ece_diff_max"],
            ),
        ),
        Figure(
            "train_step benchmark",
            README,
            "two runs of {} interleaved steps each ({}; the records name no CPU model, {} cores; "
            "`docs/results/cpu_train_step/`), each the ratio of the two frameworks' median "
            "steps: **{}×** and **{}×** at batch {} @ {} px, **{}×** and **{}×** at batch {} @ "
            "{} px |",
            "d date d .2f .2f d d .2f .2f d d",
            lambda: (
                [record(r)["repeats"] for r in (KEEP, RERUN)],
                [file_date(r) for r in (KEEP, RERUN)],
                [record(r)["cores"] for r in (KEEP, RERUN)],
                record(KEEP)["ratios"]["b16_224px"],
                record(RERUN)["ratios"]["b16_224px"],
                record(KEEP)["results"][0]["batch"],
                record(KEEP)["results"][0]["size"],
                record(KEEP)["ratios"]["b64_64px"],
                record(RERUN)["ratios"]["b64_64px"],
                record(RERUN)["results"][1]["batch"],
                record(RERUN)["results"][1]["size"],
            ),
        ),
        Figure(
            "ensemble benchmark",
            README,
            "K = {} small-DenseNet members in one step at {} px, against {} single-model steps",
            "d d d",
            lambda: (ensemble()["members"], ensemble()["image"][0], ensemble()["members"]),
        ),
        Figure(
            "ensemble benchmark ratio",
            README,
            "one run of {} interleaved steps of every candidate ({}; the record names no CPU "
            "model; `docs/results/cpu_ensemble/`), the ratio of the medians: the CPU default "
            "(`map` with `mixed` convolutions, whole members on each of {} CPU devices, one per "
            "core) **{}×** |",
            "d date d .2f",
            lambda: (
                ensemble()["repeats"],
                file_date(CPU_ENSEMBLE_RUNS[-1]),
                ensemble()["devices"],
                ensemble()["ratio"],
            ),
        ),
        Figure(
            "GPU training step and ensemble",
            README,
            "single runs of {} interleaved steps gave, as the ratio of the medians, the fp32 "
            "DenseNet-121 step at **{}×** PyTorch's (batch {} at {} px) and the K = {} ensemble "
            "step at **{}×** the {} single steps (`vmap`)",
            "d .2f d d d .2f d",
            lambda: (
                [record(GPU5_STEP)["repeats"], record(GPU5_F32)["repeats"]],
                record(GPU5_STEP)["ratios"]["b16_224px"],
                16,
                224,
                record(GPU5_F32)["members"],
                record(GPU5_F32)["ratio"],
                record(GPU5_F32)["members"],
            ),
        ),
        Figure(
            "GPU sweep_train",
            README,
            "the sweep of {} logistic models took {} s against {} s for scikit-learn on its {} "
            "cores, **{}×** ({}, `docs/results/sweep_train/`)",
            ",.0f .1f .0f d .1f date",
            lambda: (
                sweep_work(GPU_SWEEP)["models"],
                *sweep_train_row(GPU_SWEEP)[:2],
                baseline_fits(GPU_SWEEP)[2],
                record(f"sweep_train/{GPU_SWEEP}")["ratio"],
                record(f"sweep_train/{GPU_SWEEP}")["date"],
            ),
        ),
    ]


def _digits_run() -> list[Item]:
    run = "reproduce_digits"
    m = functools.partial(manifest, run)
    cases = [
        Figure(
            "digits data",
            DIGITS_RUN,
            "scikit-learn's {} handwritten digits (built in, nothing to download), label 1 for the "
            "digit {} ({} images, {}%), shrunk from their native {} x {} pixels to {} x {}",
            ",d d d .1f d d d d",
            lambda: (
                len(stored_labels(run)),
                _positive_digit(),
                stored_labels(run).sum(),
                100 * stored_labels(run).mean(),
                *digits().input_shape[:2],
                m()["config"]["image_size"],
                m()["config"]["image_size"],
            ),
        ),
        Figure(
            "digits folds",
            DIGITS_RUN,
            "**Folds.** {} folds rotated {}/{}/{} (train/validation/test): {} members, {} "
            "rotations x {} betas ({}, {}, {}), {} seed; every observation is scored by {} "
            "member per beta",
            "d d d d d d d .1f .1f .2f d words",
            lambda: (
                m()["config"]["n_folds"],
                m()["config"]["n_folds"]
                - m()["config"]["n_val_folds"]
                - m()["config"]["n_test_folds"],
                m()["config"]["n_val_folds"],
                m()["config"]["n_test_folds"],
                m()["num_members"],
                m()["num_batches"],
                len(m()["config"]["betas"]),
                *m()["config"]["betas"],
                len(m()["config"]["seeds"]),
                [s["max"] for s in record(f"{run}/ensemble.json")["ensemble_size"].values()],
            ),
        ),
        Figure(
            "digits training",
            DIGITS_RUN,
            "Adam at {}, batches of {}, at most {} epochs",
            ".0es d d",
            lambda: tuple(m()["config"][k] for k in ("learning_rate", "batch_size", "epochs")),
        ),
        Figure(
            "digits AUROC at 4 px",
            DIGITS_RUN,
            "At 4 px the classes overlap (AUROC {}-{})",
            ".2f .2f",
            lambda: min_max(over_betas(run, "raw", "auroc")),
        ),
        Figure(
            "digits decile rates",
            DIGITS_RUN,
            "deciles hold event rates from {}% to {}%",
            ".1f .0f",
            lambda: (100 * min(r for r in decile_rates() if r > 0), 100 * max(decile_rates())),
        ),
        Figure(
            "digits empty-decile bound",
            DIGITS_RUN,
            "with a bar up to the {}% Clopper-Pearson upper bound `1 - {}^(1/n)` ({} for the n = "
            "{} images of a decile)",
            ".0f .3f .3f d",
            lambda: (100 * plots._CONFIDENCE, (1 - plots._CONFIDENCE) / 2, *_empty_decile_bound()),
        ),
        Figure(
            "digits empty deciles",
            DIGITS_RUN,
            "{} (β = 0.9, 0.99) or {} (β = 0.5) of the {} deciles hold no eight",
            "Words words words",
            lambda: (
                [empty_deciles(0.9), empty_deciles(0.99)],
                empty_deciles(0.5),
                m()["config"]["n_bins"],
            ),
        ),
        Figure(
            "digits smooth ECE",
            DIGITS_RUN,
            "raw {}, {} and {} at β = 0.5, 0.9 and 0.99, loss-corrected {}, {} and {}",
            ".3f .3f .3f .3f .3f .3f",
            lambda: (
                *(table(run, b, "raw", "smooth_ece") for b in ("0.5", "0.9", "0.99")),
                *(table(run, b, "loss_corrected", "smooth_ece") for b in ("0.5", "0.9", "0.99")),
            ),
        ),
        Figure(
            "digits test at 0.5",
            DIGITS_RUN,
            "the β = 0.5 model is not quite calibrated (the test rejects it at {}%)",
            "<",
            lambda: 100 * table(run, "0.5", "raw", "loss_calibration_p_value"),
        ),
        Figure(
            "digits beta calibration",
            DIGITS_RUN,
            "gives ECE {}, {} and {} at β = 0.5, 0.9 and 0.99, within {} of Platt scaling",
            ".4f .4f .4f <=",
            lambda: (
                *(table(run, b, "beta") for b in ("0.5", "0.9", "0.99")),
                max(
                    abs(table(run, b, "beta") - table(run, b, "platt"))
                    for b in ("0.5", "0.9", "0.99")
                ),
            ),
        ),
    ]

    def results() -> str:
        header = "β | raw ECE | loss-corrected ECE | cross-fitted Platt ECE | AUROC"
        rows = [
            [
                beta,
                *(f(cells[method]["ece"], ".4f") for method in ("raw", "loss_corrected", "platt")),
                f(cells["raw"]["auroc"], ".4f"),
                f(cells["raw"]["loss_calibration_p_value"], ".3f"),
            ]
            for beta, cells in record(f"{run}/table.json").items()
        ]
        return markdown_table([*header.split(" | "), "loss-calibration test p"], rows)

    return [*cases, Table("reproduce_digits results", DIGITS_RUN, results)]


def _empty_decile_bound() -> tuple[float, int]:
    """The Clopper-Pearson upper bound of a decile without events, and a decile's size."""
    n = int(max(max(np.asarray(c.count)) for c in decile_curves().values()))
    return float(clopper_pearson_interval(0.0, float(n), plots._CONFIDENCE)[1]), n


def _pneumonia_run() -> list[Item]:
    run = "pneumoniamnist"
    m = functools.partial(manifest, run)
    betas = ("0.5", "0.9", "0.99")
    cases = [
        Figure(
            "PneumoniaMNIST data",
            PNEUMONIA_RUN,
            "All {} images of the assembled MedMNIST PneumoniaMNIST ({}x{}, grayscale), pooled. "
            "Pneumonia is the positive class, {}% of the images.",
            ",d d d .1f",
            lambda: (
                m()["num_examples"],
                m()["config"]["image_size"],
                m()["config"]["image_size"],
                100 * stored_labels(run).mean(),
            ),
        ),
        Figure(
            "PneumoniaMNIST folds",
            PNEUMONIA_RUN,
            "**Folds.** {} folds stratified by label, rotated {}/{}/{} (train/validation/test). "
            "That gives {} members: {} rotations x {} betas, {} seed. Every observation is scored "
            "by exactly {} member per beta (ensemble size {}).",
            "d d d d d d d d words d",
            lambda: (
                m()["config"]["n_folds"],
                m()["config"]["n_folds"]
                - m()["config"]["n_val_folds"]
                - m()["config"]["n_test_folds"],
                m()["config"]["n_val_folds"],
                m()["config"]["n_test_folds"],
                m()["num_members"],
                m()["num_batches"],
                len(m()["config"]["betas"]),
                len(m()["config"]["seeds"]),
                [s["max"] for s in record(f"{run}/ensemble.json")["ensemble_size"].values()],
                [s["min"] for s in record(f"{run}/ensemble.json")["ensemble_size"].values()],
            ),
        ),
        Figure(
            "PneumoniaMNIST model",
            PNEUMONIA_RUN,
            "(`densenet_small`: blocks {}-{}-{}, growth {})",
            "d d d d",
            _densenet_small,
        ),
        Figure(
            "PneumoniaMNIST training",
            PNEUMONIA_RUN,
            "Adam at {}, batches of {}, random horizontal flips, ImageNet normalisation. The "
            "learning rate is divided by {} after a validation plateau, with early stopping after "
            "{} epochs without improvement, for **at most {} epochs**.",
            ".0es d .0f d d",
            lambda: (
                m()["config"]["learning_rate"],
                m()["config"]["batch_size"],
                _lr_decay_divisor(),
                m()["config"]["patience"],
                m()["config"]["epochs"],
            ),
        ),
        Figure(
            "PneumoniaMNIST epoch cap",
            PNEUMONIA_RUN,
            "{} of the {} members reached the {}-epoch cap",
            "d d d",
            lambda: (
                stopped_epochs(run).count(-1),
                len(stopped_epochs(run)),
                m()["config"]["epochs"],
            ),
        ),
        Figure(
            "PneumoniaMNIST raw scores",
            PNEUMONIA_RUN,
            "At β = 0.99 the raw ECE is {}, and the Brier score rises from {} (β = 0.5) to {}.",
            ".2f .3f .3f",
            lambda: (
                table(run, "0.99", "raw"),
                table(run, "0.5", "raw", "brier"),
                table(run, "0.99", "raw", "brier"),
            ),
        ),
        Figure(
            "PneumoniaMNIST test does not reject",
            PNEUMONIA_RUN,
            "**Loss calibration of the raw scores is not rejected at any β** "
            "(Definition 2, p > {})",
            ">",
            lambda: min(over_betas(run, "raw", "loss_calibration_p_value")),
        ),
        Figure(
            "PneumoniaMNIST correction factor",
            PNEUMONIA_RUN,
            "It cuts ECE by {}x at both β = 0.9 and β = 0.99",
            ".0f",
            lambda: [
                table(run, b, "raw") / table(run, b, "loss_corrected") for b in ("0.9", "0.99")
            ],
        ),
        Figure(
            "PneumoniaMNIST fitted recalibration",
            PNEUMONIA_RUN,
            "which learn from labels, have ECE {}-{}",
            ".3f .3f",
            lambda: min_max(over_betas(run, "platt") + over_betas(run, "isotonic")),
        ),
        Figure(
            "PneumoniaMNIST remaining ECE",
            PNEUMONIA_RUN,
            "so the remaining {}-{} is the cost",
            ".3f .3f",
            lambda: min_max([table(run, b, "loss_corrected") for b in ("0.9", "0.99")]),
        ),
        Figure(
            "PneumoniaMNIST beta calibration",
            PNEUMONIA_RUN,
            "ECE {}, {} and {} against Platt's {}, {} and {}, and log loss",
            ".4f .4f .4f .4f .4f .4f",
            lambda: (
                *(table(run, b, "beta") for b in betas),
                *(table(run, b, "platt") for b in betas),
            ),
        ),
        Figure(
            "PneumoniaMNIST beta calibration log loss",
            PNEUMONIA_RUN,
            "against Platt's … and log loss within {}.",
            "<=",
            lambda: max(
                abs(table(run, b, "beta", "log_loss") - table(run, b, "platt", "log_loss"))
                for b in betas
            ),
        ),
        Figure(
            "PneumoniaMNIST temperature",
            PNEUMONIA_RUN,
            "does not remove the β shift ({} at β = 0.99)",
            ".2f",
            lambda: table(run, "0.99", "temperature"),
        ),
        Figure(
            "PneumoniaMNIST AUROC",
            PNEUMONIA_RUN,
            "**AUROC** is {}-{} at every β",
            ".3f .3f",
            lambda: min_max(over_betas(run, "raw", "auroc")),
        ),
    ]

    def results() -> str:
        def ece(cells: dict) -> str:
            return f"{f(cells['ece'], '.3f')} ({f(cells['ece_debiased'], '.3f')})"

        rows = [
            [
                beta,
                ece(cells["raw"]),
                ece(cells["loss_corrected"]),
                f(cells["platt"]["ece"], ".3f"),
                f"gap {f(cells['raw']['loss_calibration_gap'], '.3f')}, "
                f"p = {f(cells['raw']['loss_calibration_p_value'], '.2f')}",
            ]
            for beta, cells in record(f"{run}/table.json").items()
        ]
        header = (
            "β | raw | loss-corrected | Platt (cross-fitted) | loss-calibration test of raw scores"
        )
        return markdown_table(header.split(" | "), rows)

    return [*cases, Table("pneumoniamnist results", PNEUMONIA_RUN, results)]


def _ece_with_interval(cells: dict) -> str:
    """An ECE of a sweep's table with its 95% bootstrap interval: ``0.021 [0.018, 0.024]``."""
    low, high = cells["ece_interval"]
    return f"{f(cells['ece'], '.3f')} [{f(low, '.3f')}, {f(high, '.3f')}]"


def _ece_by_beta(run: str, rows: list[tuple], key_name: str = "beta") -> str:
    """A sweep's raw and loss-corrected ECE, each with its 95% bootstrap interval, at the grid's
    betas (a focal sweep's alphas: ``key_name``) nearest those of ``rows``: ``(beta, the format
    of its label[, what follows the label])``."""
    lines = []
    for beta, spec, *note in rows:
        nearest = min(sweep(run), key=lambda b: abs(b - beta))
        cells = sweep(run)[nearest]
        label = f(nearest, spec) + "".join(note)
        lines.append(
            [label, _ece_with_interval(cells["raw"]), _ece_with_interval(cells["loss_corrected"])]
        )
    return markdown_table([key_name, "raw ECE [95% CI]", "loss-corrected ECE [95% CI]"], lines)


def corrected_above_unweighted(run: str, beta: float) -> tuple[int, float]:
    """The betas of a sweep whose loss-corrected ECE's interval lies wholly above the interval of
    the raw ECE at the grid's beta nearest ``beta`` (the nearly unweighted model): how many, and
    the smallest. They must be the top of the grid, as the READMEs say ("from ... up")."""
    high = sweep_at(run, beta)["raw"]["ece_interval"][1]
    grid = sorted(sweep(run))
    above = [b for b in grid if sweep(run)[b]["loss_corrected"]["ece_interval"][0] > high]
    if not above or above != grid[-len(above) :]:
        raise ValueError(f"{run}: the betas above are not the top of the grid: {above}")
    return len(above), above[0]


def _ece_and_interval(cells: dict, method: str = "loss_corrected") -> tuple[float, float, float]:
    """A sweep row's ECE of ``method`` and its 95% interval."""
    return (cells[method]["ece"], *cells[method]["ece_interval"])


MULTICLASS_RUN = "docs/results/reproduce_digits_multiclass/README.md"
_MC = "reproduce_digits_multiclass"


@functools.cache
def _mc_scores() -> dict[str, np.ndarray]:
    """The multiclass reproduction's ensemble scores (raw and corrected) and labels."""
    with np.load(RESULTS / _MC / "ensemble_scores.npz") as z:
        return {name: z[name] for name in z.files}


def _class_ece(scores: np.ndarray, j: int) -> float:
    """ECE (10 quantile bins) of class ``j``'s scores against ``1{y = j}``."""
    y = _mc_scores()["labels"]
    a = np.clip(scores[:, j], 1e-7, 1 - 1e-7).astype(np.float32)
    return float(expected_calibration_error(a, (y == j).astype(np.int32), 10, "quantile"))


def _mc_series() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The unweighted raw, weighted raw and weighted corrected class scores."""
    z = _mc_scores()
    return z["scores"][0], z["scores"][1], z["corrected"][1]


def _mc_row(metric: str) -> tuple[float, float, float]:
    t = record(f"{_MC}/table.json")
    return (
        t["ones"]["raw"][metric],
        t["w[8]=10"]["raw"][metric],
        t["w[8]=10"]["loss_corrected"][metric],
    )


def _mc_weighting(config: dict) -> tuple[int, int]:
    """The class and the weight of the run's grid ``ones;w[CLASS]=WEIGHT``."""
    found = re.fullmatch(r"ones;w\[(\d+)\]=(\d+)", config["loss"]["weights"])
    return int(found[1]), int(found[2])


def _mc_top_gap(a: np.ndarray) -> float:
    """Mean top score minus accuracy."""
    y = _mc_scores()["labels"]
    return float(np.mean(a.max(-1)) - np.mean(a.argmax(-1) == y))


def _mc_best_epochs() -> list[int]:
    epochs = []
    for path in sorted((RESULTS / _MC / "batches").glob("batch-*.npz")):
        with np.load(path) as batch:
            epochs += [int(np.nanargmin(v)) + 1 for v in batch["val_loss"]]
    return epochs


def _mc_table() -> str:
    """The multiclass run's metrics: the unweighted ensemble, the weighted one raw and corrected."""
    y = _mc_scores()["labels"]
    series = _mc_series()

    def row(label: str, values: list[float], bold: int | None = None) -> list[str]:
        cells = [f(v, ".4f") for v in values]
        if bold is not None:
            cells[bold] = f"**{cells[bold]}**"
        return [label, *cells]

    others = [np.mean([_class_ece(a, j) for j in range(10) if j != 8]) for a in series]
    rows = [
        row("ECE of class 8's scores", [_class_ece(a, 8) for a in series], bold=2),
        row(
            f"mean class-8 score (frequency {f(np.mean(y == 8), '.4f')})",
            [a[:, 8].mean() for a in series],
        ),
        row("class-wise ECE", _mc_row("classwise_ece")),
        row("mean ECE of the nine other classes", others),
        row("top-label ECE", _mc_row("top_label_ece")),
        row("Brier score", _mc_row("brier")),
        row("log loss", _mc_row("log_loss")),
        row("accuracy", _mc_row("accuracy")),
    ]
    return markdown_table(["", "unweighted", "weighted, raw", "weighted, corrected"], rows)


def _top_label_with_interval(cells: dict) -> tuple[float, float, float]:
    return (cells["top_label_ece"], *cells["top_label_ece_interval"])


def _native_intervals_as_stated(native: dict) -> tuple:
    """Nothing to write: checks that the 8 px weighted ensemble's top-label intervals (raw and
    corrected) lie above the unweighted one's and overlap each other, as the README says."""
    raw, corrected = (
        native["w[8]=10"][m]["top_label_ece_interval"] for m in ("raw", "loss_corrected")
    )
    unweighted = native["ones"]["raw"]["top_label_ece_interval"]
    if not (raw[0] > unweighted[1] and corrected[0] > unweighted[1]):
        raise ValueError(f"not above the unweighted interval {unweighted}: {raw}, {corrected}")
    if not (raw[0] <= corrected[1] and corrected[0] <= raw[1]):
        raise ValueError(f"raw {raw} and corrected {corrected} do not overlap")
    return ()


def _digits_multiclass_run() -> list[Item]:
    config = manifest(_MC)["config"]
    y = _mc_scores()["labels"]
    unweighted, raw, corrected = _mc_series()
    changed = raw.argmax(-1) != corrected.argmax(-1)
    native = record(f"{_MC}/native_8px/table.json")
    return [
        Figure(
            "title",
            MULTICLASS_RUN,
            "all {} digits, the digit {} weighted {}x",
            "d d d",
            lambda: (int(y.max()) + 1, *_mc_weighting(config)),
        ),
        Figure(
            "data",
            MULTICLASS_RUN,
            "scikit-learn's {} handwritten digits, all {} classes, shrunk to {} x {} pixels",
            ",d d d d",
            lambda: (len(y), int(y.max()) + 1, *[config["data"]["image_size"]] * 2),
        ),
        Figure(
            "prevalence of 8",
            MULTICLASS_RUN,
            "(the 8s are {}% of the images)",
            ".1f",
            lambda: 100 * np.mean(y == 8),
        ),
        Figure(
            "grid",
            MULTICLASS_RUN,
            "over the grid `ones;w[{}]={}`",
            "d d",
            lambda: tuple(
                int(v)
                for v in re.fullmatch(r"ones;w\[(\d+)\]=(\d+)", config["loss"]["weights"]).groups()
            ),
        ),
        Figure(
            "folds and members",
            MULTICLASS_RUN,
            "{} folds rotated {}/{}/{}, {} seed: {} members",
            "d d d d d d",
            lambda: (
                config["data"]["n_folds"],
                config["data"]["n_folds"] - config["data"]["n_val_folds"] - 1,
                config["data"]["n_val_folds"],
                config["data"]["n_test_folds"],
                len(config["train"]["seeds"]),
                len(stopped_epochs(_MC)),
            ),
        ),
        Figure(
            "training",
            MULTICLASS_RUN,
            "Adam at {}, batches of {}, early stopping with patience {} within at most {} "
            "epochs. {} of the {} members stopped early, at best epochs {}-{}.",
            ".0es d d d d d d d",
            lambda: (
                config["train"]["learning_rate"],
                config["train"]["batch_size"],
                config["train"]["patience"],
                config["train"]["epochs"],
                sum(e >= 0 for e in stopped_epochs(_MC)),
                len(stopped_epochs(_MC)),
                *min_max(_mc_best_epochs()),
            ),
        ),
        Table("reproduce_digits_multiclass results", MULTICLASS_RUN, _mc_table),
        Figure(
            "inflation",
            MULTICLASS_RUN,
            "(mean {} against a frequency of {})",
            ".3f .3f",
            lambda: (raw[:, 8].mean(), np.mean(y == 8)),
        ),
        Figure(
            "class 8 corrected",
            MULTICLASS_RUN,
            "brings the ECE of class 8 to {}",
            ".4f",
            lambda: _class_ece(corrected, 8),
        ),
        Figure(
            "divided by the weight", MULTICLASS_RUN, "so dividing by {} overshoots", "d", lambda: 10
        ),
        Figure(
            "other classes",
            MULTICLASS_RUN,
            "Their mean ECE is {} corrected and {} raw, … the unweighted ensemble's {}.",
            ".4f .4f .4f",
            lambda: tuple(
                np.mean([_class_ece(a, j) for j in range(10) if j != 8])
                for a in (corrected, raw, unweighted)
            ),
        ),
        Figure(
            "top-label gaps",
            MULTICLASS_RUN,
            "accuracy is {} (unweighted), {} (weighted, raw) and {} (corrected)",
            ".4f .4f .4f",
            lambda: tuple(_mc_top_gap(a) for a in (unweighted, raw, corrected)),
        ),
        Figure(
            "top labels changed",
            MULTICLASS_RUN,
            "changes the top label of {} images, all from an {} to another digit, and raises "
            "accuracy by {} points",
            "d d .1f",
            lambda: (
                int(changed.sum()),
                [int(v) for v in raw.argmax(-1)[changed]],
                100 * (np.mean(corrected.argmax(-1) == y) - np.mean(raw.argmax(-1) == y)),
            ),
        ),
        Figure(
            "native 8 px",
            MULTICLASS_RUN,
            "accuracy is {} (unweighted) and {} (weighted). The weighted ensemble's top-label ECE "
            "is {} [{}, {}] raw and {} [{}, {}] corrected (unweighted {} [{}, {}]), and its "
            "class-wise ECE {}-{} either way.",
            ".4f .4f .4f .4f .4f .4f .4f .4f .4f .4f .4f .4f .4f",
            lambda: (
                native["ones"]["raw"]["accuracy"],
                native["w[8]=10"]["raw"]["accuracy"],
                *_top_label_with_interval(native["w[8]=10"]["raw"]),
                *_top_label_with_interval(native["w[8]=10"]["loss_corrected"]),
                *_top_label_with_interval(native["ones"]["raw"]),
                *min_max(
                    [native["w[8]=10"][m]["classwise_ece"] for m in ("raw", "loss_corrected")]
                ),
            ),
        ),
        Figure(
            "native 8 px intervals",
            MULTICLASS_RUN,
            "Both of the weighted ensemble's top-label intervals lie above the unweighted one's. "
            "Its raw and corrected intervals overlap",
            "",
            lambda: _native_intervals_as_stated(native),
        ),
    ]


PMN_STOPPED = "docs/results/pneumoniamnist_early_stopping/README.md"


def _optimal_raw(posterior: float, beta: float = 0.99) -> float:
    """The paper's optimal score of a posterior under the beta-weighted log loss (eq. 8)."""
    return float(iml.optimal_score(np.float64(posterior), beta))


def _pmn_decile(run: str, k: int) -> tuple[float, float, float]:
    """Mean corrected score, rate and mean raw score of the k-th decile (1-based) of the corrected
    scores of a PneumoniaMNIST run's beta = 0.99 ensemble."""
    with np.load(RESULTS / run / "ensemble_scores.npz") as z:
        i = list(z["betas"]).index(0.99)
        raw, labels = z["scores"][i], z["labels"]
    q = np.asarray(iml.loss_corrected_score(raw, 0.99))
    edges = np.quantile(q, np.linspace(0, 1, 11))
    bins = np.clip(np.searchsorted(edges, q, side="right") - 1, 0, 9)
    m = bins == k - 1
    return q[m].mean(), labels[m].mean(), raw[m].mean()


PMN_SEEDS = "docs/results/pneumoniamnist_seeds/README.md"


def _cpu_run_time(run: str) -> tuple[int, str, float]:
    """A stored run's CPU devices (one per core), the day it started and its minutes, from the
    last line of its log."""
    m = record(f"{run}/manifest.json")
    seconds = int(record_line(f"{run}/log_tail.txt", r"\((\d+) s\)")[0])
    return len(m["devices"]), m["created_at"][:10], seconds / 60


def _pmn_seed_scores(run: str) -> tuple[np.ndarray, np.ndarray]:
    """``[seeds, N]`` raw test scores of a PneumoniaMNIST run's members, one row per seed (each
    observation is in one rotation's test fold), and the ``[N]`` labels."""
    labels = np.load(RESULTS / run / "data" / "folds.npz")["labels"]
    rows: dict[int, np.ndarray] = {}
    for path in sorted((RESULTS / run / "batches").glob("*.npz")):
        with np.load(path) as b:
            for j, seed in enumerate(b["seed"]):
                lo, hi = b["test_offsets"][j], b["test_offsets"][j + 1]
                rows.setdefault(int(seed), np.full(len(labels), np.nan))[b["test_idx"][lo:hi]] = b[
                    "test_scores"
                ][lo:hi]
    scores = np.clip(np.stack([rows[s] for s in sorted(rows)]), 1e-7, 1 - 1e-7)
    assert not np.isnan(scores).any()
    return scores, labels


PMN_FLOOR = "docs/results/pneumoniamnist_lr_floor/README.md"


def _pmn_members(run: str, beta: float) -> dict[str, np.ndarray]:
    """Per member of ``beta`` in a run: its best and last epochs (1-based), its learning rate at
    the best epoch and its best validation loss."""
    rows: dict[str, list] = {"best": [], "stop": [], "lr": [], "val": []}
    for path in sorted((RESULTS / run / "batches").glob("*.npz")):
        with np.load(path) as b:
            for j in np.flatnonzero(b["beta"] == beta):
                v = np.where(np.isnan(b["val_loss"][j]), np.inf, b["val_loss"][j])
                k = int(np.argmin(v))
                rows["best"].append(k + 1)
                rows["stop"].append(int(b["stopped_epoch"][j]) + 1)
                rows["lr"].append(b["lr"][j][k])
                rows["val"].append(v[k])
    return {key: np.asarray(values) for key, values in rows.items()}


def _pmn_trained_at_floor(run: str, beta: float) -> bool:
    """Whether every member of ``beta`` in a run found its best epoch at the run's learning-rate
    floor and stopped on its validation loss before the epoch cap."""
    train = record(f"{run}/manifest.json")["config"]["train"]
    members = _pmn_members(run, beta)
    return bool(
        np.allclose(members["lr"], train["min_learning_rate"])
        and members["stop"].max() < train["epochs"]
    )


def _schedule_ratio(name: str) -> tuple[float, float, float]:
    """A schedule's ECE ratio (beta 0.99 / 0.5) and its interval, from the stored record."""
    rows = {r["schedule"]: r for r in record("pneumoniamnist_schedules/ratios.json")}
    return (rows[name]["ratio"], *rows[name]["ratio_interval"])


def _schedule_ratio_range() -> tuple[float, float]:
    """The lowest and highest ratio without the floor (the paper's schedule, patience 2 and 6)."""
    ratios = [_schedule_ratio(n)[0] for n in ("6 epochs", "patience 2", "patience 6")]
    return min(ratios), max(ratios)


def _pneumonia_schedules() -> list[Item]:
    """The README's ratios of the corrected ECE at beta = 0.99 to that at 0.5, per schedule."""

    def rows() -> dict[str, Any]:
        return {r["schedule"]: r for r in record("pneumoniamnist_schedules/ratios.json")}

    def ratio(name: str) -> tuple[float, float, float]:
        return (rows()[name]["ratio"], *rows()[name]["ratio_interval"])

    def patience(name: str) -> int:
        return record(f"{name}/manifest.json")["config"]["train"]["patience"]

    def floor(field: str) -> Any:
        return rows()["floor 1e-4"][field]

    @functools.cache
    def seeds() -> dict[str, Any]:
        first, labels = _pmn_seed_scores("pneumoniamnist_lr_floor")
        rest, other = _pmn_seed_scores("pneumoniamnist_lr_floor_seeds")
        assert np.array_equal(labels, other)
        return _pmn_averages(np.concatenate([first, rest]), labels)

    return [
        Figure(
            "README: PneumoniaMNIST ratios under the paper's schedule and early stopping",
            README,
            "It is {} [{}, {}] times as large with at most {} epochs, {} [{}, {}] with early "
            "stopping at a patience of {} (`pneumoniamnist_early_stopping/`), and {} [{}, {}] at "
            "a patience of {} (`pneumoniamnist_patience/`).",
            ".1f .1f .1f d .1f .1f .1f d .1f .1f .1f d",
            lambda: (
                *ratio("6 epochs"),
                record("pneumoniamnist/manifest.json")["config"]["epochs"],
                *ratio("patience 2"),
                patience("pneumoniamnist_early_stopping"),
                *ratio("patience 6"),
                patience("pneumoniamnist_patience"),
            ),
        ),
        Figure(
            "README: PneumoniaMNIST with a floor",
            README,
            "The corrected ECE at β = {} is then {}, and the ratio is {} [{}, {}]: the difference, "
            "+{} [{}, +{}], is not significant at 5%",
            ".2f .3f .1f .1f .1f .3f .3f .3f",
            lambda: (
                0.99,
                floor("ece_0.99_corrected"),
                *ratio("floor 1e-4"),
                floor("difference"),
                *floor("difference_interval"),
            ),
        ),
        Figure(
            "README: PneumoniaMNIST floor with 4 seeds",
            README,
            "With the floor, {} seeds at β = {} each reach {} to {} "
            "(`pneumoniamnist_lr_floor_seeds/`). The paper's average of their raw scores, "
            "corrected, gives {}, a ratio of {} [{}, {}]; the average of their logits, corrected, "
            "gives {}, a ratio of {} [{}, {}].",
            "d .2f .3f .3f .3f .1f .1f .1f .3f .1f .1f .1f",
            lambda: (
                len(seeds()["seeds"]),
                0.99,
                min(seeds()["seeds"]),
                max(seeds()["seeds"]),
                seeds()["mean_raw"],
                *ratio("floor 1e-4, 4 seeds, mean score"),
                seeds()["mean_logit"],
                *ratio("floor 1e-4, 4 seeds, mean logit"),
            ),
        ),
    ]


def _pmn_eces(run: str, beta: str, bold: bool = False) -> list[str]:
    """A PneumoniaMNIST run's ECE at ``beta``: raw, loss-corrected (in bold) and Platt."""
    cells = record(f"{run}/table.json")[beta]
    raw, corrected, platt = (f(cells[m]["ece"], ".3f") for m in ("raw", "loss_corrected", "platt"))
    return [raw, f"**{corrected}**" if bold else corrected, platt]


def _pneumonia_lr_floor_run() -> list[Item]:
    run, patience = "pneumoniamnist_lr_floor", "pneumoniamnist_patience"

    def table(name: str = run) -> dict:
        return record(f"{name}/table.json")

    def train(name: str = run) -> dict:
        return record(f"{name}/manifest.json")["config"]["train"]

    def logit(p: float) -> float:
        return math.log(p / (1 - p))

    def results() -> str:
        """The beta = 0.99 ensembles with and without the floor, and the unweighted one."""
        stopped = "pneumoniamnist_early_stopping"
        floor = f"floor {f(train()['min_learning_rate'], '.0es')}"
        rows = [
            [f"this run: {floor}, patience {train()['patience']}", *_pmn_eces(run, "0.99", True)],
            [
                f"no floor, patience {train(patience)['patience']} (`../{patience}/`)",
                *_pmn_eces(patience, "0.99"),
            ],
            [
                f"no floor, patience {train(stopped)['patience']} (`../{stopped}/`)",
                *_pmn_eces(stopped, "0.99"),
            ],
            [
                f"β = 0.5, no floor, patience {train(patience)['patience']}: the unweighted "
                "reference",
                *_pmn_eces(patience, "0.5"),
            ],
        ]
        return markdown_table(["run", "raw", "loss-corrected", "Platt (cross-fitted)"], rows)

    members = functools.partial(_pmn_members, run, 0.99)
    return [
        Figure(
            "PneumoniaMNIST early stopping: the floor",
            PMN_STOPPED,
            "For a network, {} remedies were tried since. … The third is a floor of {} on the "
            "learning rate, in `../pneumoniamnist_lr_floor/`: the members train on, their raw "
            "scores reach the optimal rule's, and the corrected ECE at β = {} falls to {},",
            "words .0es .2f .3f",
            lambda: (
                3,
                train()["min_learning_rate"],
                0.99,
                table()["0.99"]["loss_corrected"]["ece"],
            ),
        ),
        Figure(
            "PneumoniaMNIST patience: the floor",
            PMN_PATIENCE,
            "`../pneumoniamnist_lr_floor/` reaches a corrected ECE of {} at β = {}.",
            ".3f .2f",
            lambda: (table()["0.99"]["loss_corrected"]["ece"], 0.99),
        ),
        Figure(
            "PneumoniaMNIST seeds: the floor",
            PMN_SEEDS,
            "(`../pneumoniamnist_lr_floor/`): the members train on, and the corrected ECE at "
            "β = {} falls to {},",
            ".2f .3f",
            lambda: (0.99, table()["0.99"]["loss_corrected"]["ece"]),
        ),
        Figure(
            "PneumoniaMNIST floor: the patience run",
            PMN_FLOOR,
            "left most β = {} members training at rates of {} and below. Their raw scores "
            "stopped short of the optimal rule's, and the corrected ECE stayed at {}. This run "
            "keeps the rate from falling below {}",
            ".2f .0es .3f .0es",
            lambda: (
                0.99,
                1e-6 if np.mean(_pmn_members(patience, 0.99)["lr"] <= 1.01e-6) > 0.5 else None,
                table(patience)["0.99"]["loss_corrected"]["ece"],
                train()["min_learning_rate"],
            ),
        ),
        Figure(
            "PneumoniaMNIST floor: recipe",
            PMN_FLOOR,
            "Adam from {}e-{}, a patience of {} epochs and a cap of {}. It trains β = {} only.",
            ".0f d d d .2f",
            lambda: (
                train()["learning_rate"] * 1e3,
                3,
                train()["patience"],
                train()["epochs"],
                *record(f"{run}/manifest.json")["config"]["loss"]["betas"],
            ),
        ),
        Figure(
            "PneumoniaMNIST floor: time",
            PMN_FLOOR,
            "on the {}-core CPU on {}, in {} minutes",
            "d date .0f",
            lambda: _cpu_run_time(run),
        ),
        Figure(
            "PneumoniaMNIST floor: the command",
            PMN_FLOOR,
            "--config.train.min_learning_rate={}e-{}",
            ".0f d",
            lambda: (train()["min_learning_rate"] * 1e4, 4),
        ),
        Figure(
            "PneumoniaMNIST floor: verdict",
            PMN_FLOOR,
            "Trained on at a floor of {}, the β = {} networks",
            ".0es .2f",
            lambda: (train()["min_learning_rate"], 0.99),
        ),
        Table("pneumoniamnist_lr_floor results", PMN_FLOOR, results),
        Figure(
            "PneumoniaMNIST floor: the members",
            PMN_FLOOR,
            "Their best epochs came at {} to {}, all at the floor, and every member stopped on its "
            "own validation loss (at epochs {} to {}, none at the cap). Their best validation "
            "losses, {} to {}, are below the patience run's {} to {}.",
            "d d d d .4f .4f .4f .4f",
            lambda: (
                (
                    *min_max(list(members()["best"])),
                    *min_max(list(members()["stop"])),
                    *min_max(list(members()["val"])),
                    *min_max(list(_pmn_members(patience, 0.99)["val"])),
                )
                if _pmn_trained_at_floor(run, 0.99)
                else None
            ),
        ),
        Figure(
            "PneumoniaMNIST floor: the 7th decile",
            PMN_FLOOR,
            "The {}th decile of corrected scores has a mean raw logit of {}, against {} without "
            "the floor. Its mean corrected score is {}, against an observed rate of {}.",
            "d .1f .1f .3f .3f",
            lambda: (
                7,
                logit(_pmn_decile(run, 7)[2]),
                logit(_pmn_decile(patience, 7)[2]),
                *_pmn_decile(run, 7)[:2],
            ),
        ),
        Figure(
            "PneumoniaMNIST floor: the test",
            PMN_FLOOR,
            "does not reject the raw scores** (p = {}).",
            ".2f",
            lambda: table()["0.99"]["raw"]["loss_calibration_p_value"],
        ),
        Figure(
            "PneumoniaMNIST floor: the paper's starting rate",
            PMN_FLOOR,
            "The floor was chosen once, at {} (the paper's starting rate)",
            ".0es",
            lambda: train()["min_learning_rate"] if TrainConfig().learning_rate == 1e-4 else None,
        ),
    ]


PMN_FLOOR_BETAS = "docs/results/pneumoniamnist_lr_floor_other_betas/README.md"


def _pneumonia_lr_floor_other_betas_run() -> list[Item]:
    run, floor = "pneumoniamnist_lr_floor_other_betas", "pneumoniamnist_lr_floor"
    floor_run = floor
    patience, stopped = "pneumoniamnist_patience", "pneumoniamnist_early_stopping"

    def train(name: str = run) -> dict:
        return record(f"{name}/manifest.json")["config"]["train"]

    def ece(name: str, beta: str, method: str) -> float:
        return record(f"{name}/table.json")[beta][method]["ece"]

    def members(beta: float, name: str = run) -> dict[str, np.ndarray]:
        return _pmn_members(name, beta)

    def results() -> str:
        """Each beta's ensemble with the floor, and without it."""

        def floor(name: str) -> str:
            lr, patience_ = train(name)["min_learning_rate"], train(name)["patience"]
            return f"floor {f(lr, '.0es')}, patience {patience_}"

        def without(name: str) -> str:
            return f"no floor, patience {train(name)['patience']} (`../{name}/`)"

        rows = [
            ["0.5", f"this run: {floor(run)}", *_pmn_eces(run, "0.5", True)],
            ["0.5", without(patience), *_pmn_eces(patience, "0.5")],
            ["0.9", f"this run: {floor(run)}", *_pmn_eces(run, "0.9", True)],
            ["0.9", without(stopped), *_pmn_eces(stopped, "0.9")],
            [
                "0.99",
                f"{floor(floor_run)} (`../{floor_run}/`)",
                *_pmn_eces(floor_run, "0.99", True),
            ],
        ]
        header = ["β", "run", "raw", "loss-corrected", "Platt (cross-fitted)"]
        return markdown_table(header, rows)

    return [
        Figure(
            "PneumoniaMNIST floor: the other betas",
            PMN_FLOOR,
            "The same floor at β = {} and {} is in `../pneumoniamnist_lr_floor_other_betas/`: "
            "their corrected ECEs are {} and {}, against {} and {} without the floor,",
            ".1f .1f .3f .3f .3f .3f",
            lambda: (
                0.5,
                0.9,
                ece(run, "0.5", "loss_corrected"),
                ece(run, "0.9", "loss_corrected"),
                ece(patience, "0.5", "loss_corrected"),
                ece(stopped, "0.9", "loss_corrected"),
            ),
        ),
        Figure(
            "PneumoniaMNIST floor, other betas: recipe",
            PMN_FLOOR_BETAS,
            "below {}. Does the same floor keep the other betas calibrated? This run trains β = {} "
            "and {} with the same recipe: … Adam from {}e-{}, the floor at {}, a patience of {} "
            "epochs and a cap of {}.",
            ".0es .1f .1f .0f d .0es d d",
            lambda: (
                train(floor)["min_learning_rate"],
                *record(f"{run}/manifest.json")["config"]["loss"]["betas"],
                train()["learning_rate"] * 1e3,
                3,
                train()["min_learning_rate"],
                train()["patience"],
                train()["epochs"],
            ),
        ),
        Figure(
            "PneumoniaMNIST floor, other betas: time",
            PMN_FLOOR_BETAS,
            "on the {}-core CPU on {}, in {} minutes",
            "d date .0f",
            lambda: _cpu_run_time(run),
        ),
        Figure(
            "PneumoniaMNIST floor, other betas: the command",
            PMN_FLOOR_BETAS,
            "--betas {} {} … --config.train.epochs={} --config.train.patience={} "
            "--config.train.min_learning_rate={}e-{} … --config.train.members_per_batch={}",
            ".1f .1f d d .0f d d",
            lambda: (
                *record(f"{run}/manifest.json")["config"]["loss"]["betas"],
                train()["epochs"],
                train()["patience"],
                train()["min_learning_rate"] * 1e4,
                4,
                train()["members_per_batch"],
            ),
        ),
        Figure(
            "PneumoniaMNIST floor, other betas: verdict",
            PMN_FLOOR_BETAS,
            "the loss-corrected ECE is {}, {} and {} at β = {}, {} and {}, against {}, {} and {} "
            "without it** (patience {} at β = {} and {}, patience {} at {}).",
            ".3f .3f .3f .1f .1f .2f .3f .3f .3f d .1f .2f d .1f",
            lambda: (
                ece(run, "0.5", "loss_corrected"),
                ece(run, "0.9", "loss_corrected"),
                ece(floor, "0.99", "loss_corrected"),
                0.5,
                0.9,
                0.99,
                ece(patience, "0.5", "loss_corrected"),
                ece(stopped, "0.9", "loss_corrected"),
                ece(patience, "0.99", "loss_corrected"),
                train(patience)["patience"],
                0.5,
                0.99,
                train(stopped)["patience"],
                0.9,
            ),
        ),
        Table("pneumoniamnist_lr_floor_other_betas results", PMN_FLOOR_BETAS, results),
        Figure(
            "PneumoniaMNIST floor, other betas: the members",
            PMN_FLOOR_BETAS,
            "Their best epochs came at {} to {} (β = {}) and {} to {} (β = {}), all at the floor. "
            "Every member stopped on its own validation loss, at epochs {} to {} and {} to {}, "
            "none at the cap. At β = {} their best validation losses, {} to {}, are below the "
            "patience run's {} to {}.",
            "d d .1f d d .1f d d d d .1f .3f .3f .3f .3f",
            lambda: (
                (
                    *min_max(list(members(0.5)["best"])),
                    0.5,
                    *min_max(list(members(0.9)["best"])),
                    0.9,
                    *min_max(list(members(0.5)["stop"])),
                    *min_max(list(members(0.9)["stop"])),
                    0.5,
                    *min_max(list(members(0.5)["val"])),
                    *min_max(list(members(0.5, patience)["val"])),
                )
                if _pmn_trained_at_floor(run, 0.5) and _pmn_trained_at_floor(run, 0.9)
                else None
            ),
        ),
        Figure(
            "PneumoniaMNIST floor, other betas: the test",
            PMN_FLOOR_BETAS,
            "does not reject the raw scores at the {}% level**: p = {} at β = {} and p = {} at "
            "β = {}, the latter close to the line.",
            "d .2f .1f .3f .1f",
            lambda: (
                5,
                record(f"{run}/table.json")["0.5"]["raw"]["loss_calibration_p_value"],
                0.5,
                record(f"{run}/table.json")["0.9"]["raw"]["loss_calibration_p_value"],
                0.9,
            ),
        ),
        Figure(
            "PneumoniaMNIST floor, other betas: the other patience",
            PMN_FLOOR_BETAS,
            "The only β = {} run without the floor stopped with a patience of {}, not {}",
            ".1f d d",
            lambda: (0.9, train(stopped)["patience"], train()["patience"]),
        ),
        Figure(
            "PneumoniaMNIST floor, other betas: the floor",
            PMN_FLOOR_BETAS,
            "So a floor of {} costs the unweighted and the moderately weighted networks nothing",
            ".0es",
            lambda: train()["min_learning_rate"],
        ),
    ]


PMN_FLOOR_SEEDS = "docs/results/pneumoniamnist_lr_floor_seeds/README.md"


def _pmn_averages(raw: np.ndarray, labels: np.ndarray) -> dict[str, Any]:
    """Corrected ECEs at beta = 0.99 of ``[seeds, N]`` raw scores: each seed alone, the mean raw
    score (the paper's ensemble), the mean of corrected scores and the mean logit."""

    def corrected(r: np.ndarray) -> np.ndarray:
        return np.asarray(iml.loss_corrected_score(r, 0.99))

    def ece(q: np.ndarray) -> float:
        return float(expected_calibration_error(q, labels))

    z = np.mean(np.log(raw) - np.log1p(-raw), axis=0)
    return {
        "seeds": [ece(corrected(r)) for r in raw],
        "mean_raw": ece(corrected(raw.mean(axis=0))),
        "mean_corrected": ece(np.mean([corrected(r) for r in raw], axis=0)),
        "mean_logit": ece(corrected(1 / (1 + np.exp(-z)))),
    }


_PMN_AVERAGES = (  # the rows of the seeds' tables: (label, key of _pmn_averages)
    ("one seed (each seed's members alone)", "seeds"),
    ("the paper's ensemble: the mean raw score, corrected", "mean_raw"),
    ("the mean of the members' corrected scores", "mean_corrected"),
    ("the mean raw logit, corrected", "mean_logit"),
)


def _pmn_average(averages: dict[str, Any], key: str) -> str:
    """One cell of the seeds' tables: the seeds' range and mean, or one average's ECE."""
    if key == "seeds":
        seeds = averages["seeds"]
        low, high = min_max(seeds)
        return f"{f(low, '.3f')} to {f(high, '.3f')}, mean {f(np.mean(seeds), '.3f')}"
    return f(averages[key], ".3f")


def _pneumonia_lr_floor_seeds_run() -> list[Item]:
    run, floor, seeds = (
        "pneumoniamnist_lr_floor_seeds",
        "pneumoniamnist_lr_floor",
        "pneumoniamnist_seeds",
    )

    def train(name: str = run) -> dict:
        return record(f"{name}/manifest.json")["config"]["train"]

    def table() -> dict:
        return record(f"{run}/table.json")["0.99"]

    def by_logit() -> dict:
        return record(f"{run}/logit_average/table.json")["0.99"]

    @functools.cache
    def with_floor() -> dict[str, Any]:
        first, labels = _pmn_seed_scores(floor)
        rest, other = _pmn_seed_scores(run)
        assert np.array_equal(labels, other)
        return _pmn_averages(np.concatenate([first, rest]), labels)

    @functools.cache
    def without() -> dict[str, Any]:
        return _pmn_averages(*_pmn_seed_scores(seeds))

    def same_command() -> bool:
        ours, theirs = dict(train()), dict(train(floor))
        # a key added since a run was stored takes its default (runner.stored_config)
        theirs.setdefault("eval_batch_size", default_config().train.eval_batch_size)
        return ours.pop("seeds") == [1, 2, 3] and theirs.pop("seeds") == [0] and ours == theirs

    def averages() -> str:
        """Each way of averaging the four seeds, with the floor and without it."""
        rows = [
            [label, *(_pmn_average(a, key) for a in (with_floor(), without()))]
            for label, key in _PMN_AVERAGES
        ]
        rows[-1][1] = f"**{rows[-1][1]}**"
        floor_lr = f(train(floor)["min_learning_rate"], ".0es")
        return markdown_table(["scores", f"floor {floor_lr}", "no floor"], rows)

    members = functools.partial(_pmn_members, run, 0.99)
    return [
        Figure(
            "PneumoniaMNIST seeds: with the floor",
            PMN_SEEDS,
            "With that floor, {} seeds are in `../pneumoniamnist_lr_floor_seeds/`: each seed "
            "reaches {} to {}, the paper's ensemble {} and the corrected mean logit {}.",
            "d .3f .3f .3f .3f",
            lambda: (
                len(with_floor()["seeds"]),
                *min_max(with_floor()["seeds"]),
                with_floor()["mean_raw"],
                with_floor()["mean_logit"],
            ),
        ),
        Figure(
            "PneumoniaMNIST floor: the other seeds",
            PMN_FLOOR,
            "Seeds {} to {} with the same floor are in `../pneumoniamnist_lr_floor_seeds/`: each "
            "reaches a corrected ECE of {} to {}. This run's seed, at {},",
            "d d .3f .3f .3f",
            lambda: (
                train()["seeds"][0],
                train()["seeds"][-1],
                *min_max(with_floor()["seeds"][1:]),
                with_floor()["seeds"][0],
            ),
        ),
        Figure(
            "PneumoniaMNIST floor, seeds: the question",
            PMN_FLOOR_SEEDS,
            "kept from falling below {}, and its corrected ECE fell to {}. … This run trains seeds "
            "{}, {} and {} with the same command. With seed {} from the floor run, every "
            "observation is scored by {} members, one per seed.",
            ".0es .3f d d d d d",
            lambda: (
                (
                    train(floor)["min_learning_rate"],
                    record(f"{floor}/table.json")["0.99"]["loss_corrected"]["ece"],
                    *train()["seeds"],
                    *train(floor)["seeds"],
                    len(with_floor()["seeds"]),
                )
                if same_command()
                else None
            ),
        ),
        Figure(
            "PneumoniaMNIST floor, seeds: time",
            PMN_FLOOR_SEEDS,
            "on the {}-core CPU on {}, in {} minutes",
            "d date .0f",
            lambda: _cpu_run_time(run),
        ),
        Figure(
            "PneumoniaMNIST floor, seeds: the command",
            PMN_FLOOR_SEEDS,
            "--betas {} --seeds {} {} {} … --config.train.epochs={} --config.train.patience={} "
            "--config.train.min_learning_rate={}e-{} … --config.train.members_per_batch={}",
            ".2f d d d d d .0f d d",
            lambda: (
                0.99,
                *train()["seeds"],
                train()["epochs"],
                train()["patience"],
                train()["min_learning_rate"] * 1e4,
                4,
                train()["members_per_batch"],
            ),
        ),
        Figure(
            "PneumoniaMNIST floor, seeds: members",
            PMN_FLOOR_SEEDS,
            "This folder is that run directory: {} members, and `table.md` is the ensemble of its "
            "{} seeds.",
            "d d",
            lambda: (record(f"{run}/manifest.json")["num_members"], len(train()["seeds"])),
        ),
        Figure(
            "PneumoniaMNIST floor, seeds: patience",
            PMN_FLOOR_SEEDS,
            "trained without the floor (and with a patience of {}, not {}):",
            "d d",
            lambda: (train(seeds)["patience"], train()["patience"]),
        ),
        Table("pneumoniamnist_lr_floor_seeds averages", PMN_FLOOR_SEEDS, averages),
        Figure(
            "PneumoniaMNIST floor, seeds: typical",
            PMN_FLOOR_SEEDS,
            "All four seeds reach {} to {}. Every member of this run found its best epoch at the "
            "floor (epochs {} to {}) and stopped on its own validation loss (epochs {} to {}, none "
            "at the cap).",
            ".3f .3f d d d d",
            lambda: (
                (
                    *min_max(with_floor()["seeds"]),
                    *min_max(list(members()["best"])),
                    *min_max(list(members()["stop"])),
                )
                if _pmn_trained_at_floor(run, 0.99)
                else None
            ),
        ),
        Figure(
            "PneumoniaMNIST floor, seeds: averages",
            PMN_FLOOR_SEEDS,
            "is less calibrated ({}) than any of its seeds: … The mean of the members' logits "
            "keeps their scale, and its correction, {}, differs from seeds",
            ".3f .3f",
            lambda: (
                with_floor()["mean_raw"]
                if with_floor()["mean_raw"] > max(with_floor()["seeds"])
                else None,
                with_floor()["mean_logit"],
            ),
        ),
        Figure(
            "PneumoniaMNIST floor, seeds: this run's table",
            PMN_FLOOR_SEEDS,
            "The {}-seed ensemble of this run alone (`table.md`): corrected {}, raw {}, "
            "cross-fitted Platt {}; the loss-calibration test does not reject its raw scores "
            "(p = {}).",
            "d .3f .3f .3f .2f",
            lambda: (
                len(train()["seeds"]),
                table()["loss_corrected"]["ece"],
                table()["raw"]["ece"],
                table()["platt"]["ece"],
                table()["raw"]["loss_calibration_p_value"],
            ),
        ),
        Figure(
            "PneumoniaMNIST floor, seeds: the logit average",
            PMN_FLOOR_SEEDS,
            "On this run's {} seeds (`logit_average/`, its table, ensemble sizes and averaging "
            "kept): … the corrected ECE is {} against {} with the paper's average, … while the "
            "raw scores' ECE ({}) and cross-fitted Platt's ({}) read the same in both tables; the "
            "loss-calibration test gives p = {}.",
            "d .3f .3f .3f .3f .2f",
            lambda: (
                len(train()["seeds"])
                if record(f"{run}/logit_average/ensemble.json")["average"] == "logit"
                else None,
                by_logit()["loss_corrected"]["ece"],
                table()["loss_corrected"]["ece"],
                [by_logit()["raw"]["ece"], table()["raw"]["ece"]],
                [by_logit()["platt"]["ece"], table()["platt"]["ece"]],
                by_logit()["raw"]["loss_calibration_p_value"],
            ),
        ),
    ]


PMN_CONFIG = "experiments/configs/pneumoniamnist.py"


def _pneumonia_config() -> list[Item]:
    def config() -> Any:
        from iml.config import load_config_file

        return load_config_file(ROOT / PMN_CONFIG)

    def train(run: str) -> dict:
        return record(f"{run}/manifest.json")["config"]["train"]

    return [
        Figure(
            "pneumoniamnist config: title",
            PMN_CONFIG,
            "PneumoniaMNIST ({}x{} chest X-rays, pneumonia vs normal): small DenseNet, beta "
            "{}/{}/{}.",
            "d d .1f .1f .2f",
            lambda: (config().data.image_size, config().data.image_size, *config().loss.betas),
        ),
        Figure(
            "pneumoniamnist config: the run",
            PMN_CONFIG,
            "All {} images are pooled and split into {} folds rotated {}/{}/{} ({} members, one "
            "seed); members train for up to {} epochs with early stopping on the validation loss "
            "(patience {}).",
            ",d d d d d d d d",
            lambda: (
                record("pneumoniamnist/manifest.json")["num_examples"],
                config().data.n_folds,
                config().data.n_folds - config().data.n_val_folds - config().data.n_test_folds,
                config().data.n_val_folds,
                config().data.n_test_folds,
                record("pneumoniamnist/manifest.json")["num_members"]
                if len(config().train.seeds) == 1
                else None,
                config().train.epochs,
                config().train.patience,
            ),
        ),
        Figure(
            "pneumoniamnist config: the floor",
            PMN_CONFIG,
            "At beta {} the corrected ECE is {} to {} times that at beta {} under the paper's "
            "schedule, with or without early stopping, and {} [{}, {}] times with a floor on the "
            "learning rate (``--config.train.min_learning_rate={}e-{}``:",
            ".2f .1f .1f .1f .1f .1f .1f .0f d",
            lambda: (
                0.99,
                *_schedule_ratio_range(),
                0.5,
                *_schedule_ratio("floor 1e-4"),
                train("pneumoniamnist_lr_floor")["min_learning_rate"] * 1e4,
                4,
            ),
        ),
        Figure(
            "pneumoniamnist config: the longer runs",
            PMN_CONFIG,
            "(``--config.train.epochs={}``), with a patience of {}, or with {} seeds,",
            "d d d",
            lambda: (
                train("pneumoniamnist_early_stopping")["epochs"],
                train("pneumoniamnist_patience")["patience"],
                len(train("pneumoniamnist_seeds")["seeds"]),
            ),
        ),
    ]


def _pneumonia_seeds_run() -> list[Item]:
    run = "pneumoniamnist_seeds"

    def table(name: str = run) -> dict:
        return record(f"{name}/table.json")

    def config() -> dict:
        return record(f"{run}/manifest.json")["config"]

    @functools.cache
    def averages() -> dict[str, Any]:
        return _pmn_averages(*_pmn_seed_scores(run))

    def ensembles() -> str:
        """Each way of averaging the seeds, and Platt's recalibration of the ensemble."""
        corrected = table()["0.99"]["loss_corrected"]["ece"]
        if not math.isclose(corrected, averages()["mean_raw"], abs_tol=1e-4):
            raise ValueError(f"table.md's corrected ECE {corrected} is not the mean raw score's")
        rows = [[label, _pmn_average(averages(), key)] for label, key in _PMN_AVERAGES]
        rows[1][0] += " (`table.md`)"
        rows.append(
            [
                "Platt, cross-fitted on the ensemble (uses labels)",
                f(table()["0.99"]["platt"]["ece"], ".3f"),
            ]
        )
        return markdown_table(["scores", "ECE"], rows)

    def logit(p: float) -> float:
        return math.log(p / (1 - p))

    return [
        Figure(
            "PneumoniaMNIST early stopping: the ensemble of seeds",
            PMN_STOPPED,
            "An ensemble of {} seeds per observation, in `../pneumoniamnist_seeds/` (the paper "
            "averages {}; … the paper's ensemble, the mean raw score corrected, reached {}.",
            "d d .3f",
            lambda: (len(config()["train"]["seeds"]), 80, table()["0.99"]["loss_corrected"]["ece"]),
        ),
        Figure(
            "PneumoniaMNIST seeds: the question",
            PMN_SEEDS,
            "the corrected ECE at β = {} stays at {}. The paper averages {} members per "
            "observation. This run asks whether averaging helps, with {} seeds",
            ".2f .3f d d",
            lambda: (
                0.99,
                table("pneumoniamnist_early_stopping")["0.99"]["loss_corrected"]["ece"],
                80,
                len(config()["train"]["seeds"]),
            ),
        ),
        Figure(
            "PneumoniaMNIST seeds: recipe",
            PMN_SEEDS,
            "Adam at {}e-{}, the learning rate divided by {} after each epoch without improvement, "
            "early stopping after {} epochs without improvement, and a cap of {} epochs.",
            ".0f d .0f d d",
            lambda: (
                config()["train"]["learning_rate"] * 1e3,
                3,
                _lr_decay_divisor(),
                config()["train"]["patience"],
                config()["train"]["epochs"],
            ),
        ),
        Figure(
            "PneumoniaMNIST seeds: time",
            PMN_SEEDS,
            "on the {}-core CPU on {}, in {} minutes",
            "d date .0f",
            lambda: _cpu_run_time(run),
        ),
        Figure(
            "PneumoniaMNIST seeds: members",
            PMN_SEEDS,
            "{} members, so each observation's ensemble has {} members, one per seed.",
            "d d",
            lambda: (
                record(f"{run}/manifest.json")["num_members"],
                *set(np.load(RESULTS / run / "ensemble_scores.npz")["sizes"].ravel().tolist()),
            ),
        ),
        Figure(
            "PneumoniaMNIST seeds: beta 0.5",
            PMN_SEEDS,
            "at β = {} the early-stopping run reaches {})",
            ".1f .3f",
            lambda: (
                0.5,
                table("pneumoniamnist_early_stopping")["0.5"]["loss_corrected"]["ece"],
            ),
        ),
        Table("pneumoniamnist_seeds averages", PMN_SEEDS, ensembles),
        Figure(
            "PneumoniaMNIST seeds: top decile",
            PMN_SEEDS,
            "the ensemble's mean raw logit is {}. For the single seed of the early-stopping run it "
            "is {}. … the {}th decile's mean corrected score is {} against an observed rate of {}.",
            ".1f .1f d .3f .3f",
            lambda: (
                logit(_pmn_decile(run, 10)[2]),
                logit(_pmn_decile("pneumoniamnist_early_stopping", 10)[2]),
                7,
                *_pmn_decile(run, 7)[:2],
            ),
        ),
        Figure(
            "PneumoniaMNIST seeds: the test",
            PMN_SEEDS,
            "does not reject the ensemble's raw scores at the {}% level** (p = {}).",
            "d .3f",
            lambda: (
                5,
                table()["0.99"]["raw"]["loss_calibration_p_value"]
                if table()["0.99"]["raw"]["loss_calibration_p_value"] > 0.05
                else None,
            ),
        ),
    ]


PMN_PATIENCE = "docs/results/pneumoniamnist_patience/README.md"


def _pneumonia_against(run: str, other: str, other_header: str) -> str:
    """A PneumoniaMNIST run's ECEs per beta, with the corrected ECE of ``other`` at each beta."""
    header = ["β", "raw", "loss-corrected", other_header, "Platt (cross-fitted)"]
    rows = [
        [
            beta,
            f(cells["raw"]["ece"], ".3f"),
            f(cells["loss_corrected"]["ece"], ".3f"),
            f(record(f"{other}/table.json")[beta]["loss_corrected"]["ece"], ".3f"),
            f(cells["platt"]["ece"], ".3f"),
            f"p = {f(cells['raw']['loss_calibration_p_value'], '#.2g')}",
        ]
        for beta, cells in record(f"{run}/table.json").items()
    ]
    return markdown_table([*header, "loss-calibration test of raw scores"], rows)


def _pneumonia_patience_run() -> list[Item]:
    run, before = "pneumoniamnist_patience", "pneumoniamnist_early_stopping"

    def table(name: str = run) -> dict:
        return record(f"{name}/table.json")

    def train() -> dict:
        return record(f"{run}/manifest.json")["config"]["train"]

    def logit(p: float) -> float:
        return math.log(p / (1 - p))

    def rates() -> np.ndarray:
        return _pmn_members(run, 0.99)["lr"]

    return [
        Figure(
            "PneumoniaMNIST patience: the patience-2 run",
            PMN_PATIENCE,
            "the corrected ECE at β = {} stayed at {} against {} at β = {}.",
            ".2f .3f .3f .1f",
            lambda: (
                0.99,
                table(before)["0.99"]["loss_corrected"]["ece"],
                table(before)["0.5"]["loss_corrected"]["ece"],
                0.5,
            ),
        ),
        Figure(
            "PneumoniaMNIST patience: recipe",
            PMN_PATIENCE,
            "after {} epochs without improvement, … with a patience of {} epochs. … Adam at "
            "{}e-{}, the learning rate divided by {} after each epoch without improvement (the "
            "paper's schedule), and a cap of {} epochs. It trains β = {} and {} only.",
            "d d .0f d .0f d .1f .2f",
            lambda: (
                record(f"{before}/manifest.json")["config"]["train"]["patience"],
                train()["patience"],
                train()["learning_rate"] * 1e3,
                3,
                _lr_decay_divisor(),
                train()["epochs"],
                *record(f"{run}/manifest.json")["config"]["loss"]["betas"],
            ),
        ),
        Figure(
            "PneumoniaMNIST patience: time",
            PMN_PATIENCE,
            "started on {}, in {} minutes",
            "date .0f",
            lambda: (
                record(f"{run}/manifest.json")["created_at"][:10],
                int(record_line(f"{run}/log_tail.txt", r"\((\d+) s\)")[0]) / 60,
            ),
        ),
        Table(
            "pneumoniamnist_patience results",
            PMN_PATIENCE,
            lambda: _pneumonia_against(run, before, "corrected, patience 2"),
        ),
        Figure(
            "PneumoniaMNIST patience: the 7th decile",
            PMN_PATIENCE,
            "the {}th decile of corrected scores has a mean raw logit of {} here and {} with a "
            "patience of {}. Its mean corrected score is {} against an observed rate of {} ({} "
            "against {} with a patience of {}).",
            "d .1f .1f d .3f .3f .3f .3f d",
            lambda: (
                7,
                logit(_pmn_decile(run, 7)[2]),
                logit(_pmn_decile(before, 7)[2]),
                2,
                *_pmn_decile(run, 7)[:2],
                *_pmn_decile(before, 7)[:2],
                2,
            ),
        ),
        Figure(
            "PneumoniaMNIST patience: best epochs and rates",
            PMN_PATIENCE,
            "best epochs came at {} to {} ({} to {} with a patience of {}), but {} of the {} came "
            "after the learning rate had been cut to {} or below, and {} at {} or below (the "
            "smallest {}). The paper's schedule divides the rate by {} after every epoch",
            "d d d d d d d .0es d .0es .0es .0f",
            lambda: (
                *min_max(list(_pmn_members(run, 0.99)["best"])),
                *min_max(list(_pmn_members(before, 0.99)["best"])),
                2,
                int(np.sum(rates() <= 1.01e-6)),
                len(rates()),
                1e-6,
                int(np.sum(rates() <= 1.01e-8)),
                1e-8,
                rates().min(),
                _lr_decay_divisor(),
            ),
        ),
        Figure(
            "PneumoniaMNIST patience: the test",
            PMN_PATIENCE,
            "(p = {}, against {} with a patience of {}). The corrected ECE moved from {} to {},",
            ".2f .3f d .3f .3f",
            lambda: (
                table()["0.99"]["raw"]["loss_calibration_p_value"],
                table(before)["0.99"]["raw"]["loss_calibration_p_value"],
                2,
                table(before)["0.99"]["loss_corrected"]["ece"],
                table()["0.99"]["loss_corrected"]["ece"],
            ),
        ),
        Figure(
            "PneumoniaMNIST patience: the optimal logit",
            PMN_PATIENCE,
            "with a {}th-decile logit near {}, where the optimal rule asks for {} at that decile's "
            "observed rate.",
            "d .1f .1f",
            lambda: (
                7,
                logit(_pmn_decile(run, 7)[2]),
                logit(_optimal_raw(_pmn_decile(run, 7)[1])),
            ),
        ),
    ]


def _pneumonia_early_stopping_run() -> list[Item]:
    run = "pneumoniamnist_early_stopping"

    def table(name: str = run) -> dict:
        return record(f"{name}/table.json")

    def config() -> dict:
        return record(f"{run}/manifest.json")["config"]

    def best_epochs() -> np.ndarray:
        epochs = []
        for path in sorted((RESULTS / run / "batches").glob("*.npz")):
            with np.load(path) as b:
                losses = np.where(np.isnan(b["val_loss"]), np.inf, b["val_loss"])
                epochs.extend(np.argmin(losses, axis=1) + 1)
        return np.asarray(epochs)

    def decile(k: int) -> tuple[float, float, float]:
        return _pmn_decile(run, k)

    def deciles() -> str:
        header = ["decile", "mean loss-corrected score", "observed rate", "mean raw score"]
        rows = [
            [
                f"{k}th",
                *(f(x, spec) for x, spec in zip(decile(k), (".3f", ".3f", ".4f"), strict=True)),
            ]
            for k in (4, 7)
        ]
        return markdown_table(header, rows)

    return [
        Figure(
            "PneumoniaMNIST early stopping: the capped run",
            PMN_STOPPED,
            "the corrected ECE was {} at β = {} against {} at β = {}.",
            ".3f .2f .3f .1f",
            lambda: (
                table("pneumoniamnist")["0.99"]["loss_corrected"]["ece"],
                0.99,
                table("pneumoniamnist")["0.5"]["loss_corrected"]["ece"],
                0.5,
            ),
        ),
        Figure(
            "PneumoniaMNIST early stopping: recipe",
            PMN_STOPPED,
            "Adam at {}e-{}, the learning rate divided by {} after a validation plateau, and early "
            "stopping after {} epochs without improvement; - a cap of {} epochs",
            "d d .0f d d",
            lambda: (
                1,
                3,
                _lr_decay_divisor(),
                config()["train"]["patience"],
                config()["train"]["epochs"],
            ),
        ),
        Figure(
            "PneumoniaMNIST early stopping: machines",
            PMN_STOPPED,
            "**Batches {} and {}** ({} members) ran on one NVIDIA H100…**Batch {}** ({} members)",
            "d d d d d",
            lambda: (
                0,
                1,
                2 * config()["train"]["members_per_batch"],
                2,
                config()["train"]["members_per_batch"],
            ),
        ),
        Table(
            "pneumoniamnist_early_stopping results",
            PMN_STOPPED,
            lambda: _pneumonia_against(
                run, "pneumoniamnist", "corrected, 6-epoch cap (`../pneumoniamnist/`)"
            ),
        ),
        Figure(
            "PneumoniaMNIST early stopping: best epochs",
            PMN_STOPPED,
            "Their best validation losses came at epochs {} to {}, and none reached the cap.",
            "d d",
            lambda: (best_epochs().min(), best_epochs().max()),
        ),
        Figure(
            "PneumoniaMNIST early stopping: the test",
            PMN_STOPPED,
            "(p = {}). With the 6-epoch cap they were not rejected (p = {}).",
            ".3f .2f",
            lambda: (
                table()["0.99"]["raw"]["loss_calibration_p_value"],
                table("pneumoniamnist")["0.99"]["raw"]["loss_calibration_p_value"],
            ),
        ),
        Table("pneumoniamnist_early_stopping deciles", PMN_STOPPED, deciles),
        Figure(
            "PneumoniaMNIST early stopping: the optimal rule near 1",
            PMN_STOPPED,
            "maps a posterior of {} to a raw score of {}, a logit of about {}; the networks reach "
            "a logit of about {}.",
            ".3f .5f .1f .0f",
            lambda: (
                0.997,
                _optimal_raw(0.997),
                math.log(_optimal_raw(0.997) / (1 - _optimal_raw(0.997))),
                math.log(decile(7)[2] / (1 - decile(7)[2])),
            ),
        ),
        Figure(
            "PneumoniaMNIST early stopping: slope and gradient",
            PMN_STOPPED,
            "slope β/(1-β) = {} at raw scores near 1, so a raw score {} short",
            ".0f .4f",
            lambda: (0.99 / 0.01, _optimal_raw(0.997) - decile(7)[2]),
        ),
        Figure(
            "PneumoniaMNIST early stopping: the gradient of a positive",
            PMN_STOPPED,
            "a positive at raw score {} contributes a gradient of about {}.",
            ".4f .4f",
            lambda: (decile(7)[2], 0.99 * (1 - decile(7)[2])),
        ),
        Figure(
            "PneumoniaMNIST early stopping: the longer patience",
            PMN_STOPPED,
            "with a patience of {} the raw scores stayed where they were, and the corrected ECE at "
            "β = {} was {}.",
            "d .2f .3f",
            lambda: (
                record("pneumoniamnist_patience/manifest.json")["config"]["train"]["patience"],
                0.99,
                table("pneumoniamnist_patience")["0.99"]["loss_corrected"]["ece"],
            ),
        ),
        Figure(
            "PneumoniaMNIST early stopping: the calibrated betas",
            PMN_STOPPED,
            "In this run the corrected ECE at β = {} and {} is {} and {},",
            ".1f .1f .3f .3f",
            lambda: (
                0.5,
                0.9,
                table()["0.5"]["loss_corrected"]["ece"],
                table()["0.9"]["loss_corrected"]["ece"],
            ),
        ),
    ]


def _adult_run() -> list[Item]:
    run = "sweep_adult"
    values = functools.partial(sweep_values, run)

    def summary() -> str:
        """The metrics over all betas: raw, and loss-corrected."""

        def median(method: str, metric: str, spec: str = ".3f") -> str:
            return f"median {f(statistics.median(values(method, metric)), spec)}"

        def up_to(metric: str) -> str:
            return f"up to {f(max(values('raw', metric)), '.2f')}"

        def span(method: str, metric: str) -> str:
            return " to ".join(f(x, ".3f") for x in min_max(values(method, metric)))

        corrected = "loss_corrected"
        auroc, same = span("raw", "auroc"), span(corrected, "auroc")
        if auroc != same:
            raise ValueError(f"AUROC {auroc} raw, {same} corrected: not 'the same'")
        rows = [
            [
                "ECE",
                f"{up_to('ece')}, {median('raw', 'ece', '.2f')}",
                f"{span(corrected, 'ece')}, {median(corrected, 'ece')}",
            ],
            [
                "debiased ECE",
                f"{up_to('ece_debiased')}, {median('raw', 'ece_debiased', '.2f')}",
                f"{median(corrected, 'ece_debiased')}, "
                f"at most {f(max(values(corrected, 'ece_debiased')), '.3f')}",
            ],
            ["Brier score", up_to("brier"), span(corrected, "brier")],
            ["log loss", up_to("log_loss"), span(corrected, "log_loss")],
            ["AUROC", auroc, "the same"],
        ]
        return markdown_table(["metric", "raw scores", "loss-corrected scores"], rows)

    return [
        Figure(
            "Adult data",
            ADULT_RUN,
            "**Data.** {} rows (adult.data + adult.test); the label is `>50K` ({}% positive). {} "
            "features",
            ",d .1f d",
            lambda folder: (
                len(adult(folder).labels),
                100 * adult(folder).labels.mean(),
                adult(folder).features.shape[1],
            ),
            data="uci-adult",
        ),
        Figure(
            "Adult grid",
            ADULT_RUN,
            "**Grid.** {} betas, evenly spaced in logit(beta) from {} to {}; {} seeds; {} folds "
            "stratified by label, rotated {}/{}/{}. That makes {} models, trained as {} vectorized "
            "chunks of {}.",
            "d .2f .2f d d d d d ,d d ,d",
            lambda: sweep_grid(run),
        ),
        Figure(
            "Adult training",
            ADULT_RUN,
            "**Training.** Adam at learning rate {}, minibatches of {}. The learning rate is "
            "divided by {} after {} epochs without validation improvement, and a member stops "
            "early after {}, for at most {} epochs.",
            ".2f d .0f d d d",
            lambda: sweep_training(run),
        ),
        Figure(
            "Adult scores",
            ADULT_RUN,
            "Each row's score is the mean over the {} seeds",
            "d",
            lambda: len(manifest(run)["config"]["seeds"]),
        ),
        Table(
            "sweep_adult ECE by beta",
            ADULT_RUN,
            lambda: _ece_by_beta(
                run, [(0.01, ".2f"), (0.094, ".3f"), (0.518, ".3f"), (0.906, ".3f"), (0.99, ".2f")]
            ),
        ),
        Figure("Adult betas", ADULT_RUN, "Over all {} betas:", "d", lambda: len(sweep(run))),
        Table("sweep_adult summary", ADULT_RUN, summary),
        Figure(
            "Adult corrected against the nearly unweighted model",
            ADULT_RUN,
            "The corrected ECE is {} to {}, against {} for the raw scores of the nearly "
            "unweighted model (beta = {}).",
            ".3f .3f .3f .3f",
            lambda: (
                *min_max(values("loss_corrected", "ece")),
                sweep_at(run, 0.518)["raw"]["ece"],
                min(sweep(run), key=lambda b: abs(b - 0.5)),
            ),
        ),
        Figure(
            "Adult unweighted interval and the betas above it",
            ADULT_RUN,
            "That ECE's interval is [{}, {}]. At the {} betas from {} up the corrected ECE's "
            "interval lies wholly above it",
            ".3f .3f d .2f",
            lambda: (
                *sweep_at(run, 0.518)["raw"]["ece_interval"],
                *corrected_above_unweighted(run, 0.518),
            ),
        ),
        Figure(
            "Adult extreme betas",
            ADULT_RUN,
            "The corrected ECE is largest towards the extreme betas ({} at {}, interval [{}, {}])",
            ".2f .2f .3f .3f",
            lambda: (
                sweep_at(run, 0.99)["loss_corrected"]["ece"],
                max(sweep(run)),
                *sweep_at(run, 0.99)["loss_corrected"]["ece_interval"],
            ),
        ),
        Figure(
            "Adult against the defaults at 0.99",
            ADULT_RUN,
            "at beta = {} it is {} [{}, {}], against {} [{}, {}] here.",
            ".2f .3f .3f .3f .3f .3f .3f",
            lambda: (
                max(sweep(run)),
                *_ece_and_interval(sweep_at("sweep_defaults/adult_paper", 0.99)),
                *_ece_and_interval(sweep_at(run, 0.99)),
            ),
        ),
    ]


def _letter_run() -> list[Item]:
    run = "sweep_letter"
    values = functools.partial(sweep_values, run)

    def up_to(limit: float) -> Callable[[float], bool]:
        return lambda b: b <= limit

    return [
        Figure(
            "Letter data",
            LETTER_RUN,
            "Setup: {} rows, label 1 for the letter O ({} rows, {}%: iml.data's default positive "
            "letter), {} z-scored integer features.",
            ",d d .2f d",
            lambda folder: (
                len(letter(folder).labels),
                letter(folder).labels.sum(),
                100 * letter(folder).labels.mean(),
                letter(folder).features.shape[1],
            ),
            data="uci-letter",
        ),
        Figure(
            "Letter grid",
            LETTER_RUN,
            "{} betas evenly spaced in logit(beta) from {} to {}; {} seeds (initialisation and "
            "minibatch order); {} folds stratified by label, {}/{}/{} rotations: {} logistic "
            "regressions, trained as {} chunks of {} members",
            "d .2f .2f d d d d d ,d d ,d",
            lambda: sweep_grid(run),
        ),
        Figure(
            "Letter training",
            LETTER_RUN,
            "Adam (learning rate {}, minibatches of {}), learning rate divided by {} after {} "
            "epochs without validation improvement, early stopping after {} (at most {} epochs)",
            ".2f d .0f d d d",
            lambda: sweep_training(run),
        ),
        Figure(
            "Letter chunk",
            LETTER_RUN,
            "in the chunk of the {} smallest betas",
            "d",
            lambda: manifest(run)["config"]["betas_per_chunk"],
        ),
        Figure(
            "Letter scores",
            LETTER_RUN,
            "Each row's score is the mean over the {} seeds",
            "d",
            lambda: len(manifest(run)["config"]["seeds"]),
        ),
        Figure(
            "Letter default learning rate",
            LETTER_RUN,
            "A first run with the default learning rate {} (not committed) … its loss-corrected "
            "ECE at beta = {} was … instead of {} below",
            ".2f .2f .2f",
            lambda: (
                [TABULAR_DEFAULTS.learning_rate, sweep_config().train.learning_rate],
                min(sweep(run)),
                sweep_at(run, 0.01)["loss_corrected"]["ece"],
            ),
        ),
        Figure(
            "Letter calibrated range",
            LETTER_RUN,
            "the loss-corrected ECE is {}-{}, against {} for the raw scores at beta = {}, the "
            "nearly unweighted model.",
            ".3f .3f .3f .2f",
            lambda: (
                *min_max(values("loss_corrected", "ece", up_to(0.85))),
                sweep_at(run, 0.52)["raw"]["ece"],
                min(sweep(run), key=lambda b: abs(b - 0.52)),
            ),
        ),
        Figure(
            "Letter high betas",
            LETTER_RUN,
            "Above that the corrected ECE is {} at beta = {} and",
            ".3f .2f",
            lambda: (
                sweep_at(run, 0.91)["loss_corrected"]["ece"],
                min(sweep(run), key=lambda b: abs(b - 0.91)),
            ),
        ),
        Figure(
            "Letter corrected ECE at 0.99",
            LETTER_RUN,
            "Above that the corrected ECE is … and {} at {}, where the raw",
            ".3f .2f",
            lambda: (sweep_at(run, 0.99)["loss_corrected"]["ece"], max(sweep(run))),
        ),
        Figure(
            "Letter unweighted interval and the betas above it",
            LETTER_RUN,
            "The raw ECE at beta = {} has the 95% interval [{}, {}]. At the {} betas from {} up "
            "the corrected ECE's interval lies wholly above it (at {}: [{}, {}])",
            ".2f .3f .3f d .2f .2f .3f .3f",
            lambda: (
                min(sweep(run), key=lambda b: abs(b - 0.52)),
                *sweep_at(run, 0.52)["raw"]["ece_interval"],
                *corrected_above_unweighted(run, 0.52),
                max(sweep(run)),
                *sweep_at(run, 0.99)["loss_corrected"]["ece_interval"],
            ),
        ),
        Figure(
            "Letter against the defaults at 0.99",
            LETTER_RUN,
            "furthest from the optimal rule: {} [{}, {}], against {} [{}, {}] here.",
            ".3f .3f .3f .3f .3f .3f",
            lambda: (
                *_ece_and_interval(sweep_at("sweep_defaults/letter_paper", 0.99)),
                *_ece_and_interval(sweep_at(run, 0.99)),
            ),
        ),
        Figure(
            "Letter raw ECE at high betas",
            LETTER_RUN,
            "where the raw scores have {} and {}.",
            ".2f .2f",
            lambda: (sweep_at(run, 0.91)["raw"]["ece"], sweep_at(run, 0.99)["raw"]["ece"]),
        ),
        Table(
            "sweep_letter ECE by beta",
            LETTER_RUN,
            lambda: _ece_by_beta(
                run,
                [
                    (0.01, ".2f"),
                    (0.094, ".3f"),
                    (0.518, ".3f"),
                    (0.800, ".3f"),
                    (0.906, ".3f"),
                    (0.964, ".3f", " (about 1 - prevalence)"),
                    (0.99, ".2f"),
                ],
            ),
        ),
        Figure(
            "Letter unweighted AUROC",
            LETTER_RUN,
            "(AUROC {} unweighted)",
            ".2f",
            # the two betas of the grid either side of 0.5
            lambda: [sweep_at(run, 0.48)["raw"]["auroc"], sweep_at(run, 0.52)["raw"]["auroc"]],
        ),
        Figure(
            "Letter AUROC at 0.99",
            LETTER_RUN,
            "(AUROC rises to {} at beta = {})",
            ".2f .2f",
            lambda: (sweep_at(run, 0.99)["raw"]["auroc"], max(sweep(run))),
        ),
        Figure(
            "Letter debiased error",
            LETTER_RUN,
            "(corrected: median {}, {} at beta = {}; raw up to {})",
            ".3f .2f .2f .2f",
            lambda: (
                statistics.median(values("loss_corrected", "ece_debiased")),
                sweep_at(run, 0.99)["loss_corrected"]["ece_debiased"],
                max(sweep(run)),
                max(values("raw", "ece_debiased")),
            ),
        ),
        Figure(
            "Letter raw ECE below 0.5",
            LETTER_RUN,
            "Below beta = 0.5 the raw ECE looks small ({}-{})",
            ".3f .3f",
            lambda: min_max(values("raw", "ece", lambda b: b < 0.5)),
        ),
        Figure(
            "Letter corrected ECE below 0.5",
            LETTER_RUN,
            "the correction brings it to {}-{}",
            ".3f .3f",
            lambda: min_max(values("loss_corrected", "ece", lambda b: b < 0.5)),
        ),
        Figure(
            "Letter Brier score and log loss ranges",
            LETTER_RUN,
            "Corrected Brier score and log loss are {}-{} and {}-{} up to beta = 0.84",
            ".3f .3f .3f .3f",
            lambda: (
                *min_max(values("loss_corrected", "brier", up_to(0.85))),
                *min_max(values("loss_corrected", "log_loss", up_to(0.85))),
            ),
        ),
        Figure(
            "Letter Brier score and log loss at 0.99",
            LETTER_RUN,
            "up to beta = 0.84 (raw at beta = {}: {} and {}; corrected: {} and {})",
            ".2f .2f .2f .3f .2f",
            lambda: (
                max(sweep(run)),
                sweep_at(run, 0.99)["raw"]["brier"],
                sweep_at(run, 0.99)["raw"]["log_loss"],
                sweep_at(run, 0.99)["loss_corrected"]["brier"],
                sweep_at(run, 0.99)["loss_corrected"]["log_loss"],
            ),
        ),
    ]


def _sklearn_logistic_tol() -> float:
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression().tol


ANY_LOSS_README = "docs/results/sweep_any_loss/README.md"


def _weighted(run: str, loss: str) -> dict:
    return any_loss(run, "weighted_class.json")[loss]


ANY_LOSS_MULTICLASS = {  # the Adam runs of sweep_any_loss, as its tables name them
    "digits_matrix": "digits, matrix",
    "digits_softmax": "digits, softmax",
    "letter_matrix": "Letter, matrix",
    "letter_softmax": "Letter, softmax",
}


def _with_interval(value: float, interval: Sequence[float], spec: str) -> str:
    """``0.071 [0.062, 0.081]``."""
    return f"{f(value, spec)} [{f(interval[0], spec)}, {f(interval[1], spec)}]"


def _raw_to_corrected(cells: dict, metric: str, spec: str) -> str:
    """A metric raw → loss-corrected, each ECE with its 95% interval where the table has one."""
    out = []
    for method in ("raw", "loss_corrected"):
        value, interval = cells[method][metric], cells[method].get(f"{metric}_interval")
        out.append(_with_interval(value, interval, spec) if interval else f(value, spec))
    return " → ".join(out)


def _any_loss_multiclass_table() -> str:
    """sweep_any_loss's Adam runs over all classes: top-label and class-wise ECE (with their
    intervals), Brier score and accuracy, raw → loss-corrected."""
    rows = []
    for run, label in ANY_LOSS_MULTICLASS.items():
        for loss, cells in any_loss(run, "table.json").items():
            rows.append(
                [
                    label,
                    loss,
                    _raw_to_corrected(cells, "top_label_ece", ".3f"),
                    _raw_to_corrected(cells, "classwise_ece", ".4f"),
                    _raw_to_corrected(cells, "brier", ".3f"),
                    _raw_to_corrected(cells, "accuracy", ".3f"),
                ]
            )
    header = [
        "run",
        "loss",
        "top-label ECE [95% CI] raw → corrected",
        "class-wise ECE [95% CI] raw → corrected",
        "Brier raw → corrected",
        "accuracy raw → corrected",
    ]
    return markdown_table(header, rows)


def _weighted_class_table() -> str:
    """The weighted class of each multiclass Adam run (``weighted_class.json``): its binary ECE
    raw → corrected with their intervals, the corrected ECE's difference from the unweighted
    model's with its paired interval, its mean score, and the loss-calibration p-values."""
    rows = []
    for run, label in ANY_LOSS_MULTICLASS.items():
        for loss, w in any_loss(run, "weighted_class.json").items():
            ece = " → ".join(
                _with_interval(w[f"ece_{m}"], w[f"ece_{m}_interval"], ".3f")
                for m in ("raw", "corrected")
            )
            difference = w.get("ece_corrected_minus_unweighted")
            entry = re.fullmatch(r"B\[(\d+),(\d+)\]=.*", loss)
            # an off-diagonal weight leaves the class no binary beta rule to test
            tested = entry is None or entry[1] == entry[2]
            p = (
                f"{f(w['loss_calibration_trained']['p_value'], '.3f')} / "
                f"{f(w['loss_calibration_unweighted']['p_value'], '.3f')}"
                if tested
                else "—"
            )
            rows.append(
                [
                    label,
                    loss,
                    ece,
                    _with_interval(difference["estimate"], difference["interval"], "+.3f")
                    if difference
                    else "—",
                    f"{f(w['mean_raw'], '.3f')} → {f(w['mean_corrected'], '.3f')} "
                    f"({f(w['rate'], '.3f')})",
                    p,
                ]
            )
    header = [
        "run",
        "loss",
        "class ECE [95% CI] raw → corrected",
        "corrected − unweighted [95% CI]",
        "mean score raw → corrected (rate)",
        "loss-calibration p at beta = 10/11 / at 1/2",
    ]
    return markdown_table(header, rows)


def _any_loss_tables() -> list[Item]:
    """sweep_any_loss's tables, each ECE with its interval, and the figures around them."""
    focal = "sweep_any_loss/adult_focal"
    alphas = [(0.01, ".2f"), (0.031, ".3f"), (0.151, ".3f"), (0.5, ".1f"), (0.849, ".3f"),
              (0.969, ".3f"), (0.99, ".2f")]  # fmt: skip

    def renormalised(run: str) -> tuple[float, ...]:
        """The top-label ECE of ``ones`` raw and renormalised, each with its interval; their
        intervals must not overlap (the README says renormalising raises it)."""
        cells = any_loss(run, "table.json")["ones"]
        raw, renorm = cells["raw"], cells["loss_corrected_renormalised"]
        if not raw["top_label_ece_interval"][1] < renorm["top_label_ece_interval"][0]:
            raise ValueError(f"{run}: the renormalised interval does not lie above the raw one")
        return (*_top_label_with_interval(raw), *_top_label_with_interval(renorm))

    def matrix_top_label() -> tuple[float, ...]:
        """The top-label ECE of ``ones`` and of the weighted loss, raw, and of the weighted loss
        corrected, each with its interval, on digits then Letter; the corrected interval must
        lie above the weighted raw one (the README says the correction raises it)."""
        values: list[float] = []
        for run, loss in (("digits_matrix", "B[8,8]=10"), ("letter_matrix", "B[14,14]=10")):
            table = any_loss(run, "table.json")
            raw, corrected = table[loss]["raw"], table[loss]["loss_corrected"]
            if not raw["top_label_ece_interval"][1] < corrected["top_label_ece_interval"][0]:
                raise ValueError(f"{run}: the corrected interval does not lie above the raw one")
            values += [*_top_label_with_interval(table["ones"]["raw"]),
                       *_top_label_with_interval(raw)]  # fmt: skip
        for run, loss in (("digits_matrix", "B[8,8]=10"), ("letter_matrix", "B[14,14]=10")):
            values += _top_label_with_interval(any_loss(run, "table.json")[loss]["loss_corrected"])
        return tuple(values)

    def matrix_classwise() -> tuple[float, ...]:
        """The weighted loss's class-wise ECE raw and corrected with their intervals, digits then
        Letter, and their renormalised top-label ECE; the classwise intervals must not overlap."""
        values: list[float] = []
        renorm: list[float] = []
        for run, loss in (("digits_matrix", "B[8,8]=10"), ("letter_matrix", "B[14,14]=10")):
            cells = any_loss(run, "table.json")[loss]
            raw, corrected = cells["raw"], cells["loss_corrected"]
            if not corrected["classwise_ece_interval"][1] < raw["classwise_ece_interval"][0]:
                raise ValueError(f"{run}: the class-wise intervals overlap")
            for m in (raw, corrected):
                values += [m["classwise_ece"], *m["classwise_ece_interval"]]
            renorm += _top_label_with_interval(cells["loss_corrected_renormalised"])
        return (*renorm, *values)

    def focal_above_log() -> tuple[int, int, float]:
        """The alphas whose corrected ECE's interval lies wholly above the unweighted log loss's:
        how many at the bottom of the grid, how many at its top, and the smallest of those; no
        other alpha may."""
        high = any_loss("adult_log", "table.json")["0.5"]["raw"]["ece_interval"][1]
        grid = sorted(sweep(focal))
        above = [a for a in grid if sweep(focal)[a]["loss_corrected"]["ece_interval"][0] > high]
        low = next(i for i, a in enumerate(grid) if a not in above)
        top = len(grid) - next(i for i, a in enumerate(reversed(grid)) if a not in above)
        if above != grid[:low] + grid[top:]:
            raise ValueError(f"the alphas above the log loss are not the grid's ends: {above}")
        return low, len(grid) - top, grid[top]

    return [
        Table("sweep_any_loss multiclass", ANY_LOSS_README, _any_loss_multiclass_table),
        Figure(
            "matrix top label",
            ANY_LOSS_README,
            "lowers the top-label ECE, from {} [{}, {}] to {} [{}, {}] on digits and from {} "
            "[{}, {}] to {} [{}, {}] on Letter, and the correction raises it again, to {} [{}, {}] "
            "and {} [{}, {}];",
            " ".join([".3f"] * 18),
            matrix_top_label,
        ),
        Figure(
            "matrix renormalised and class-wise",
            ANY_LOSS_README,
            "(`renorm.`: {} [{}, {}] on digits and {} [{}, {}] on Letter). The class-wise ECE, by "
            "contrast, falls with the correction, from {} [{}, {}] to {} [{}, {}] on digits and "
            "from {} [{}, {}] to {} [{}, {}] on Letter.",
            " ".join([".3f"] * 6 + [".4f"] * 12),
            matrix_classwise,
        ),
        Figure(
            "focal unweighted",
            ANY_LOSS_README,
            "Even unweighted (alpha = 1/2), focal training leaves scores far from calibrated (ECE "
            "{} [{}, {}]).",
            ".3f .3f .3f",
            lambda: _ece_and_interval(sweep_at(focal, 0.5), "raw"),
        ),
        Figure(
            "focal against the log loss",
            ANY_LOSS_README,
            "The generic inverse brings the ECE to {}-{}, against {} [{}, {}] for the unweighted "
            "log loss.",
            ".3f .3f .3f .3f .3f",
            lambda: (
                *min_max(sweep_values(focal, "loss_corrected", "ece")),
                *_ece_and_interval(any_loss("adult_log", "table.json")["0.5"], "raw"),
            ),
        ),
        Figure(
            "focal above the log loss",
            ANY_LOSS_README,
            "At the {} smallest alphas and at the {} from {} up, the corrected ECE's interval lies "
            "wholly above the log loss's",
            "words words .2f",
            focal_above_log,
        ),
        Table("sweep_any_loss weighted class", ANY_LOSS_README, _weighted_class_table),
        Table(
            "sweep_any_loss focal by alpha",
            ANY_LOSS_README,
            lambda: _ece_by_beta(focal, alphas, key_name="alpha"),
        ),
        Figure(
            "renormalised ones",
            ANY_LOSS_README,
            "renormalising alone raises the top-label ECE of `ones` from {} [{}, {}] to {} "
            "[{}, {}] on digits and from {} [{}, {}] to {} [{}, {}] on Letter.",
            " ".join([".3f"] * 12),
            lambda: (*renormalised("digits_matrix"), *renormalised("letter_matrix")),
        ),
        Figure(
            "unweighted log loss on Adult",
            ANY_LOSS_README,
            "The beta-weighted log loss at beta = 1/2, on the same folds (exact fit), has ECE {} "
            "[{}, {}]. AUROC is {} to {} at every alpha",
            ".3f .3f .3f .3f .3f",
            lambda: (
                *_ece_and_interval(any_loss("adult_log", "table.json")["0.5"], "raw"),
                *min_max(
                    [
                        c[m]["auroc"]
                        for c in sweep(focal).values()
                        for m in ("raw", "loss_corrected")
                    ]
                ),
            ),
        ),
    ]


def _adam_against_exact_table(rows: list[tuple[str, str, str]]) -> str:
    """The weighted class of ``(data, family, loss)`` fitted by Adam and exactly: its ECE raw →
    corrected with their intervals, the corrected ECE's difference from the unweighted model's
    with its paired interval, the corrected top-label ECE with its interval, and the
    loss-calibration p-value at the trained beta."""

    def ece(run: str, loss: str) -> str:
        w = _weighted(run, loss)
        return " → ".join(
            _with_interval(w[f"ece_{m}"], w[f"ece_{m}_interval"], ".3f")
            for m in ("raw", "corrected")
        )

    def difference(run: str, loss: str) -> str:
        d = _weighted(run, loss).get("ece_corrected_minus_unweighted")
        return _with_interval(d["estimate"], d["interval"], "+.3f") if d else "—"

    def top(run: str, loss: str) -> str:
        cells = any_loss(run, "table.json")[loss]["loss_corrected"]
        return _with_interval(*_top_label_with_interval(cells)[:1],
                              _top_label_with_interval(cells)[1:], ".3f")  # fmt: skip

    def p(run: str, loss: str) -> str:
        return f(_weighted(run, loss)["loss_calibration_trained"]["p_value"], ".3f")

    out = []
    for data, family, loss in rows:
        adam, exact = f"{data}_{family}", f"{data}_{family}_exact"
        out.append(
            [
                "digits" if data == "digits" else "Letter",
                loss,
                ece(adam, loss),
                ece(exact, loss),
                f"{difference(adam, loss)} / {difference(exact, loss)}",
                f"{top(adam, loss)} / {top(exact, loss)}",
                f"{p(adam, loss)} / {p(exact, loss)}",
            ]
        )
    header = [
        "run",
        "loss",
        "weighted class ECE [95% CI] raw → corrected, Adam",
        "the same, exact",
        "corrected − unweighted [95% CI], Adam / exact",
        "top-label ECE corrected [95% CI], Adam / exact",
        "loss-calibration p at beta = 10/11, Adam / exact",
    ]
    return markdown_table(header, out)


def _exact_timing(run: str, first: bool = False) -> float:
    timing = record("sweep_any_loss/exact_timing.json")
    return (timing["first_runs"] if first else timing)["wall_s"][run]


def _matrix_exact_runs() -> list[Item]:
    """The B-weighted runs at their exact optimum, against the Adam runs of the same losses."""
    rows = [("digits", "matrix", "B[8,8]=10"), ("letter", "matrix", "ones"),
            ("letter", "matrix", "B[14,14]=10")]  # fmt: skip
    p_trained = lambda run, loss: _weighted(run, loss)["loss_calibration_trained"]["p_value"]  # noqa: E731
    return [
        Table(
            "sweep_any_loss matrix exact",
            ANY_LOSS_README,
            lambda: _adam_against_exact_table(rows),
        ),
        Figure(
            "matrix exact timing",
            ANY_LOSS_README,
            "The reruns took {} s (digits) and {} s (Letter) on the {}-core CPU while other work "
            "shared it (`exact_timing.json`; the first runs, with nothing else running: {} s and "
            "{} s,",
            ".0f .0f d .0f .0f",
            lambda: (
                _exact_timing("digits_matrix_exact"),
                _exact_timing("letter_matrix_exact"),
                2,
                _exact_timing("digits_matrix_exact", first=True),
                _exact_timing("letter_matrix_exact", first=True),
            ),
        ),
        Figure(
            "matrix exact Letter rows",
            ANY_LOSS_README,
            "whose score rows sum to {}-{} ({}% to {}%) at the optimum",
            ".2f .2f d d",
            lambda: (
                _weighted("letter_matrix_exact", "B[14,14]=10")["row_sum_quantiles"][0],
                _weighted("letter_matrix_exact", "B[14,14]=10")["row_sum_quantiles"][-1],
                5,
                95,
            ),
        ),
        Figure(
            "matrix exact digits",
            ANY_LOSS_README,
            "(mean score {} against Adam's {}, for a rate of {}), but the correction leaves its "
            "ECE at {} [{}, {}], against {} [{}, {}] for the unweighted model: a difference of {} "
            "[{}, {}], where Adam's was {} [{}, {}]. The top-label ECE after the correction is {} "
            "[{}, {}], against {} [{}, {}] for Adam's. The loss-calibration test at beta = {}/{} "
            "rejects (p = {}, against {} for Adam's ensemble of {} seeds), but for a small gap: a "
            "better score within the bins would lower the weighted loss by {} per unit of "
            "weight, against {} for the same scores judged at beta = {}/{}.",
            " ".join([".3f"] * 21) + " d d .3f .3f words .4f .3f d d",
            lambda: (
                _weighted("digits_matrix_exact", "B[8,8]=10")["mean_raw"],
                _weighted("digits_matrix", "B[8,8]=10")["mean_raw"],
                _weighted("digits_matrix_exact", "B[8,8]=10")["rate"],
                *_weighted_ece("digits_matrix_exact", "B[8,8]=10", "corrected"),
                *_weighted_ece("digits_matrix_exact", "ones", "raw"),
                *_weighted_difference("digits_matrix_exact", "B[8,8]=10"),
                *_weighted_difference("digits_matrix", "B[8,8]=10"),
                *_top_label_with_interval(
                    any_loss("digits_matrix_exact", "table.json")["B[8,8]=10"]["loss_corrected"]
                ),
                *_top_label_with_interval(
                    any_loss("digits_matrix", "table.json")["B[8,8]=10"]["loss_corrected"]
                ),
                *_ratio_of(_weighted("digits_matrix_exact", "B[8,8]=10")),
                p_trained("digits_matrix_exact", "B[8,8]=10"),
                p_trained("digits_matrix", "B[8,8]=10"),
                len(any_loss("digits_matrix")["config"]["seeds"]),
                _weighted("digits_matrix_exact", "B[8,8]=10")["loss_calibration_trained"]["gap"],
                _weighted("digits_matrix_exact", "B[8,8]=10")["loss_calibration_unweighted"]["gap"],
                1,
                round(
                    1
                    / _weighted("digits_matrix_exact", "B[8,8]=10")["loss_calibration_unweighted"][
                        "beta"
                    ]
                ),
            ),
        ),
    ]


def _weighted_ece(run: str, loss: str, method: str) -> tuple[float, float, float]:
    """The weighted class's ECE, ``raw`` or ``corrected``, and its interval."""
    w = _weighted(run, loss)
    return (w[f"ece_{method}"], *w[f"ece_{method}_interval"])


def _weighted_difference(run: str, loss: str) -> tuple[float, float, float]:
    """The weighted class's corrected ECE minus the unweighted model's, and its paired interval."""
    d = _weighted(run, loss)["ece_corrected_minus_unweighted"]
    return (d["estimate"], *d["interval"])


def _any_loss_comparisons() -> list[Item]:
    """The comparisons of sweep_any_loss: each ECE with its interval, and the weighted class's
    difference from the unweighted model's with its paired interval (``weighted_class.json``)."""

    def within(pairs: list[tuple[str, str, str]]) -> float:
        """The largest difference, Adam against exact, of the weighted class's raw and corrected
        ECE and of the corrected top-label ECE, over ``(adam run, exact run, loss)``; each of
        these intervals must overlap its counterpart's (the README says so)."""
        gaps = []
        for adam, exact, loss in pairs:
            pairs_of = [
                (_weighted_ece(adam, loss, m), _weighted_ece(exact, loss, m))
                for m in ("raw", "corrected")
            ]
            pairs_of.append(
                tuple(
                    _top_label_with_interval(any_loss(run, "table.json")[loss]["loss_corrected"])
                    for run in (adam, exact)
                )
            )
            for (a, a_low, a_high), (b, b_low, b_high) in pairs_of:
                if not (a_low <= b_high and b_low <= a_high):
                    raise ValueError(
                        f"{adam} against {exact}, {loss}: the intervals do not overlap"
                    )
                gaps.append(abs(a - b))
        return max(gaps)

    def weighted_class(run: str, loss: str) -> tuple[float, ...]:
        """Raw → corrected ECE of the weighted class, and the unweighted model's, with intervals,
        and the difference with its paired interval."""
        return (
            *_weighted_ece(run, loss, "raw"),
            *_weighted_ece(run, loss, "corrected"),
            *_weighted_ece(run, "ones", "raw"),
            *_weighted_difference(run, loss),
        )

    def raw_above_unweighted() -> list[bool]:
        """Each weighted run's raw interval lies above its unweighted model's."""
        out = []
        for run, loss in ANY_LOSS_WEIGHTED.items():
            ones, weighted = _weighted_ece(run, "ones", "raw"), _weighted_ece(run, loss, "raw")
            out.append(weighted[1] > ones[2])
        if not all(out):
            raise ValueError("a weighted run's raw interval does not lie above the unweighted one")
        return out

    def verdicts() -> tuple:
        """Nothing to write: checks the README's verdicts on the weighted class. Raw and
        corrected intervals apart in every run but digits under the softmax loss; the corrected
        ECE's difference from the unweighted model's not significant on digits under the
        B-weighted loss only."""
        for run, loss in ANY_LOSS_WEIGHTED.items():
            apart = _weighted_ece(run, loss, "corrected")[2] < _weighted_ece(run, loss, "raw")[1]
            if apart != (run != "digits_softmax"):
                raise ValueError(f"{run}: raw and corrected intervals apart: {apart}")
            _, low, high = _weighted_difference(run, loss)
            if (low <= 0 <= high) != (run == "digits_matrix"):
                raise ValueError(f"{run}: the difference's interval [{low}, {high}]")
        return ()

    phrase = "- {}: {} [{}, {}] → {} [{}, {}] (unweighted {} [{}, {}]; difference {} [{}, {}])"
    cases = [
        ("digits, matrix", "digits_matrix", "B[8,8]=10", "."),
        ("Letter, matrix", "letter_matrix", "B[14,14]=10", ";"),
        ("Letter, softmax", "letter_softmax", "w[14]=10", ";"),
        ("digits, softmax", "digits_softmax", "w[8]=10", ";"),
    ]
    return [
        Figure(
            "weighted class ECE ratio",
            ANY_LOSS_README,
            "gives it a binary ECE {} to {} times the unweighted model's, each raw interval lying "
            "above the unweighted one's.",
            ">= <=",
            lambda: (
                min(weighted_class_ece_ratios()) if all(raw_above_unweighted()) else None,
                max(weighted_class_ece_ratios()),
            ),
        ),
        Figure(
            "weighted class inflation",
            ANY_LOSS_README,
            "inflates that class's scores (mean {} against a rate of {} on digits, {} against {} "
            "on Letter);",
            ".2f .3f .2f .3f",
            lambda: (
                _weighted("digits_matrix", "B[8,8]=10")["mean_raw"],
                _weighted("digits_matrix", "B[8,8]=10")["rate"],
                _weighted("letter_matrix", "B[14,14]=10")["mean_raw"],
                _weighted("letter_matrix", "B[14,14]=10")["rate"],
            ),
        ),
        *[
            Figure(
                f"weighted class: {label}",
                ANY_LOSS_README,
                phrase.replace("- {}:", f"- {label}:"),
                " ".join([".3f"] * 12),
                lambda run=run, loss=loss: weighted_class(run, loss),
            )
            for label, run, loss, _ in cases
        ],
        Figure(
            "weighted class verdicts",
            ANY_LOSS_README,
            "the raw and corrected intervals lie apart in three of the four, and overlap on digits "
            "under the softmax loss.",
            "",
            verdicts,
        ),
        Figure(
            "softmax class-wise ECE",
            ANY_LOSS_README,
            "In the softmax runs the class-wise ECE over all classes goes from {} [{}, {}] to {} "
            "[{}, {}] on digits and from {} [{}, {}] to {} [{}, {}] on Letter (unweighted {} "
            "[{}, {}] and {} [{}, {}]).",
            " ".join([".4f"] * 18),
            lambda: (
                *_classwise("digits_softmax", "w[8]=10", "raw"),
                *_classwise("digits_softmax", "w[8]=10", "loss_corrected"),
                *_classwise("letter_softmax", "w[14]=10", "raw"),
                *_classwise("letter_softmax", "w[14]=10", "loss_corrected"),
                *_classwise("digits_softmax", "ones", "raw"),
                *_classwise("letter_softmax", "ones", "raw"),
            ),
        ),
        Figure(
            "focal loss at the extreme alphas",
            ANY_LOSS_README,
            "Its largest values are at the ends of the grid, up to {} at alpha = {}.",
            ".3f .2f",
            lambda: (
                max(sweep_values("sweep_any_loss/adult_focal", "loss_corrected", "ece")),
                max(sweep("sweep_any_loss/adult_focal")),
            ),
        ),
        Figure(
            "digits softmax over-correction",
            ANY_LOSS_README,
            "loss calibration of the class-8 scores is rejected both at beta = 10/11 and at 1/2 "
            "(p = {} and {});",
            ".3f .3f",
            lambda: tuple(
                _weighted("digits_softmax", "w[8]=10")[f"loss_calibration_{b}"]["p_value"]
                if _weighted("digits_softmax", "w[8]=10")[f"loss_calibration_{b}"]["p_value"] < 0.05
                else None
                for b in ("trained", "unweighted")
            ),
        ),
        Figure(
            "digits softmax corrected mean",
            ANY_LOSS_README,
            "the corrected mean is {} against a rate of {}.",
            ".3f .3f",
            lambda: (
                _weighted("digits_softmax", "w[8]=10")["mean_corrected"],
                _weighted("digits_softmax", "w[8]=10")["rate"],
            ),
        ),
        Figure(
            "Letter softmax test and correction",
            ANY_LOSS_README,
            "loss calibration of the weighted class is not rejected at beta = 10/11 (p = {}; its "
            "power against beta = 1/2 at these scores is {}) and is rejected at 1/2 (p = {}), and "
            "its correction brings the class's ECE to within {} [{}, {}] of the unweighted "
            "model's:",
            ".1f .2f .3f .3f .3f .3f",
            lambda: (
                _weighted("letter_softmax", "w[14]=10")["loss_calibration_trained"]["p_value"],
                _weighted("letter_softmax", "w[14]=10")["loss_calibration_trained"][
                    "power_against"
                ]["rate"],
                _weighted("letter_softmax", "w[14]=10")["loss_calibration_unweighted"]["p_value"],
                *_weighted_difference("letter_softmax", "w[14]=10"),
            ),
        ),
        Figure(
            "matrix exact Letter against Adam",
            ANY_LOSS_README,
            "On Letter, the exact optimum's ECEs lie within {} of Adam's",
            "<=",
            lambda: within(
                [("letter_matrix", "letter_matrix_exact", loss) for loss in ("ones", "B[14,14]=10")]
            ),
        ),
        Figure(
            "softmax exact Letter against Adam",
            ANY_LOSS_README,
            "On Letter, the exact fits' ECEs lie within {} of Adam's",
            "<=",
            lambda: within([("letter_softmax", "letter_softmax_exact", "w[14]=10")]),
        ),
        Figure(
            "matrix row sums",
            ANY_LOSS_README,
            "each row's scores sum to {}-{} (5% to 95%) on digits and {}-{} on Letter under `ones`",
            ".2f .2f .2f .2f",
            lambda: (
                _weighted("digits_matrix", "ones")["row_sum_quantiles"][0],
                _weighted("digits_matrix", "ones")["row_sum_quantiles"][-1],
                _weighted("letter_matrix", "ones")["row_sum_quantiles"][0],
                _weighted("letter_matrix", "ones")["row_sum_quantiles"][-1],
            ),
        ),
    ]


def _classwise(run: str, loss: str, method: str) -> tuple[float, float, float]:
    cells = any_loss(run, "table.json")[loss][method]
    return (cells["classwise_ece"], *cells["classwise_ece_interval"])


def _stronger_ridge_run() -> list[Item]:
    """The digits B-weighted run refitted exactly with l2 = 1e-2, against the l2 = 1e-3 one."""
    run, loss = "digits_matrix_exact_l2_1e-2", "B[8,8]=10"
    table = lambda run: any_loss(run, "table.json")[loss]  # noqa: E731
    return [
        Figure(
            "matrix exact digits, stronger ridge",
            ANY_LOSS_README,
            "(`--l2 {}`, losses `ones;B[8,8]=10`, in `digits_matrix_exact_l2_1e-2/`: the JSON "
            "records and the ECE figure), loss calibration of the weighted class's scores is not "
            "rejected (p = {}). Their mean score is {} and corrected ECE {} [{}, {}] (Adam's: {} "
            "and {} [{}, {}]), with an accuracy of {} against {} and a corrected top-label ECE of "
            "{} [{}, {}] against {} [{}, {}] at `--l2 {}`; its corrected ECE's difference from its "
            "own unweighted model's is {} [{}, {}].",
            ".0es .2f " + " ".join([".3f"] * 16) + " .0es .3f .3f .3f",
            lambda: (
                any_loss(run)["config"]["train"]["l2"],
                _weighted(run, loss)["loss_calibration_trained"]["p_value"],
                _weighted(run, loss)["mean_raw"],
                *_weighted_ece(run, loss, "corrected"),
                _weighted("digits_matrix", loss)["mean_raw"],
                *_weighted_ece("digits_matrix", loss, "corrected"),
                table(run)["raw"]["accuracy"],
                table("digits_matrix_exact")["raw"]["accuracy"],
                *_top_label_with_interval(table(run)["loss_corrected"]),
                *_top_label_with_interval(table("digits_matrix_exact")["loss_corrected"]),
                any_loss("digits_matrix_exact")["config"]["train"]["l2"],
                *_weighted_difference(run, loss),
            ),
        ),
    ]


def _softmax_exact_runs() -> list[Item]:
    """The class-weighted softmax runs at their exact optimum, against the Adam runs."""
    weighted = lambda data, run="": _weighted(  # noqa: E731
        f"{data}_softmax{run}", "w[8]=10" if data == "digits" else "w[14]=10"
    )
    p_trained = lambda data, run="": weighted(data, run)["loss_calibration_trained"]["p_value"]  # noqa: E731
    test = lambda data, run="": weighted(data, run)["loss_calibration_unweighted"]  # noqa: E731
    rows = [("digits", "softmax", "w[8]=10"), ("letter", "softmax", "w[14]=10")]
    return [
        Table(
            "sweep_any_loss softmax exact",
            ANY_LOSS_README,
            lambda: _adam_against_exact_table(rows),
        ),
        Figure(
            "softmax exact timing",
            ANY_LOSS_README,
            "The reruns took {} s (digits) and {} s (Letter) on the {}-core CPU while other work "
            "shared it (`exact_timing.json`; the first runs, with nothing else running: {} s and "
            "{} s).",
            ".1f .1f d .1f .1f",
            lambda: (
                _exact_timing("digits_softmax_exact"),
                _exact_timing("letter_softmax_exact"),
                2,
                _exact_timing("digits_softmax_exact", first=True),
                _exact_timing("letter_softmax_exact", first=True),
            ),
        ),
        Figure(
            "softmax exact digits in the README",
            README,
            "and loss calibration of its scores is not rejected "
            "(p = {}; rejected with Adam, p = {})",
            ".3f .3f",
            lambda: (p_trained("digits", "_exact"), p_trained("digits")),
        ),
        Figure(
            "softmax exact digits",
            ANY_LOSS_README,
            "at beta = {}/{} (p = {}), where that of Adam's ensemble was rejected (p = {}). Nor is "
            "it at beta = 1/2 (p = {}), although at these scores each test's power against the "
            "other beta is {}: the scores lie between the two rules. They are inflated less than "
            "Adam's (mean score {} against {}, for a rate of {}), so the correction has less to "
            "undo; it leaves the class's ECE at {} [{}, {}], against {} [{}, {}] for the "
            "unweighted exact fit, a difference of {} [{}, {}] that these {} digits do not "
            "resolve (Adam's: {} [{}, {}]).",
            "d d .3f .3f .3f .2f .3f .3f .3f " + " ".join([".3f"] * 9) + " ,d .3f .3f .3f",
            lambda: (
                *_ratio_of(weighted("digits", "_exact")),
                p_trained("digits", "_exact"),
                p_trained("digits"),
                test("digits", "_exact")["p_value"],
                [
                    weighted("digits", "_exact")[f"loss_calibration_{b}"]["power_against"]["rate"]
                    for b in ("trained", "unweighted")
                ],
                weighted("digits", "_exact")["mean_raw"],
                weighted("digits")["mean_raw"],
                weighted("digits", "_exact")["rate"],
                *_weighted_ece("digits_softmax_exact", "w[8]=10", "corrected"),
                *_weighted_ece("digits_softmax_exact", "ones", "raw"),
                *_weighted_difference("digits_softmax_exact", "w[8]=10"),
                len(digits().labels),
                *_weighted_difference("digits_softmax", "w[8]=10"),
            ),
        ),
    ]


def _ratio_of(weighted: dict) -> tuple[int, int]:
    """The trained beta as the fraction the text writes, w / (w + 1) with w = 10."""
    beta = weighted["loss_calibration_trained"]["beta"]
    w = round(beta / (1 - beta))
    return w, w + 1


def _sweep_train_run() -> list[Item]:
    runs = (CPU_SWEEP, GPU_SWEEP)
    work = sweep_work
    return [
        Figure(
            "sweep_train work",
            SWEEP_TRAIN,
            "Work: `run_sweep` on UCI Adult ({} rows x {} encoded features), {} betas x {} seeds x "
            "{} rotations = {} models, ridge `l2 = {}`",
            ",.0f .0f .0f .0f .0f ,.0f .0es",
            lambda: tuple(
                [work(r)[k] for r in runs]
                for k in ("rows", "features", "betas", "seeds", "rotations", "models", "l2")
            ),
        ),
        Figure(
            "sweep_train Adult data",
            SWEEP_TRAIN,
            "on UCI Adult ({} rows x {} encoded features)",
            ",d d",
            lambda folder: (len(adult(folder).labels), adult(folder).features.shape[1]),
            data="uci-adult",
        ),
        Figure(
            "sweep_train fits",
            SWEEP_TRAIN,
            "so the {} seeds share each of the {} (beta, rotation) fits",
            ".0f .0f",
            lambda: (
                work(CPU_SWEEP)["seeds"],
                work(CPU_SWEEP)["betas"] * work(CPU_SWEEP)["rotations"],
            ),
        ),
        Figure(
            "sweep_train baseline slice",
            SWEEP_TRAIN,
            "{} fits timed ({} betas x {} rotations, spread over the grid)",
            "d d .0f",
            lambda: (
                [baseline_fits(r)[0] for r in runs],
                [len(record(f"sweep_train/{r}")["corrected_ece_diff"]) for r in runs],
                work(CPU_SWEEP)["rotations"],
            ),
        ),
        Figure(
            "sweep_train on the H200",
            SWEEP_TRAIN,
            "+ {} CPU cores for the baseline | {} s | {} s | **{}** | `2026-11-28_h200.json` |",
            "d .1f .0f .1f",
            lambda: (baseline_fits(GPU_SWEEP)[2], *sweep_train_row(GPU_SWEEP)),
        ),
        Figure(
            "sweep_train on the CPU",
            SWEEP_TRAIN,
            "| {}-core Intel Xeon virtual machine (CPU only) | {} s | {} s | **{}** | "
            "`2026-11-28_cpu_2core.json` |",
            "d .1f .0f .1f",
            lambda: (baseline_fits(CPU_SWEEP_NOW)[2], *sweep_train_row(CPU_SWEEP_NOW)),
        ),
        Figure(
            "sweep_train benchmark: reference tolerance",
            "experiments/benchmarks/sweep_train.py",
            "scikit-learn's Newton-Cholesky solver at a tolerance of {}: against that reference",
            ".0es",
            lambda: sweep_train.REFERENCE_TOL,
        ),
        Figure(
            "sweep_train benchmark: reference fit",
            "experiments/benchmarks/sweep_train.py",
            "scikit-learn's Newton-Cholesky solver at a tolerance of {} instead of lbfgs",
            ".0es",
            lambda: sweep_train.REFERENCE_TOL,
        ),
        Figure(
            "sweep_train benchmark: scikit-learn's default tolerance",
            "experiments/benchmarks/sweep_train.py",
            "(scikit-learn's own default is {}).",
            ".0es",
            lambda: _sklearn_logistic_tol(),
        ),
        Figure(
            "sweep_train on the H200 against its exact reference",
            SWEEP_TRAIN,
            "On the H200 ({}), the exact reference agrees with ours as on the CPU: objectives "
            "within {} relative, fitted log-likelihoods within {}.",
            "date .1e .1e",
            lambda: (
                record(f"sweep_train/{GPU_SWEEP}")["date"],
                record(f"sweep_train/{GPU_SWEEP}")["objective_rel_diff_vs_exact_max"],
                record(f"sweep_train/{GPU_SWEEP}")["loglik_rel_diff_vs_exact_max"],
            ),
        ),
        Figure(
            "sweep_train on the H200 against the solver before",
            SWEEP_TRAIN,
            "There the solver as it stands took {} s, against {} s for the one before it … and "
            "the baseline's {} fits took {} s against {} s, so the ratio stayed about the same. "
            "Why the changes since that solver, which cut the CPU's time from {} s to {} s,",
            ".1f .1f d .2f .2f .0f .1f",
            lambda: (
                record(f"sweep_train/{GPU_SWEEP}")["ours_s"],
                record("sweep_train/2026-11-27_h200_minnorm.json")["ours_s"],
                baseline_fits(GPU_SWEEP)[0],
                baseline_fits(GPU_SWEEP)[1],
                baseline_fits("2026-11-27_h200_minnorm.json")[1],
                record("sweep_train/2026-11-27_cpu_2core_minnorm.json")["ours_s"],
                record(f"sweep_train/{CPU_SWEEP}")["ours_s"],
            ),
        ),
        Figure(
            "sweep_train earlier CPU runs",
            SWEEP_TRAIN,
            "On the CPU it ran twice on {}: {} s vs {} s, **{}**, then {} s vs {} s, **{}** "
            "(`2026-11-28_cpu_2core_repeat.json`). On {} the same machine type had given {} s "
            "vs {} s, **{}** (`2026-11-27_cpu_2core_exact_reference.json`), and before the "
            "benchmark refitted its slice with an exact reference (below), {} s vs {} s, **{}** "
            "(`2026-11-27_cpu_2core_path.json`). Both sides ran faster on {} (the "
            "baseline's {} fits in {} s and {} s against {} s)",
            "date .1f .0f .1f .1f .0f .1f date .1f .0f .1f .1f .0f .1f date d .2f .2f .2f",
            lambda: (
                record(f"sweep_train/{CPU_SWEEP_NOW}")["date"],
                *sweep_train_row(CPU_SWEEP_NOW),
                *sweep_train_row(CPU_SWEEP_REPEAT),
                record(f"sweep_train/{CPU_SWEEP}")["date"],
                *sweep_train_row(CPU_SWEEP),
                *sweep_train_row("2026-11-27_cpu_2core_path.json"),
                record(f"sweep_train/{CPU_SWEEP_REPEAT}")["date"],
                baseline_fits(CPU_SWEEP_NOW)[0],
                baseline_fits(CPU_SWEEP_NOW)[1],
                baseline_fits(CPU_SWEEP_REPEAT)[1],
                baseline_fits(CPU_SWEEP)[1],
            ),
        ),
        Figure(
            "sweep_train compile time on the CPU",
            SWEEP_TRAIN,
            "(tracing, lowering and compiling: `ours_compile_s`): {} s of {} s and {} s of {} s.",
            ".1f .1f .1f .1f",
            lambda: tuple(
                record(f"sweep_train/{r}")[k]
                for r in (CPU_SWEEP_NOW, CPU_SWEEP_REPEAT)
                for k in ("ours_compile_s", "ours_s")
            ),
        ),
        Figure(
            "sweep_train exact reference",
            SWEEP_TRAIN,
            "at a tolerance of {}. Against that reference "
            "(`2026-11-27_cpu_2core_exact_reference.json`), our objectives agree within {} "
            "relative and our fitted log-likelihoods (the weighted log loss without the ridge) "
            "within {} relative: the goal of {} is met",
            ".0es .1e .1e .0es",
            lambda: (
                sweep_train.REFERENCE_TOL,
                record(f"sweep_train/{CPU_SWEEP}")["objective_rel_diff_vs_exact_max"],
                record(f"sweep_train/{CPU_SWEEP}")["loglik_rel_diff_vs_exact_max"],
                1e-3,
            ),
        ),
        Figure(
            "sweep_train first solver",
            SWEEP_TRAIN,
            "| Hessians from the design, a ridged solve | {} s vs {} s, **{}** "
            "(`2026-11-27_h200.json`) | {} s vs {} s, **{}** (`2026-11-27_cpu_2core.json`) |",
            ".1f .0f .1f .0f .0f .2f",
            lambda: (
                *sweep_train_row("2026-11-27_h200.json"),
                *sweep_train_row("2026-11-27_cpu_2core.json"),
            ),
        ),
        Figure(
            "sweep_train second solver",
            SWEEP_TRAIN,
            "| pair-product Hessians, a ridged solve | {} s vs {} s, **{}** "
            "(`2026-11-27_h200_pairs.json`) | {} s vs {} s, **{}** "
            "(`2026-11-27_cpu_2core_pairs.json`) |",
            ".1f .0f .1f .0f .0f .2f",
            lambda: (
                *sweep_train_row("2026-11-27_h200_pairs.json"),
                *sweep_train_row("2026-11-27_cpu_2core_pairs.json"),
            ),
        ),
        Figure(
            "sweep_train baseline spread",
            SWEEP_TRAIN,
            "({} s to {} s for the same {} fits on the H200 machine's {} cores, {} s to {} s on "
            "the 2-core CPU)",
            ".2f .2f d d .2f .2f",
            lambda: (
                *min_max([baseline_fits(r)[1] for r in _sweep_train_records("h200")]),
                baseline_fits(GPU_SWEEP)[0],
                baseline_fits(GPU_SWEEP)[2],
                *min_max([baseline_fits(r)[1] for r in _sweep_train_records("cpu_2core")]),
            ),
        ),
        Figure(
            "sweep_train objectives",
            SWEEP_TRAIN,
            "our objective is never higher than scikit-learn's, and at most {}% lower",
            ".2f",
            lambda: [100 * record(f"sweep_train/{r}")["objective_rel_diff_max"] for r in runs],
        ),
        Figure(
            "sweep_train corrected ECEs",
            SWEEP_TRAIN,
            "the loss-corrected ECEs of the two agree within {} (the goal",
            ".5f",
            lambda: max(record(f"sweep_train/{r}")["corrected_ece_diff_max"] for r in runs),
        ),
        Figure(
            "sweep_train tolerance",
            SWEEP_TRAIN,
            "ours are at a gradient norm below {}.",
            ".0es",
            lambda: TABULAR_DEFAULTS.tol,
        ),
        Figure(
            "sweep_train third solver",
            SWEEP_TRAIN,
            "| minimum-norm Newton steps, every member from zero | {} s vs {} s, **{}** "
            "(`2026-11-27_h200_minnorm.json`) | {} s vs {} s, **{}** "
            "(`2026-11-27_cpu_2core_minnorm.json`) |",
            ".1f .0f .1f .0f .0f .2f",
            lambda: (
                *sweep_train_row("2026-11-27_h200_minnorm.json"),
                *sweep_train_row("2026-11-27_cpu_2core_minnorm.json"),
            ),
        ),
        Figure(
            "sweep_train eigenvalue floor",
            SWEEP_TRAIN,
            "that started from a neighbour's optimum could stall above the tolerance; raised to "
            "{} of the largest, it keeps moving",
            ".0es",
            lambda: iml.recalibration.newton._EIGEN_CUTOFF,
        ),
        Figure(
            "sweep_train CPU memory",
            SWEEP_TRAIN,
            "({} GiB for the CPU run as it stands,",
            ".1f",
            lambda: record(f"sweep_train/{CPU_SWEEP}")["peak_rss_gb"],
        ),
        Figure(
            "sweep_train GPU memory",
            SWEEP_TRAIN,
            "as it stands, {} GiB for the GPU host process)",
            ".1f",
            lambda: record(f"sweep_train/{GPU_SWEEP}")["peak_rss_gb"],
        ),
    ]


def _sweep_train_records(machine: str) -> list[str]:
    return [p.name for p in sorted((RESULTS / "sweep_train").glob(f"*_{machine}*.json"))]


H100 = "docs/results/gpu_h100/README.md"
H100_K1 = "gpu_h100/2026-11-27/paper_scale_k1.json"
H100_K16 = "gpu_h100/2026-11-27/paper_scale_k16.json"
H100_LOG = "gpu_h100/2026-11-27/log_first_call.txt"


PAPER_EPOCHS = 10  # the epochs per member of the projections of the paper's experiment


def _paper_members() -> int:
    """The members of the paper's experiment (``project_paper_experiment``'s default)."""
    from experiments.benchmarks._projection import project_paper_experiment

    return inspect.signature(project_paper_experiment).parameters["members"].default


def _paper_steps(paper: dict, k: dict) -> str:
    """A paper_scale record's steps: PyTorch's, one member's and ``k``'s members' in one step."""
    batch, torch = paper["batch_per_member"], paper["torch"]
    one, torch_rate = paper["ours_one_member"], torch["train_member_images_per_s"]

    def row(label: str, step_s: float, members: int, rate: float, ratio: str) -> list[str]:
        step = f"{f(step_s * 1e3, '.1f')} ms for {members * batch} images"
        return [label, step, f(rate, ".0f"), ratio]

    rows = [
        row("PyTorch, one model", torch["train_step_s"], 1, torch_rate, "1"),
        row(
            f"ours, K = {one['members']}",
            one["step_s"],
            one["members"],
            one["member_images_per_s"],
            f"**{f(paper['ratio_one_member'], '.2f')}**",
        ),
        row(
            f"ours, K = {k['members']} in one step",
            k["step_s"],
            k["members"],
            k["member_images_per_s"],
            f"**{f(k['member_images_per_s'] / torch_rate, '.2f')}**",
        ),
    ]
    return markdown_table(["", "step", "member-images/s", "against PyTorch"], rows, True)


def _paper_projection(paper: dict, k: dict) -> str:
    """The paper's experiment projected from a paper_scale record (``project_paper_experiment``):
    PyTorch's loop, one member at a time, and ``k``'s members per step."""
    from experiments.benchmarks._projection import project_paper_experiment

    validation = paper["torch"]["eval_member_images_per_s"]

    def hours(rate: float) -> dict[str, float]:
        return project_paper_experiment(rate, validation, epochs=PAPER_EPOCHS)

    torch = hours(paper["torch"]["train_member_images_per_s"])
    one = hours(paper["ours_one_member"]["member_images_per_s"])
    ours = hours(k["member_images_per_s"])

    def cells(h: dict[str, float]) -> list[str]:
        days = f"{f(h['hours'], ',.0f')} h ({f(h['hours'] / 24, '.1f')} days)"
        return [f"{f(h['hours_per_epoch'], '.1f')} h", days]

    last = cells(ours)
    last[1] = f"**{last[1]}**, {f(torch['hours'] / ours['hours'], '.2f')}x less"
    rows = [
        ["PyTorch loop, one model at a time", *cells(torch)],
        ["ours, one member at a time", *cells(one)],
        [f"ours, {k['members']} members per step", *last],
    ]
    header = ["", f"per epoch of all {f(_paper_members(), ',d')} members", f"{PAPER_EPOCHS} epochs"]
    return markdown_table(header, rows, True)


def _gpu_h100_run() -> list[Item]:
    from experiments.benchmarks._projection import project_paper_experiment

    def k1() -> dict:
        return record(H100_K1)

    def k16() -> dict:
        return record(H100_K16)["train"]

    def torch_rate() -> float:
        return k1()["torch"]["train_member_images_per_s"]

    def hours(rate: float, key: str) -> float:
        return project_paper_experiment(rate, k1()["torch"]["eval_member_images_per_s"], epochs=10)[
            key
        ]

    return [
        Table("gpu_h100 steps", H100, lambda: _paper_steps(k1(), k16())),
        Figure(
            "H100 largest K",
            H100,
            "the one-member program gives {} GB (arguments and temporaries), which predicts {} "
            "members",
            ".2f d",
            lambda: (
                k1()["ours_one_member"]["xla_bytes"] / 1e9,
                int(record_line(H100_LOG, r"largest K: predicted (\d+)")[0]),
            ),
        ),
        Figure(
            "H100 K = 16 memory",
            H100,
            "K = {} compiled in {} s and takes {} GB by XLA's account ({} GB per member)",
            "d .1f .1f .2f",
            lambda: (
                k16()["members"],
                k16()["compile_s"],
                k16()["xla_bytes"] / 1e9,
                k16()["xla_bytes"] / 1e9 / k16()["members"],
            ),
        ),
        Figure(
            "H100 compile times",
            H100,
            "Compile times: {} s for K = {} and {} s for K = {}. PyTorch's first step took {} s. "
            "PyTorch's allocator peaked at {} GB.",
            ".1f d .1f d .1f .1f",
            lambda: (
                k1()["ours_one_member"]["compile_s"],
                1,
                k16()["compile_s"],
                k16()["members"],
                k1()["torch"]["first_step_s"],
                k1()["torch"]["peak_device_mb"] * 2**20 / 1e9,
            ),
        ),
        Figure(
            "H100 validation speed",
            H100,
            "PyTorch's measured validation speed for both sides: {} images/s at batch {}.",
            ",.0f d",
            lambda: (k1()["torch"]["eval_member_images_per_s"], k1()["eval_batch_per_member"]),
        ),
        Figure(
            "H100 projection per model",
            H100,
            "PyTorch on this H100 takes {} h per model for {} epochs",
            ".2f d",
            lambda: (hours(torch_rate(), "hours_per_member"), 10),
        ),
        Table("gpu_h100 projection", H100, lambda: _paper_projection(k1(), k16())),
        Figure(
            "H100 batching gain",
            H100,
            "batching {} members raised the speed by {}x over one member",
            "d .1f",
            lambda: (
                k16()["members"],
                k16()["member_images_per_s"] / k1()["ours_one_member"]["member_images_per_s"],
            ),
        ),
    ]


def _seeds_of(*values: int) -> tuple[int, ...]:
    """What ``iml reproduce --seeds VALUES`` and ``iml sweep --seeds VALUES`` train (the same
    seeds): one value's count, its first and last seed; several values, the seeds themselves."""
    from iml import cli

    both = {
        cli.load_config(
            cli.parse_args([command, "--seeds", *map(str, values), "--out", "unused"])
        ).train.seeds
        for command in ("reproduce", "sweep")
    }
    assert len(both) == 1, both
    (seeds,) = both
    return (len(seeds), seeds[0], seeds[-1]) if len(values) == 1 else seeds


def _bare_seeds_refused(n: int) -> tuple[int, int, int, int] | None:
    """``n`` four times if ``--config.train.seeds=n`` is refused in both commands with the error
    that names ``--seeds n`` and ``'(n,)'``."""
    from iml import cli

    for command in ("reproduce", "sweep"):
        args = cli.parse_args([command, f"--config.train.seeds={n}", "--out", "unused"])
        try:
            cli.load_config(args)
        except ValueError as error:
            if not re.search(rf"use --seeds {n} .*'\({n},\)' for the seed {n}", str(error)):
                return None
        else:
            return None
    return n, n, n, n


def _first_failed_conv(log: str) -> dict:
    """The first instruction that a failed GPU compile's log names (``Could not get config for
    HLO``): a cuDNN convolution's output shape, window, groups and the layer that made it."""
    m = re.search(
        r"Could not get config for HLO: %cudnn-conv\.\d+ = \(f32\[([\d,]+)\].*?"
        r"window=\{size=(\d+)x(\d+)[ }].*?feature_group_count=(\d+).*?"
        r"op_name=\"jit\(member_train_step\)/([^\"]+)/conv_general_dilated\"",
        (RESULTS / log).read_text(),
    )
    assert m, f"{log}: no failed convolution"
    shape, wh, ww, groups, name = m.groups()
    return {
        "shape": [int(d) for d in shape.split(",")],
        "window": (int(wh), int(ww)),
        "groups": int(groups),
        "layer": name.split(")/", 1)[1],
        "backward": name.startswith("vmap(transpose("),
    }


def _dense_layer_input_maps(arch: dict, block: int, layer: int) -> int:
    """The maps that dense layer ``layer`` of dense block ``block`` (both from 1) reads."""
    maps = arch["num_init_features"]
    for layers in arch["block_config"][: block - 1]:
        maps = (maps + layers * arch["growth_rate"]) // 2  # the transition halves them
    return maps + (layer - 1) * arch["growth_rate"]


def _largest_conv_operand(model, members: int, side: int, channels: int, batch: int = 16) -> int:
    """The most values that one convolution of ``members`` members' training step (the
    trainer's ``vmap``) reads, from the traced program (nothing is compiled)."""
    from tools.probe_member_convs import step_convolutions

    layers = step_convolutions(model, members, batch, side, channels)
    return max(
        math.prod(shape)
        for layer in layers
        for call in layer.calls
        for shape in (call.lhs_shape, call.rhs_shape)
    )


def _gpu_array_size_refuted() -> list[Item]:
    """The runs of many small DenseNets against the first instructions that failed at 48 and 62
    DenseNet-121 members."""
    from experiments.benchmarks.paper_scale import architecture
    from iml.models import densenet_small

    small = {
        k: v.default
        for k, v in inspect.signature(densenet_small).parameters.items()
        if v.default is not inspect.Parameter.empty
    }
    block1 = small["num_init_features"] + small["block_config"][0] * small["growth_rate"]
    bottleneck = small["bn_size"] * small["growth_rate"]
    assert block1 == bottleneck

    def run(name: str) -> tuple[int, int, int, int]:
        """(members, side, batch, bytes per value) of a largest-K record of the small DenseNet."""
        r = record(name)
        assert r["model"] == "densenet_small()" and r["image"][0] == r["image"][1]
        itemsize = {"float32": 4, "bfloat16": 2}[r["dtype"]]
        return r["largest_members"]["members"], r["image"][0], r["batch_per_member"], itemsize

    def operand(name: str) -> tuple[float, float]:
        """One convolution operand of the run's K members: (GB, values)."""
        k, side, batch, itemsize = run(name)
        values = batch * side * side * block1 * k
        return values * itemsize / 1e9, values

    def past_both(name: str) -> bool:
        gb, values = operand(name)
        return gb * 1e9 > 2**31 and values > 2**31

    dn121 = architecture(False)
    bn = dn121["bn_size"] * dn121["growth_rate"]

    def at48() -> tuple:
        c = _first_failed_conv(f"{GPU6}/log_k48.txt")
        g = c["groups"]
        maps, one, _, out = c["shape"]
        ok = (
            c["layer"] == "denseblock2/denselayer6/conv1"
            and c["backward"]
            and (one, out) == (1, g * bn)
            and maps == _dense_layer_input_maps(dn121, 2, 6)
        )
        side, batch = c["window"][0], record(f"{GPU6}/paper_scale_k48.json")["batch_per_member"]
        reads = (maps * side * side * batch * g * 4 / 1e6, g * bn * side * side * batch * 4 / 1e6)
        return (
            g if ok else None,
            maps,
            bn,
            side,
            side,
            *c["window"],
            g,
            *reads,
            maps * g * bn * 4 / 1e6,
        )

    def at62() -> tuple:
        c = _first_failed_conv(f"{GPU5}/log_paper.txt")
        g = c["groups"]
        batch, side, _, maps = c["shape"]
        ok = (
            c["layer"] == "denseblock4/denselayer6/conv1"
            and c["backward"]
            and c["window"] == (1, 1)
            and maps == g * _dense_layer_input_maps(dn121, 4, 6)
            and g == record(GPU5_PAPER)["predicted_members"]
        )
        return (
            g if ok else None,
            maps // g,
            bn,
            side,
            side,
            batch * side * side * maps * 4 / 1e6,
        )

    def traced_bf16() -> int:
        """Run 4's K if its traced step's largest convolution operand is the one stated."""
        k, side, batch, _ = run(GPU_MAXK_BF16)
        got = _largest_conv_operand(densenet_small(dtype=jnp.bfloat16), k, side, 1, batch)
        return k if got == operand(GPU_MAXK_BF16)[1] else None

    return [
        Figure(
            "array size: the traced bf16 step",
            GPU,
            "(`jax.make_jaxpr` of the {}-member step finds no larger convolution operand.)",
            ",d",
            traced_bf16,
        ),
        Figure(
            "array size: the small DenseNets' operands",
            GPU,
            "(`densenet_small`, {}x{}, batch {}) have {} maps per member at the end of the first "
            "dense block ({} + {} x {}) and in its bottlenecks ({} x {}), so one convolution "
            "operand of K members holds {} x {} x {} x {}K values. At run 3's {} fp32 members that "
            "is {} GB; at run 4's {} bf16 members, {} GB and {} billion values, past 2^31 bytes "
            "and past 2^31 values. Both steps ran.",
            "d d d d d d d d d d d d d ,d .2f ,d .2f .2f",
            lambda: (
                run(GPU_MAXK_F32)[1],
                run(GPU_MAXK_F32)[1],
                run(GPU_MAXK_F32)[2],
                block1,
                small["num_init_features"],
                small["block_config"][0],
                small["growth_rate"],
                small["bn_size"],
                small["growth_rate"],
                run(GPU_MAXK_F32)[2],
                run(GPU_MAXK_F32)[1],
                run(GPU_MAXK_F32)[1],
                block1,
                run(GPU_MAXK_F32)[0],
                operand(GPU_MAXK_F32)[0],
                run(GPU_MAXK_BF16)[0] if past_both(GPU_MAXK_BF16) else None,
                operand(GPU_MAXK_BF16)[0],
                operand(GPU_MAXK_BF16)[1] / 1e9,
            ),
        ),
        Figure(
            "array size: the first failed instructions",
            GPU,
            "At {} members (run 6) it was the kernel gradient of `denseblock2/denselayer6/conv1`, "
            "a 1x1 convolution from {} to {} maps on {} x {} pixels, which XLA computes as a "
            "convolution with a {} x {} window over {} groups: it reads {} MB and {} MB and "
            "writes {} MB. At {} members (run 5) it was the input gradient of "
            "`denseblock4/denselayer6/conv1` ({} to {} maps on {} x {} pixels), which writes "
            "{} MB.",
            "d d d d d d d d .0f .0f .1f d d d d d .0f",
            lambda: (*at48(), *at62()),
        ),
    ]


def _gpu_h200_run6() -> list[Item]:
    """Run 6 on an H200: 48 members failing with and without the autotuner, and 41 members."""
    from experiments.benchmarks.paper_scale import architecture

    def k32() -> int:
        return record(GPU5_K32)["members"]

    def failed(name: str, words: str) -> int:
        """The K that ``name``'s record says failed, if its error has ``words``."""
        got = record(f"{GPU6}/{name}")["failed"]
        return got["members"] if words in got["error"] else None

    def k48() -> int:
        return failed("paper_scale_k48.json", "Failed to get configs for")

    def k48_running() -> int:
        return failed("paper_scale_k48_no_autotune.json", "CUDA_ERROR_ILLEGAL_ADDRESS")

    def k62() -> int:
        return record(GPU5_PAPER)["predicted_members"]

    def activation_bytes() -> int:
        """One member's largest activations at batch 16 and 224 px: after the stem's
        convolution, and at the end of the first dense block (the same size)."""
        arch, batch = (
            architecture(False),
            record(f"{GPU6}/paper_scale_k41.json")["batch_per_member"],
        )
        stem = batch * 112 * 112 * arch["num_init_features"] * 4
        block1 = arch["num_init_features"] + arch["block_config"][0] * arch["growth_rate"]
        assert batch * 56 * 56 * block1 * 4 == stem
        return stem

    def torch(name: str) -> dict:
        return record(f"{GPU6}/{name}")["torch"]

    records = ("paper_scale_k48.json", "paper_scale_k48_no_autotune.json", "paper_scale_k41.json")
    return [
        Figure(
            "H200 run 6 card",
            GPU,
            "Two calls, each on a freshly started H200 machine (`2026-11-28/card.txt`: {} MiB, "
            "driver … {} s of GPU time in all",
            ",d .0f",
            lambda: (
                int(record_line(f"{GPU6}/card.txt", r"NVIDIA H200, (\d+) MiB")[0]),
                record(f"{GPU6}/calls.json")[-1]["lease"]["held_s"],
            ),
        ),
        Figure(
            "H200 run 6 autotuner",
            GPU,
            "**{} members failed as {} did.** XLA's autotuner hit `CUDA_ERROR_ILLEGAL_ADDRESS` "
            "while timing cuDNN's grouped convolutions (`feature_group_count={}`), then failed "
            "for {} of {} instructions.",
            "d d d d ,d",
            lambda: (
                k48(),
                k62(),
                k48(),
                *(
                    int(x)
                    for x in re.search(
                        r"configs for: (\d+) out of (\d+) instructions",
                        record(f"{GPU6}/paper_scale_k48.json")["failed"]["error"],
                    ).groups()
                ),
            ),
        ),
        Figure(
            "H200 run 6 without the autotuner",
            GPU,
            "Compiled again with the autotuner off, the {}-member program compiled, and its first "
            "step failed … So some kernel reads or writes out of bounds at {} members",
            "d d",
            lambda: (k48_running(), k48_running()),
        ),
        Figure(
            "H200 run 6 the 2 GiB guess",
            GPU,
            "The largest activations of one member at batch {} are {} MB ({} x {} x {} x {} floats "
            "after the first convolution, … they pass 2^31 bytes at K = {}: {} GB at {} members, "
            "which ran, and {} GB at {} and {} GB at {}, which did not.",
            "d .1f d d d d d .2f d .2f d .2f d",
            lambda: (
                16,
                activation_bytes() / 1e6,
                16,
                112,
                112,
                architecture(False)["num_init_features"],
                2**31 // activation_bytes() + 1,
                k32() * activation_bytes() / 1e9,
                k32(),
                k48() * activation_bytes() / 1e9,
                k48(),
                k62() * activation_bytes() / 1e9,
                k62(),
            ),
        ),
        Figure(
            "H200 run 6 41 members",
            GPU,
            "**{} members, under that bound, did not finish compiling** in the roughly {} s that "
            "the second call had left after PyTorch's baseline",
            "d .0f",
            lambda: (
                int(re.search(r"--members (\d+)", record(f"{GPU6}/calls.json")[1]["command"])[1])
                if "ours" not in record(f"{GPU6}/paper_scale_k41.json")
                else None,
                280 - torch("paper_scale_k41.json")["first_step_s"],
            ),
        ),
        Figure(
            "H200 run 6 PyTorch",
            GPU,
            "PyTorch's baseline in the three processes: {}, {} and {} training images/s (batch "
            "{}), and {} and {} validation images/s at batch {} ({} at batch {}).",
            ".0f .0f .0f d ,.0f ,.0f d .0f d",
            lambda: (
                *(torch(r)["train_member_images_per_s"] for r in records),
                16,
                torch(records[0])["eval_member_images_per_s"],
                torch(records[1])["eval_member_images_per_s"],
                record(f"{GPU6}/{records[0]}")["eval_batch_per_member"],
                torch(records[2])["eval_member_images_per_s"],
                record(f"{GPU6}/{records[2]}")["eval_batch_per_member"],
            ),
        ),
        Figure(
            "README: members per batch on a GPU",
            README,
            "On one H200, {} DenseNet-121 members at {} px ran in one program, and {} and {} did "
            "not: a kernel hit a CUDA illegal address, in XLA's autotuner and, with the autotuner "
            "off, in the compiled program (`docs/results/gpu_h200/`). At that size pass "
            "`--config.train.members_per_batch={}` or fewer;",
            "d d d d d",
            lambda: (k32(), 224, k48_running(), k62(), k32()),
        ),
        Figure(
            "README: the validation batch on a GPU",
            README,
            "Validation and test scoring take `config.train.eval_batch_size` ({}) images per "
            "member and step, {} times the training batch. No card has run that step",
            "d words",
            lambda: (
                default_config().train.eval_batch_size,
                default_config().train.eval_batch_size // default_config().train.batch_size,
            ),
        ),
        Figure(
            "is_gpu_kernel_failure: the H200 cases",
            "iml/training/programs.py",
            "The trainer's DenseNet-121 step at {} px fails these ways on one H200 with the "
            "software versions of ``docs/results/gpu_h200/``, where {} members run: at {} and {} "
            "members in the autotuner, and at {} members with the autotuner off in the compiled "
            "program.",
            "d d d d d",
            lambda: (224, k32(), k48(), k62(), k48_running()),
        ),
    ]


def _gpu_h200_run5() -> list[Item]:
    """Run 5 on an H200: the current trainer's fp32 figures, and DenseNet-121 at 224 px."""
    from experiments.benchmarks._projection import project_paper_experiment

    def paper() -> dict:
        return record(GPU5_PAPER)

    def k32() -> dict:
        return record(GPU5_K32)

    def one() -> dict:
        return paper()["ours_one_member"]

    def torch_rate() -> float:
        return paper()["torch"]["train_member_images_per_s"]

    def hours(rate: float, key: str = "hours") -> float:
        validation = paper()["torch"]["eval_member_images_per_s"]
        return project_paper_experiment(rate, validation, epochs=10)[key]

    step = functools.partial(record, GPU5_STEP)
    ens = functools.partial(record, GPU5_F32)
    log = f"{GPU5}/log_paper.txt"
    return [
        Figure(
            "H200 run 5 card",
            GPU,
            "Three calls on one H200 (`2026-11-27/card.txt`: {} MiB, … {} s of GPU time in all "
            "(`2026-11-27/calls.json`).",
            ",d .0f",
            lambda: (
                int(record_line(f"{GPU5}/card.txt", r"NVIDIA H200, (\d+) MiB")[0]),
                record(f"{GPU5}/calls.json")[-1]["lease"]["held_s"],
            ),
        ),
        Figure(
            "H200 run 5 step",
            GPU,
            "fp32, batch {} at {} px: Flax {} img/s against torch {} img/s, ratio **{}** (median "
            "of {} interleaved steps; run 1: {}). The Flax step compiled in {} s; torch's first "
            "step took {} s. XLA put the step at {} MB of arguments and {} MB of temporaries. The "
            "allocators peaked at {} MB (JAX) and {} MB (torch).",
            "d d .0f .0f .2f d .2f .1f .1f .0f ,.0f ,.0f ,.0f",
            lambda: (
                step()["results"][0]["batch"],
                step()["results"][0]["size"],
                *train_step(GPU5_STEP, "b16_224px"),
                step()["repeats"],
                train_step_log(GPU_FIRST_LOG, 16, 224)[3],
                step()["results"][0]["flax"]["compile_s"],
                step()["results"][0]["torch"]["first_step_s"],
                step()["results"][0]["flax"]["xla_arguments_mb"],
                step()["results"][0]["flax"]["xla_temporaries_mb"],
                step()["results"][0]["flax"]["peak_device_mb"],
                step()["results"][0]["torch"]["peak_device_mb"],
            ),
        ),
        Figure(
            "H200 run 5 ensemble",
            GPU,
            "K = {} ensemble step: `vmap/xla` {} against {} member-img/s, ratio **{}** (median of "
            "{}; run 1: {}). One in-place program per member, `loop/xla`, gave {}. Compile times "
            "were {} s (`vmap/xla`) and {} s (baseline).",
            "d ,.0f ,.0f .2f d .2f .2f .1f .1f",
            lambda: (
                ens()["members"],
                ens()["member_images_per_second"],
                ens()["baseline_member_images_per_second"],
                ens()["ratio"],
                ens()["repeats"],
                record(GPU_F32)["ratio"],
                ens()["details"]["loop/xla"]["ratio"],
                ens()["details"]["vmap/xla"]["compile_seconds"],
                ens()["details"]["baseline"]["compile_seconds"],
            ),
        ),
        Figure(
            "H200 run 5 against run 1",
            GPU,
            "than in run 1 (Flax {} and torch {} img/s then), and so did the {} single steps of "
            "the ensemble's baseline ({} member-img/s then).",
            ".0f .0f d ,.0f",
            lambda: (
                train_step_log(GPU_FIRST_LOG, 16, 224)[0],
                train_step_log(GPU_FIRST_LOG, 16, 224)[2],
                record(GPU_F32)["members"],
                record(GPU_F32)["baseline_member_images_per_second"],
            ),
        ),
        Figure(
            "H200 run 5 table row: K = 32",
            GPU,
            "| the trainer's step, K = {} DenseNet-121s at {}x{}, batch {} each, fp32 | {} "
            "member-img/s | one torchvision model's step after another: {} img/s | **{}** | {} |",
            "d d d d .0f .0f .2f d",
            lambda: (
                k32()["members"],
                224,
                224,
                paper()["batch_per_member"],
                k32()["member_images_per_s"],
                torch_rate(),
                k32()["member_images_per_s"] / torch_rate(),
                5,
            ),
        ),
        Table("gpu_h200 paper_scale steps", GPU, lambda: _paper_steps(paper(), k32())),
        Figure(
            "H200 run 5 prediction",
            GPU,
            "K = {} compiled in {} s. XLA's memory analysis gives {} GB for it, which predicts {} "
            "members under {} of the card.",
            "d .1f .2f d .1f",
            lambda: (
                one()["members"],
                one()["compile_s"],
                one()["xla_bytes"] / 1e9,
                paper()["predicted_members"],
                0.9,
            ),
        ),
        Figure(
            "H200 run 5 failed compile",
            GPU,
            "**The {}-member program did not compile.** XLA's autotuner, timing cuDNN's grouped "
            "convolutions (`feature_group_count={}`), hit `CUDA_ERROR_ILLEGAL_ADDRESS`, after "
            "which it failed for {} of {} instructions",
            "d d d ,d",
            lambda: (
                paper()["predicted_members"],
                paper()["predicted_members"],
                *(
                    int(x)
                    for x in record_line(log, r"configs for: (\d+) out of (\d+) instructions")
                ),
            ),
        ),
        Figure(
            "H200 run 5 K = 32",
            GPU,
            "K = {} compiled in {} s, takes {} GB by XLA's account ({} GB per member), and ran. So "
            "**{} members is the largest K measured on this card, not the largest that fits**: "
            "memory would allow about {}, and whether a K between {} and {} compiles",
            "d .1f .1f .2f d d d d",
            lambda: (
                k32()["members"],
                k32()["compile_s"],
                k32()["xla_bytes"] / 1e9,
                k32()["xla_bytes"] / 1e9 / k32()["members"],
                k32()["members"],
                paper()["predicted_members"],
                k32()["members"] + 1,
                paper()["predicted_members"] - 1,
            ),
        ),
        Figure(
            "H200 run 5 batching gain",
            GPU,
            "Batching {} members raised the speed by {}x over one member.",
            "d .2f",
            lambda: (
                k32()["members"],
                k32()["member_images_per_s"] / one()["member_images_per_s"],
            ),
        ),
        Figure(
            "H200 run 5 validation",
            GPU,
            "Not measured: the K = {} validation step, for want of device time. As on the H100, "
            "the projection below uses PyTorch's validation speed for both sides: {} images/s at "
            "batch {}.",
            "d ,.0f d",
            lambda: (
                k32()["members"],
                paper()["torch"]["eval_member_images_per_s"],
                paper()["eval_batch_per_member"],
            ),
        ),
        Figure(
            "H200 run 5 projection",
            GPU,
            "as in `../gpu_h100/`: {} DenseNet-121s, {} epochs, training and validation passes, "
            "no data loading):",
            ",d d",
            lambda: (_paper_members(), PAPER_EPOCHS),
        ),
        Table("gpu_h200 projection", GPU, lambda: _paper_projection(paper(), k32())),
        Figure(
            "H200 run 5 members per batch",
            GPU,
            "At DenseNet-121 and {} px, pass `--config.train.members_per_batch={}` or fewer",
            "d d",
            lambda: (224, k32()["members"]),
        ),
        Figure(
            "README: --seeds counts in both commands",
            README,
            "`--seeds {}` means {} seeds, {} to {}, and `--seeds {} {}` the seeds themselves, in "
            "both commands",
            "d words d d d d",
            lambda: (8, *_seeds_of(8), *_seeds_of(3, 7)),
        ),
        Figure(
            "README: a bare number in config.train.seeds",
            README,
            "(`--config.train.seeds={}`) is refused as ambiguous: write `--seeds {}`, or `'({},)'` "
            "for the seed {} alone",
            "d d d d",
            lambda: _bare_seeds_refused(8),
        ),
        Figure(
            "README: paper_scale row",
            README,
            "(batch {} each, the paper's recipe) … GPU only: one run on one NVIDIA H200, "
            "PyTorch's {} steps first, then ours, each side's median: K = {} at **{}×** ({}; "
            "`docs/results/gpu_h200/`)",
            "d words d .2f date",
            lambda: (
                paper()["batch_per_member"],
                [len(paper()["torch"]["train_step_s_all"]), len(k32()["step_s_all"])],
                k32()["members"],
                k32()["member_images_per_s"] / torch_rate(),
                GPU5.split("/")[1],  # the record's folder is its date
            ),
        ),
        Figure(
            "paper_scale docstring: the failed K",
            "experiments/benchmarks/paper_scale.py",
            "the first {} characters of its message under ``failed`` in the JSON. On an H200 the "
            "predicted {} members failed so, and {} too",
            ",d d d",
            lambda: (
                2000,
                paper()["predicted_members"],
                record(f"{GPU6}/paper_scale_k48.json")["failed"]["members"],
            ),
        ),
    ]


def _gpu_run() -> list[Item]:
    step224 = functools.partial(train_step_log, GPU_FIRST_LOG, 16, 224)
    bf16_224 = functools.partial(train_step_log, GPU_THIRD_LOG, 16, 224)
    f32, bf16 = functools.partial(record, GPU_F32), functools.partial(record, GPU_BF16)
    maxk, maxk16 = functools.partial(record, GPU_MAXK_F32), functools.partial(record, GPU_MAXK_BF16)
    step64, step64_16 = (
        functools.partial(record, GPU_STEP_64),
        functools.partial(record, GPU_STEP_BF16_64),
    )

    def repeats(log: str, dtype: str) -> int:
        return int(
            record_line(log, rf"train_step --device gpu --dtype {dtype} --repeats (\d+)\n")[0]
        )

    def program(r: dict, part: str) -> float:
        memory = r["details"]["vmap/xla"]["compiled_memory"]
        return {
            "temporaries": memory["temp_bytes"] / 1e6,
            "arguments": memory["argument_bytes"] / 1e6,
            "per member": (memory["temp_bytes"] + memory["argument_bytes"]) / r["members"] / 1e6,
        }[part]

    def calls() -> tuple[dict, dict]:
        return record("gpu_h200/2026-11-26_bf16/call.json"), record(
            "gpu_h200/2026-11-26_bf16/call2.json"
        )

    return [
        Figure(
            "GPU table: fp32 step at 224 px",
            GPU,
            "| DenseNet-121 training step, fp32, batch {} at {}x{} | Flax {} img/s | torchvision + "
            "`torch.optim.Adam` {} img/s (cuDNN benchmark mode) | **{}** | {} |",
            "d d d .0f .0f .2f d",
            lambda: (16, 224, 224, *train_step(GPU5_STEP, "b16_224px"), 5),
        ),
        Figure(
            "GPU table: fp32 step at 64 px",
            GPU,
            "| DenseNet-121 training step, fp32, batch {} at {}x{} | Flax {} img/s | torch {} "
            "img/s | **{}** |",
            "d d d ,.0f ,.0f .2f",
            lambda: (
                step64()["results"][0]["batch"],
                step64()["results"][0]["size"],
                step64()["results"][0]["size"],
                *train_step(GPU_STEP_64, "b64_64px"),
            ),
        ),
        Figure(
            "GPU table: bf16 step at 224 px",
            GPU,
            "| DenseNet-121 training step, bf16 mixed precision, batch {} at {}x{} | Flax {} img/s "
            "| torch autocast bf16 {} img/s | **{}** |",
            "d d d .0f .0f .2f",
            lambda: (16, 224, 224, bf16_224()[0], *bf16_224()[2:]),
        ),
        Figure(
            "GPU table: fp32 ensemble",
            GPU,
            "| ensemble step, K = {} small DenseNets at {}x{}, fp32 | `vmap/xla` {} member-img/s | "
            "{} single-model steps in a row: {} member-img/s | **{}** | {} |",
            "d d d ,.0f d ,.0f .2f d",
            lambda: (
                record(GPU5_F32)["members"],
                *record(GPU5_F32)["image"][:2],
                record(GPU5_F32)["member_images_per_second"],
                record(GPU5_F32)["members"],
                record(GPU5_F32)["baseline_member_images_per_second"],
                record(GPU5_F32)["ratio"],
                5,
            ),
        ),
        Figure(
            "GPU table: bf16 ensemble",
            GPU,
            "| ensemble step, K = {}, bf16 | `vmap/xla` {} member-img/s | {} member-img/s | "
            "**{}** |",
            "d ,.0f ,.0f .2f",
            lambda: (
                bf16()["members"],
                bf16()["member_images_per_second"],
                bf16()["baseline_member_images_per_second"],
                bf16()["ratio"],
            ),
        ),
        Figure(
            "GPU headline",
            GPU,
            "So the fp32 training-step headline (the lower of the two sizes) is **{}** on this "
            "card ({} in run {}).",
            ".2f .2f d",
            lambda: (
                min(record(GPU5_STEP)["ratios"]["b16_224px"], step64()["ratio"]),
                step224()[3],
                1,
            ),
        ),
        Figure(
            "GPU run 1 repeats",
            GPU,
            "Both figures are medians of interleaved repeats: {} for the training step and {} for "
            "the ensemble.",
            "d d",
            lambda: (repeats(GPU_FIRST_LOG, "float32"), f32()["repeats"]),
        ),
        Figure(
            "GPU run 1 compile times",
            GPU,
            "Compile times were {} s for the Flax DenseNet-121 step, and {} s (baseline) and {} s "
            "(`vmap/xla`) for the small-DenseNet steps.",
            ".1f .1f .1f",
            lambda: (
                step224()[1],
                f32()["details"]["baseline"]["compile_seconds"],
                f32()["details"]["vmap/xla"]["compile_seconds"],
            ),
        ),
        Figure(
            "GPU run 1 ensemble memory",
            GPU,
            "of the 8-member `vmap` program gives {} MB of temporaries and {} MB of arguments, "
            "about {} MB per member.",
            ".0f .0f .0f",
            lambda: tuple(program(f32(), p) for p in ("temporaries", "arguments", "per member")),
        ),
        Figure(
            "GPU run 2 step at 64 px",
            GPU,
            "**64x64, fp32, batch {}**: Flax {} img/s, torch {} img/s, ratio **{}** (median of {} "
            "interleaved steps). The Flax step compiled in {} s. XLA put it at {} MB of arguments "
            "and {} MB of temporaries; the allocators' peaks were {} MB (JAX) and {} MB (torch).",
            "d ,.0f ,.0f .2f d .1f .0f .0f ,.0f ,.0f",
            lambda: (
                step64()["results"][0]["batch"],
                *train_step(GPU_STEP_64, "b64_64px"),
                step64()["repeats"],
                step64()["results"][0]["flax"]["compile_s"],
                step64()["results"][0]["flax"]["xla_arguments_mb"],
                step64()["results"][0]["flax"]["xla_temporaries_mb"],
                step64()["results"][0]["flax"]["peak_device_mb"],
                step64()["results"][0]["torch"]["peak_device_mb"],
            ),
        ),
        Figure(
            "GPU run 2 bf16 step",
            GPU,
            "**bf16 mixed precision, 224x224, batch {}**: Flax {} img/s, torch (autocast) {} "
            "img/s, ratio **{}** (median of {}).",
            "d .0f .0f .2f d",
            lambda: (16, bf16_224()[0], *bf16_224()[2:], repeats(GPU_THIRD_LOG, "bfloat16")),
        ),
        Figure(
            "GPU run 2 bf16 compile",
            GPU,
            "the Flax step took **{} s to compile**, {} times the fp32 compile",
            ".0f words",
            lambda: (bf16_224()[1], round(bf16_224()[1] / step224()[1])),
        ),
        Figure(
            "GPU run 2 fp32 speeds",
            GPU,
            "at this size ({} and {} img/s, measured in run 1",
            ".0f .0f",
            lambda: (step224()[0], step224()[2]),
        ),
        Figure(
            "GPU run 2 bf16 ensemble",
            GPU,
            "**Ensemble, K = {}, bf16**: `vmap/xla` {} member-img/s against {}, ratio **{}** "
            "(median of {}). Compile times: {} s for `vmap/xla` and {} s for the baseline. XLA "
            "reports {} MB of temporaries and {} MB of arguments for the 8-member program, about "
            "{} MB per member.",
            "d ,.0f ,.0f .2f d .1f .1f .0f .0f .0f",
            lambda: (
                bf16()["members"],
                bf16()["member_images_per_second"],
                bf16()["baseline_member_images_per_second"],
                bf16()["ratio"],
                bf16()["repeats"],
                bf16()["details"]["vmap/xla"]["compile_seconds"],
                bf16()["details"]["baseline"]["compile_seconds"],
                *(program(bf16(), p) for p in ("temporaries", "arguments", "per member")),
            ),
        ),
        Figure(
            "GPU run 2 first torch step",
            GPU,
            "the torch 64x64 step took {} s before its first step",
            ".1f",
            lambda: float(
                record_line(
                    GPU_THIRD_LOG, r"f32_64px: .*\n.*64px: torch ready, first step ([\d.]+)s"
                )[0]
            ),
        ),
        Figure(
            "GPU run 3 card",
            GPU,
            "(`card.txt` says {} MiB)",
            ",d",
            lambda: int(record_line("gpu_h200/versions.txt", r"NVIDIA H200, (\d+) MiB")[0]),
        ),
        Figure(
            "GPU run 3 memory limit",
            GPU,
            "(`XLA_PYTHON_CLIENT_MEM_FRACTION=0.92`, a limit of {} GB)",
            ".1f",
            lambda: maxk()["largest_members"]["bytes_limit"] / 1e9,
        ),
        Figure(
            "GPU run 3 largest K",
            GPU,
            "**At least {} small-DenseNet members fit in one fp32 `vmap/xla` step on one "
            "H200**, at batch {} per member and {}x{}: {} images per step, {} s per step, **{} "
            "member-images/s**. That is {} times the {} member-img/s of single-model steps",
            ",d d d d ,d .2f ,.0f .1f ,.0f",
            lambda: (
                maxk()["largest_members"]["members"],
                maxk()["batch_per_member"],
                *maxk()["image"][:2],
                maxk()["largest_members"]["members"] * maxk()["batch_per_member"],
                maxk()["largest_members"]["step_seconds_median"],
                maxk()["largest_members"]["member_images_per_second"],
                maxk()["largest_members"]["member_images_per_second"]
                / maxk()["baseline_member_images_per_second"],
                maxk()["baseline_member_images_per_second"],
            ),
        ),
        Figure(
            "GPU run 3 prediction",
            GPU,
            "The search started at XLA's prediction, {} members ({} MiB per member from the "
            "8-member program): it fitted, at {} member-img/s.",
            ",d .1f ,d",
            lambda: (
                maxk()["largest_members"]["predicted_members"],
                mib(maxk()["largest_members"]["bytes_per_member_predicted"]),
                int(record_line("gpu_h200/maxk_log_f32.txt", r"2736 members fit, (\d+) member")[0]),
            ),
        ),
        Figure(
            "GPU run 3 compile times",
            GPU,
            "Compiling the program took {} s at K = {} and {} s at K = {}, against {} s at K = {}.",
            ".0f ,d .0f ,d .0f d",
            lambda: (
                float(
                    record_line("gpu_h200/maxk_log_f32.txt", r"2736 members fit.*in ([\d.]+)s")[0]
                ),
                maxk()["largest_members"]["predicted_members"],
                maxk()["largest_members"]["compile_seconds"],
                maxk()["largest_members"]["members"],
                maxk()["details"]["vmap/xla"]["compile_seconds"],
                maxk()["members"],
            ),
        ),
        Figure(
            "GPU run 3 K = 8",
            GPU,
            "The K = {} part of the same run: `vmap/xla` {} against {} member-img/s, ratio **{}** "
            "(median of {}; run 1 measured {} with {} repeats)",
            "d ,.0f ,.0f .2f d .2f d",
            lambda: (
                maxk()["members"],
                maxk()["member_images_per_second"],
                maxk()["baseline_member_images_per_second"],
                maxk()["ratio"],
                maxk()["repeats"],
                f32()["ratio"],
                f32()["repeats"],
            ),
        ),
        Figure(
            "GPU run 3 bf16 prediction",
            GPU,
            "The same search in bf16 predicted {} members ({} MiB each)",
            ",.0f .1f",
            lambda: tuple(
                float(x)
                for x in reversed(
                    record_line(
                        "gpu_h200/maxk_log_bf16.txt", r"([\d.]+) MiB per member predicts (\d+)"
                    )
                )
            ),
        ),
        Figure(
            "GPU run 4 card",
            GPU,
            "(`2026-11-26_bf16/versions.txt`: {} MiB",
            ",d",
            lambda: int(
                record_line("gpu_h200/2026-11-26_bf16/versions.txt", r"H200, (\d+) MiB")[0]
            ),
        ),
        Figure(
            "GPU run 4 time used",
            GPU,
            "together {} of the",
            ".1f",
            lambda: calls()[1]["lease"]["held_s"] / 60,
        ),
        Figure(
            "GPU run 4 time allowed",
            GPU,
            "of the {} minutes of GPU time",
            ".0f",
            lambda: (calls()[1]["lease"]["held_s"] + calls()[1]["lease"]["budget_left_s"]) / 60,
        ),
        Figure(
            "GPU run 4 largest K",
            GPU,
            "**At least {} bf16 members fit in one `vmap/xla` step**: {} images of {}x{} per step, "
            "{} s per step, **{} member-images/s**, {} times the {} member-img/s of single-model "
            "steps in a row measured in the same run. That is {} times the fp32 figure ({} at K = "
            "{}).",
            ",d ,d d d .2f ,.0f .1f ,.0f .1f ,.0f ,d",
            lambda: (
                maxk16()["largest_members"]["members"],
                maxk16()["largest_members"]["members"] * maxk16()["batch_per_member"],
                *maxk16()["image"][:2],
                maxk16()["largest_members"]["step_seconds_median"],
                maxk16()["largest_members"]["member_images_per_second"],
                maxk16()["largest_members"]["member_images_per_second"]
                / maxk16()["baseline_member_images_per_second"],
                maxk16()["baseline_member_images_per_second"],
                maxk16()["largest_members"]["member_images_per_second"]
                / maxk()["largest_members"]["member_images_per_second"],
                maxk()["largest_members"]["member_images_per_second"],
                maxk()["largest_members"]["members"],
            ),
        ),
        Figure(
            "GPU run 4 prediction",
            GPU,
            "({} MiB per member from the 8-member program, so {} under a {} GB limit). It fitted, "
            "and **compiling it took {} s** ({} s at K = 8).",
            ".1f ,d .1f .0f .1f",
            lambda: (
                mib(maxk16()["largest_members"]["bytes_per_member_predicted"]),
                maxk16()["largest_members"]["predicted_members"],
                maxk16()["largest_members"]["bytes_limit"] / 1e9,
                maxk16()["largest_members"]["compile_seconds"],
                maxk16()["details"]["vmap/xla"]["compile_seconds"],
            ),
        ),
        Figure(
            "GPU run 4 K = 8",
            GPU,
            "K = {} in the same run: `vmap/xla` {} against {} member-img/s, ratio **{}** "
            "(median of {}; run 2 measured {} with {})",
            "d ,.0f ,.0f .2f d .2f d",
            lambda: (
                maxk16()["members"],
                maxk16()["member_images_per_second"],
                maxk16()["baseline_member_images_per_second"],
                maxk16()["ratio"],
                maxk16()["repeats"],
                bf16()["ratio"],
                bf16()["repeats"],
            ),
        ),
        Figure(
            "GPU run 4 bf16 step at 64 px",
            GPU,
            "**bf16 DenseNet-121 step, batch {} at {}x{}**: Flax {} img/s, torch (autocast) {} "
            "img/s, ratio **{}** (median of {} alternating steps). The Flax step compiled in {} s; "
            "torch's first step took {} s. fp32 at this size was {} against {} ({}, run 2).",
            "d d d ,.0f ,.0f .2f d .1f .1f ,.0f ,.0f .2f",
            lambda: (
                step64_16()["results"][0]["batch"],
                step64_16()["results"][0]["size"],
                step64_16()["results"][0]["size"],
                *train_step(GPU_STEP_BF16_64, "b64_64px"),
                step64_16()["repeats"],
                step64_16()["results"][0]["flax"]["compile_s"],
                float(
                    record_line(
                        "gpu_h200/2026-11-26_bf16/train_step_bf16_64px_log2.txt",
                        r"torch ready, first step ([\d.]+)s",
                    )[0]
                ),
                *train_step(GPU_STEP_64, "b64_64px"),
            ),
        ),
    ]


def _cpu_ensemble_run() -> list[Item]:
    first, moments, stem, keep = CPU_ENSEMBLE_RUNS
    system = "ensemble_2026-11-26_system.json"

    def ratios(run: str) -> dict[str, float]:
        return ensemble_ratios(run)

    def speed(run: str, strategy: str) -> float:
        r = record(f"cpu_ensemble/{run}")
        if strategy == "default":
            return r["member_images_per_second"]
        return ensemble_speed(f"cpu_ensemble/{run}", strategy)

    def strategies() -> str:
        """The first run's speed and ratio per strategy, fastest first."""
        one = ["map/mixed", "loop/mixed", "loop/xla"]  # the strategies named "one device"
        rest = ["vmap/mixed", "map/matmul", "loop/matmul", "vmap/matmul", "vmap/xla", "map/xla"]
        default = "**default: `map/mixed` on the trainer's mesh, one CPU device per core**"
        bold = [
            f"**{f(speed(first, 'default'), '.1f')}**",
            f"**{f(ratios(first)['default'], '.2f')}**",
        ]
        rows = [[default, *bold]]
        for strategy in one + rest:
            name = f"`{strategy}`, one device" if strategy in one else f"`{strategy}`"
            rows.append([name, f(speed(first, strategy), ".1f"), f(ratios(first)[strategy], ".2f")])
        return markdown_table(["strategy", "member-images/s", "ratio"], rows)

    def host_memory() -> str:
        """The runs with and without ``keep_step_memory``."""
        header = ["command", "baseline (8 single steps)", "default (`map/mixed` on the mesh)"]
        keep_, system_ = (record(f"cpu_ensemble/{run}") for run in (keep, system))
        rows = [
            [
                f"`--repeats {f(keep_['repeats'], 'd')}` (`{keep}`)",
                f"{f(speed(keep, 'baseline'), '.1f')} member-images/s",
                f(speed(keep, "default"), ".1f"),
                f"**{f(ratios(keep)['default'], '.2f')}**",
            ],
            [
                f"`--repeats {f(system_['repeats'], 'd')} --host-memory system --strategies "
                f"map/mixed,vmap/mixed`, straight afterwards (`{system}`)",
                f(speed(system, "baseline"), ".1f"),
                f(speed(system, "default"), ".1f"),
                f(ratios(system)["default"], ".2f"),
            ],
        ]
        return markdown_table([*header, "ratio"], rows)

    def moved(run: str, before: str, rows: tuple[str, ...]) -> float:
        return max(abs(ratios(run)[s] - ratios(before)[s]) for s in rows)

    def vmap_range() -> tuple[float, float]:
        return min_max(
            [v for run in CPU_ENSEMBLE_RUNS for s, v in ratios(run).items() if s.startswith("vmap")]
        )

    return [
        Figure(
            "CPU ensemble setup",
            CPU_ENSEMBLE,
            "K = {} small DenseNets (`densenet_small()`) at {}x{}x{}, batch {} per member, median "
            "of {} interleaved repeats.",
            "d d d d d d",
            lambda: (
                record(f"cpu_ensemble/{first}")["members"],
                *record(f"cpu_ensemble/{first}")["image"],
                record(f"cpu_ensemble/{first}")["batch_per_member"],
                record(f"cpu_ensemble/{first}")["repeats"],
            ),
        ),
        Figure(
            "CPU ensemble baseline",
            CPU_ENSEMBLE,
            "convolutions** as the default strategy ({} member-images/s)",
            ".1f",
            lambda: record(f"cpu_ensemble/{first}")["baseline_member_images_per_second"],
        ),
        Table("cpu_ensemble strategies", CPU_ENSEMBLE, strategies),
        Figure(
            "CPU ensemble against xla",
            CPU_ENSEMBLE,
            "Against 8 single steps with `xla` convolutions ({} member-images/s, the `loop/xla` "
            "row), the default runs {}x faster.",
            ".1f .1f",
            lambda: (
                speed(first, "loop/xla"),
                speed(first, "default") / speed(first, "loop/xla"),
            ),
        ),
        Figure(
            "CPU ensemble map/xla",
            CPU_ENSEMBLE,
            "`map` with `xla` convolutions stays slow ({})",
            ".2f",
            lambda: ratios(first)["map/xla"],
        ),
        Figure(
            "CPU ensemble headings",
            CPU_ENSEMBLE,
            "on the mesh becomes the CPU default; {}x … after the BatchNorm moments change; {}x … "
            "after the stem change; {}x … the benchmark runs under `keep_step_memory`; {}x",
            ".2f .2f .2f .2f",
            lambda: tuple(ratios(run)["default"] for run in CPU_ENSEMBLE_RUNS),
        ),
        Figure(
            "CPU ensemble moments run",
            CPU_ENSEMBLE,
            "(`ensemble_2026-11-26_moments.json`)… The default strategy gave **{}x** ({} against "
            "{} member-images/s).",
            ".2f .1f .1f",
            lambda: (
                ratios(moments)["default"],
                speed(moments, "default"),
                speed(moments, "baseline"),
            ),
        ),
        Figure(
            "CPU ensemble moments spread",
            CPU_ENSEMBLE,
            "This is within the run-to-run spread of the first run's {}. `map/mixed` on one device "
            "gave {}. `vmap/mixed` rose from {} to {}:",
            ".2f .2f .2f .2f",
            lambda: (
                ratios(first)["default"],
                ratios(moments)["map/mixed"],
                ratios(first)["vmap/mixed"],
                ratios(moments)["vmap/mixed"],
            ),
        ),
        Figure(
            "CPU ensemble moments other rows",
            CPU_ENSEMBLE,
            "The other rows moved by at most {}.",
            "<=",
            lambda: moved(
                moments,
                first,
                (
                    "vmap/matmul",
                    "vmap/xla",
                    "loop/matmul",
                    "loop/mixed",
                    "loop/xla",
                    "map/matmul",
                    "map/xla",
                ),
            ),
        ),
        Figure(
            "CPU ensemble stem run",
            CPU_ENSEMBLE,
            "(`ensemble_2026-11-26_stem.json`)… The default strategy gave **{}x** ({} against {} "
            "member-images/s), between the two runs before ({} and {}). `map/mixed` on one device "
            "gave {} ({} in the run before), `vmap/mixed` {} ({}). Against 8 single steps with "
            "`xla` convolutions (`loop/xla`, {}) the default runs {}x faster.",
            ".2f .1f .1f .2f .2f .2f .2f .2f .2f .1f .1f",
            lambda: (
                ratios(stem)["default"],
                speed(stem, "default"),
                speed(stem, "baseline"),
                ratios(moments)["default"],
                ratios(first)["default"],
                ratios(stem)["map/mixed"],
                ratios(moments)["map/mixed"],
                ratios(stem)["vmap/mixed"],
                ratios(moments)["vmap/mixed"],
                speed(stem, "loop/xla"),
                speed(stem, "default") / speed(stem, "loop/xla"),
            ),
        ),
        Table("cpu_ensemble host memory", CPU_ENSEMBLE, host_memory),
        Figure(
            "CPU ensemble gains",
            CPU_ENSEMBLE,
            "(+{}% against +{}%)",
            ".0f .0f",
            lambda: (
                100 * (speed(keep, "baseline") / speed(system, "baseline") - 1),
                100 * (speed(keep, "default") / speed(system, "default") - 1),
            ),
        ),
        Figure(
            "CPU ensemble baseline temporaries",
            CPU_ENSEMBLE,
            "Its one-device step's {} MB of temporaries",
            ".0f",
            lambda: (
                record(f"cpu_ensemble/{keep}")["details"]["baseline"]["compiled_memory"][
                    "temp_bytes"
                ]
                / 1e6
            ),
        ),
        Figure(
            "CPU ensemble keep rows",
            CPU_ENSEMBLE,
            "Under the setting, `map/mixed` on one device gave {}, `vmap/mixed` {} and "
            "`vmap/xla` {}.",
            ".2f .2f .2f",
            lambda: tuple(ratios(keep)[s] for s in ("map/mixed", "vmap/mixed", "vmap/xla")),
        ),
        Figure(
            "CPU ensemble four runs",
            CPU_ENSEMBLE,
            "Over the four runs of 2026-11-26 above, the default gave {}-{}x, `map/mixed` on one "
            "device {}-{}x and `vmap` {}-{}x",
            ".2f .2f .2f .2f .2f .2f",
            lambda: (
                *over_ensemble_runs("default"),
                *over_ensemble_runs("map/mixed"),
                *vmap_range(),
            ),
        ),
    ]


def _step_row(result: dict, label: str, bold: bool = True) -> list[str]:
    """One size of a train_step record: its speeds (three significant digits) and ratio."""
    ratio = f(result["ratio"], ".2f")
    return [
        label,
        f"{f(result['flax']['images_per_s'], '#.3g')} img/s",
        f"{f(result['torch']['images_per_s'], '#.3g')} img/s",
        f"**{ratio}**" if bold else ratio,
    ]


def _step_table(record_name: str, flax: str = "Flax (`mixed`)", torch: str = "torch") -> str:
    """A train_step record's two sizes (224 px, then 64 px)."""

    def label(result: dict) -> str:
        return f"batch {result['batch']} at {result['size']}x{result['size']}"

    results = record(f"cpu_train_step/{record_name}")["results"]
    rows = [_step_row(result, label(result)) for result in results]
    return markdown_table(["size", flax, torch, "ratio"], rows)


PAPER_SCALE = "docs/results/paper_scale/README.md"
PROCESS_SCALING = "docs/results/process_scaling/README.md"
PROJECTION = "paper_scale/2026-11-29_h200_projection.json"
SCALING = "process_scaling/2026-11-29_cpu_2core.json"


def _hours(hours: float) -> str:
    return (
        f"{f(hours, ',.0f')} h ({f(hours / 24, '.1f')} days)"
        if hours >= 48
        else (f"{f(hours, '.1f')} h")
    )


def _projection_table() -> str:
    """The paper's experiment per card count, from the stored projection."""
    rows = [
        [
            f(row["cards"], "d"),
            _hours(row["ours_hours"]),
            _hours(row["torch_hours"]),
            f"**{f(row['ratio'], '.2f')}** [{f(row['interval_95']['ratio'][0], '.2f')}, "
            f"{f(row['interval_95']['ratio'][1], '.2f')}]",
            f"{f(row['coordination_s'], '.1f')} s",
        ]
        for row in record(PROJECTION)["projection"]["cards"]
    ]
    header = [
        "cards",
        "ours, 32 members per batch",
        "PyTorch loop",
        "PyTorch over ours [95% interval]",
        "of ours, the runtime's coordination",
    ]
    return markdown_table(header, rows, True)


def _projection_terms() -> str:
    p = record(PROJECTION)["projection"]
    epochs = p["epochs_drawn"]
    rows = [
        ["a member's epoch (training and validation passes)",
         f"{f(p['ours_member_epoch_s'], '.1f')} s at K = {p['members_per_batch']}",
         f"{f(p['torch_member_epoch_s'], '.1f')} s"],
        ["epochs to early stopping (30 members: "
         f"{f(min(epochs), 'd')} to {f(max(epochs), 'd')})",
         f"{f(p['batch_epochs'], '.1f')}: a batch runs until its last member stops",
         f"{f(p['mean_epochs'], '.1f')}: each model its own"],
        ["the plan", f"{f(p['batches'], 'd')} batches of {p['members_per_batch']} members",
         f"{f(p['members'], ',d')} models of "
         f"{_hours(p['torch_member_epoch_s'] * p['mean_epochs'] / 3600)} each"],
        ["compiling the step, once per process", f"{f(p['compile_s'], '.0f')} s", ""],
    ]  # fmt: skip
    return markdown_table(["", "ours", "PyTorch"], rows, True)


def _scaling_runs() -> str:
    median = record(SCALING)["median"]
    rows = [
        [label, *(f"{f(median[name][key], '.2f')} s" for key in
                  ("start_s", "batch_s", "end_s", "wall_s"))]
        for label, name in (("one process", "one"), ("two processes", "two"))
    ]  # fmt: skip
    rows.append(["two over one", "", f"{f(record(SCALING)['batch_slowdown'], '.2f')}x", "",
                 f"speedup **{f(record(SCALING)['ratio'], '.2f')}**"])  # fmt: skip
    header = ["", "start (to the first batch stored)", "a batch", "end (after the last batch)",
              "the run"]  # fmt: skip
    return markdown_table(header, rows, True)


def _scaling_meetings() -> str:
    rows = [
        [f(m["processes"], "d"), f"{f(m['join_s'] * 1e3, '.1f')} ms",
         f"{f(m['meeting_s'] * 1e3, '.3f')} ms"]
        for m in record(SCALING)["meetings"]
    ]  # fmt: skip
    return markdown_table(["processes", "joining", "one all-gather and one barrier"], rows, True)


def _paper_scale_runs() -> list[Item]:
    one = lambda: record(PROJECTION)["projection"]["cards"][0]  # noqa: E731
    return [
        Table("paper_scale projection", PAPER_SCALE, _projection_table),
        Table("paper_scale terms", PAPER_SCALE, _projection_terms),
        Table("paper_scale projection README", README, _projection_table),
        Table("process_scaling runs", PROCESS_SCALING, _scaling_runs),
        Table("process_scaling meetings", PROCESS_SCALING, _scaling_meetings),
        Table(
            "process_scaling coordination",
            PROCESS_SCALING,
            lambda: f"  {f(record(SCALING)['coordination_s'], '.2f')} s.",
        ),
        Figure(
            "README: paper_scale projection",
            README,
            "the paper's 1,200 models to early stopping projected at {} h against {} h for a "
            "loop of PyTorch models ({}× [{}, {}] on one card",
            ",.0f ,.0f .2f .2f .2f",
            lambda: (
                one()["ours_hours"],
                one()["torch_hours"],
                one()["ratio"],
                *one()["interval_95"]["ratio"],
            ),
        ),
        Figure(
            "README: process_scaling",
            README,
            "two processes train a 16-batch plan in {} s against {} s for one: **{}×**",
            ".1f .1f .2f",
            lambda: (
                record(SCALING)["median"]["two"]["wall_s"],
                record(SCALING)["median"]["one"]["wall_s"],
                record(SCALING)["ratio"],
            ),
        ),
    ]


def _cpu_step_run() -> list[Item]:
    mixed = functools.partial(record, MIXED)

    def keep_system() -> str:
        """The runs with and without ``keep_step_memory`` (only the first in bold)."""
        rows = []
        for name, memory in (("keep_memory", "keep"), ("system", "system")):
            for result in record(f"cpu_train_step/train_step_2026-11-26_{name}.json")["results"]:
                label = f"batch {result['batch']} at {result['size']} px, `{memory}`"
                rows.append(_step_row(result, label, bold=memory == "keep"))
        return markdown_table(["size", "Flax", "torch", "ratio"], rows)

    def mixed_table() -> str:
        return _step_table(
            "train_step_mixed.json",
            'Flax (`conv_impl="mixed"`)',
            "torchvision + `torch.optim.Adam`",
        )

    return [
        Figure(
            "CPU step: mixed heading",
            CPU_STEP,
            '`conv_impl="mixed"`; 224 px at {}x',
            ".2f",
            lambda: mixed()["ratios"]["b16_224px"],
        ),
        Figure(
            "CPU step: mixed command",
            CPU_STEP,
            "train_step --repeats {} # train_step_mixed.json",
            "d",
            lambda: mixed()["repeats"],
        ),
        Table("cpu_train_step mixed", CPU_STEP, mixed_table),
        Figure(
            "CPU step: mixed run",
            CPU_STEP,
            "Each figure is the median of {} steps, timed alternately with torch's. Flax compiled "
            "in {} s ({} px) and {} s ({} px).",
            "d .0f d .0f d",
            lambda: (
                mixed()["repeats"],
                mixed()["results"][0]["flax"]["compile_s"],
                mixed()["results"][0]["size"],
                mixed()["results"][1]["flax"]["compile_s"],
                mixed()["results"][1]["size"],
            ),
        ),
        Figure(
            "CPU step: mixed temporaries",
            CPU_STEP,
            "XLA put the 224 px step at {} GB of temporaries.",
            ".1f",
            lambda: gigabytes(mixed()["results"][0]["flax"]["xla_temporaries_mb"]),
        ),
        Figure(
            "CPU step: pool/taps temporaries",
            CPU_STEP,
            "allocates the step's temporaries afresh for every execution ({} GB at 224 px)",
            ".1f",
            lambda: gigabytes(
                record("cpu_train_step/train_step_2026-11-26_pool_taps.json")["results"][0]["flax"][
                    "xla_temporaries_mb"
                ]
            ),
        ),
        Figure(
            "CPU step: pool/taps compared",
            CPU_STEP,
            "(`python -m experiments.compare_densenet --rev 3e47139`, "
            "`compare_densenet_3e47139.jsonl`): - batch {} at {} px: {} -> {} s per step, **{}x "
            "faster** (median of {}); - batch {} at {} px: {} -> {} s, **{}x faster** (median of "
            "{}).",
            "d d .3f .3f .2f d d d .3f .3f .2f d",
            lambda: (*compare_densenet("3e47139", 64), *compare_densenet("3e47139", 16)),
        ),
        Figure(
            "CPU step: convolution profile",
            CPU_STEP,
            "For example, 28x28 took {} against {} ms, 16x16 took {} against {} ms, and 2x2 "
            "took {} against {} ms. At 56x56 the convolution is faster ({} against {} ms)",
            ".1f .1f .1f .1f .1f .2f .1f .1f",
            lambda: (*profile_conv(28), *profile_conv(16), *profile_conv(2), *profile_conv(56)),
        ),
        Table(
            "cpu_train_step pool_taps",
            CPU_STEP,
            lambda: _step_table("train_step_2026-11-26_pool_taps.json"),
        ),
        Figure(
            "CPU step: previous commit",
            CPU_STEP,
            "The same command at the previous commit, run straight afterwards, gave {} and {} "
            "(`train_step_2026-11-26_at_3e47139.json`)",
            ".2f .2f",
            lambda: tuple(
                record("cpu_train_step/train_step_2026-11-26_at_3e47139.json")["ratios"].values()
            ),
        ),
        Figure(
            "CPU step: moments heading",
            CPU_STEP,
            "batch moments computed once per map; 224 px at {}x",
            ".2f",
            lambda: record("cpu_train_step/train_step_2026-11-26_moments.json")["ratios"][
                "b16_224px"
            ],
        ),
        Figure(
            "CPU step: moments compared",
            CPU_STEP,
            "(`python -m experiments.compare_densenet --rev e2e46b8`, "
            "`compare_densenet_e2e46b8.jsonl`): - batch {} at {} px: {} -> {} s per step, **{}x "
            "faster**; - batch {} at {} px: {} -> {} s, **{}x faster**.",
            "d d .3f .3f .2f d d .3f .3f .2f",
            lambda: (*compare_densenet("e2e46b8", 16)[:5], *compare_densenet("e2e46b8", 64)[:5]),
        ),
        Table(
            "cpu_train_step moments",
            CPU_STEP,
            lambda: _step_table("train_step_2026-11-26_moments.json"),
        ),
        Figure(
            "CPU step: stem heading",
            CPU_STEP,
            "the stem as one 2-D product; 224 px at {}x on a slower day",
            ".2f",
            lambda: record("cpu_train_step/train_step_2026-11-26_stem.json")["ratios"]["b16_224px"],
        ),
        Figure(
            "CPU step: stem compared",
            CPU_STEP,
            "(`python -m experiments.compare_densenet --rev 7b4a630 --repeats {}`, "
            "`compare_densenet_7b4a630.jsonl`): - batch {} at {} px: {} -> {} s per step, **{}x "
            "faster**; - batch {} at {} px: {} -> {} s, **{}x faster**.",
            "d d d .3f .3f .2f d d .3f .3f .2f",
            lambda: (
                compare_densenet("7b4a630", 16)[5],
                *compare_densenet("7b4a630", 16)[:5],
                *compare_densenet("7b4a630", 64)[:5],
            ),
        ),
        Table(
            "cpu_train_step stem",
            CPU_STEP,
            lambda: _step_table("train_step_2026-11-26_stem.json"),
        ),
        Figure(
            "CPU step: slower day",
            CPU_STEP,
            "torch ran at {} img/s at 224 px, against {} in the run before. The ratio at 224 px "
            "({}) is within the cross-run spread of that run's {}.",
            ".2f .2f .2f .2f",
            lambda: (
                record("cpu_train_step/train_step_2026-11-26_stem.json")["images_per_s"][
                    "b16_224px"
                ]["torch"],
                record("cpu_train_step/train_step_2026-11-26_moments.json")["images_per_s"][
                    "b16_224px"
                ]["torch"],
                record("cpu_train_step/train_step_2026-11-26_stem.json")["ratios"]["b16_224px"],
                record("cpu_train_step/train_step_2026-11-26_moments.json")["ratios"]["b16_224px"],
            ),
        ),
        Table("cpu_train_step host memory", CPU_STEP, keep_system),
        Figure(
            "CPU step: rerun",
            CPU_STEP,
            "(`train_step_2026-11-26_rerun.json`) gave **{}** at 224 px ({} against {} img/s) and "
            "{} at 64 px.",
            ".2f .2f .2f .2f",
            lambda: (
                record(RERUN)["ratios"]["b16_224px"],
                *list(record(RERUN)["images_per_s"]["b16_224px"].values()),
                record(RERUN)["ratios"]["b64_64px"],
            ),
        ),
    ]


# Docstrings and comments -----------------------------------------------------------------------

DEFAULTS = "iml/pipeline/defaults.py"  # the reproduce config, with its comments
MULTICLASS_CONFIG = "experiments/configs/digits_multiclass.py"


def _multiclass_config() -> Any:
    from experiments.configs.digits_multiclass import get_config

    return get_config()


def _logistic_init_scale() -> float:
    """The standard deviation of LogisticRegression's initial weights, measured."""
    from iml.models import LogisticRegression

    w = LogisticRegression().init(jax.random.key(0), jnp.zeros((1, 4000)))["params"]["w"]
    return float(np.std(np.asarray(w)))


DATASETS = "iml/data/datasets.py"
TRAIN_CONFIG = "iml/training/train_config.py"
TABULAR = "iml/data/tabular.py"


def _docstrings() -> list[Item]:
    c = default_config
    ensemble_run = functools.partial(record, f"cpu_ensemble/{CPU_ENSEMBLE_RUNS[0]}")
    all_runs = (*CPU_ENSEMBLE_RUNS, "ensemble_2026-11-26_system.json")

    def over_runs(strategy: str) -> tuple[float, float]:
        return min_max(
            [ensemble_ratios(r)[strategy] for r in all_runs if strategy in ensemble_ratios(r)]
        )

    return [
        Figure(
            "default_config: run",
            DEFAULTS,
            "{} folds rotated {}/{}/{} ({} members; the {} of a rotation trained together), {} "
            "epochs at learning rate {}.",
            "d d d d d d d .0es",
            lambda: (
                *reproduce_folds()[:4],
                reproduce_members(),
                c().train.members_per_batch or len(c().loss.betas) * len(c().train.seeds),
                c().train.epochs,
                c().train.learning_rate,
            ),
        ),
        Figure(
            "default_config: image size",
            DEFAULTS,
            "The digits are shrunk from their native {} px to {} px",
            "d d",
            lambda: (digits().input_shape[0], c().data.image_size),
        ),
        Figure(
            "default_config: 4 px task",
            DEFAULTS,
            "At 4 px (AUROC about {}, {}% positive) the upper deciles hold rates from {}% to {}%",
            ".2f .1f .1f .0f",
            lambda: (
                statistics.median(over_betas("reproduce_digits", "raw", "auroc")),
                100 * digits().prevalence,
                100 * min(r for r in decile_rates() if r > 0),
                100 * max(decile_rates()),
            ),
        ),
        Figure(
            "default_config: mixed convolutions",
            DEFAULTS,
            "where it # trains a DenseNet-121 about {}-{}x faster than 'xla'".replace(" # ", " "),
            ".1f .0f",
            mixed_over_xla,
        ),
        Figure(
            "digits: eights",
            DATASETS,
            "{} of the {} images ({}%) are eights.",
            "d ,d .1f",
            lambda: (int(digits().labels.sum()), digits().num_examples, 100 * digits().prevalence),
        ),
        Figure(
            "load_dataset: digits",
            DATASETS,
            "scikit-learn's {} handwritten digits, label 1 for ``positive_digit`` (default "
            ":data:`DEFAULT_POSITIVE_DIGIT` = {}, {}% positive). Native size {} px",
            ",d d .1f d",
            lambda: (
                digits().num_examples,
                _positive_digit(),
                100 * digits().prevalence,
                digits().input_shape[0],
            ),
        ),
        Figure(
            "load_dataset: PneumoniaMNIST sizes",
            DATASETS,
            "``image_size`` {}/{}/{}: ``pneumoniamnist_{}.npz`` etc.",
            "d d d d",
            lambda: (*NATIVE_SIZES[1:], NATIVE_SIZES[1]),
        ),
        Figure(
            "ensemble averages: where a float32 sigmoid gives 1",
            "iml/pipeline/store.py",
            "float32 sigmoid gives 1 for logits above about {})",
            ".1f",
            lambda: float(
                jnp.min(
                    jnp.where(
                        jax.nn.sigmoid(z := jnp.linspace(10, 20, 100_001, dtype=jnp.float32)) == 1,
                        z,
                        jnp.inf,
                    )
                )
            ),
        ),
        Figure(
            "TrainConfig: no floor by default",
            TRAIN_CONFIG,
            "min_lr: the floor of the decayed learning rate ({}: none, as in the paper).",
            ".0f",
            lambda: TrainConfig().min_lr,
        ),
        Figure(
            "end_of_epoch: no floor by default",
            "iml/training/member.py",
            "min_lr: the floor of the decayed learning rate ({}: none, the paper's schedule);",
            ".0f",
            lambda: inspect.signature(end_of_epoch).parameters["min_lr"].default,
        ),
        Figure(
            "member batching: benchmark",
            TRAIN_CONFIG,
            "(K={} small DenseNets, {}x{}x{}, batch {} per member;",
            "d d d d d",
            lambda: (
                ensemble_run()["members"],
                *ensemble_run()["image"],
                ensemble_run()["batch_per_member"],
            ),
        ),
        Figure(
            "member batching: CPU",
            TRAIN_CONFIG,
            "is the fastest in every recorded run, {}-{}x; on one device 'map' gives {}-{}x and "
            "'loop' {}-{}x, and 'map' with 'xla' convolutions is slow ({}-{})",
            ".2f .2f .2f .2f .2f .2f .2f .2f",
            lambda: (
                *over_runs("default"),
                *over_runs("map/mixed"),
                *over_runs("loop/mixed"),
                *over_runs("map/xla"),
            ),
        ),
        Figure(
            "member batching: CPU cores",
            TRAIN_CONFIG,
            "CPU ({} cores; docs/results/cpu_ensemble",
            "d",
            lambda: [record(f"cpu_ensemble/{r}")["devices"] for r in all_runs],
        ),
        Figure(
            "member batching: GPU",
            TRAIN_CONFIG,
            "GPU (one H200, docs/results/gpu_h200): vmap/xla, {}x.",
            ".2f",
            lambda: record(GPU5_F32)["ratio"],
        ),
        Figure(
            "logistic_newton: eigenvalue cutoff",
            "iml/recalibration/newton.py",
            "with the Hessian's eigenvalues raised to at least ``{}`` of the largest. Collinear",
            ".0es",
            lambda: iml.recalibration.newton._EIGEN_CUTOFF,
        ),
        Figure(
            "exact solver: diagonal floor",
            "iml/training/exact.py",
            "is factored with its diagonal raised by ``{}`` of its largest entry",
            ".0es",
            lambda: iml.training.exact_design.FLOOR,
        ),
        Figure(
            "exact solver: batches",
            "iml/training/exact.py",
            "chunk: the most members solved at once (default: as many as keep a ``[members, N]`` "
            "array under 2^{} floats)",
            "d",
            lambda: int(np.log2(iml.training.exact._BATCH_FLOATS)),
        ),
        Figure(
            "exact solver: room for the pair products",
            "iml/training/exact.py",
            "made once where it takes at most {} GiB",
            ".0f",
            lambda: iml.training.exact_design._PAIR_BYTES / 2**30,
        ),
        Figure(
            "exact solver: a path's anchors",
            "iml/training/exact.py",
            "The path is cut into segments of about {} betas; in each, every {}th beta from the "
            "middle one is an anchor",
            "d d",
            lambda: (iml.training.exact._SEGMENT, iml.training.exact._STRIDE),
        ),
        Figure(
            "LogisticRegression: initial weights",
            "iml/models/small.py",
            "initial weights ``{} N(0, 1)``",
            ".2f",
            _logistic_init_scale,
        ),
        Figure(
            "TABULAR_DEFAULTS",
            "iml/training/tabular.py",
            "{} on minibatches of {} rows shared by the members of a seed, the learning rate "
            "divided by {} after {} epochs without a relative improvement of {}, early stopping "
            "after {}, validation in blocks of {} rows",
            ".2f d .0f d .0es d ,d",
            lambda: (
                TABULAR_DEFAULTS.learning_rate,
                TABULAR_DEFAULTS.batch_size,
                1 / TABULAR_DEFAULTS.lr_factor,
                TABULAR_DEFAULTS.plateau_patience,
                TABULAR_DEFAULTS.min_rel_delta,
                TABULAR_DEFAULTS.patience,
                TABULAR_DEFAULTS.eval_batch_size,
            ),
        ),
        Figure(
            "digits_multiclass config",
            MULTICLASS_CONFIG,
            "Digits with all {} classes",
            "d",
            lambda: len(digits().class_names),
        ),
        Figure(
            "digits_multiclass config: grid",
            MULTICLASS_CONFIG,
            "with the digit {} weighted {}x (``w[{}]={}``)",
            "d d d d",
            lambda: (*_mc_weighting(to_dict(_multiclass_config())),) * 2,
        ),
        Figure(
            "digits_multiclass config: sizes and epochs",
            MULTICLASS_CONFIG,
            "shrunk to {} px, as in the default binary run, so that the task stays uncertain "
            "(``--image-size {}`` keeps their native size, where nearly every score is at an "
            "extreme); members train to early stopping (at most {} epochs).",
            "d d d",
            lambda: (
                _multiclass_config().data.image_size,
                digits().input_shape[0],
                _multiclass_config().train.epochs,
            ),
        ),
        Figure(
            "defaults: classes of digits",
            DEFAULTS,
            "every class of a dataset that has classes (digits: {})",
            "d",
            lambda: len(digits().class_names),
        ),
        Figure(
            "read_letter: features",
            TABULAR,
            "UCI Letter Recognition: {} integer features",
            "d",
            lambda folder: letter(folder).features.shape[1],
            data="uci-letter",
        ),
        Figure(
            "read_letter: positive rate",
            TABULAR,
            "Caruana's LETTER.p1 (about {}% positive)",
            ".0f",
            lambda folder: 100 * letter(folder).labels.mean(),
            data="uci-letter",
        ),
        Figure(
            "defaults: the positive letter",
            DEFAULTS,
            "('' = O, a ~{}% class)",
            ".0f",
            lambda folder: 100 * letter(folder).labels.mean(),
            data="uci-letter",
        ),
        Figure(
            "sweep_config: grid",
            DEFAULTS,
            "The default sweep of ``iml sweep``: {} betas of the beta-weighted log loss of "
            "logistic regression",
            "d",
            lambda: sweep_config().loss.n_betas,
        ),
        Figure(
            "defaults: folds",
            DEFAULTS,
            "cross-validation folds, rotated train/validation/test ({}-{}-{} of {})",
            "d d d d",
            lambda: (
                *(
                    [reproduce_folds()[i], sweep_folds(sweep_config().data.n_folds)[i - 1]]
                    for i in (1, 2, 3)
                ),
                [reproduce_folds()[0], sweep_config().data.n_folds],
            ),
        ),
    ]


DECLARATIONS: list[Item] = [
    *_readme(),
    *_digits_run(),
    *_pneumonia_run(),
    *_pneumonia_early_stopping_run(),
    *_pneumonia_patience_run(),
    *_pneumonia_seeds_run(),
    *_pneumonia_config(),
    *_pneumonia_lr_floor_run(),
    *_pneumonia_schedules(),
    *_pneumonia_lr_floor_other_betas_run(),
    *_pneumonia_lr_floor_seeds_run(),
    *_digits_multiclass_run(),
    *_adult_run(),
    *_letter_run(),
    *_sweep_train_run(),
    *_any_loss_tables(),
    *_matrix_exact_runs(),
    *_any_loss_comparisons(),
    *_softmax_exact_runs(),
    *_stronger_ridge_run(),
    *_gpu_run(),
    *_gpu_h200_run5(),
    *_gpu_h200_run6(),
    *_gpu_array_size_refuted(),
    *_gpu_h100_run(),
    *_cpu_ensemble_run(),
    *_cpu_step_run(),
    *_paper_scale_runs(),
    *_docstrings(),
]
