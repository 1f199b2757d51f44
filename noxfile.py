"""Developer and CI sessions: a bare ``nox`` runs every gate; ``nox -s bench`` runs the benchmark.

``nox -s mutation`` (not in the default run: 20 to 40 minutes with one mutmut child on a busy
2-core machine, 7 to 15 with ``-- --reuse`` after a change) scores the unit and integration
tests by mutation testing of the core.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import nox

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.error_on_external_run = True
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["lint", "typecheck", "contract", "tests", "conformance", "fuzz", "package"]

PYTHON = "3.11"
CONSTRAINTS = ("-c", "constraints.txt")


def _install_project(session: nox.Session) -> None:
    """Install the built package (not editable: tests exercise what users get) plus dev tools."""
    session.install(*CONSTRAINTS, ".[dev]")


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """Ruff lint and format check."""
    session.install(*CONSTRAINTS, "ruff")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """mypy --strict over src, generated, harness, tests."""
    _install_project(session)
    session.run("mypy")


@nox.session(python=PYTHON)
def contract(session: nox.Session) -> None:
    """Schemas valid, generated models not drifted, no unversioned break (release, base)."""
    _install_project(session)
    session.run("python", "-m", "harness.contract", "check", *session.posargs)


@nox.session(python=PYTHON)
def codegen(session: nox.Session) -> None:
    """Regenerate generated/ from schemas/ (run after editing a schema)."""
    _install_project(session)
    session.run("python", "-m", "harness.contract", "generate")


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Unit, integration and end-to-end tests (spawned server, payment stub)."""
    _install_project(session)
    session.run(
        "pytest",
        "-m",
        "not conformance and not inspector and not fuzz and not package",
        *session.posargs,
    )


@nox.session(python=PYTHON)
def conformance(session: nox.Session) -> None:
    """Official MCP conformance suite and MCP Inspector (Node) against a spawned server via the proxy."""
    _install_project(session)
    session.run("pytest", "-m", "conformance or inspector", *session.posargs)


@nox.session(python=PYTHON)
def fuzz(session: nox.Session) -> None:
    """Schemathesis + Hypothesis against POST /mcp; database invariants afterwards."""
    _install_project(session)
    session.run("pytest", "-m", "fuzz", *session.posargs)


@nox.session(python=PYTHON)
def package(session: nox.Session) -> None:
    """Packaging smoke: build the wheel, install it alone into a fresh venv, start every command."""
    _install_project(session)
    session.install(*CONSTRAINTS, "uv")
    work = Path(session.create_tmp()).resolve() / "package"
    shutil.rmtree(work, ignore_errors=True)
    session.run("uv", "build", "--wheel", "--out-dir", str(work / "dist"), ".")
    (wheel,) = (work / "dist").glob("expert_booking_mcp-*.whl")
    venv = work / "venv"
    session.run("uv", "venv", "--python", PYTHON, str(venv))
    session.run(
        "uv", "pip", "install", "--python", str(venv / "bin" / "python"), *CONSTRAINTS, str(wheel)
    )
    session.run(
        "pytest",
        "tests/package",
        "-m",
        "package",
        *session.posargs,
        env={"EXPERT_BOOKING_SMOKE_VENV": str(venv)},
    )


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Benchmark against a floor server; prints figures and ratios, writes a JSON report."""
    _install_project(session)
    session.run("python", "-m", "harness.bench", *session.posargs)


@nox.session(python=PYTHON)
def demo(session: nox.Session) -> None:
    """Run the end-to-end demo against a spawned server and a payment stub."""
    _install_project(session)
    session.run("expert-booking-mcp", "demo")


@nox.session(python=PYTHON)
def mutation(session: nox.Session) -> None:
    """mutmut over the core ([tool.mutmut]); fails under 90% of the non-equivalent mutants.

    ``-- --reuse`` keeps ``mutants/`` and retests only changed functions and the survivors;
    ``-- --max-children N`` runs N mutants at once (1 by default: the machine is shared).
    """
    _install_project(session)
    session.install(*CONSTRAINTS, "mutmut")
    session.run("python", "-m", "harness.mutation", *session.posargs)
