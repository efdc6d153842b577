"""Benchmark: the logistic-regression beta sweep against a loop of scikit-learn fits, at equal
work.

Work: the fits of ``iml sweep`` on UCI Adult (48,842 rows, 108 encoded features): 64 betas (the
default logit-spaced grid from 0.01 to 0.99) x 10 rotations of the nested cross-validation = 640
distinct models, each fitted on its rotation's training rows with a ridge ``l2 = 1e-4`` and
scored on its test rows, by the exact solver (``iml.training.train_tabular``, as
``run_sweep`` calls it, on the features as they are). A convex model's optimum depends on no
seed, so the sweep fits each (beta, rotation) once whatever ``--seeds`` asks (it says so in a
warning), and the baseline fits each once too.

Baseline: what a researcher writes today, one ``sklearn.linear_model.LogisticRegression`` fit
per model (``class_weight={0: 1 - beta, 1: beta}``, lbfgs with its default tolerance, the same
ridge penalty, on the same training rows of the same rotations, then its test rows'
probabilities), run over all cores with joblib. The full loop would take a minute, so a slice of
models (``--baseline-models``, spread over the grid) is timed and scaled to the 640 (stated in the
JSON).

Our time is the fits and the out-of-fold logits, as the sweep makes them; the sweep's table of
metrics, which the baseline does not make, is timed apart, once (``sweep_s``, the whole
``run_sweep``). Both sides run in ``--runs`` interleaved runs
(:mod:`experiments.benchmarks._harness`) after a cold call of each; the rounds' record is
written to ``--out`` as soon as they end (marked ``partial``) and replaced by the whole record at
the end, so a run stopped at a time limit keeps them. Ours' cold call makes or loads JAX's
programs (``compile_s``, the part of it spent so; the warm runs' own are in
``warm_compile_s``), the baseline's starts joblib's workers. JAX's programs are kept in a
persistent compilation cache (``--cache-dir``); ``compile_cache`` says whether it held them
before this run, and how many the cold call loaded or made. The achieved arithmetic rate of the
fits (``achieved_gflops``, from the counted matrix products: the gradients' and the Hessians',
over our median warm run) is reported beside that of one large matrix product on the same
machine (``gemm_gflops``), which each round times too, after both sides: each round's two rates
and their ratio (``share_of_gemm``), with medians and ranges, so that a machine whose speed
drifts during a run shifts both alike.

Equal quality is checked on the slice: each sliced model's fitted objective (the mean
beta-weighted log loss on its training rows plus the ridge) against ours (relative difference),
and at each sliced beta the loss-corrected ECE of the baseline's out-of-fold scores (all ten
rotations) against the sweep's. The baseline's default tolerance stops lbfgs short of the optimum
where the weighted loss is flat, so the sliced models are also refitted, untimed, by
scikit-learn's Newton-Cholesky solver at a tolerance of 1e-10: against that reference optimum,
our objectives and our fitted log-likelihoods (the weighted log loss alone) are compared too.

**The default sweep** (``--default``): what ``iml sweep --dataset adult`` fits by default
(``train.l2 = "auto"``): every (beta, rotation) at each of the 7 penalties of the ridge's grid
(``TrainConfig.l2_grid``, on features standardised on the rotation's training rows), each keeping
the penalty that ``TrainConfig.l2_choice`` picks from its fits' losses of their own (the
beta-weighted log loss) on the rotation's validation rows. The baseline does the same per member
with scikit-learn: a ``StandardScaler`` on the training rows, then one ``LogisticRegression``
(lbfgs, default tolerance) warm-started along the grid from the largest penalty down, as
``LogisticRegressionCV`` runs its path of ``Cs``, each level scored on the validation rows and the
level kept by the same rule; a slice of members is timed and scaled. Equal quality, on the slice,
against the baseline and against the same paths solved by scikit-learn's Newton-Cholesky solver at a
tolerance of 1e-10 (untimed): the share of equal chosen penalties, the validation losses they were
chosen by, the out-of-fold (test rows') weighted log losses of the chosen fits (per member, the
largest difference also among the members whose penalties are equal alone, and pooled over the
rotations of each sliced beta) and the corrected ECEs. Beside the training, once:
the whole ``run_sweep`` (``sweep_s``: training, the table and its bootstrap intervals), the files
and figures ``iml sweep`` writes (``outputs_s``), the share of the training time these add
(``report_share``), and on the whole table with 64 betas the ``iml sweep`` command itself in a fresh
process (``command_s``). One more warm call of the training times each phase of the exact solver
(the path of betas at the largest penalty, each lower penalty, the chosen penalty's fit carried on
to the tolerance) and gives its arithmetic rate beside the matrix product's (``phases``).

Run from the repository root, with ``adult.data``, ``adult.test`` and ``adult.names`` from the
UCI Machine Learning Repository (https://archive.ics.uci.edu/dataset/2/adult) in ``ADULT_DIR``::

    python -m experiments.benchmarks.sweep_train --data-dir ADULT_DIR --seeds 1
    python -m experiments.benchmarks.sweep_train --data-dir ADULT_DIR --seeds 1 --default
    python -m experiments.benchmarks.sweep_train --data-dir ADULT_DIR --quick

The last stdout line is one JSON object; ``ratio`` is the median over the runs of the baseline's
time for all models over ours (higher is better), ``ratio_range`` their range, with
``peak_rss_gb`` the process's peak resident memory.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

from experiments.benchmarks._harness import add_runs_argument, check_runs, say
from iml.training.host import host_memory_record, keep_step_memory
from iml.training.tabular import NEAR_LOWEST

# The gradient tolerance of the exact reference fits of the quality check (scikit-learn's own
# default is 1e-4).
REFERENCE_TOL = 1e-10


def _write(out: str, record: dict) -> None:
    """``record`` as ``out``'s JSON, written atomically."""
    from iml.pipeline import atomic_write_bytes

    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, json.dumps(record, indent=2).encode())


