"""Data: TFDS builders that need no TensorFlow, tabular loaders and nested cross-validation folds.

``load_dataset(name, ...)`` returns a :class:`Dataset` for any source (``digits`` by default,
``pneumoniamnist``, ``chestxray14``, ``csv``, ``adult``, ``letter``); :mod:`iml.data.folds` makes
the paper's patient-grouped 10-fold, 7-2-1 rotated nested cross-validation.
"""

from iml.data.builders.chestxray14 import ChestXray14Labels, chestxray14_labels
from iml.data.builders.pneumoniamnist import assemble_pneumoniamnist
from iml.data.datasets import (
    DATASETS,
    DEFAULT_POSITIVE_DIGIT,
    ENV_DATA_DIR,
    Dataset,
    default_data_dir,
    load_csv,
    load_dataset,
)
from iml.data.folds import (
    FoldSplit,
    assign_folds,
    cycle_length,
    nested_cv,
    nested_cv_splits,
    rotation_folds,
)

__all__ = [
    "DATASETS",
    "DEFAULT_POSITIVE_DIGIT",
    "ENV_DATA_DIR",
    "ChestXray14Labels",
    "Dataset",
    "FoldSplit",
    "assemble_pneumoniamnist",
    "assign_folds",
    "chestxray14_labels",
    "cycle_length",
    "default_data_dir",
    "load_csv",
    "load_dataset",
    "nested_cv",
    "nested_cv_splits",
    "rotation_folds",
]
