"""Tests of experiments.studies.multiclass_reveal_power: its grids, its table, and the stored
record's sizes."""

import json

import numpy as np

from experiments.studies import multiclass_reveal_power as M
from iml import revealed as R


def test_grids_raise_the_last_class_weight_of_each_family():
    softmax = M.grid("class_weighted_softmax", M.HEAVY)
    np.testing.assert_allclose(np.asarray(softmax.params["class_weights"])[:, 2], M.HEAVY)
    matrix = M.grid("matrix", M.HEAVY)
    B = np.asarray(matrix.params["B"])
    np.testing.assert_allclose(B[:, 2, 2], M.HEAVY)
    assert B.shape == (4, 3, 3)


def test_channel_has_one_posterior_per_signal_whose_top_class_is_the_signal():
    ex = M.channel(np.array([0.4, 0.4, 0.2]), 0.7, 2)
    posterior = np.asarray(ex.posterior)
    np.testing.assert_array_equal(posterior.argmax(-1), [[0, 1, 2], [0, 1, 2]])
    np.testing.assert_allclose(ex.prior, [[0.4, 0.4, 0.2]] * 2, atol=1e-6)
    assert 0 < float(R.mutual_information(ex)[0]) < np.log(3)


def test_stored_record_renders_one_row_each_and_its_sizes_are_at_most_seven_percent():
    record = json.loads(M.RECORD.read_text())
    assert record["settings"]["datasets"] == 500
    assert M.stored_table().count("\n") == len(record["rows"]) + 1
    sizes = []
    for row in record["rows"]:
        if row["scenario"] in ("capacity", "channel"):
            sizes += [row["nis"], row["niac"], row["nias"]]
        elif row["scenario"] in ("rising", "shannon"):
            sizes += [row["niac"], row["nias"]]
    assert max(sizes) <= 0.07
    shannon = [row for row in record["rows"] if row["scenario"] == "shannon"]
    assert len(shannon) == 2 and min(row["nis"] for row in shannon) >= 0.9
    for row in shannon:  # the agents' own value matrix reveals their lambda
        low, high = row["population_lambda"]
        assert low < row["lambda"] < high
    misreported = [row["nias"] for row in record["rows"] if row["scenario"] == "misreported"]
    assert min(misreported) >= 0.9