def _write_rounds(out: str, benchmark: str, timing: dict, compile_s: float) -> None:
    """The rounds' headline as ``out``'s record as soon as they end, marked ``partial``: a run
    stopped later (at a time limit, say) keeps its timed rounds; the whole record replaces it."""
    from experiments.benchmarks._harness import headline

    partial = "the timed rounds only: the run stopped before its quality checks and the rest"
    _write(out, {"benchmark": benchmark, "partial": partial,
                 **headline(timing, compile_s=compile_s)})  # fmt: skip
    say(f"the rounds' record written to {out} (partial until the run ends)")


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--data-dir", required=True, help="folder with adult.data/.test/.names")
    p.add_argument("--quick", action="store_true", help="8 betas on 8,000 rows")
    p.add_argument(
        "--default",
        action="store_true",
        help="the default sweep's work: every fit at every penalty of the ridge's grid, each "
        "member's penalty chosen on its validation folds (train.l2 = 'auto'); --l2 is unused",
    )
    p.add_argument(
        "--no-command",
        action="store_true",
        help="with --default, leave out the timing of the whole `iml sweep` command",
    )
    p.add_argument("--n-betas", type=int, default=None, help="default 64 (8 with --quick)")
    p.add_argument(
        "--seeds", type=int, default=1, help="seeds the sweep is asked for (the fits: one each)"
    )
    p.add_argument("--rows", type=int, default=None, help="rows used (default all)")
    p.add_argument(
        "--host-memory",
        choices=("keep", "system"),
        default="keep",
        help="'keep' (default, as `iml sweep`): iml.training.host.keep_step_memory with one heap "
        "for every thread, so that each run of the solver's programs reuses the last one's "
        "memory; 'system': glibc's and JAX's defaults",
    )
    p.add_argument("--baseline-models", type=int, default=None, help="default 40 (10 quick)")
    p.add_argument("--jobs", type=int, default=-1, help="joblib workers (default all cores)")
    p.add_argument(
        "--l2",
        type=float,
        default=1e-4,
        help="ridge penalty of both (default 1e-4: Adult's rare one-hot categories make the "
        "unpenalised optimum lie at infinity, where no two solvers agree)",
    )
    p.add_argument(
        "--cache-dir",
        default="runs/jax_cache",
        help="JAX's persistent compilation cache (default runs/jax_cache)",
    )
    add_runs_argument(p)
    p.add_argument("--out", default="runs/benchmarks/sweep_train.json", help="the JSON record")
    args = p.parse_args(argv)
    check_runs(p, args.runs)
    return args


def _baseline_fit(x, y, train, test, beta, l2, exact=False):
    """One researcher's fit and its test rows' scores; returns (coef, intercept, scores, s).

    scikit-learn minimises ``C sum_i w_i l_i + ||w||^2 / 2``; over ``C n`` that is the sweep's
    mean weighted loss plus ``l2 / 2 ||w||^2`` with ``C = 1 / (l2 n)``. ``exact`` asks for
    scikit-learn's Newton-Cholesky solver at a tolerance of 1e-10 instead of lbfgs at its
    default: the reference optimum of the quality check, not timed.
    """
    from sklearn.linear_model import LogisticRegression

    start = time.perf_counter()
    C = 1.0 / (l2 * len(train)) if l2 > 0 else np.inf
    solver = {"solver": "newton-cholesky", "tol": REFERENCE_TOL} if exact else {}
    clf = LogisticRegression(C=C, class_weight={0: 1.0 - beta, 1: beta}, max_iter=10_000, **solver)
    clf.fit(x[train], y[train])
    scores = clf.predict_proba(x[test])[:, 1]
    return clf.coef_[0], float(clf.intercept_[0]), scores, time.perf_counter() - start


