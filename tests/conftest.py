"""Test configuration shared by every test module.

Eight host devices are requested before JAX starts so that sharded code (mesh axes for ensemble
members and data) is exercised on the CPU exactly as it would be on eight accelerators.

Some tests read real data (the UCI files, PneumoniaMNIST, the ChestX-ray14 label file and sample
images) from the project's shared data folder, ``../shared/data`` beside the repository, or the
folder named by ``$IML_SHARED_DATA``. It is not part of the repository: in a clone without it,
those tests are skipped with a reason naming the folder they need. Only fixtures look for it, so
collecting the tests never touches it.
"""

import gc
import json
import os
from collections.abc import Callable
from pathlib import Path

from _training_helpers import FAST_COMPILE

os.environ.setdefault("XLA_FLAGS", FAST_COMPILE)
os.environ.setdefault("MPLBACKEND", "Agg")
# `iml` commands keep compiled programs in one on-disk cache per user. Test workers running in
# parallel would share it, reading entries another worker is still writing (a worker crashed in
# such a read), so the tests keep none; the test of the cache itself switches it back on.
os.environ.setdefault("IML_JAX_CACHE", "off")

import chex
import jax
import pytest
from _pipeline_runs import TINY_REPRODUCE, iml_process_env, run_iml
from hypothesis import HealthCheck, settings

chex.set_n_cpu_devices(8)  # the host-platform device count, before any JAX operation
jax.config.update("jax_num_cpu_devices", 8)

