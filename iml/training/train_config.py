"""The configuration of ensemble training: :class:`TrainConfig` and its checks, the solvers
(:data:`SOLVERS`), the ridge's grid, scales and choice rules (:data:`L2_GRID`, :data:`L2_SCALES`,
:data:`L2_CHOICES`), and how
members are batched on each backend (:data:`DEFAULT_MEMBER_BATCHING`,
:func:`resolve_member_batching`)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import jax

from iml import _validation as V
from iml.training.member import MemberState, end_of_epoch

__all__ = [
    "DEFAULT_MEMBER_BATCHING",
    "L2_CHOICES",
    "L2_GRID",
    "L2_SCALES",
    "SOLVERS",
    "TrainConfig",
    "resolve_member_batching",
]

# How members are batched, per backend, chosen with `python -m experiments.benchmarks.ensemble`
# (K=8 small DenseNets against 8 single-model steps with the same convolutions).
# CPU (docs/results/cpu_ensemble): 'map' with 'mixed' convolutions on the trainer's mesh of one
# CPU device per core (each device maps over its own members inside one shard_map program:
# per_device_members) is the fastest recorded; 'map' with 'xla' convolutions is slow, so 'map'
# goes with the models' CPU convolutions (iml.models.DEFAULT_CONV_IMPL).
# GPU (docs/results/gpu_h200): vmap with xla convolutions. TPU has no measurement; vmap is the
# usual choice there.
DEFAULT_MEMBER_BATCHING: dict[str, str] = {"cpu": "map", "gpu": "vmap", "tpu": "vmap"}

_NORMALIZATIONS = ("imagenet", "none")

#: The solvers of :attr:`TrainConfig.solver`.
SOLVERS = ("auto", "exact", "adam")
#: What a ridge coefficient ``l2`` is measured against (``TrainConfig.l2_scale``): ``"paper"``,
#: the loss itself, so that ``l2 / 2 ||W||^2`` is a fixed cost in the paper's units at every
#: class weight (the costly-learning model's assumption); ``"per_weight"``, the loss's total
#: weight over the member's training rows, so that the penalty trades off against the data
#: alike at every beta, ``B`` or ``w`` (multiplying every sample weight by a constant leaves the
#: fit unchanged).
L2_SCALES = ("paper", "per_weight")
#: The ridge coefficients ``TrainConfig.l2 = "auto"`` chooses among (per loss and rotation, on
#: the validation folds): decades from 1e-6 to 1.
L2_GRID = (1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0)
#: How ``TrainConfig.l2 = "auto"`` chooses a member's coefficient from its fits at every level of
#: the grid (:func:`iml.training.tabular.chosen_penalty`): ``"least_penalty"``, the smallest
#: coefficient whose mean validation loss is within half a standard error (paired over the
#: validation rows) of the lowest; ``"lowest_loss"``, the coefficient of lowest mean validation
#: loss (scikit-learn's ``LogisticRegressionCV``).
L2_CHOICES = ("least_penalty", "lowest_loss")


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Hyperparameters of ensemble training (defaults: the paper's recipe, Section 5).

    Attributes:
      learning_rate: initial Adam learning rate of every member (1e-4).
      b1, b2, eps: Adam's parameters (0.9, 0.999, 1e-8).
      batch_size: training examples per member and step (16).
      eval_batch_size: validation/prediction examples per member and step.
      max_epochs: the most epochs a member trains.
      patience: epochs without validation improvement before a member stops early.
      plateau_patience: epochs without improvement before its learning rate is decayed.
      lr_factor: the decay factor (0.1: "decayed by a factor of 10").
      min_lr: the floor of the decayed learning rate (0: none, as in the paper).
      min_delta: the least decrease of the validation loss that counts as an improvement.
      min_rel_delta: the least decrease, as a fraction of the best validation loss, that counts.
      l2: coefficient of ``l2 / 2 * ||W||^2`` added to the training loss (weights only:
        :func:`iml.models.weight_norm`); for a table's small models also ``"auto"``: each
        member's coefficient is chosen from ``l2_grid`` by ``l2_choice``, from its fits' losses
        of its own on its validation folds (:func:`iml.training.train_tabular`).
      l2_grid: the coefficients ``l2 = "auto"`` chooses among (:data:`L2_GRID`).
      l2_choice: how ``l2 = "auto"`` chooses (:data:`L2_CHOICES`).
      l2_scale: what ``l2`` is measured against (:data:`L2_SCALES`): ``"paper"``, the loss, a
        fixed cost in the paper's units; ``"per_weight"``, the member's total sample weight.
      standardize: a table's features are standardised on each rotation's training rows (as
        scikit-learn's ``StandardScaler`` in a pipeline would), which makes the ridge that of
        standardised features; the fitted coefficients stay in the features' own units.
      flip: random horizontal flips of training images; ``None`` (the default): the inputs'
        own default, flips for images and none for a table's feature rows
        (:meth:`for_inputs`).
      normalize: ``'imagenet'`` or ``'none'``; ``None`` (the default): ``'imagenet'`` for
        images, ``'none'`` for feature rows. A table refuses flips and normalisation set
        explicitly (:func:`iml.training.check_table_config`).
      solver: ``'adam'`` (minibatch Adam with the schedule above), ``'exact'`` (a table's
        logistic regression under the beta-weighted or B-weighted log loss or the class-weighted
        softmax cross-entropy fitted to its optimum by full-batch Newton steps:
        :func:`iml.training.tabular.table_solver`), or ``'auto'``:
        exact where it applies, Adam otherwise (:func:`iml.training.train_tabular`). Image models
        train by Adam.
      tol: the exact solver's gradient tolerance (largest absolute entry).
      max_newton_steps: the exact solver's most Newton steps.
      member_batching: ``'vmap'``, ``'map'`` or ``'loop'`` (see :mod:`iml.training.member`);
        ``None`` takes the backend's measured default (:data:`DEFAULT_MEMBER_BATCHING`). With
        ``'map'`` or ``'loop'`` on a mesh whose data axis is 1, each device steps its own members.
      checkpoint_every_steps: also checkpoint every this many steps within an epoch (always at
        the end of each epoch when a checkpoint directory is given).
    """

    learning_rate: float = 1e-4
    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8
    batch_size: int = 16
    eval_batch_size: int = 64
    max_epochs: int = 100
    patience: int = 5
    plateau_patience: int = 1
    lr_factor: float = 0.1
    min_lr: float = 0.0
    min_delta: float = 0.0
    min_rel_delta: float = 0.0
    l2: float | str = 0.0
    l2_grid: tuple[float, ...] = L2_GRID
    l2_choice: str = "least_penalty"
    l2_scale: str = "paper"
    standardize: bool = False
    flip: bool | None = None
    normalize: str | None = None
    member_batching: str | None = None
    checkpoint_every_steps: int | None = None
    solver: str = "auto"
    tol: float = 1e-6
    max_newton_steps: int = 50

    def for_inputs(self, images: bool) -> TrainConfig:
        """This configuration with ``flip`` and ``normalize`` that are ``None`` set for the
        inputs: flips and ImageNet normalisation for images, neither for feature rows."""
        flip = images if self.flip is None else self.flip
        normalize = ("imagenet" if images else "none") if self.normalize is None else self.normalize
        return dataclasses.replace(self, flip=flip, normalize=normalize)

    def epoch_end_rule(self) -> Callable[..., MemberState]:
        """:func:`~iml.training.member.end_of_epoch` with this configuration's early
        stopping and plateau decay: ``rule(state, val_loss, epoch)`` for one member."""
        return functools.partial(
            end_of_epoch,
            patience=self.patience,
            plateau_patience=self.plateau_patience,
            lr_factor=self.lr_factor,
            min_lr=self.min_lr,
            min_delta=self.min_delta,
            min_rel_delta=self.min_rel_delta,
        )

    def __post_init__(self) -> None:
        for name in ("learning_rate", "eps", "tol"):
            V.check_positive(f"TrainConfig.{name}", getattr(self, name))
        counts = ("batch_size", "eval_batch_size", "max_epochs", "patience", "plateau_patience",
                  "max_newton_steps")  # fmt: skip
        for name in counts:
            V.check_count(f"TrainConfig.{name}", getattr(self, name))
        for name in ("min_lr", "min_delta", "min_rel_delta"):
            V.check_non_negative(f"TrainConfig.{name}", getattr(self, name))
        if self.l2 != "auto":
            if isinstance(self.l2, str | bool):
                raise ValueError(f"TrainConfig.l2 must be a number >= 0 or 'auto', got {self.l2!r}")
            V.check_non_negative("TrainConfig.l2", self.l2)
        grid = self.l2_grid
        if not isinstance(grid, tuple) or not grid:
            raise ValueError(f"TrainConfig.l2_grid must be a non-empty tuple, got {grid!r}")
        for value in grid:
            V.check_positive("TrainConfig.l2_grid", value)
        if len(set(grid)) != len(grid):
            raise ValueError(f"TrainConfig.l2_grid repeats a value: {grid!r}")
        V.check_choice("TrainConfig.l2_scale", self.l2_scale, L2_SCALES)
        V.check_choice("TrainConfig.l2_choice", self.l2_choice, L2_CHOICES)
        V.check_choice("TrainConfig.solver", self.solver, SOLVERS)
        if not (0.0 <= self.b1 < 1.0 and 0.0 <= self.b2 < 1.0):
            raise ValueError(f"TrainConfig.b1 and b2 must be in [0, 1), got {self.b1}, {self.b2}")
        if not 0.0 < self.lr_factor <= 1.0:
            raise ValueError(f"TrainConfig.lr_factor must be in (0, 1], got {self.lr_factor!r}")
        if self.flip is not None and not isinstance(self.flip, bool):
            raise ValueError(f"TrainConfig.flip must be True, False or None, got {self.flip!r}")
        if self.normalize is not None:
            V.check_choice("TrainConfig.normalize", self.normalize, _NORMALIZATIONS)
        if self.member_batching not in (None, "vmap", "map", "loop"):
            raise ValueError(
                "TrainConfig.member_batching must be 'vmap', 'map', 'loop' or None, "
                f"got {self.member_batching!r}"
            )
        if self.checkpoint_every_steps is not None:
            V.check_count("TrainConfig.checkpoint_every_steps", self.checkpoint_every_steps)


def resolve_member_batching(config: TrainConfig, backend: str | None = None) -> str:
    """The member batching a run uses: ``config.member_batching``, or the measured default
    (:data:`DEFAULT_MEMBER_BATCHING`) of ``backend`` (default ``jax.default_backend()``)."""
    backend = backend or jax.default_backend()
    return config.member_batching or DEFAULT_MEMBER_BATCHING.get(backend, "vmap")
