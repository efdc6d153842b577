"""A pytest plugin for ``.ci/run``: the controller writes the node ids its workers collected to
the file ``IML_CI_COLLECTED`` names (once), and appends the node id of every test that finished
(passed, or skipped) to the file ``IML_CI_FINISHED`` names, so that a run cut short by a crashed
worker can run again only what did not finish."""

from __future__ import annotations

import os

import pytest

_config: pytest.Config | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _config
    _config = config


def _controller() -> bool:
    return _config is not None and not hasattr(_config, "workerinput")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids: list[str]) -> None:
    path = os.environ.get("IML_CI_COLLECTED")
    if path and _controller() and not os.path.exists(path):
        with open(path, "w") as f:
            f.writelines(node_id + "\n" for node_id in ids)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = os.environ.get("IML_CI_FINISHED")
    if not path or not _controller():
        return  # not asked, or a worker: the controller records each report once
    if (report.when == "call" and report.passed) or report.skipped:
        with open(path, "a") as f:
            f.write(report.nodeid + "\n")
