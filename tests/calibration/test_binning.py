"""Tests of iml.calibration.binning: bin edges (quantile or uniform), the bin of every score
and the per-bin sums."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
from absl.testing import parameterized
from sklearn.calibration import calibration_curve as sk_calibration_curve

from iml import calibration as cal
from iml.calibration import binning


class Binning(chex.TestCase):
    """Edges, bins and per-bin sums, jitted and not: ties share a bin, duplicate edges leave
    empty bins, and edge scores fall in the lower bin."""

    @chex.variants(with_jit=True, without_jit=True)
    def test_ties_share_a_bin_and_duplicate_edges_give_empty_bins(self):
        calibration_curve = self.variant(lambda s, y: cal.calibration_curve(s, y, n_bins=10))
        # 60% of the scores tie at 0 (exactly), 10% at 1: several deciles collapse onto one value.
        scores = np.concatenate([np.zeros(60), np.linspace(0.2, 0.8, 30), np.ones(10)]).astype(
            np.float32
        )
        labels = np.concatenate([np.zeros(55), np.ones(5), np.zeros(15), np.ones(15), np.ones(10)])
        curve = calibration_curve(scores, labels)
        count = np.asarray(curve.count)
        # All 60 zeros share bin 0; the bins between the duplicate edges at 0 are empty with NaN
        # means.
        assert count[0] == 60 and np.all(count[1:5] == 0)
        assert np.all(np.isnan(np.asarray(curve.mean_score)[1:5]))
        assert np.all(np.isnan(np.asarray(curve.event_rate)[1:5]))
        np.testing.assert_allclose(curve.event_rate[0], 5 / 60, rtol=1e-6)
        # Scores exactly 1 land in the last bin, together with nothing above them.
        bins = np.asarray(self.variant(cal.assign_bins)(scores, curve.edges))
        assert np.all(bins[scores == 1.0] == 9) and np.all(bins[scores == 0.0] == 0)
        assert count.sum() == 100
        prob_true, prob_pred = sk_calibration_curve(labels, scores, n_bins=10, strategy="quantile")
        np.testing.assert_allclose(np.asarray(curve.event_rate)[count > 0], prob_true, rtol=1e-6)
        np.testing.assert_allclose(np.asarray(curve.mean_score)[count > 0], prob_pred, rtol=1e-6)

    @chex.variants(with_jit=True, without_jit=True)
    def test_uniform_bins_keep_edge_scores_in_lower_bin_and_empty_bins_nan(self):
        calibration_curve = self.variant(
            lambda s, y: cal.calibration_curve(s, y, n_bins=4, strategy="uniform")
        )
        scores = np.array([0.0, 0.05, 0.1, 0.15, 0.95, 1.0], np.float32)
        labels = np.array([0, 0, 1, 0, 1, 1])
        curve = calibration_curve(scores, labels)
        # Bins (0, .25], (.25, .5], (.5, .75], (.75, 1], the first holding 0 too.
        np.testing.assert_array_equal(curve.count, [4, 0, 0, 2])
        np.testing.assert_allclose(curve.event_rate[0], 0.25)
        np.testing.assert_allclose(curve.mean_score[3], 0.975)
        assert np.isnan(curve.event_rate[1]) and np.isnan(curve.mean_score[2])

    @chex.variants(with_jit=True, without_jit=True)
    @parameterized.parameters("quantile", "uniform")
    def test_edges_are_numpys_percentiles_or_equal_widths_and_bins_are_right_closed(self, strategy):
        rng = np.random.default_rng(0)
        scores = rng.beta(2.0, 5.0, 501).astype(np.float32)
        edges = self.variant(lambda s: cal.bin_edges(s, 10, strategy))(scores)
        chex.assert_shape(edges, (11,))
        chex.assert_type(edges, jnp.float32)
        expected = (
            np.percentile(scores.astype(np.float64), np.linspace(0, 100, 11))
            if strategy == "quantile"
            else np.linspace(0.0, 1.0, 11)
        )
        np.testing.assert_allclose(edges, expected, rtol=1e-5, atol=1e-7)
        bins = self.variant(cal.assign_bins)(scores, edges)
        chex.assert_shape(bins, scores.shape)
        chex.assert_type(bins, jnp.int32)
        # bin b holds (e_b, e_{b+1}], the first bin its lower edge too, as sklearn's searchsorted
        np.testing.assert_array_equal(
            bins, np.searchsorted(np.asarray(edges)[1:-1], scores, side="left")
        )
        e = np.asarray(edges)
        inside = (scores > e[bins]) | (bins == 0)
        assert np.all(inside & (scores <= e[bins + 1]))

    @chex.variants(with_jit=True, without_jit=True)
    def test_quantile_edges_of_the_host_sort_are_jnp_quantile_to_the_last_bit(self):
        """The edges from NumPy's sort (the CPU's path) equal ``jnp.quantile``'s linear
        interpolation bit for bit, with ties, one row at a time, vmapped (over one or two
        axes) and in a batch of rows; a row holding NaN gets NaN edges."""
        rng = np.random.default_rng(3)
        scores = rng.beta(0.5, 3.0, (4, 1237)).astype(np.float32)
        scores[1, :400] = 0.25  # many ties
        scores[2] = np.round(scores[2], 2)
        for n_bins in (3, 10, 15):
            q = jnp.linspace(0.0, 1.0, n_bins + 1, dtype=jnp.float32)
            expected = np.stack([np.asarray(jnp.quantile(row, q, method="linear"))
                                 for row in scores])  # fmt: skip
            one = self.variant(lambda s, n=n_bins: cal.bin_edges(s, n, "quantile"))
            np.testing.assert_array_equal(one(scores[0]), expected[0])
            np.testing.assert_array_equal(jax.vmap(one)(scores), expected)
            nested = jax.vmap(jax.vmap(one))(scores.reshape(2, 2, -1))  # two batch axes
            np.testing.assert_array_equal(nested, expected.reshape(2, 2, -1))
            batch = self.variant(lambda s, n=n_bins: binning.quantile_edges(s, n))(scores)
            np.testing.assert_array_equal(batch, expected)
        scores[3, 7] = np.nan
        batch = np.asarray(binning.quantile_edges(scores, 10))
        assert np.isnan(batch[3]).all() and not np.isnan(batch[:3]).any()
        # Many rows of few distinct values (a histogram's recalibrated scores): an edge one
        # float apart would move a whole block of ties between bins.
        steps = np.sort(rng.uniform(size=(200, 10)).astype(np.float32), axis=1)
        tied = np.take_along_axis(steps, rng.integers(0, 10, (200, 4999)), axis=1)
        q = jnp.linspace(0.0, 1.0, 11, dtype=jnp.float32)
        expected = np.stack([np.asarray(jnp.quantile(row, q, method="linear")) for row in tied])
        mapped = jax.lax.map(lambda r: cal.bin_edges(r, 10, "quantile"), tied, batch_size=64)
        np.testing.assert_array_equal(mapped, expected)
        np.testing.assert_array_equal(binning.quantile_edges(tied, 10), expected)
        # rows shorter than the host sort's (XLA sorts them everywhere): the same edges
        short = scores[:3, :301]
        expected = np.stack([np.asarray(jnp.quantile(row, q, method="linear")) for row in short])
        np.testing.assert_array_equal(binning.quantile_edges(short, 10), expected)

    @chex.variants(with_jit=True, without_jit=True)
    def test_bin_sums_are_the_exact_sums_to_float32_rounding_in_any_length(self):
        """The blocked segment sums equal the float64 sums per bin (and the one-hot product
        they replace) for lengths that do and do not fill the blocks, and a vmapped batch of
        rows gives each row's own sums."""
        rng = np.random.default_rng(4)
        for n in (1, 63, 64, 1000, 48_843):
            values = rng.normal(size=(3, n)).astype(np.float32)
            bins = rng.integers(0, 7, n).astype(np.int32)
            exact = np.stack([np.bincount(bins, v.astype(np.float64), minlength=7)
                              for v in values])  # fmt: skip
            sums = self.variant(lambda v, b: binning.bin_sums(v, b, 7))(values, bins)
            chex.assert_shape(sums, (3, 7))
            np.testing.assert_allclose(sums, exact, rtol=1e-5, atol=1e-5 * np.sqrt(n))
            product = np.asarray(values @ jax.nn.one_hot(bins, 7), np.float64)
            np.testing.assert_allclose(sums, product, rtol=1e-4, atol=1e-4 * np.sqrt(n))
        batch = jax.vmap(lambda v, b: binning.bin_sums(v, b, 7))(
            np.stack([values, 2 * values]), np.stack([bins, 6 - bins])
        )
        np.testing.assert_allclose(batch[0], sums, rtol=1e-6)
        flipped = np.stack([np.bincount(6 - bins, 2 * v.astype(np.float64), minlength=7)
                            for v in values])  # fmt: skip
        np.testing.assert_allclose(batch[1], flipped, rtol=1e-5, atol=1e-3)

    @chex.variants(with_jit=True, without_jit=True)
    def test_bins_of_many_edges_are_numpys_searchsorted_too(self):
        """Past ``_COMPARE_ALL_EDGES`` edges a score's bin is found by binary search rather
        than by comparing it with every edge; both are NumPy's ``searchsorted``, ties and edge
        scores included."""
        rng = np.random.default_rng(8)
        scores = rng.uniform(size=2000).astype(np.float32)
        for n_edges in (11, binning._COMPARE_ALL_EDGES + 1, binning._COMPARE_ALL_EDGES + 2):
            edges = np.sort(rng.uniform(size=n_edges)).astype(np.float32)
            edges[3:6] = edges[3]  # duplicate edges
            probe = np.concatenate([scores, edges])  # scores on the edges
            bins = self.variant(cal.assign_bins)(probe, edges)
            np.testing.assert_array_equal(bins, np.searchsorted(edges[1:-1], probe, side="left"))

    @chex.variants(with_jit=True, without_jit=True)
    def test_binned_statistics_are_weighted_sums_per_bin_and_a_nan_spoils_its_own_bin(self):
        statistics = self.variant(lambda s, y, b, w: cal.binned_statistics(s, y, b, 3, w))
        scores = np.array([0.1, 0.2, 0.5, 0.6, 0.9], np.float32)
        labels = np.array([0, 1, 1, 0, 1])
        bins = np.array([0, 0, 1, 1, 2])
        weights = np.array([1.0, 2.0, 0.5, 1.0, 3.0], np.float32)
        stats = statistics(scores, labels, bins, weights)
        chex.assert_trees_all_close(
            stats,
            cal.BinnedStatistics(
                count=np.array([3.0, 1.5, 3.0]),
                score_sum=np.array([0.1 + 0.4, 0.25 + 0.6, 2.7]),
                label_sum=np.array([2.0, 0.5, 3.0]),
                weight_sq_sum=np.array([5.0, 1.25, 9.0]),
            ),
            rtol=1e-6,
        )
        # a batch of weight vectors (bootstrap replicates) gives a batch of sums
        batch = statistics(scores, labels, bins, np.stack([weights, np.ones(5, np.float32)]))
        chex.assert_shape(batch, (2, 3))  # every field
        chex.assert_trees_all_close(batch.count[1], jnp.array([2.0, 2.0, 1.0]))
        # a NaN score makes its own bin's sums NaN and leaves the other bins
        with_nan = np.where(np.arange(5) == 2, np.nan, scores).astype(np.float32)
        spoiled = statistics(with_nan, labels, bins, weights)
        assert np.isnan(spoiled.score_sum[1]) and np.isnan(spoiled.label_sum[1])
        np.testing.assert_allclose(
            np.asarray(spoiled.score_sum)[[0, 2]], np.asarray(stats.score_sum)[[0, 2]], rtol=1e-6
        )
        np.testing.assert_allclose(spoiled.count, stats.count, rtol=1e-6)