# JIT compilation makes the first example of a property slow; deadlines would only measure that.
settings.register_profile(
    "iml",
    deadline=None,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("iml")


@pytest.fixture
def x64():
    """Float64 in JAX for the test, for references computed in double precision."""
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", previous)


# Every compiled program holds a few memory mappings for its machine code, and JAX keeps the
# programs of functions long gone in its caches. A test worker compiles thousands of programs, and
# on Linux a process may hold at most vm.max_map_count mappings (65,530 by default): a worker that
# reached it segfaulted inside XLA's CPU compiler, in whichever test compiled next. So after each
# test file, a worker holding over half that many mappings empties JAX's caches, which unmaps
# the programs; a later file calling them compiles them again, so the caches are kept until then.
MAPS = Path("/proc/self/maps")
MAX_MAPS = Path("/proc/sys/vm/max_map_count")


def mapping_count() -> int:
    """How many memory mappings this process holds (0 where /proc does not say)."""
    try:
        with MAPS.open("rb") as lines:
            return sum(1 for _ in lines)
    except OSError:
        return 0


@pytest.fixture(scope="module", autouse=True)
def release_compiled_programs():
    """Empty JAX's caches after a test file once this worker's mappings near the limit."""
    yield
    try:
        limit = int(MAX_MAPS.read_text())
    except (OSError, ValueError):
        return
    if mapping_count() > limit // 2:
        jax.clear_caches()
        gc.collect()


# ----------------------------------------------------------------------------------------------
# The shared data folder
# ----------------------------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA_ENV = "IML_SHARED_DATA"

# Where the real files in each folder come from, for a skip reason.
SHARED_DATA_SOURCES = {
    "uci-adult": "the UCI Machine Learning Repository's Adult files",
    "uci-letter": "the UCI Machine Learning Repository's letter-recognition.data",
    "pneumoniamnist": "two public partial copies of MedMNIST's PneumoniaMNIST",
    "nih-chestxray14-meta": "the NIH Clinical Center's ChestX-ray14 label and list files",
    "nih-chestxray14-sample-images": "64 PNGs of the NIH Clinical Center's ChestX-ray14 release",
}


def locate_shared_data() -> tuple[Path | None, str]:
    """The shared data folder (None where it is absent) and what a skip reason calls it.

    ``$IML_SHARED_DATA`` when it is set (that path only, so that setting it to a missing folder
    hides the shared data), else the first ``shared/data`` in the repository root or above it.
    """
    named = os.environ.get(SHARED_DATA_ENV)
    if named:
        folder = Path(named).expanduser()
        return (folder if folder.is_dir() else None), f"${SHARED_DATA_ENV}"
    for parent in (ROOT, *ROOT.parents):
        if (parent / "shared" / "data").is_dir():
            return parent / "shared" / "data", "../shared/data"
    return None, "../shared/data"


def require_shared_data(name: str = "") -> Path:
    """``name`` inside the shared data folder; skips the calling test where it is absent."""
    folder, called = locate_shared_data()
    path = folder / name if folder is not None and name else folder
    if path is not None and path.exists():
        return path
    if called == "../shared/data":
        where = f"{called}/{name}".rstrip("/")
        why = "the project's shared data folder, absent in this clone"
    else:
        where = os.path.join(os.environ[SHARED_DATA_ENV], name).rstrip("/")
        why = f"${SHARED_DATA_ENV} names a folder without it"
    source = SHARED_DATA_SOURCES.get(name.split("/")[0])
    get = f"; it holds {source}" if source else ""
    pytest.skip(
        f"needs {where} ({why}{get}; point ${SHARED_DATA_ENV} at a copy of the folder to run it)"
    )


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The shared data folder; a test that asks for it is skipped where it is absent."""
    return require_shared_data()


@pytest.fixture(scope="session")
def shared_data_path() -> Callable[[str], Path]:
    """``shared_data_path("uci-adult")``: a folder or file in it, or a skip that names it."""
    return require_shared_data


# ----------------------------------------------------------------------------------------------
# Runs shared by several test files, each trained once per test worker
# ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def iml_env(tmp_path_factory) -> dict[str, str]:
    """The environment of an ``iml`` command run as a process, with a compilation cache kept for
    this worker's session (``_pipeline_runs.iml_process_env``)."""
    return iml_process_env(tmp_path_factory.mktemp("jax-cache"))


@pytest.fixture(scope="session")
def tiny_reproduce_run(tmp_path_factory, iml_env) -> Path:
    """The folder of the tiny ``iml reproduce`` run (``_pipeline_runs.TINY_REPRODUCE``), trained
    once per test worker: trained only (as on a GPU machine), then reported from the stored run
    alone with ``iml figures``. Tests read it; one that would change it works on a copy."""
    out = tmp_path_factory.mktemp("tiny-reproduce") / "tiny"
    done = run_iml([*TINY_REPRODUCE, "--out", str(out), "--train-only"], iml_env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"members stored in {out}" in done.stdout
    assert len(list((out / "batches").glob("*.npz"))) == 4
    assert not (out / "table.json").exists() and not (out / "figures").exists()
    done = run_iml(["figures", "--run", str(out)], iml_env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout) == {"out": str(out), "losses": ["0.5", "0.9"]}
    return out


# The test files that take longest (each whole on one worker under `.ci/run`'s --dist loadfile),
# longest first, as paths under tests/: starting them first keeps a long file from running alone
# at the end while the other workers idle. Measured as each file's summed test time in one run of
# the whole suite on 2 cores shared with other work (147 s for test_distributed.py down to 49 s
# for scoring/test_checks.py; the files after them took 37 s or less). test_spec.py is also the
# longest file of the fast tier (-m "not slow").
LONG_FILES = (
    "pipeline/test_distributed.py",
    "pipeline/test_sweep.py",
    "test_notebooks.py",
    "pipeline/test_report.py",
    "commands/test_experiment.py",
    "test_extending.py",
    "commands/test_reveal.py",
    "scoring/test_generic.py",
    "test_spec.py",
    "training/test_trainer.py",
    "scoring/test_checks.py",
)
TESTS = Path(__file__).resolve().parent

# Test files that share a session fixture whose cost rivals their own tests' (tiny_reproduce_run:
# about 25 s) run on one worker, which builds it once, instead of wherever --dist loadfile sends
# each file.
SAME_WORKER = {
    "tests/pipeline/test_distributed.py": "tiny_reproduce_run",
    "tests/commands/test_experiment.py": "tiny_reproduce_run",
}


def work_unit(nodeid: str) -> str:
    """The unit of work of a test under ``--dist loadfile``: its file, or the files of
    :data:`SAME_WORKER` together."""
    path = nodeid.split("::", 1)[0]
    return SAME_WORKER.get(path, path)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Under ``--dist loadfile``, each unit of :func:`work_unit` whole on one worker."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class Scheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return Scheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Order the long files first (a stable sort: within a file, and among the others, the
    collection order stays)."""

    def rank(item: pytest.Item) -> int:
        path = item.path.resolve()
        name = path.relative_to(TESTS).as_posix() if path.is_relative_to(TESTS) else path.name
        return LONG_FILES.index(name) if name in LONG_FILES else len(LONG_FILES)

    items.sort(key=rank)
