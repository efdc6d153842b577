"""The ``iml`` command line: ``reproduce`` the paper's experiment, redraw ``figures``, ``sweep``,
``reveal`` what a run's models learned.

Examples::

    iml reproduce --out runs/reproduce              # digits, small DenseNet, beta 0.5/0.9/0.99
    iml reproduce --config experiments/configs/pneumoniamnist.py --config.data.manual_dir=DIR \\
        --out runs/pmn
    iml reproduce --config experiments/configs/chestxray14.py --config.train.max_epochs=1 \\
        --config.model.conv_impl=xla --config.data.manual_dir=NIH_RELEASE --out runs/cxr-smoke
    iml figures --run runs/reproduce --out runs/reproduce-figures
    iml figures --run runs/reproduce --out runs/reproduce-20-bins --config.eval.n_bins=20
    iml sweep --dataset digits --config.train.learning_rate=0.05 --seeds 4 --out runs/sweep-digits
    iml reveal --run runs/reproduce --out runs/reproduce-revealed
    srun iml reproduce --config experiments/configs/chestxray14.py \\
        --config.data.manual_dir=NIH_RELEASE --out /shared/runs/cxr \\
        --config.distributed.enabled=true    # one process per Slurm task, sharing the work
    python -m iml.cli reproduce --config.train.max_epochs=1 --config.data.n_folds=3

``reproduce`` and ``sweep`` read a config of one schema
(:func:`iml.pipeline.defaults.experiment_config`: sections ``data``, ``model``, ``loss``, ``train``,
``eval``, ``distributed``), starting from their own defaults (``default_config``, ``sweep_config``)
or ``--config FILE``, then set any key as ``--config.SECTION.KEY=VALUE``, then the few named options
(``--seeds`` sets ``config.plan.seeds``; :data:`iml.commands.config.SHORTCUTS`: one name per key in
both commands). ``figures`` trains nothing: it reports a stored run with the run's config, and takes
``--config.eval.KEY=VALUE`` for the report's own settings, as ``reveal`` does. ``--no-progress``
hides every progress bar, those of tensorflow-datasets preparing a dataset too.

Every command first loads the plugins (:mod:`iml.plugins`) that register a user's losses, models
and datasets: those of installed packages (entry points of the group ``iml.plugins``), then each
``--import MODULE_OR_FILE`` (a dotted module name, or a ``.py`` file), so that ``--loss``,
``--config.model.name=NAME`` and ``--dataset`` can name what they register. A run's manifest
records them, and ``figures`` and ``reveal`` load a stored run's plugins again.

Bad input (an unknown dataset, a misspelled config key, beta outside (0, 1), missing directories
or CSV columns, a plugin that cannot be found or fails to import) is reported before any work
starts, in one line, with exit status 2. A failure during the work exits with status 1 and its
traceback, and leaves every finished result in place.

The parser, the configs and each command's checks and work are in :mod:`iml.commands`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

import jax

from iml.commands.parser import parse_args
from iml.commands.plugins import load_command_plugins

__all__ = ["keep_compiled_programs", "main"]


def keep_compiled_programs() -> Path | None:
    """Keep the programs JAX compiles on disk, so that a command run again loads them instead of
    compiling them anew (seconds of every sweep): in ``JAX_COMPILATION_CACHE_DIR`` where it is
    set, else in ``$XDG_CACHE_HOME/iml/jax`` (``~/.cache/iml/jax``); ``IML_JAX_CACHE=off`` keeps
    none. Every program is kept, however quickly it compiled: a sweep compiles many programs
    that compile quickly, and loading them took less time than compiling them again
    (``docs/results/sweep_train/README.md``, "Programs compiled on every run"). Programs that
    sort long rows by NumPy on the CPU are kept too: they call it by name
    (:mod:`iml._ffi`). Returns the folder, or None."""

    if os.environ.get("IML_JAX_CACHE", "").lower() == "off":
        return None
    folder = os.environ.get("JAX_COMPILATION_CACHE_DIR")
    if not folder:
        home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        folder = os.path.join(home, "iml", "jax")
        jax.config.update("jax_compilation_cache_dir", folder)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    return Path(folder)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``iml``; returns its exit status (2: bad input, printed as one line
    ``iml COMMAND: error: ...`` before any work starts; see the module docstring)."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if getattr(args, "no_progress", False):
        # imported here: only to hide its bars while it prepares a dataset
        import tensorflow_datasets as tfds

        tfds.disable_progress_bar()
    if args.command == "reproduce":
        # on the CPU, one device per core lets ensemble members train side by side
        # imported here: the trainer, which `iml --help` and the other commands do without
        from iml.training import use_cpu_cores_as_devices

        use_cpu_cores_as_devices()
    keep_compiled_programs()
    try:
        load_command_plugins(args)
        work = args.func(args)
    except (ValueError, FileNotFoundError) as err:
        print(f"iml {args.command}: error: {err}", file=sys.stderr)
        return 2
    return int(work())


if __name__ == "__main__":
    sys.exit(main())
