"""Tests of iml.grids: grids of betas and of losses, their table keys, and grids of weights read
from their own syntax."""

import re

import jax.numpy as jnp
import numpy as np
import pytest

import iml
from iml.grids import (
    WEIGHT_GRIDS,
    beta_grid,
    beta_key,
    loss_grid,
    parse_weight_grid,
    weight_grid,
)
from iml.spec import loss_spec


def test_beta_grid_is_even_in_logit_symmetric_and_keeps_its_bounds():
    grid = beta_grid(5, 0.01, 0.99)
    mid = 0.1 / (0.1 + np.sqrt(0.99))  # odds sqrt(0.01 / 0.99): halfway in logit
    np.testing.assert_allclose(grid, [0.01, mid, 0.5, 1 - mid, 0.99], rtol=1e-9)
    assert grid[0] == 0.01 and grid[-1] == 0.99  # the table's keys show the bounds
    # The middle of bounds whose decimals sum to 1 is 1/2, whatever the CPU's exp and log: a
    # float64 NumPy grid put it at 0.4999999999999998 on one machine and 0.5 on another.
    for n in (3, 5, 65):
        assert beta_grid(n)[n // 2] == 0.5 and beta_grid(n, 0.1, 0.9)[n // 2] == 0.5
    assert beta_grid(3, 0.1, 0.8)[1] != 0.5
    assert len(beta_grid()) == 64 and beta_grid(1, 0.2, 0.3).tolist() == [0.2]
    for args, message in [
        ((0,), "n_betas must be an integer >= 1, got 0"),
        ((True,), "n_betas must be an integer >= 1, got True"),
        ((4, 0.0, 0.5), "beta_min"),
        ((4, 0.5, 1.0), "beta_max"),
        ((4, 0.6, 0.4), "beta_min = 0.6 exceeds beta_max = 0.4"),
    ]:
        with pytest.raises(ValueError, match=message):
            beta_grid(*args)


@pytest.mark.parametrize("n_betas, low, high", [(64, 0.01, 0.99), (7, 0.05, 0.8), (5, 0.1, 0.9)])
def test_beta_grid_is_the_float_nearest_each_exact_weight(n_betas, low, high):
    # An independent computation at 50 digits (mpmath): the bounds as written, evenly spaced
    # logits, their sigmoid rounded once to float64. A grid that rounded at every step, as
    # float64 NumPy does, differs from it by a few ulps that depend on the CPU's exp and log,
    # and a run keyed by those ulps could not be resumed on another machine.
    mpmath = pytest.importorskip("mpmath")
    with mpmath.workdps(50):
        a, b = (mpmath.log(mpmath.mpf(repr(x)) / (1 - mpmath.mpf(repr(x)))) for x in (low, high))
        exact = [float(1 / (1 + mpmath.exp(-(a + k * (b - a) / (n_betas - 1)))))
                 for k in range(n_betas)]  # fmt: skip
    assert beta_grid(n_betas, low, high).tolist() == exact


def test_loss_grids_refuse_repeats_and_unreadable_weights():
    with pytest.raises(ValueError, match="losses repeat"):
        loss_grid(np.ones((2, 3, 3)))
    with pytest.raises(ValueError, match="betas"):
        loss_grid([0.5, 0.5])
    assert parse_weight_grid("ones; B[8,8]=10 ;B[3,8]=10,B[8,3]=2", "matrix") == [
        {},
        {(8, 8): 10.0},
        {(3, 8): 10.0, (8, 3): 2.0},
    ]
    grid = loss_grid(weight_grid(parse_weight_grid("ones;B[8,8]=10", "matrix"), "matrix", 10))
    assert grid.keys == ["ones", "B[8,8]=10"]  # keys read back as the --weights syntax
    for text, message in [
        ("ones;w[1]=2", r"^weights: cannot read 'w\[1\]=2'.*B\[3,3\]=10"),
        ("B[1]=2", "B takes 2 indices"),
        ("B[1,1]=-2", r"a weight must be a finite number > 0, got 'B\[1,1\]=-2'"),
        (" ; ", "^weights is empty"),
    ]:
        with pytest.raises(ValueError, match=message):
            parse_weight_grid(text, "matrix")
    with pytest.raises(ValueError, match=r"index \[3, 0\] is out of range for 3 classes"):
        weight_grid([{(3, 0): 2.0}], "matrix", 3)


def test_every_weight_grid_builds_its_loss_from_its_own_syntax():
    for loss, (symbol, rank, param) in WEIGHT_GRIDS.items():
        index = ",".join(["2"] * rank)
        entries = parse_weight_grid(f"ones;{symbol}[{index}]=10", loss)
        assert entries == [{}, {(2,) * rank: 10.0}]
        grid = weight_grid(entries, loss, 4)
        assert grid.name == loss == loss_spec(loss, **{param: np.ones((4,) * rank)}).name
        weights = np.asarray(grid.params[param])
        assert weights.shape == (2, *(4,) * rank)
        assert weights[1][(2,) * rank] == 10.0 and weights.sum() == 2 * 4**rank + 9
        prefix = "gamma=2," if "gamma" in grid.params else ""  # the focal loss's focusing too
        assert loss_grid(grid).keys == [f"{prefix}ones", f"{prefix}{symbol}[{index}]=10"]
    with pytest.raises(ValueError, match=r"^config\.loss\.weights: a grid of weights is read"):
        parse_weight_grid("ones", "focal", name="config.loss.weights")
    with pytest.raises(ValueError, match="not 'log'"):
        weight_grid([{}], "log", 3)


def test_a_callable_with_parameters_is_a_grid_keyed_by_them():
    def weighted_log(a, y, beta):
        return jnp.where(y == 1, -beta * jnp.log(a), -(1 - beta) * jnp.log1p(-a))

    spec = loss_spec(weighted_log, jnp.array([0.5, 0.9]))
    assert spec.batch_shape == (2,)
    grid = loss_grid(spec)
    assert grid.keys == ["0.5", "0.9"] and grid.weights is None
    # each member is the callable at its own parameter, with the generic rule
    a = spec[1].optimal_score(jnp.array([0.1, 0.5]))
    np.testing.assert_allclose(a, iml.optimal_score(jnp.array([0.1, 0.5]), 0.9), rtol=1e-5)


@pytest.mark.slow
def test_a_grid_whose_rule_has_no_inverse_is_refused_naming_the_loss_and_weight():
    from iml.grids import check_rules_invertible, loss_family

    def linear(a, y, weight):  # improper: the expected loss is linear in the score
        return jnp.where(y == 1, weight * (1.0 - a), (1.0 - weight) * a)

    def boosting(a, y, weight):  # strictly proper: its rule is the weight's tilt
        return jnp.where(
            y == 1, weight * jnp.sqrt((1 - a) / a), (1 - weight) * jnp.sqrt(a / (1 - a))
        )

    check_rules_invertible(loss_family(boosting)([0.01, 0.5, 0.99]))  # the generic rule, checked
    check_rules_invertible(np.array([0.01, 0.99]))  # the log loss's closed forms
    check_rules_invertible(loss_family("focal", gamma=2.0)([0.1, 0.9]))
    refused = r"at loss 0\.3 has an optimal scoring rule that is not invertible for scores in \["
    with pytest.raises(ValueError, match=refused) as caught:
        check_rules_invertible(loss_family(linear)([0.3, 0.6]))
    low, high = map(float, re.search(r"scores in \[(\S+), (\S+)\]", str(caught.value)).groups())
    assert 0.0 < low <= high < 1.0


def test_a_config_s_loss_section_is_one_grid_its_errors_named_as_the_caller_names_keys():
    from iml.grids import config_grid
    from iml.pipeline.defaults import experiment_config

    loss = experiment_config().loss
    loss.name, loss.weights = "class_weighted_softmax", "ones;w[2]=4"
    grid = config_grid(loss, 3)
    assert grid.keys == ["ones", "w[2]=4"] and grid.spec.batch_shape == (2,)
    np.testing.assert_array_equal(grid.spec.params["class_weights"][1], [1.0, 1.0, 4.0])
    flags = {"loss.betas": "--betas", "loss.weights": "--config.loss.weights"}

    def name(key):
        return flags.get(key, f"config.{key}")

    with pytest.raises(ValueError, match=r"^--config\.loss\.weights: index \[5\] is out of range"):
        config_grid({**loss, "weights": "w[5]=2"}, 3, name)
    with pytest.raises(ValueError, match=r"^config\.loss\.params\.gamma: the loss 'class_weig"):
        config_grid({**loss, "params": {"gamma": 2.0}}, 3, name)
    binary = {**experiment_config().loss, "betas": (0.5, 1.0)}
    with pytest.raises(ValueError, match=r"^--betas must lie in \(0, 1\)"):
        config_grid(binary, 2, name)
    with pytest.raises(ValueError, match=r"^config\.loss\.n_betas: n_betas must be"):
        config_grid({**binary, "betas": (), "n_betas": 0}, 2, name)


def test_a_grid_that_repeats_a_loss_in_float32_or_by_its_entries_is_refused_naming_the_key():
    from iml.grids import config_betas, weight_row
    from iml.pipeline.defaults import experiment_config

    focal = {**experiment_config().loss, "name": "focal", "betas": (0.9, 0.9000000001)}
    with pytest.raises(ValueError, match=r"^config\.loss\.betas: the grid repeats .* float32"):
        config_betas(focal)
    flat = {**focal, "betas": (), "n_betas": 3, "beta_min": 0.5, "beta_max": 0.5}
    with pytest.raises(ValueError, match=r"^config\.loss\.n_betas: the grid repeats"):
        config_betas(flat)
    with pytest.raises(ValueError, match=r"^config\.loss\.beta_min: could not convert"):
        config_betas({**flat, "beta_min": "x"})
    with pytest.raises(ValueError, match=r"^--w repeats a loss: 'ones' is 'ones'"):
        parse_weight_grid("ones;w[1]=2;ones", "class_weighted_softmax", name="--w")
    # a member's beta finds its row exactly, or else in float32 (a focal grid's weights)
    assert weight_row([0.5, 0.12345679], 0.123456789) == 1
    assert weight_row([0.9, 0.9000000001], 0.9000000001) == 1  # exact first
    with pytest.raises(ValueError, match=r"0\.3 is not one of the grid's"):
        weight_row([0.5, 0.9], 0.3)


def test_a_grid_written_as_a_config_reads_back_with_its_keys_and_float32_parameters():
    import jax

    from iml.grids import config_grid
    from iml.pipeline.defaults import experiment_config

    betas = beta_grid(7)
    focal = {**experiment_config().loss, "name": "focal", "betas": tuple(betas.tolist())}
    grids = [
        loss_grid(betas),  # keyed by the betas as given: '0.17774412460002179'
        loss_grid(loss_spec("focal", gamma=2.0, alpha=betas)),  # by float32 decimals
        config_grid(focal),  # a config's class weights, as given, whatever the loss
        loss_grid(weight_grid(parse_weight_grid("ones;B[1,1]=10", "matrix"), "matrix", 3)),
    ]
    assert grids[0].keys == grids[2].keys == [beta_key(b) for b in betas]
    assert grids[1].keys[1] == "0.044641905" != grids[2].keys[1]
    for grid in grids:
        config = grid.to_config()
        again = loss_grid(config)
        assert again.keys == grid.keys and again.spec.name == grid.spec.name
        if grid.weights is None:
            assert again.weights is None
        else:
            np.testing.assert_array_equal(again.weights, grid.weights)
            assert config[grid.spec.record.class_weight] == grid.weights.tolist()
        for a, b in zip(jax.tree.leaves(again.spec), jax.tree.leaves(grid.spec), strict=True):
            assert a.dtype == b.dtype and np.array_equal(a, b)
    with pytest.raises(ValueError, match="callable loss cannot be stored"):
        loss_grid(loss_spec(lambda a, y, w: w * a, 0.5)).to_config()


def test_a_mapping_s_class_weights_that_repeat_in_float32_or_as_one_number_are_refused():
    message = r"^alphas: the grid repeats a class weight in float32"
    for losses in (
        {"name": "focal", "gamma": [2.0, 2.0, 2.0], "alpha": 0.25},  # one weight, three losses
        {"name": "focal", "alpha": [0.1, 0.1 + 1e-12]},  # equal in float32
    ):
        with pytest.raises(ValueError, match=message):
            loss_grid(losses)
    assert loss_grid({"name": "log", "beta": 0.3}).keys == ["0.3"]  # a grid of one
