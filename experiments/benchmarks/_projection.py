"""The paper's experiment projected from measured steps: on one card and on N cards across hosts.

The model (:func:`project_on_cards`), for ``M`` members of the paper's plan, ``I`` images, and the
fractions ``TRAIN_FRACTION`` and ``VALIDATION_FRACTION`` of them trained on and validated on in
each epoch:
- **an epoch of one member** takes ``I * (TRAIN_FRACTION / train_rate + VALIDATION_FRACTION /
  eval_rate)`` seconds at member-image rates (the K-member step's rates for ours, one model's for
  PyTorch);
- **early stopping**: each member trains until its validation loss stops improving, for a number
  of epochs drawn from a stored run's members (:func:`epochs_until_stopped`). A loop of PyTorch
  models trains each model its own epochs (their mean). Our K members share one program, which
  runs until the last of them stops, so a batch takes the expected maximum of K draws
  (:func:`expected_batch_epochs`);
- **N cards** are N processes, each training its share of the ``ceil(M / K)`` batches (batch
  ``i`` on process ``i % N``), so the run takes ``ceil(ceil(M / K) / N)`` batches, plus compiling
  the step once, plus the runtime's coordination on N processes, measured with CPU processes
  (``experiments.benchmarks.process_scaling``). A loop of PyTorch models on N cards is N
  independent loops of ``ceil(M / N)`` models, with no coordination: the baseline is given ideal
  scaling.

Expected values stand in for random epochs: a card's sum of batches is taken at its mean.
Data loading and test-set scoring are not counted, for either side.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

#: The paper's experiment (Appendix, "Technical Details"): betas, folds rotated 7/2/1, seeds.
PAPER_BETAS = 3
PAPER_ROTATIONS = 10
PAPER_SEEDS = 40
PAPER_MEMBERS = PAPER_BETAS * PAPER_ROTATIONS * PAPER_SEEDS
CHESTXRAY14_IMAGES = 112_120
TRAIN_FRACTION = 0.7
VALIDATION_FRACTION = 0.2

ROOT = Path(__file__).resolve().parents[2]
#: A stored run whose members trained with the paper's recipe to early stopping (PneumoniaMNIST,
#: a small DenseNet: Adam, the learning rate divided by 10 on a plateau, stopping after 2 epochs
#: without improvement).
STOPPING_RUN = ROOT / "docs" / "results" / "pneumoniamnist_early_stopping"
#: The stored measurement of the runtime's coordination on CPU processes.
SCALING_RECORDS = ROOT / "docs" / "results" / "process_scaling"


def _positive(**values: float) -> None:
    for name, value in values.items():
        if not value > 0:
            raise ValueError(f"{name} must be positive, got {value!r}")


def member_epoch_seconds(
    train_images_per_s: float, eval_images_per_s: float, images: int = CHESTXRAY14_IMAGES
) -> float:
    """Seconds of one member's epoch: a training pass over ``TRAIN_FRACTION`` of ``images`` and a
    validation pass over ``VALIDATION_FRACTION``, at member-image rates."""
    _positive(train_images_per_s=train_images_per_s, eval_images_per_s=eval_images_per_s)
    return images * (TRAIN_FRACTION / train_images_per_s + VALIDATION_FRACTION / eval_images_per_s)


def project_paper_experiment(
    train_images_per_s: float,
    eval_images_per_s: float,
    *,
    epochs: float,
    members: int = PAPER_MEMBERS,
    images: int = CHESTXRAY14_IMAGES,
) -> dict[str, float]:
    """Hours on one card for ``members`` members of ``epochs`` epochs each, at the given
    member-image throughputs.

    Returns:
      ``hours`` in all, ``hours_per_epoch`` of all members, and ``hours_per_member``.
    """
    _positive(epochs=epochs)
    per_epoch = members * member_epoch_seconds(train_images_per_s, eval_images_per_s, images)
    hours = epochs * per_epoch / 3600
    return {
        "hours": hours,
        "hours_per_epoch": per_epoch / 3600,
        "hours_per_member": hours / members,
    }


def epochs_until_stopped(run: str | Path) -> np.ndarray:
    """Epochs each member of a stored run trained (its finite validation losses, counted), from
    the run's ``batches/*.npz``.

    Raises:
      FileNotFoundError: a run without stored batches.
    """
    files = sorted(Path(run).glob("batches/batch-*.npz"))
    if not files:
        raise FileNotFoundError(f"{run} holds no batches/batch-*.npz of a stored run")
    counts = []
    for f in files:
        with np.load(f, allow_pickle=False) as batch:
            counts.append(np.isfinite(batch["val_loss"]).sum(axis=1))
    return np.concatenate(counts)


def expected_batch_epochs(epochs: np.ndarray, k: int) -> float:
    """The expected epochs of a batch of ``k`` members whose epochs are drawn from ``epochs``
    (with replacement), run until its last member stops: ``E[max]`` of ``k`` draws."""
    epochs = np.asarray(epochs, float)
    if epochs.size == 0 or np.any(epochs < 1):
        raise ValueError("epochs must be a non-empty array of counts of at least 1")
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    values = np.unique(epochs)
    below = np.array([np.mean(epochs <= v) for v in values]) ** k
    return float(np.sum(values * np.diff(np.concatenate([[0.0], below]))))


def latest_scaling_record(folder: str | Path = SCALING_RECORDS) -> Path | None:
    """The newest ``process_scaling`` record in ``folder`` (by name, which starts with its date)."""
    records = sorted(Path(folder).glob("*.json"))
    return records[-1] if records else None


def coordination_seconds(scaling: dict[str, Any], processes: int) -> float:
    """A run's coordination cost on ``processes`` processes: the measured two-process cost, plus
    the growth of joining the runtime and its meetings (one all-gather per check and the two
    barriers), linear in the process count through the measured points and extrapolated past
    them; ``0`` on one process."""
    if processes <= 1:
        return 0.0
    from experiments.benchmarks.process_scaling import MEETINGS_PER_RUN

    points = sorted(scaling["meetings"], key=lambda m: m["processes"])
    counts = np.array([m["processes"] for m in points], float)
    per_run = np.array([m["join_s"] + MEETINGS_PER_RUN * m["meeting_s"] for m in points])
    slope = max(float(np.polyfit(counts, per_run, 1)[0]), 0.0) if len(points) > 1 else 0.0
    return max(float(scaling["coordination_s"]), 0.0) + slope * (processes - 2)


def project_on_cards(
    ours: dict[str, float],
    torch: dict[str, float],
    *,
    members_per_batch: int,
    epochs: np.ndarray,
    cards: list[int],
    scaling: dict[str, Any] | None,
    compile_s: float = 0.0,
    members: int = PAPER_MEMBERS,
    images: int = CHESTXRAY14_IMAGES,
) -> dict[str, Any]:
    """The paper's experiment on each number of ``cards`` (see the module's docstring).

    Args:
      ours: ``train`` and ``eval`` member-image rates of our K-member steps.
      torch: the same of one PyTorch model's steps.
      members_per_batch: K.
      epochs: each member's epochs to early stopping, as drawn from a stored run.
      cards: card counts, one process each.
      scaling: a ``process_scaling`` record (``None``: no coordination cost counted).
      compile_s: compiling our K-member step, once per process.

    Returns:
      the model's terms and, per card count, ``ours_hours``, ``torch_hours`` and ``ratio``
      (PyTorch's hours over ours).
    """
    if members_per_batch < 1 or any(n < 1 for n in cards):
        raise ValueError("members_per_batch and every card count must be at least 1")
    ours_epoch = member_epoch_seconds(ours["train"], ours["eval"], images)
    torch_epoch = member_epoch_seconds(torch["train"], torch["eval"], images)
    k = members_per_batch
    batch_epochs = expected_batch_epochs(epochs, k)
    mean_epochs = float(np.mean(epochs))
    batch_s = k * ours_epoch * batch_epochs
    model_s = torch_epoch * mean_epochs
    batches = math.ceil(members / k)
    rows = []
    for n in cards:
        coordination = 0.0 if scaling is None else coordination_seconds(scaling, n)
        ours_s = math.ceil(batches / n) * batch_s + compile_s + coordination
        torch_s = math.ceil(members / n) * model_s
        rows.append({
            "cards": n,
            "ours_hours": ours_s / 3600,
            "torch_hours": torch_s / 3600,
            "coordination_s": coordination,
            "ratio": torch_s / ours_s,
        })  # fmt: skip
    return {
        "members": members,
        "members_per_batch": k,
        "batches": batches,
        "mean_epochs": mean_epochs,
        "batch_epochs": batch_epochs,
        "ours_member_epoch_s": ours_epoch,
        "torch_member_epoch_s": torch_epoch,
        "compile_s": compile_s,
        "cards": rows,
    }


def projection_intervals(
    ours: dict[str, float],
    torch: dict[str, float],
    *,
    ours_step_s: list[float],
    torch_step_s: list[float],
    epochs: np.ndarray,
    replicates: int = 2000,
    level: float = 0.95,
    seed: int = 0,
    **settings: Any,
) -> list[dict[str, list[float]]]:
    """Percentile bootstrap intervals of :func:`project_on_cards`'s hours and ratio per card
    count: each replicate resamples the members' epochs and each side's timed training steps
    (their median sets the training rate, scaled from the measured one); the validation rates
    and the coordination are held fixed.

    Args:
      ours, torch, epochs, settings: as :func:`project_on_cards` takes them.
      ours_step_s, torch_step_s: the timed training steps behind ``ours["train"]`` and
        ``torch["train"]``.

    Returns:
      Per card count, ``ours_hours``, ``torch_hours`` and ``ratio`` as ``[low, high]``.
    """
    if replicates < 1 or not 0 < level < 1:
        raise ValueError(
            f"replicates must be at least 1 and level in (0, 1), got {replicates}, {level}"
        )
    rng = np.random.default_rng(seed)
    epochs = np.asarray(epochs)
    ours_steps, torch_steps = np.asarray(ours_step_s, float), np.asarray(torch_step_s, float)
    keys = ("ours_hours", "torch_hours", "ratio")
    draws = []
    for _ in range(replicates):
        scale_ours = np.median(ours_steps) / np.median(rng.choice(ours_steps, ours_steps.size))
        scale_torch = np.median(torch_steps) / np.median(rng.choice(torch_steps, torch_steps.size))
        out = project_on_cards(
            {**ours, "train": ours["train"] * scale_ours},
            {**torch, "train": torch["train"] * scale_torch},
            epochs=rng.choice(epochs, epochs.size),
            **settings,
        )
        draws.append([[row[k] for k in keys] for row in out["cards"]])
    values = np.asarray(draws)  # [replicates, cards, 3]
    tails = [100 * (1 - level) / 2, 100 * (1 + level) / 2]
    bounds = np.percentile(values, tails, axis=0)  # [2, cards, 3]
    return [
        {k: bounds[:, c, i].tolist() for i, k in enumerate(keys)} for c in range(values.shape[1])
    ]


def load_card_records(paths: list[str | Path]) -> dict[str, Any]:
    """A card's measurements from stored ``paper_scale`` records, later files overriding: a
    whole record (with ``torch``), or the ``ours`` part of one (a file with ``members`` and
    ``member_images_per_s``).

    Raises:
      ValueError: records that leave out PyTorch's steps or ours at K members.
    """
    card: dict[str, Any] = {}
    for path in paths:
        record = json.loads(Path(path).read_text())
        if "member_images_per_s" in record and "members" in record:
            record = {"ours": record}
        card.update(record)
    missing = [part for part in ("torch", "ours") if part not in card]
    if missing:
        raise ValueError(
            f"the card records {[str(p) for p in paths]} hold no {' or '.join(missing)}: give a "
            "paper_scale record and, where it was measured apart, the K-member step's"
        )
    return card
