"""Tests of iml._bootstrap: resampling counts (multinomial and Poisson), percentile and order
statistic intervals, and the check of the resampling scheme."""

import os
import select
import signal

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iml import _bootstrap as B
from iml import revealed as R


class Resampling(chex.TestCase):
    """Resampling counts and intervals on small arrays, jitted and not."""

    @chex.variants(with_jit=True, without_jit=True)
    def test_multinomial_counts_resample_every_row_to_n_observations(self):
        counts = self.variant(B.bootstrap_counts, static_argnums=(1, 2))(jax.random.key(0), 50, 40)
        chex.assert_shape(counts, (40, 50))
        chex.assert_type(counts, jnp.float32)
        counts = np.asarray(counts)
        np.testing.assert_array_equal(counts.sum(1), 50.0)
        assert np.all(counts >= 0) and np.all(counts == np.round(counts))
        assert len({tuple(row) for row in counts}) == 40  # the replicates differ

    @chex.variants(with_jit=True, without_jit=True)
    def test_bootstrap_rows_index_rows_drawn_with_replacement(self):
        rows = self.variant(B.bootstrap_rows, static_argnums=(1, 2))(jax.random.key(4), 30, 500)
        chex.assert_shape(rows, (500, 30))
        chex.assert_type(rows, jnp.int32)
        rows = np.asarray(rows)
        assert rows.min() == 0 and rows.max() == 29  # every index reachable, none outside
        # with replacement: a replicate holds 1 - (1 - 1/30)^30 = 64% of the rows on average
        distinct = np.mean([len(set(r)) / 30 for r in rows])
        assert abs(distinct - (1 - (29 / 30) ** 30)) < 0.02

    @chex.variants(with_jit=True, without_jit=True)
    def test_poisson_counts_take_the_quantised_poisson_values_with_mean_and_variance_one(self):
        counts = self.variant(B.poisson_counts, static_argnums=(1, 2))(jax.random.key(1), 999, 200)
        chex.assert_shape(counts, (200, 999))
        counts = np.asarray(counts)
        assert set(np.unique(counts)) <= {0.0, 1.0, 2.0, 3.0, 4.0, 5.0}
        assert abs(counts.mean() - 1.0) < 0.01 and abs(counts.var() - 1.0) < 0.02
        # the quantised distribution itself has mean and variance exactly 1
        values = B._POISSON_COUNTS.astype(np.float64)
        assert values.size == 256 and values.mean() == 1.0 and values.var() == 1.0

    @chex.variants(with_jit=True, without_jit=True)
    def test_poisson_counts_read_each_byte_of_the_random_words_through_the_table(self):
        # An independent reading of the same bits: the words' four bytes in turn (NumPy), each
        # looked up in the 256 quantised values; for n with and without a partial last word.
        key = jax.random.key(5)
        for n in (12, 999, 1001):
            counts = self.variant(B.poisson_counts, static_argnums=(1, 2))(key, n, 7)
            words = np.asarray(jax.random.bits(key, (7, (n + 3) // 4), jnp.uint32))
            parts = [(words >> shift) & 0xFF for shift in (0, 8, 16, 24)]
            u = np.concatenate(parts, axis=1)[:, :n]
            np.testing.assert_array_equal(np.asarray(counts), B._POISSON_COUNTS[u])

    @chex.variants(with_jit=True, without_jit=True)
    def test_poisson_counts_in_int8_are_the_float32_counts(self):
        key = jax.random.key(6)
        for n in (12, 1001):
            counts = self.variant(B.poisson_counts, static_argnums=(1, 2, 3))
            as_int8 = np.asarray(counts(key, n, 9, jnp.int8))
            assert as_int8.dtype == np.int8
            np.testing.assert_array_equal(as_int8, np.asarray(counts(key, n, 9)))

    @chex.variants(with_jit=True, without_jit=True)
    def test_percentile_interval_is_numpys_nan_percentile(self):
        rng = np.random.default_rng(2)
        samples = rng.normal(size=(101, 3)).astype(np.float32)
        samples[:10, 1] = np.nan  # an empty bin in some replicates
        interval = self.variant(lambda s: B.percentile_interval(s, 0.9))(samples)
        chex.assert_shape(interval, (2, 3))
        expected = np.nanpercentile(samples.astype(np.float64), [5.0, 95.0], axis=0)
        np.testing.assert_allclose(interval, expected, rtol=1e-5, atol=1e-6)

    @chex.variants(with_jit=True, without_jit=True)
    def test_order_statistic_interval_takes_the_order_statistics_rounded_outward(self):
        rng = np.random.default_rng(3)
        samples = rng.normal(size=(99, 4)).astype(np.float32)
        samples[:9, 2] = np.nan  # 90 valid replicates in column 2
        samples[:, 3] = np.nan  # none in column 3
        interval = np.asarray(self.variant(lambda s: B.order_statistic_interval(s, 0.9))(samples))
        chex.assert_shape(interval, (2, 4))
        for j, n in ((0, 99), (1, 99), (2, 90)):
            ordered = np.sort(samples[~np.isnan(samples[:, j]), j])
            assert ordered.size == n
            lo, hi = int(np.floor(0.05 * (n - 1))), int(np.ceil(0.95 * (n - 1)))
            np.testing.assert_array_equal(interval[:, j], [ordered[lo], ordered[hi]])
        assert np.all(np.isnan(interval[:, 3]))

    @chex.variants(with_jit=True, without_jit=True)
    def test_sorted_rows_are_numpys_sort_on_the_host_and_on_the_device_path(self):
        """The CPU's host sort (rows of HOST_SORT_MIN_LENGTH or more) and the ordered-key sort
        used elsewhere give NumPy's rows, NaN last; under vmap the host sort takes the batch at
        once."""
        for n in (B.HOST_SORT_MIN_LENGTH - 23, B.HOST_SORT_MIN_LENGTH + 977):
            self._check_sorted_rows(n)

    def _check_sorted_rows(self, n):
        rng = np.random.default_rng(5)
        x = rng.normal(size=(3, 4, n)).astype(np.float32)
        x[0, 1, [5, 70]] = np.nan
        x[1, 2, :10] = 0.0
        expected = np.sort(x, axis=-1)
        np.testing.assert_array_equal(self.variant(B.sorted_rows)(x), expected)
        np.testing.assert_array_equal(self.variant(jax.vmap(B.sorted_rows))(x), expected)
        keys = jax.lax.sort(B.ordered_keys(x[0, 0]), is_stable=False)
        np.testing.assert_array_equal(B.from_ordered_keys(keys), expected[0, 0])

    @chex.variants(with_jit=True, without_jit=True)
    def test_sort_order_is_numpys_stable_argsort_on_the_host_and_on_the_device_path(self):
        """Ties keep their order and NaN goes last, by the host's NumPy sort (rows of
        HOST_SORT_MIN_LENGTH or more) and by the ``jnp.argsort`` used elsewhere; under vmap the
        host sort takes the batch at once."""
        for n in (B.HOST_SORT_MIN_LENGTH - 23, B.HOST_SORT_MIN_LENGTH + 977):
            self._check_sort_order(n)

    def _check_sort_order(self, n):
        rng = np.random.default_rng(7)
        x = np.round(rng.normal(size=(3, n)), 1).astype(np.float32)  # many ties
        x[0, [5, 70]] = np.nan
        expected = np.argsort(x, axis=-1, kind="stable")
        np.testing.assert_array_equal(self.variant(B.sort_order)(x[0]), expected[0])
        np.testing.assert_array_equal(self.variant(jax.vmap(B.sort_order))(x), expected)
        np.testing.assert_array_equal(jnp.argsort(x, axis=-1, stable=True), expected)
        # unstable: an order that sorts, NaN last, ties in any order
        order = np.asarray(self.variant(jax.vmap(lambda v: B.sort_order(v, stable=False)))(x))
        np.testing.assert_array_equal(np.sort(order, axis=-1), np.sort(expected, axis=-1))
        np.testing.assert_array_equal(np.take_along_axis(x, order, -1), np.sort(x, axis=-1))

    @chex.variants(with_jit=True, without_jit=True)
    def test_resampled_seeds_pool_drawn_seeds_and_keep_a_lone_seed_by_either_average(self):
        """A model with one seed (NaN rows for the others) gets that seed's scores back, by
        either average, binary or of classes; a model with several gets a pool of them."""
        rng = np.random.default_rng(6)
        binary = rng.uniform(0.05, 0.95, (3, 2, 40)).astype(np.float32)
        classes = rng.dirichlet(np.ones(3), (3, 2, 40)).astype(np.float32)
        for seeds in (binary, classes):
            seeds[1:, 0] = np.nan
            for average in ("score", "logit"):
                pooled = self.variant(B.resampled_seeds, static_argnums=2)(
                    jax.random.key(2), seeds, average
                )
                chex.assert_shape(pooled, seeds.shape[1:])
                np.testing.assert_allclose(pooled[0], seeds[0, 0], rtol=2e-6)
                if seeds.ndim == 4:  # a renormalised geometric mean sums to one
                    np.testing.assert_allclose(np.sum(pooled, -1), 1.0, rtol=1e-5)
                if seeds.ndim == 3 or average == "score":  # a mean lies between its terms
                    low, high = seeds[:, 1].min(0), seeds[:, 1].max(0)
                    assert np.all((low - 1e-6 <= pooled[1]) & (pooled[1] <= high + 1e-6))

    @chex.variants(with_jit=True, without_jit=True)
    def test_ordered_keys_keep_the_order_of_floats_and_invert(self):
        x = jnp.array([-np.inf, -2.5, -1e-30, -0.0, 0.0, 1e-30, 3.0, np.inf], jnp.float32)
        keys = self.variant(B.ordered_keys)(x)
        chex.assert_type(keys, jnp.int32)
        assert np.all(np.diff(np.asarray(keys)) >= 0)
        np.testing.assert_array_equal(self.variant(B.from_ordered_keys)(keys), x)


def test_check_bootstrap_names_the_option_at_fault():
    B.check_bootstrap(0, None, 0.95)  # no replicates need no key
    with pytest.raises(ValueError, match="key"):
        B.check_bootstrap(10, None, 0.95)
    with pytest.raises(ValueError, match="n_bootstrap"):
        B.check_bootstrap(-1, jax.random.key(0), 0.95)
    with pytest.raises(ValueError, match="confidence"):
        B.check_bootstrap(10, jax.random.key(0), 1.0)


BAD = {
    "resampling": (
        lambda: R.paired_bootstrap_weights(jax.random.key(0), 5, 2, "jackknife"),
        "resampling",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_raises_value_error_naming_the_argument(name):
    call, match = BAD[name]
    with pytest.raises(ValueError, match=match):
        call()


#: Programs calling host functions (NumPy's sorts on the CPU) still running when a script ends.
STILL_RUNNING_AT_EXIT = """
import jax
from iml import _bootstrap as B
step = jax.jit(lambda v: B.sorted_rows(v + 1.0) * 2.0)
x = jax.random.uniform(jax.random.key(0), (64, 200_000))
for _ in range(6):
    x = step(x)
print("dispatched", flush=True)
"""


@pytest.mark.parametrize("short", [True, False])
def test_only_rows_of_the_host_sorts_length_are_sorted_by_a_host_function(short):
    # Short rows, whose sort costs little anywhere, are sorted by XLA; long ones on the CPU by
    # the host function the program names (no Python callback, which no cache keeps).
    n = B.HOST_SORT_MIN_LENGTH - 1 if short else B.HOST_SORT_MIN_LENGTH
    x = jnp.zeros((4, n), jnp.float32)
    names = (B.SORTED_ROWS, B.STABLE_ORDER, B.ORDER)
    for f, name in zip((B.sorted_rows, B.sort_order, lambda v: B.sort_order(v, stable=False)),
                       names, strict=True):  # fmt: skip
        text = jax.jit(f).lower(x).as_text()
        assert "callback" not in text
        assert (f"@{name}" in text) is (jax.default_backend() == "cpu" and not short)


@pytest.mark.slow
def test_a_script_that_ends_while_host_functions_run_exits_cleanly():
    """Without the wait registered at exit, the host functions that start once Python finalizes
    abort the process (SIGABRT) after the script's work is done."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", STILL_RUNNING_AT_EXIT], cwd=root,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert (done.returncode, done.stdout) == (0, "dispatched\n"), done.stderr[-2000:]


def test_a_host_functions_rows_split_over_threads_give_the_values_of_one_call():
    from iml._bootstrap import THREAD_MIN_ELEMENTS, by_rows

    rng = np.random.default_rng(11)
    calls = []

    def spy(fn):
        def run(a):
            calls.append(a.shape)
            return fn(a)

        return run

    a = rng.normal(size=(3, 5, THREAD_MIN_ELEMENTS // 8)).astype(np.float32)
    a[0, 1, :50] = a[0, 1, 50:100]  # ties, for the stable order
    for fn in (np.sort, lambda r: np.argsort(r, axis=-1, kind="stable"),
               lambda r: np.sort(r, axis=-1)[..., [0, 7, 99]]):  # fmt: skip
        calls.clear()
        got = by_rows(spy(fn), a)
        np.testing.assert_array_equal(got, fn(a))
        assert got.shape == fn(a).shape
        assert sum(shape[0] for shape in calls) == 15  # every row once
        assert len(calls) == min(len(os.sched_getaffinity(0)), 8, 15)
    # one row, or a small batch: one call on the array as it is
    for small in (a[0, 0], a[:, :, :10]):
        calls.clear()
        np.testing.assert_array_equal(by_rows(spy(np.sort), small), np.sort(small))
        assert calls == [small.shape]


def test_the_stable_order_of_float32_rows_is_numpys_stable_argsort():
    from iml._bootstrap import stable_order

    rng = np.random.default_rng(12)
    a = rng.normal(size=(4, 3000)).astype(np.float32)
    a[0, ::7] = a[0, 3]  # ties
    a[1, :40] = 0.0
    a[1, 20:60:2] = -0.0  # equal to +0.0: kept in their order
    a[2, ::11] = np.nan
    a[2, 5::13] = -np.nan
    a[3, :30] = np.inf
    a[3, 30:60] = -np.inf
    a[3, 60:90] = np.float32(1e-45)  # subnormal
    a[3, 90:120] = -np.float32(1e-45)
    got = stable_order(a)
    np.testing.assert_array_equal(got, np.argsort(a, axis=-1, kind="stable"))
    assert got.dtype == np.int64
    b = a.astype(np.float64)  # other dtypes: NumPy's stable sort itself
    np.testing.assert_array_equal(stable_order(b), np.argsort(b, axis=-1, kind="stable"))


# JAX warns at any fork; the child here runs NumPy alone
@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")
def test_a_forked_child_splits_rows_over_threads_of_its_own():
    from iml._bootstrap import THREAD_MIN_ELEMENTS, by_rows

    a = np.random.default_rng(13).normal(size=(4, THREAD_MIN_ELEMENTS)).astype(np.float32)
    by_rows(np.sort, a)  # the parent's pool exists before the fork
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: sort with a pool of its own, report, and leave at once
        ok = np.array_equal(by_rows(np.sort, a), np.sort(a))
        os.write(write, b"1" if ok else b"0")
        os._exit(0)
    os.close(write)
    try:
        # a pool without threads would never answer
        ready, _, _ = select.select([read], [], [], 60)
        got = os.read(read, 1) if ready else b"no answer"
    finally:
        os.close(read)
        if not ready:
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    assert got == b"1"
