"""``nox -s mutation``: mutmut over the core, scored against the committed list of equivalents.

``python -m harness.mutation [--max-children N] [--reuse] [--score-only]`` deletes ``mutants/``
(unless ``--reuse``: mutmut then keeps its earlier results and tests only what changed), runs
``mutmut run`` (what it mutates and which tests it runs: ``[tool.mutmut]`` in pyproject.toml),
then reads every mutant's result and prints the counts, the score and how long the run took.

The score is (killed + timeouts) / (all mutants - the equivalents listed in
``harness/mutation-equivalent.toml``). It fails when the score is under ``THRESHOLD``, when a
mutant was left unchecked, and when the list is no longer true: a listed name that no longer
exists, whose change is no longer the one judged (mutmut numbers mutants by position, so an
edited function renumbers them), or that a test now kills. Every survivor not on the list is
printed as a ready-to-fill entry for that file.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EQUIVALENT_FILE = ROOT / "harness" / "mutation-equivalent.toml"
THRESHOLD = 0.90
DETECTED = frozenset({"killed", "timeout", "caught by type check"})
UNCHECKED = frozenset({"not checked", "check was interrupted by user"})


@dataclass(frozen=True)
class Equivalent:
    name: str
    change: str
    reason: str


@dataclass
class Tally:
    status_by_name: dict[str, str]
    change_by_name: dict[str, str] = field(default_factory=dict)

    def count(self, *statuses: str) -> int:
        return sum(1 for status in self.status_by_name.values() if status in statuses)


def load_equivalents(path: Path = EQUIVALENT_FILE) -> list[Equivalent]:
    """The committed judgements: ``[[mutant]]`` tables with ``name``, ``change`` and ``reason``."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    entries = [Equivalent(**entry) for entry in data.get("mutant", [])]
    names = [entry.name for entry in entries]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise SystemExit(f"{path.name}: listed twice: {', '.join(duplicates)}")
    for entry in entries:
        if not entry.reason.strip() or entry.reason.strip() == "TODO":
            raise SystemExit(f"{path.name}: {entry.name} has no reason")
    return entries


def run_mutmut(max_children: int, *, reuse: bool) -> float:
    """Run ``mutmut run`` in the repository; the wall-clock seconds it took.

    With ``reuse``, mutmut tests only the mutants of changed functions; the earlier survivors
    are then tested again by name (mutmut keeps a result otherwise, even when tests changed).
    """
    if not reuse:
        shutil.rmtree(ROOT / "mutants", ignore_errors=True)
    started = time.monotonic()
    _mutmut_run(max_children)
    if reuse:
        survivors = [n for n, s in read_results().status_by_name.items() if s not in DETECTED]
        if survivors:
            _mutmut_run(max_children, *survivors)
    return time.monotonic() - started


def _mutmut_run(max_children: int, *names: str) -> None:
    mutmut = Path(sys.executable).parent / "mutmut"
    command = [str(mutmut), "run", "--max-children", str(max_children), *names]
    done = subprocess.run(command, cwd=ROOT, check=False)
    if done.returncode != 0:
        raise SystemExit(f"mutmut run failed with exit status {done.returncode}")


def _changed_lines(diff: str) -> str:
    """The lines a mutant's diff removes and adds (``-``/``+``, stripped): what identifies the
    mutation within its function."""
    return "\n".join(
        line[0] + line[1:].strip()
        for line in diff.splitlines()
        if line[:1] in {"-", "+"} and line[:3] not in {"---", "+++"}
    )


def read_results() -> Tally:
    """Every mutant's status and change, read through mutmut's own modules (cwd: the repo)."""
    from mutmut.mutation.data import SourceFileMutationData
    from mutmut.mutation.diff_apply import get_diff_for_mutant
    from mutmut.stats import status_by_exit_code
    from mutmut.utils.file_utils import walk_mutatable_files

    os.chdir(ROOT)
    tally = Tally(status_by_name={})
    for path in walk_mutatable_files():
        data = SourceFileMutationData(path=path)
        data.load()
        for name, exit_code in data.exit_code_by_key.items():
            status = status_by_exit_code[exit_code]
            tally.status_by_name[name] = status
            if status not in DETECTED:
                tally.change_by_name[name] = _changed_lines(get_diff_for_mutant(name, path=path))
    return tally


def _toml_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def score(tally: Tally, equivalents: list[Equivalent], elapsed: float | None) -> int:
    """Print the figures and every problem; 0 when the score holds and the list is true."""
    problems: list[str] = []
    listed = {entry.name: entry for entry in equivalents}
    for entry in equivalents:
        status = tally.status_by_name.get(entry.name)
        if status is None:
            problems.append(f"listed equivalent but no longer a mutant: {entry.name}")
        elif status in DETECTED:
            problems.append(f"listed equivalent but {status}: {entry.name} (remove the entry)")
        elif status not in UNCHECKED and tally.change_by_name[entry.name] != entry.change:
            problems.append(
                f"listed equivalent but its change is now {tally.change_by_name[entry.name]!r},"
                f" not {entry.change!r}: {entry.name} (judge it again)"
            )
    unchecked = sorted(n for n, s in tally.status_by_name.items() if s in UNCHECKED)
    if unchecked:
        problems.append(f"{len(unchecked)} mutants not checked (run incomplete): {unchecked[:5]}")

    total = len(tally.status_by_name)
    equivalent = sum(1 for name in listed if name in tally.status_by_name)
    killed = tally.count("killed", "caught by type check")
    timeouts = tally.count("timeout")
    judged = total - equivalent
    value = (killed + timeouts) / judged if judged else 0.0
    open_survivors = sorted(
        name
        for name, status in tally.status_by_name.items()
        if status not in DETECTED | UNCHECKED and name not in listed
    )
    for name in open_survivors:
        print(
            f'\n[[mutant]]  # {tally.status_by_name[name]}\nname = "{name}"\n'
            f'change = {_toml_string(tally.change_by_name.get(name, ""))}\nreason = "TODO"'
        )
    print()
    print(
        f"mutants: {total}; killed {killed}, timeouts {timeouts}, survived (not listed) "
        f"{len(open_survivors)}, equivalent (listed) {equivalent}"
    )
    others = {
        status: tally.count(status)
        for status in sorted(set(tally.status_by_name.values()) - DETECTED - {"survived"})
        if status not in UNCHECKED
    }
    if others:
        print("of the survivors: " + ", ".join(f"{n} {s}" for s, n in others.items()))
    print(
        f"mutation score: {value:.1%} of {judged} non-equivalent mutants "
        f"(threshold {THRESHOLD:.0%})"
    )
    if elapsed is not None:
        print(f"mutmut run took {elapsed / 60:.1f} min")
    if value < THRESHOLD:
        problems.append(f"mutation score {value:.1%} is under {THRESHOLD:.0%}")
    for problem in problems:
        print(f"FAIL: {problem}", file=sys.stderr)
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.mutation", description=__doc__)
    parser.add_argument("--max-children", type=int, default=1, help="parallel mutants (1)")
    parser.add_argument("--reuse", action="store_true", help="keep mutants/ and its results")
    parser.add_argument("--score-only", action="store_true", help="score the last run only")
    args = parser.parse_args(argv)
    equivalents = load_equivalents()
    elapsed = None if args.score_only else run_mutmut(args.max_children, reuse=args.reuse)
    return score(read_results(), equivalents, elapsed)


if __name__ == "__main__":
    raise SystemExit(main())
