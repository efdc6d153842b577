"""What the tests of iml.plots (tests/plots/) read off a drawn figure, found by gid, and the
simulated scores they draw."""

import jax
import numpy as np

BETAS = (0.5, 0.9, 0.99)
N = 2000


def simulated_scores():
    """Scores of the same signals scored under three class weights (one shared label vector)."""
    from iml.sbr import simulate_gaussian_scores

    scores = {}
    for beta in BETAS:
        s, y, _, _ = simulate_gaussian_scores(jax.random.key(0), N, prevalence=0.1, beta=beta)
        scores[beta] = np.asarray(s)
    return scores, np.asarray(y)


def lines_by_gid(ax, prefix):
    return [line for line in ax.get_lines() if (line.get_gid() or "").startswith(prefix)]


def diagonal_line(ax):
    (line,) = lines_by_gid(ax, "diagonal")
    return line


def line_by_gid(ax, gid):
    """The one line with exactly this gid."""
    (line,) = [line for line in ax.get_lines() if line.get_gid() == gid]
    return line


def collection_by_gid(ax, gid):
    (coll,) = [c for c in ax.collections if c.get_gid() == gid]
    return coll


def floor_of(ax):
    (line,) = [line for line in ax.get_lines() if line.get_gid() == "floor"]
    return float(line.get_ydata()[0])
