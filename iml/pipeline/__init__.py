"""The experiment pipeline: plan -> train -> score -> aggregate -> report, and its results store.

* :mod:`iml.pipeline.defaults`: the one config schema of an experiment, and its two defaults
  (``iml reproduce``: an ensemble on images; ``iml sweep``: small models on rows of a table).
* :mod:`iml.pipeline.experiment`: one experiment, ``build(config)``: the kind of run follows from
  the model (images fed from the host, :mod:`iml.pipeline.runner`; or a table held on the
  device, :mod:`iml.pipeline.sweep`); the config of either kind read and checked in one place,
  :mod:`iml.pipeline.run_config`.
* :mod:`iml.pipeline.plan`: nested-CV folds and the grid loss x rotation x seed in member batches.
* :mod:`iml.pipeline.train_plan`: ``run(experiment, store)``, the one loop of every run: each
  member batch trained and stored (resumable after ``kill -9``), in parts sized by memory where
  asked; on several processes (:mod:`iml.pipeline.distributed`) each trains its share.
* :mod:`iml.pipeline.store`: the atomic results store, its one manifest schema (a ``kind`` and a
  ``schema`` version; older runs are migrated by ``python -m tools.migrate_runs``), the one
  layout of stored members and their aggregation into ensemble scores.
* :mod:`iml.pipeline.scores`: a stored run's ensembles over its grid, and the one table of every
  run (raw and loss-corrected scores, the loss-calibration test, and the recalibration baselines
  of a binary grid of class weights).
* :mod:`iml.pipeline.report`: the one report of every run: the table, its Markdown
  (:mod:`iml.pipeline.markdown`), the scores and the figures (Figures 1-4 and the revealed
  experiments of a binary grid; the figures by class of a multiclass one).
* :mod:`iml.pipeline.beside`: a call made in a second process beside this one (a report's
  revealed experiments, beside its table).
* :mod:`iml.pipeline.reveal`: the revealed experiments of a stored run (``revealed.json``) and
  their report; :mod:`iml.pipeline.reveal_input` reads any run's member batches.
"""

from iml._io import atomic_write_bytes
from iml.pipeline.plan import Member, MemberBatch, Plan, check_betas, ensemble_sizes, make_plan
from iml.pipeline.store import (
    ENSEMBLE_AVERAGES,
    KINDS,
    SCHEMA,
    EnsembleScores,
    RunStore,
    aggregate_members,
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
