"""Data: TFDS builders that need no TensorFlow, tabular loaders and nested cross-validation folds.

``load_dataset(name, ...)`` returns a :class:`Dataset` for any source (``digits`` by default,
``pneumoniamnist``, ``chestxray14``, ``csv``, ``adult``, ``letter``); :mod:`iml.data.folds` makes
the paper's patient-grouped 10-fold, 7-2-1 rotated nested cross-validation.

The dataset loaders and builders import TensorFlow Datasets, so they load on first use: the folds
and the tabular readers (:mod:`iml.data.tabular`) import without it.
"""

import importlib
from typing import Any

from iml.data.folds import (
    FoldSplit,
    assign_folds,
    cycle_length,
    nested_cv,
    nested_cv_splits,
    rotation_folds,
)

# The names of __all__ not imported above load on first access (PEP 562): from iml.data.datasets
# unless named here.
_LAZY = {
    "ENV_DATA_DIR": "iml.data.prepared",
    "default_data_dir": "iml.data.prepared",
    "ChestXray14Labels": "iml.data.builders.chestxray14.chestxray14_dataset_builder",
    "chestxray14_labels": "iml.data.builders.chestxray14.chestxray14_dataset_builder",
    "assemble_pneumoniamnist": "iml.data.builders.pneumoniamnist.pneumoniamnist_dataset_builder",
}


def __getattr__(name: str) -> Any:
    if name in __all__:
        value = getattr(importlib.import_module(_LAZY.get(name, "iml.data.datasets")), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'iml.data' has no attribute {name!r}")


__all__ = [
    "DATASETS",
    "DEFAULT_POSITIVE_DIGIT",
    "ENV_DATA_DIR",
    "ChestXray14Labels",
    "Dataset",
    "FoldSplit",
    "Source",
    "assemble_pneumoniamnist",
    "assign_folds",
    "chestxray14_labels",
    "cycle_length",
    "default_data_dir",
    "load_csv",
    "load_dataset",
    "nested_cv",
    "nested_cv_splits",
    "register_dataset",
    "rotation_folds",
    "unregister_dataset",
]
