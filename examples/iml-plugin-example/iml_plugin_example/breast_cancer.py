"""scikit-learn's breast-cancer table (569 rows, 30 features), registered in ``iml`` as the
dataset ``"breast_cancer"`` when imported: ``iml sweep --dataset breast_cancer``.

Label 1 is a malignant tumour (212 of 569, 37%); the features are standardised. A dataset of
``iml`` is loaded by ``load(manual_dir, **options)`` for a table and returns an
``iml.data.Dataset``: ``labels [N]`` of 0 and 1, ``groups`` and ``ids [N]``, ``input_shape``
``(d,)``, ``kind="tabular"`` and a ``reader`` from row indices to float32 rows ``[n, d]``.
"""

import numpy as np

from iml.data import Dataset, register_dataset

__all__ = ["load_breast_cancer_table"]


def load_breast_cancer_table(manual_dir=None) -> Dataset:
    """The table, from scikit-learn's bundled copy (no download)."""
    from sklearn.datasets import load_breast_cancer

    data = load_breast_cancer()
    x = data.data
    x = ((x - x.mean(axis=0)) / x.std(axis=0)).astype(np.float32)
    n = len(x)
    return Dataset(
        name="breast_cancer",
        labels=(data.target == 0).astype(np.int32),  # scikit-learn's 0 is "malignant"
        groups=np.arange(n),
        ids=np.arange(n),
        input_shape=(x.shape[1],),
        kind="tabular",
        reader=x.__getitem__,
        feature_names=list(data.feature_names),
    )


register_dataset("breast_cancer", load_breast_cancer_table, kind="tabular")
