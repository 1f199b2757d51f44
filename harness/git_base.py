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


def _git(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    git = shutil.which("git")
    if git is None:
        raise NoBaseError("git is not installed")
    return subprocess.run(
        [git, *args], cwd=cwd, capture_output=True, text=True, check=False, encoding="utf-8"
    )


def _commit(rev: str, cwd: Path) -> str | None:
    result = _git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", cwd=cwd)
    return result.stdout.strip() if result.returncode == 0 else None


def _shallow(cwd: Path) -> bool:
    return _git("rev-parse", "--is-shallow-repository", cwd=cwd).stdout.strip() == "true"


def find_base(explicit: str | None, *, cwd: Path = ROOT) -> str:
    """The commit to compare with: merge base of HEAD and --base, else origin/main, else HEAD~1.

    On a clean clone of main, ``origin/main`` is ``HEAD`` itself; then ``HEAD~1`` is used.
    ``cwd`` is any directory inside the work tree.

    Raises:
        NoBaseError: no git, no commits, or no earlier commit to compare with (the message
            says when the clone is shallow and how to deepen it).
        BadBaseError: ``explicit`` is not a commit.
    """
    if _git("rev-parse", "--is-inside-work-tree", cwd=cwd).returncode != 0:
        raise NoBaseError("not a git work tree")
    head = _commit("HEAD", cwd)
    if head is None:
        raise NoBaseError("the repository has no commits yet")
    origin = _commit("origin/main", cwd)
    if explicit is not None:
        if _commit(explicit, cwd) is None:
            raise BadBaseError(f"--base {explicit!r} is not a commit")
        rev = explicit
    elif origin not in (None, head):
        rev = "origin/main"
    elif _commit("HEAD~1", cwd) is not None:  # a clone of main itself: check the newest commit
        rev = "HEAD~1"
    else:
        state = "does not exist" if origin is None else "is HEAD itself"
        if _shallow(cwd):
            raise NoBaseError(
                f"shallow clone without the commit before HEAD (origin/main {state}); "
                "fetch it with `git fetch --deepen=1`, or name a base with --base REV"
            )
        raise NoBaseError(f"HEAD is the first commit and origin/main {state}")
    result = _git("merge-base", "HEAD", rev, cwd=cwd)
    if result.returncode != 0:
        if _shallow(cwd):
            raise NoBaseError(
                f"HEAD and {rev} have no common ancestor in this shallow clone; deepen it "
                "(`git fetch --deepen=N` or `git fetch --unshallow`), or name a base with --base"
            )
        raise NoBaseError(f"HEAD and {rev} have no common ancestor")
    return result.stdout.strip()


def base_document(base: str, path: Path) -> dict[str, Any] | None:
    """The schema as committed at ``base``; None when the file did not exist there."""
    # ``<rev>:./<path>`` names the path relative to the working directory.
    result = _git("show", f"{base}:./{path.name}", cwd=path.parent)
    if result.returncode != 0:
        return None
    loaded = json.loads(result.stdout)
    return loaded if isinstance(loaded, dict) else None


def base_file_names(base: str, folder: Path, suffix: str) -> list[str]:
    """Names of the files ending in ``suffix`` directly in ``folder`` as committed at ``base``.

    Empty when the folder did not exist there.
    """
    # --full-tree: inside a subdirectory, ls-tree would otherwise filter by that path again.
    result = _git("ls-tree", "-z", "--full-tree", "--name-only", f"{base}:./", cwd=folder)
    if result.returncode != 0:
        return []
    return sorted(name for name in result.stdout.split("\0") if name.endswith(suffix))
