"""``benchharness push``: a trained run, as a sentence-transformers model with its model card, to the
Hugging Face hub (or, with ``--stage-only``, into a folder to inspect)."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

HELP = "upload a trained run with its model card to the Hugging Face hub"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("encoder", help="a trained run: its folder, registered name or recipe name")
    p.add_argument("--repo-id", help="hub repository, owner/name (required unless --stage-only)")
    p.add_argument("--stage", help="folder to assemble the upload in (default: a temporary one)")
    p.add_argument("--stage-only", action="store_true", help="assemble the folder and stop (no network)")
    p.add_argument("--private", action="store_true", help="create the repository private")
    p.add_argument("--results-dir", help="where the run's stored results are (for the card)")


def main(args: argparse.Namespace) -> int:
    from benchharness.cli.options import check_output, result_store
    from benchharness.core.errors import InvalidInputError
    from benchharness.evaluation.resolver import Resolver
    from benchharness.reporting.sharing import push, run_folder, stage

    if not args.stage_only and not args.repo_id:
        raise InvalidInputError("push needs --repo-id owner/name (or --stage-only to assemble the folder only)")
    if args.stage_only and not args.stage:
        raise InvalidInputError("--stage-only needs --stage FOLDER to leave the assembled folder in")
    if args.stage:
        check_output(args.stage, "folder", "--stage")
    folder = run_folder(dict(Resolver(train_missing=False, config=args.configuration).spec_for(args.encoder)))
    with tempfile.TemporaryDirectory() as scratch:
        staged = stage(
            args.encoder, folder, result_store(args), Path(args.stage or Path(scratch) / "upload"), args.repo_id
        )
        print(f"staged {folder} as {staged}")
        if not args.stage_only:
            print(f"uploaded: {push(staged, args.repo_id, args.private)}")
    return 0
