"""The benchmark still runs: ``python -m harness.bench --quick`` end to end with tiny counts.

Not a timed test: it only checks that every configuration was measured without failures (the
authenticated ones too: a real token from the bench's own oidc-provider, every call admitted by
the quota) and that the report holds the figures NOTES.md quotes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.bench import CONFIGS

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def test_quick_benchmark_measures_every_configuration_and_writes_the_report(
    tmp_path: Path,
) -> None:
    out = tmp_path / "report.json"

    finished = subprocess.run(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-m", "harness.bench", "--quick", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert finished.returncode == 0, finished.stderr[-4000:]
    report = json.loads(out.read_text(encoding="utf-8"))
    results = {entry["name"]: entry for entry in report["results"]}
    assert set(results) == {config.name for config in CONFIGS}
    for entry in results.values():
        for concurrency in ("c1", "c16"):
            assert entry[concurrency]["requests"] > 0, entry["name"]
            assert entry[concurrency]["failures"] == {}, (entry["name"], entry[concurrency])
            assert entry[concurrency]["p50_ms"] > 0
        assert entry["rps_ratio_c16"] > 0
        if entry["kind"] == "auth":  # judged against its anonymous twin of the same rounds
            assert entry["anonymous"] in results
            assert entry["anon_p50_ratio_c1"] > 0
            assert [check["metric"] for check in entry["checks"]] == [
                "c=1 p50 auth/anon",
                "c=16 r/s auth/anon",
            ]
    assert report["cold_start"]["ready_s_median"] > 0
    assert report["peak_rss_kib"]["real"] > 0
    assert report["context_bytes"]["tools_list_wire_bytes"] > 0
    assert report["context_bytes"]["one_booking_model_bytes"] > 0
    assert "configuration" in finished.stdout
