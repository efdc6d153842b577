"""Tests for tools.probe_page_faults: the per-run account of CPU seconds and page faults."""

from __future__ import annotations

import mmap

from tools.probe_page_faults import account, memory_environment, summary


def _touch_64_mib() -> None:
    with mmap.mmap(-1, 64 << 20) as m:  # fresh anonymous pages, each written once
        for offset in range(0, 64 << 20, 4096):
            m[offset] = 1


def test_a_run_that_touches_fresh_memory_counts_its_page_faults():
    touched, idle = account(_touch_64_mib, 2), account(lambda: None, 2)
    assert [len(rows) for rows in (touched, idle)] == [2, 2]
    assert all(row["minor_faults"] >= 1000 for row in touched)  # 16,384 pages a run
    assert all(row["minor_faults"] < 1000 for row in idle)
    assert all(row["wall_s"] >= 0 and row["peak_rss_gb"] > 0 for row in touched + idle)


def test_the_summary_leaves_the_first_run_out():
    rows = [{"wall_s": w, "user_s": 1.0, "sys_s": 0.5, "minor_faults": f}
            for w, f in ((9.0, 900), (1.0, 10), (3.0, 30), (2.0, 20))]  # fmt: skip
    assert summary(rows) == {"wall_s": 2.0, "user_s": 1.0, "sys_s": 0.5, "minor_faults": 20}
    assert summary(rows[:1])["wall_s"] == 9.0  # one run: itself


def test_the_memory_environment_names_only_what_changes_allocation(monkeypatch):
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1")
    monkeypatch.setenv("MALLOC_MMAP_MAX_", "0")
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    assert memory_environment() == {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1",
                                    "MALLOC_MMAP_MAX_": "0"}  # fmt: skip
