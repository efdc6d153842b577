"""The ridge and the standardisation of the tabular trainer's members
(``iml.training.tabular_ridge``): a ridge per unit of weight, and standardised fits equal to scikit-
learn's pipeline on the training rows."""

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression


@pytest.mark.parametrize("loss", ["matrix", "class_weighted_softmax"])
def test_a_ridge_per_unit_of_weight_ignores_a_common_factor_of_the_weights(three_class_table, loss):
    """Under l2_scale='per_weight', multiplying every sample weight by 5 (B -> 5B, w -> 5w)
    leaves each member's fit unchanged; in the paper's units it weakens the ridge 5-fold."""
    import dataclasses

    from iml import loss_spec
    from iml.models import build_model
    from iml.training import TABULAR_DEFAULTS, train_tabular

    x, y, splits, B = three_class_table
    model = build_model("logistic", 3)

    def losses(factor):
        if loss == "matrix":
            return factor * B
        return loss_spec(loss, class_weights=factor * np.array([[1.0, 1.0, 1.0], [1.0, 1.0, 10.0]]))

    def coef(scale, factor):
        config = dataclasses.replace(TABULAR_DEFAULTS, l2=0.05, l2_scale=scale)
        return train_tabular(model, x, y, splits[:2], losses(factor), [0], config).params["w"]

    np.testing.assert_allclose(coef("per_weight", 5.0), coef("per_weight", 1.0), atol=2e-5)
    paper = np.abs(coef("paper", 5.0) - coef("paper", 1.0)).max()
    assert paper > 1e-2


def test_standardised_fits_are_scikit_learns_pipeline_on_the_training_rows(rare_class_table):
    """standardize=True: the members are StandardScaler + LogisticRegression fitted on each
    rotation's training rows (the ridge on the standardised coefficients), with coefficients in
    the features' own units."""
    import dataclasses

    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from iml.data.folds import nested_cv_splits
    from iml.models import build_model
    from iml.training import TABULAR_DEFAULTS, train_tabular

    x, y, _ = rare_class_table
    x = x * np.array([1.0, 10.0, 0.1, 3.0, 1.0, 50.0], np.float32) + 2.0  # scales apart
    splits = nested_cv_splits(np.arange(len(y)) % 10)[:2]
    l2, beta = 1e-2, 0.8
    config = dataclasses.replace(TABULAR_DEFAULTS, l2=l2, standardize=True)
    fit = train_tabular(build_model("logistic"), x, y, splits, [beta], [0], config)
    raw_config = dataclasses.replace(config, standardize=False)
    unscaled = train_tabular(build_model("logistic"), x, y, splits, [beta], [0], raw_config)
    for r, split in enumerate(splits):
        rows = split.train
        # scikit-learn's C sum_i w_i l_i + ||w'||^2 / 2 over C n is the mean loss + l2 / 2 ||w'||^2
        clf = LogisticRegression(C=1.0 / (l2 * len(rows)), class_weight={0: 1 - beta, 1: beta},
                                 tol=1e-12, max_iter=10_000)  # fmt: skip
        pipe = make_pipeline(StandardScaler(), clf).fit(x[rows], y[rows])
        ours = x[split.test] @ fit.params["w"][0, 0, r] + fit.params["b"][0, 0, r]
        theirs = pipe.decision_function(x[split.test])
        np.testing.assert_allclose(ours, theirs, atol=1e-3)  # a gradient below 1e-6, in float32
        raw = x[split.test] @ unscaled.params["w"][0, 0, r] + unscaled.params["b"][0, 0, r]
        assert np.abs(raw - theirs).max() > 0.05  # the ridge on the features as they are
