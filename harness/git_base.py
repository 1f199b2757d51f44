"""The git revision the contract gate compares schemas with, and files as committed there."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


class NoBaseError(Exception):
    """There is nothing to compare against (no git, no commit yet, no earlier commit)."""


class BadBaseError(Exception):
    """The revision given with --base does not name a commit."""


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    git = shutil.which("git")
    if git is None:
        raise NoBaseError("git is not installed")
    return subprocess.run(
        [git, *args], cwd=ROOT, capture_output=True, text=True, check=False, encoding="utf-8"
    )


def _commit(rev: str) -> str | None:
    result = _git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    return result.stdout.strip() if result.returncode == 0 else None


def find_base(explicit: str | None) -> str:
    """The commit to compare with: merge base of HEAD and --base, else origin/main, else HEAD~1.

    On a clean clone of main, ``origin/main`` is ``HEAD`` itself; then ``HEAD~1`` is used.

    Raises:
        NoBaseError: no git, no commits, or no earlier commit to compare with.
        BadBaseError: ``explicit`` is not a commit.
    """
    if _git("rev-parse", "--is-inside-work-tree").returncode != 0:
        raise NoBaseError("not a git work tree")
    if _commit("HEAD") is None:
        raise NoBaseError("the repository has no commits yet")
    if explicit is not None:
        if _commit(explicit) is None:
            raise BadBaseError(f"--base {explicit!r} is not a commit")
        rev = explicit
    elif _commit("origin/main") not in (None, _commit("HEAD")):
        rev = "origin/main"
    elif _commit("HEAD~1") is not None:  # a clone of main itself: check the newest commit
        rev = "HEAD~1"
    else:
        raise NoBaseError("HEAD is the first commit and origin/main does not exist")
    result = _git("merge-base", "HEAD", rev)
    if result.returncode != 0:
        raise NoBaseError(f"HEAD and {rev} have no common ancestor")
    return result.stdout.strip()


def base_document(base: str, path: Path) -> dict[str, Any] | None:
    """The schema as committed at ``base``; None when the file did not exist there."""
    top = _git("rev-parse", "--show-toplevel")
    relative = path.resolve().relative_to(Path(top.stdout.strip()).resolve()).as_posix()
    result = _git("show", f"{base}:{relative}")
    if result.returncode != 0:
        return None
    loaded = json.loads(result.stdout)
    return loaded if isinstance(loaded, dict) else None