def _objective(x, y, train, beta, coef, intercept, l2):
    """Mean beta-weighted log loss over the training rows plus the ridge: the sweep's objective.

    With ``l2 = 0``, the fitted (weighted, negative, per row) log-likelihood alone.
    """
    coef = np.asarray(coef, np.float64)
    z = x[train].astype(np.float64) @ coef + float(intercept)
    t = y[train]
    weight = np.where(t == 1, beta, 1.0 - beta)
    return float(np.mean(weight * (np.logaddexp(0.0, z) - t * z)) + 0.5 * l2 * coef @ coef)


# Products a call of the reference matrix multiply makes (about half a second on 2 cores).
GEMM_REPEATS = 8


def _gemm(x: np.ndarray, members: int) -> tuple[Callable[[], None], float]:
    """A call of :data:`GEMM_REPEATS` products ``[members, N] @ [N, d]`` in float32 on this
    machine (the gradients' kind of matrix product, the fits' ceiling), timed in the same rounds
    as both sides, and the floating-point operations of one call."""
    import jax
    import jax.numpy as jnp

    a = jnp.ones((members, x.shape[0]), jnp.float32)
    b = jnp.asarray(x, jnp.float32)
    product = jax.jit(lambda a, b: jnp.dot(a, b, precision=jax.lax.Precision.HIGHEST))

    def call() -> None:
        for _ in range(GEMM_REPEATS):
            jax.block_until_ready(product(a, b))

    return call, GEMM_REPEATS * 2.0 * members * x.shape[0] * x.shape[1]


def _rates(timing: dict, flops: float, gemm_flops: float) -> dict:
    """Each round's arithmetic rate of ours (``flops`` over its seconds) and of the reference
    product timed in the same round (``gemm``), and their ratio (``share_of_gemm``): medians
    with their ranges and the rounds'."""
    ours = [flops / s / 1e9 for s in timing["warm_s"]["ours"]]
    gemm = [gemm_flops / s / 1e9 for s in timing["warm_s"]["gemm"]]
    share = [a / b for a, b in zip(ours, gemm, strict=True)]

    def summary(values: list[float], digits: int) -> dict:
        return {"median": round(statistics.median(values), digits),
                "range": [round(min(values), digits), round(max(values), digits)],
                "rounds": [round(v, digits) for v in values]}  # fmt: skip

    return {"achieved_gflops_rounds": summary(ours, 3), "gemm_gflops_rounds": summary(gemm, 3),
            "share_of_gemm": summary(share, 3)}  # fmt: skip


def _phase_rates(train_once: Callable[[], object], levels: np.ndarray, gemm: float) -> list[dict]:
    """One more warm call of ``train_once`` (the default path's training), each of the exact
    solver's batch calls (:meth:`iml.training.exact.Members.solve`) timed, and its arithmetic
    rate from the matrix products it counts: three ``[N, d + 1]`` products a member's Newton
    step and one row of its design's table of pair products a Hessian, and an add a row for
    each pair of categories its cells sum (as ``achieved_gflops``
    counts them, without the members' first gradients and their validation and test logits).
    The calls are grouped into the solver's phases in the order it makes them: the path of betas
    at the largest penalty, each lower penalty of ``levels``, and the chosen penalty's fit
    carried on to the tolerance. Each phase's rate is given as a share of ``gemm``, the
    measured rate of one large matrix product (``gemm_gflops``)."""
    from iml.training import exact as E

    calls: list[tuple[str, float, float]] = []
    inside_path = [False]
    solve, solve_path = E.Members.solve, E._solve_path

    def timed_solve(self, S, P, theta, H, renew_first):
        start = time.perf_counter()
        solved = solve(self, S, P, theta, H, renew_first)
        seconds = time.perf_counter() - start
        n, d1 = S.shape[-1], theta.shape[-1]
        pairs = self.design.pairs
        # a table's column is a multiply and an add a row, a pair of categories' cells an add
        columns = d1 * (d1 + 1) // 2 if pairs is None else pairs.products.shape[0]
        columns += 0 if pairs is None else pairs.cells.shape[0] / 2
        steps, hessians = float(np.sum(solved.iterations)), float(np.sum(solved.hessians))
        flops = 2.0 * n * (3 * d1 * steps + columns * hessians)
        calls.append(("path" if inside_path[0] else "level", seconds, flops))
        return solved

    def timed_path(*args, **kwargs):
        inside_path[0] = True
        try:
            return solve_path(*args, **kwargs)
        finally:
            inside_path[0] = False

    E.Members.solve, E._solve_path = timed_solve, timed_path
    try:
        train_once()
    finally:
        E.Members.solve, E._solve_path = solve, solve_path
    ordered = sorted(np.asarray(levels, np.float64), reverse=True)
    names = [f"the path of betas at l2 = {ordered[0]:g}"]
    names += [f"l2 = {level:g} from the level above" for level in ordered[1:]]
    names += ["the chosen penalty's fit carried on to the tolerance"]
    groups = [[c for c in calls if c[0] == "path"]] + [[c] for c in calls if c[0] == "level"]
    if len(groups) != len(names):
        return [{"note": f"{len(groups)} phases found where {len(names)} were expected"}]
    phases = []
    for name, group in zip(names, groups, strict=True):
        seconds, flops = sum(c[1] for c in group), sum(c[2] for c in group)
        rate = flops / seconds / 1e9
        phases.append({"phase": name, "calls": len(group), "seconds": round(seconds, 3),
                       "gflops": round(rate, 1),
                       "share_of_gemm": round(rate / gemm, 3)})  # fmt: skip
    return phases


