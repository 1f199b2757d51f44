# Generated from schemas/ by `nox -s codegen` (python -m harness.contract generate). Do not edit.
