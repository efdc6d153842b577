"""Training ensembles through one entry point, :func:`train`: one trainer (per-member train state,
steps, early stopping, device mesh, checkpoints) fed with image batches from the host
(:func:`train_ensemble`) or with an in-memory table whose minibatches its members share
(:func:`train_tabular`), and exact full-batch fits of convex members (:mod:`iml.training.exact`).
"""

from iml.training.ensemble_data import DataSource, MemberSpec, epoch_order
from iml.training.exact import beta_weighted_sample_weights, fit_weighted_logistic
from iml.training.exact_design import LogisticFit
from iml.training.exact_multinomial import fit_weighted_softmax
from iml.training.host import HostMemory, keep_step_memory
from iml.training.member import (
    MemberState,
    adam,
    batch_members,
    end_of_epoch,
    init_member_state,
    member_eval_step,
    member_in_place,
    member_train_step,
    preprocess,
    skip_idle_members,
)
from iml.training.programs import ensemble_programs, is_gpu_kernel_failure, is_out_of_memory
from iml.training.sharding import (
    make_mesh,
    per_device_member_loop,
    per_device_members,
    use_cpu_cores_as_devices,
)
from iml.training.tabular import (
    TABULAR_DEFAULTS,
    MemberFit,
    out_of_fold_logits,
    train_tabular,
)
from iml.training.train import FEEDS, Trained, member_grid, train
from iml.training.train_config import (
    DEFAULT_MEMBER_BATCHING,
    L2_CHOICES,
    L2_GRID,
    L2_SCALES,
    SOLVERS,
    TrainConfig,
    resolve_member_batching,
)
from iml.training.trainer import (
    EnsembleCheckpointer,
    MemberHistory,
    predict_ensemble,
    train_ensemble,
)

__all__ = [
    "DEFAULT_MEMBER_BATCHING",
    "FEEDS",
    "L2_CHOICES",
    "L2_GRID",
    "L2_SCALES",
    "SOLVERS",
    "TABULAR_DEFAULTS",
    "DataSource",
    "EnsembleCheckpointer",
    "HostMemory",
    "LogisticFit",
    "MemberFit",
    "MemberHistory",
    "MemberSpec",
    "MemberState",
    "TrainConfig",
    "Trained",
    "adam",
    "batch_members",
    "beta_weighted_sample_weights",
    "end_of_epoch",
    "ensemble_programs",
    "epoch_order",
    "fit_weighted_logistic",
    "fit_weighted_softmax",
    "init_member_state",
    "is_gpu_kernel_failure",
    "is_out_of_memory",
    "keep_step_memory",
    "make_mesh",
    "member_eval_step",
    "member_grid",
    "member_in_place",
    "member_train_step",
    "out_of_fold_logits",
    "per_device_member_loop",
    "per_device_members",
    "predict_ensemble",
    "preprocess",
    "resolve_member_batching",
    "skip_idle_members",
    "train",
    "train_ensemble",
    "train_tabular",
    "use_cpu_cores_as_devices",
]
