"""The experiment pipeline: plan -> train -> score -> aggregate -> report, and its results store.

* :mod:`iml.pipeline.defaults`: the one config schema of an experiment, and its two defaults
  (``iml reproduce``: an ensemble on images; ``iml sweep``: small models on rows of a table).
* :mod:`iml.pipeline.plan`: nested-CV folds and the grid loss x rotation x seed in member batches
  (of members, or of every member of a group of losses), for both kinds of run.
* :mod:`iml.pipeline.train_plan`: the one loop of every run: each member batch trained and stored
  (resumable after ``kill -9``), in parts sized by memory where asked.
* :mod:`iml.pipeline.runner`: a run on images (its data, model and plan) into the store;
  :mod:`iml.pipeline.run_config` the config's checks.
* :mod:`iml.pipeline.sweep`: a grid of losses over many small models on rows at once, each group
  of losses one stored batch; :mod:`iml.pipeline.sweep_config` the config's checks, and
  :mod:`iml.pipeline.sweep_scores` its scoring from the stored batches (just trained, or
  reported again by ``iml figures``).
* :mod:`iml.pipeline.distributed`: a run of either kind as several processes (JAX's
  multi-controller runtime), each training its share of the batches into the one store.
* :mod:`iml.pipeline.store`: the atomic results store, its one manifest schema (a ``kind`` and a
  ``schema`` version; older runs are migrated by ``python -m tools.migrate_runs``), the one
  layout of stored members (:func:`~iml.pipeline.store.member_entry`), and the one aggregation
  of them into ensemble scores (per loss, the mean score or the score of the mean logit) and
  ensemble sizes.
* :mod:`iml.pipeline.report`: the report of every run: the one table
  (:func:`iml.calibration.table_by_loss`; with the recalibration baselines and the
  loss-calibration test for a run on images), its Markdown (:mod:`iml.pipeline.markdown`), the
  scores and the figures (Figures 1-4; the ECE by loss and the reliability by class of a grid).
* :mod:`iml.pipeline.reveal`: the revealed experiments of a stored run (``revealed.json``) and
  their report; :mod:`iml.pipeline.reveal_input` reads any run's member batches.
"""

from iml.pipeline.plan import Member, MemberBatch, Plan, check_betas, ensemble_sizes, make_plan
from iml.pipeline.store import (
    ENSEMBLE_AVERAGES,
    KINDS,
    SCHEMA,
    EnsembleScores,
    RunStore,
    aggregate_members,
    atomic_write_bytes,
    load_ensemble,
    member_entry,
    member_test_scores,
    package_versions,
)

__all__ = [
    "ENSEMBLE_AVERAGES",
    "KINDS",
    "SCHEMA",
    "EnsembleScores",
    "Member",
    "MemberBatch",
    "Plan",
    "RunStore",
    "aggregate_members",
    "atomic_write_bytes",
    "check_betas",
    "ensemble_sizes",
    "load_ensemble",
    "make_plan",
    "member_entry",
    "member_test_scores",
    "package_versions",
]