def main(argv: list[str] | None = None) -> dict:
    """Run the benchmark with JAX's persistent compilation cache in ``--cache-dir``, then put
    the process's cache settings back as they were (a caller's later programs neither read nor
    write that folder)."""
    args = _parse(argv)
    import jax
    from jax._src import compilation_cache

    # before JAX's first computation, which fixes its CPU dispatch mode
    if args.host_memory == "keep":
        keep_step_memory(shared_heap=True)  # as `iml sweep` on a table

    before = (jax.config.jax_compilation_cache_dir,
              jax.config.jax_persistent_cache_min_compile_time_secs)  # fmt: skip
    Path(args.cache_dir).mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(Path(args.cache_dir).resolve()))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    compilation_cache.reset_cache()
    try:
        return _run_default(args) if args.default else _run(args)
    finally:
        jax.config.update("jax_compilation_cache_dir", before[0])
        jax.config.update("jax_persistent_cache_min_compile_time_secs", before[1])
        compilation_cache.reset_cache()


def _setup(args: argparse.Namespace, train) -> tuple:
    """Both benchmarks' work: Adult's rows (encoded as ``iml sweep --dataset adult``; a random
    ``--rows`` of them where asked), the grid of betas, the sweep's plan under ``train`` with
    the warnings it gave, and the slice of members the baseline fits: whole betas spread over the
    grid (all their rotations, for an ECE) first.

    Returns:
      ``(x, y, whole, betas, plan, warnings, picked, jobs)``: ``whole`` when every row is used,
      ``picked`` the sliced betas' indices, ``jobs`` their ``(beta index, rotation)`` pairs.
    """
    from iml import beta_grid
    from iml.data.tabular import read_adult
    from iml.pipeline.sweep import plan_sweep

    n_betas = args.n_betas or (8 if args.quick else 64)
    n_baseline = args.baseline_models or (10 if args.quick else 40)
    rows = args.rows or (8000 if args.quick else None)
    table, _ = read_adult(args.data_dir)
    x = np.asarray(table.features, np.float32)
    y = np.asarray(table.labels, np.int32)
    whole = rows is None or rows >= len(y)
    if not whole:
        keep = np.random.default_rng(0).permutation(len(y))[:rows]
        x, y = x[keep], y[keep]
    betas = beta_grid(n_betas)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        plan = plan_sweep(x, y, None, betas, seeds=args.seeds, train=train)
    n_rotations = len(plan.splits)
    picked = np.unique(np.linspace(0, n_betas - 1, max(1, n_baseline // n_rotations)).astype(int))
    jobs = [(b, r) for b in picked for r in range(n_rotations)][:n_baseline]
    return x, y, whole, betas, plan, said, picked, jobs


def _run(args: argparse.Namespace) -> dict:

    cached_before = sum(1 for _ in Path(args.cache_dir).iterdir())
    from joblib import Parallel, delayed

    from experiments.benchmarks._harness import (
        CacheHits,
        CompileSeconds,
        PeakRSS,
        headline,
        interleaved,
    )
    from iml.calibration import beta_key, score_metrics
    from iml.pipeline.sweep import run_sweep
    from iml.scoring import loss_corrected_score
    from iml.training import TABULAR_DEFAULTS, train_tabular
    from iml.training.exact_design import Design
    from iml.training.tabular import out_of_fold_logits

    # A fixed ridge on the features as they are: the baseline's problem, exactly.
    train = dataclasses.replace(TABULAR_DEFAULTS, l2=args.l2, standardize=False)
    x, y, _, betas, plan, said, picked, jobs = _setup(args, train)
    n_betas, splits = len(betas), plan.splits
    n_models = n_betas * len(splits)  # distinct fits: one per (beta, rotation)
    done: dict = {"compile_s": [], "cache": []}

    def ours() -> None:
        with CompileSeconds() as compiling, CacheHits() as cache:
            fit = train_tabular(plan.model, x, y, splits, plan.losses, plan.seeds, plan.config)
            done["oof"] = out_of_fold_logits(fit.test_logits, splits, len(y))
        done["fit"] = fit
        done["compile_s"].append(compiling.seconds)
        done["cache"].append({"hits": cache.hits, "misses": cache.misses})

    def baseline() -> None:
        done["fits"] = Parallel(n_jobs=args.jobs)(
            delayed(_baseline_fit)(x, y, splits[r].train, splits[r].test, float(betas[b]), args.l2)
            for b, r in jobs
        )

    gemm, gemm_flops = _gemm(x, 640)
    with PeakRSS() as peak:
        timing = interleaved(
            {"ours": ours, "baseline": baseline, "gemm": gemm},
            args.runs,
            scale={"baseline": n_models / len(jobs)},
        )
    _write_rounds(args.out, "sweep_train", timing, done["compile_s"][0])
    fit, fits = done["fit"], done["fits"]
    assert np.isfinite(done["oof"]).all()
    ours_s = statistics.median(timing["warm_s"]["ours"])
    with CompileSeconds() as sweep_compiling:
        start = time.perf_counter()
        result = run_sweep(x, y, None, betas, seeds=plan.seeds, train=train, progress=False)
        sweep_s = time.perf_counter() - start
    say(f"run_sweep once {sweep_s:.2f} s")

    # The matrix products the fits made: per Newton step, the step's logits, the gradient and
    # the size of its terms (three [N, d+1] products a member); per Hessian, one row of the table
    # of pair products and an add a row for each pair of categories summed by cells; the first
    # gradient of each member, and its validation and test logits.
    d1 = x.shape[1] + 1
    layout = Design.of(x).pairs  # the fits' design's pairs
    pairs = layout.products.shape[0] + layout.cells.shape[0] / 2
    steps = np.asarray(fit.best_epoch[0], np.float64)
    hessians = np.asarray(fit.hessians[0], np.float64)
    flops = 2.0 * len(y) * (3 * d1 * steps.sum() + pairs * hessians.sum() + 3 * d1 * steps.size)

    # Equal quality: objectives of the sliced models, and the corrected ECE at sliced betas.
    exact = Parallel(n_jobs=args.jobs)(  # the reference optimum of each sliced model, untimed
        delayed(_baseline_fit)(
            x, y, splits[r].train, splits[r].test, float(betas[b]), args.l2, exact=True
        )
        for b, r in jobs
    )
    rel, rel_exact, rel_loglik = [], [], []
    scores = {b: np.full(len(y), np.nan) for b in picked}
    for (b, r), theirs_fit, reference_fit in zip(jobs, fits, exact, strict=True):
        beta = float(betas[b])
        train_rows = splits[r].train
        mine_fit = (fit.params["w"][0, b, r], fit.params["b"][0, b, r])
        theirs = _objective(x, y, train_rows, beta, *theirs_fit[:2], args.l2)
        mine = _objective(x, y, train_rows, beta, *mine_fit, args.l2)
        reference = _objective(x, y, train_rows, beta, *reference_fit[:2], args.l2)
        rel.append((mine - theirs) / theirs)
        rel_exact.append((mine - reference) / reference)
        mine_loglik = _objective(x, y, train_rows, beta, *mine_fit, 0.0)
        reference_loglik = _objective(x, y, train_rows, beta, *reference_fit[:2], 0.0)
        rel_loglik.append((mine_loglik - reference_loglik) / reference_loglik)
        scores[b][splits[r].test] = theirs_fit[2]
    ece_diff = {}
    for b in picked:
        if np.isnan(scores[b]).any():
            continue  # not every rotation of this beta is in the slice
        beta = float(betas[b])
        theirs = score_metrics(np.asarray(loss_corrected_score(scores[b], beta)), y)["ece"]
        ece_diff[beta_key(beta)] = result.table[beta_key(beta)]["loss_corrected"]["ece"] - theirs

    report = {
        "benchmark": "sweep_train",
        "work": f"logistic beta sweep (l2 = {args.l2:g}) on UCI Adult: {n_betas} betas x "
        f"{len(splits)} rotations = {n_models} models, each a distinct fit ({args.seeds} seeds "
        f"asked, {len(plan.seeds)} fitted: the optimum depends on none), {len(y)} rows x "
        f"{x.shape[1]} features",
        "baseline_measured": f"{len(jobs)} scikit-learn fits a run on {os.cpu_count()} cores "
        f"(joblib), scaled to {n_models}",
        # the cold call made or loaded JAX's programs; the warm runs should make none
        "warm_compile_s": done["compile_s"][1:],
        "compile_cache": {
            "dir": args.cache_dir,
            "entries_before": cached_before,
            **done["cache"][0],  # the cold call's
        },
        "sweep_s": round(sweep_s, 2),  # the whole run_sweep, its table included, once
        "sweep_compile_s": round(sweep_compiling.seconds, 2),
        "achieved_gflops": round(flops / ours_s / 1e9, 1),
        # the reference product's median rate over the rounds, each round's rates and shares
        "gemm_gflops": round(gemm_flops / statistics.median(timing["warm_s"]["gemm"]) / 1e9, 1),
        **_rates(timing, flops, gemm_flops),
        "newton_steps_mean": round(float(steps.mean()), 2),
        "hessians_per_model": round(float(hessians.mean()), 3),
        "objective_rel_diff_max": float(np.max(np.abs(rel))),
        "objective_ours_lower_or_equal": bool(np.all(np.asarray(rel) <= 1e-6)),
        "objective_rel_diff_vs_exact_max": float(np.max(np.abs(rel_exact))),
        "loglik_rel_diff_vs_exact_max": float(np.max(np.abs(rel_loglik))),
        "corrected_ece_diff": ece_diff,
        "corrected_ece_diff_max": float(max(abs(v) for v in ece_diff.values()))
        if ece_diff
        else None,
        "warnings": [str(w.message) for w in said],
        "peak_rss_gb": round(peak.peak / 2**30, 2),  # both sides, interleaved
        "host_memory": host_memory_record(),
        **headline(timing, compile_s=done["compile_s"][0]),
    }
    _write(args.out, report)
    print(json.dumps(report))
    return report


# ----------------------------------------------------------------------------------------------
# The default sweep: every penalty of the grid, chosen on the validation folds
# ----------------------------------------------------------------------------------------------


def _weighted_log_loss(z: np.ndarray, t: np.ndarray, beta: float) -> float:
    """The mean beta-weighted log loss of logits ``z`` on labels ``t``: a member's own loss
    (eq. ``b-loss-bin``), on which the default sweep chooses its penalty."""
    return float(np.mean(_weighted_log_losses(z, t, beta)))


def _weighted_log_losses(z: np.ndarray, t: np.ndarray, beta: float) -> np.ndarray:
    """The beta-weighted log loss of each row's logit ``z`` at its label ``t``."""
    z = np.asarray(z, np.float64)
    weight = np.where(t == 1, beta, 1.0 - beta)
    return weight * (np.logaddexp(0.0, z) - t * z)


def _baseline_path(x, y, split, beta, levels, exact=False):
    """One researcher's default fit: the features standardised on the training rows (as
    ``StandardScaler``), one ``LogisticRegression`` warm-started along the grid of penalties from
    the largest down (as ``LogisticRegressionCV`` runs its path of ``Cs``), each level scored by
    the member's own loss on the validation rows, and the level kept by the sweep's rule
    (``TABULAR_DEFAULTS.l2_choice``, :func:`iml.training.tabular.chosen_penalty`, applied to
    these fits' validation losses), whose test rows' logits are kept.

    ``exact`` asks for scikit-learn's Newton-Cholesky solver at a tolerance of 1e-10 instead of
    lbfgs at its default: the reference optima of the quality check, not timed.

    Returns ``(chosen l2, validation losses [G] in the grid's order, test logits, seconds)``.
    """
    from sklearn.linear_model import LogisticRegression

    start = time.perf_counter()
    train, val, test = split.train, split.val, split.test
    mean = x[train].mean(axis=0, dtype=np.float64)
    var = x[train].var(axis=0, dtype=np.float64)
    scale = np.sqrt(np.where(var <= 1e-12 * np.maximum(1.0, mean**2), 1.0, var))
    xt, xv, xe = ((x[rows] - mean) / scale for rows in (train, val, test))
    solver = {"solver": "newton-cholesky", "tol": REFERENCE_TOL} if exact else {}
    clf = LogisticRegression(class_weight={0: 1.0 - beta, 1: beta}, warm_start=True,
                             max_iter=10_000, **solver)  # fmt: skip
    row_losses = np.empty((len(levels), len(val)))
    test_logits = np.empty((len(levels), len(test)))
    for g in np.argsort(-np.asarray(levels), kind="stable"):
        clf.set_params(C=1.0 / (levels[g] * len(train)))
        clf.fit(xt, y[train])
        row_losses[g] = _weighted_log_losses(clf.decision_function(xv), y[val], beta)
        test_logits[g] = clf.decision_function(xe)
    best = _chosen_level(row_losses, np.asarray(levels))
    seconds = time.perf_counter() - start
    return float(levels[best]), row_losses.mean(axis=1), test_logits[best], seconds


def _chosen_level(row_losses: np.ndarray, levels: np.ndarray) -> int:
    """The level ``iml sweep``'s default keeps (``l2_choice = "least_penalty"``), in NumPy: the
    smallest penalty whose mean validation loss lies within half a standard error of the
    difference, paired over the rows ``row_losses [G, V]``, of the lowest."""
    lowest = int(np.argmin(row_losses.mean(axis=1)))
    gap = row_losses - row_losses[lowest]
    se = gap.std(axis=1, ddof=1) / np.sqrt(gap.shape[1])
    near = np.flatnonzero(gap.mean(axis=1) <= NEAR_LOWEST * se)
    return int(near[np.argmin(levels[near])])


def _run_default(args: argparse.Namespace) -> dict:
    """The default sweep's training (``train.l2 = "auto"``) against the baseline's path of
    penalties, at equal work; the whole ``run_sweep`` and the whole ``iml sweep`` command
    timed once beside it."""
    cached_before = sum(1 for _ in Path(args.cache_dir).iterdir())
    import subprocess
    import sys
    import tempfile

    from joblib import Parallel, delayed

    from experiments.benchmarks._harness import (
        CacheHits,
        CompileSeconds,
        PeakRSS,
        headline,
        interleaved,
    )
    from iml.calibration import beta_key, score_metrics
    from iml.pipeline.report import report_run
    from iml.pipeline.store import RunStore
    from iml.pipeline.sweep import run_sweep
    from iml.scoring import loss_corrected_score
    from iml.training import TABULAR_DEFAULTS, train_tabular
    from iml.training.tabular import out_of_fold_logits

    train = TABULAR_DEFAULTS  # what `iml sweep` trains with: l2 = "auto", standardised
    levels = np.asarray(train.l2_grid, np.float64)
    x, y, whole, betas, plan, said, picked, jobs = _setup(args, train)
    n_betas, splits = len(betas), plan.splits
    n_models = n_betas * len(splits)
    done: dict = {"compile_s": [], "cache": []}

    def ours() -> None:
        with CompileSeconds() as compiling, CacheHits() as cache:
            fit = train_tabular(plan.model, x, y, splits, plan.losses, plan.seeds, plan.config)
            done["oof"] = out_of_fold_logits(fit.test_logits, splits, len(y))
        done["fit"] = fit
        done["compile_s"].append(compiling.seconds)
        done["cache"].append({"hits": cache.hits, "misses": cache.misses})

    def baseline() -> None:
        done["fits"] = Parallel(n_jobs=args.jobs)(
            delayed(_baseline_path)(x, y, splits[r], float(betas[b]), levels) for b, r in jobs
        )

    gemm_call, gemm_flops = _gemm(x, 640)
    with PeakRSS() as peak:
        timing = interleaved(
            {"ours": ours, "baseline": baseline, "gemm": gemm_call},
            args.runs,
            scale={"baseline": n_models / len(jobs)},
        )
    _write_rounds(args.out, "sweep_train --default", timing, done["compile_s"][0])
    gemm = gemm_flops / statistics.median(timing["warm_s"]["gemm"]) / 1e9
    phases = _phase_rates(lambda: train_tabular(plan.model, x, y, splits, plan.losses,
                                                plan.seeds, plan.config), levels, gemm)  # fmt: skip
    fit, fits = done["fit"], done["fits"]
    assert np.isfinite(done["oof"]).all()
    ours_s = statistics.median(timing["warm_s"]["ours"])

    # The rest of the sweep, once: run_sweep (its training again, then the table with its
    # bootstrap intervals), then the report `iml sweep` writes (the table again with the
    # baselines, its files, Figures 1-4 and the revealed experiments).
    with tempfile.TemporaryDirectory() as folder:
        with CompileSeconds() as sweep_compiling:
            start = time.perf_counter()
            result = run_sweep(x, y, None, betas, seeds=plan.seeds, train=train, progress=False,
                               store=RunStore(folder))  # fmt: skip
            sweep_s = time.perf_counter() - start
        say(f"run_sweep once {sweep_s:.2f} s")
        start = time.perf_counter()
        report_run(folder, formats=("png", "pdf"))
        outputs_s = time.perf_counter() - start
        say(f"the report once {outputs_s:.2f} s")
    command_s = None
    if whole and not args.no_command and n_betas == 64:
        # The whole command as a user runs it, in a fresh process: imports, data, plan,
        # training, table, files and figures.
        with tempfile.TemporaryDirectory() as folder:
            argv = [sys.executable, "-m", "iml.cli", "sweep", "--dataset", "adult", "--seeds",
                    str(args.seeds), "--out", str(Path(folder) / "run"), "--no-progress",
                    f"--config.data.data_dir={args.data_dir}"]  # fmt: skip
            start = time.perf_counter()
            subprocess.run(argv, check=True, capture_output=True)
            command_s = time.perf_counter() - start
            say(f"the command once {command_s:.2f} s")

    # Equal quality on the slice, against the baseline and against the exact reference paths
    # (untimed): the chosen penalties, the validation losses they were chosen by, the
    # out-of-fold (test rows') log losses of the chosen fits, and the corrected ECEs.
    exact = Parallel(n_jobs=args.jobs)(
        delayed(_baseline_path)(x, y, splits[r], float(betas[b]), levels, exact=True)
        for b, r in jobs
    )

    def agreement(theirs_fits: list) -> dict:
        same, val_rel, oof_rel = [], [], []
        scores = {b: np.full(len(y), np.nan) for b in picked}
        pooled = {b: [0.0, 0.0] for b in picked}  # ours, theirs: summed test-row losses
        for (b, r), (chosen, val_loss, test_logits, _) in zip(jobs, theirs_fits, strict=True):
            beta, test = float(betas[b]), splits[r].test
            same.append(bool(np.isclose(fit.l2[0, b, r], chosen, rtol=1e-9)))
            theirs_val = val_loss[np.flatnonzero(levels == chosen)[0]]
            val_rel.append((float(fit.best_val[0, b, r]) - theirs_val) / theirs_val)
            mine = _weighted_log_loss(fit.test_logits[0, b, r, : len(test)], y[test], beta)
            theirs = _weighted_log_loss(test_logits, y[test], beta)
            oof_rel.append((mine - theirs) / theirs)
            pooled[b][0] += mine * len(test)
            pooled[b][1] += theirs * len(test)
            scores[b][test] = 1.0 / (1.0 + np.exp(-test_logits))
        ece_diff, pooled_rel = {}, {}
        for b in picked:
            if np.isnan(scores[b]).any():
                continue  # not every rotation of this beta is in the slice
            beta = float(betas[b])
            theirs = score_metrics(np.asarray(loss_corrected_score(scores[b], beta)), y)["ece"]
            key = beta_key(beta)
            ece_diff[key] = result.table[key]["loss_corrected"]["ece"] - theirs
            pooled_rel[key] = (pooled[b][0] - pooled[b][1]) / pooled[b][1]
        return {
            "chosen_l2_equal": f"{sum(same)} of {len(same)}",
            "chosen_l2_equal_share": sum(same) / len(same),
            "val_loss_rel_diff_max": float(np.max(np.abs(val_rel))),
            "oof_log_loss_rel_diff_max": float(np.max(np.abs(oof_rel))),
            # a member whose penalty differs is counted in chosen_l2_equal: its fit is another's
            "oof_log_loss_rel_diff_max_same_penalty": max(
                (abs(d) for d, equal in zip(oof_rel, same, strict=True) if equal), default=None
            ),
            # per beta whose every rotation is sliced: ours less theirs, over theirs
            "oof_log_loss_rel_diff_pooled": pooled_rel,
            "corrected_ece_diff": ece_diff,
            "corrected_ece_diff_max": float(max(abs(v) for v in ece_diff.values()))
            if ece_diff
            else None,
        }

    chosen_ours = {f"{level:g}": int(np.sum(fit.l2[0] == level)) for level in levels}

    report = {
        "benchmark": "sweep_train --default",
        "work": f"the default logistic beta sweep on UCI Adult: {n_betas} betas x "
        f"{len(splits)} rotations = {n_models} members, each fitted at the {len(levels)} "
        f"penalties of the ridge's grid ({', '.join(f'{v:g}' for v in levels)}; standardised "
        f"features) and its penalty chosen by its own loss on its validation folds = "
        f"{n_models * len(levels)} fits ({args.seeds} seeds asked, {len(plan.seeds)} fitted), "
        f"{len(y)} rows x {x.shape[1]} features",
        "baseline_measured": f"{len(jobs)} members a run (each a scikit-learn path of "
        f"{len(levels)} warm-started fits) on {os.cpu_count()} cores (joblib), scaled to "
        f"{n_models}",
        "warm_compile_s": done["compile_s"][1:],
        "compile_cache": {
            "dir": args.cache_dir,
            "entries_before": cached_before,
            **done["cache"][0],
        },
        "sweep_s": round(sweep_s, 2),  # run_sweep: training, then the table and its bootstrap
        "sweep_compile_s": round(sweep_compiling.seconds, 2),
        "outputs_s": round(outputs_s, 2),  # the report iml sweep writes (report_run)
        # the table, its bootstrap and the outputs over the training (sweep_s less ours)
        "report_share": round((sweep_s - ours_s + outputs_s) / ours_s, 3),
        "command_s": None if command_s is None else round(command_s, 2),
        "gemm_gflops": round(gemm, 1),
        "phases": phases,  # one more warm call, each phase timed (_phase_rates)
        "chosen_l2_ours": chosen_ours,  # members per penalty, all of ours
        "vs_baseline": agreement(fits),
        "vs_exact": agreement(exact),
        "warnings": [str(w.message) for w in said],
        "peak_rss_gb": round(peak.peak / 2**30, 2),
        "host_memory": host_memory_record(),
        **headline(timing, compile_s=done["compile_s"][0]),
    }
    _write(args.out, report)
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
