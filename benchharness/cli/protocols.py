"""``benchharness protocols <encoder>``: the encoder's score under every protocol variant papers use."""

from __future__ import annotations

import argparse

HELP = "one encoder's scores under every protocol variant of the literature (why papers disagree)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("encoder", help="an encoder with stored results")
    p.add_argument("--results-dir")
    p.add_argument("--output", "-o", help="write the Markdown table to this file instead of stdout")


def main(args: argparse.Namespace) -> int:
    from benchharness.cli.options import check_output, result_store
    from benchharness.core.errors import InvalidInputError
    from benchharness.reporting.protocol_spread import markdown, spread

    if args.output:
        check_output(args.output, "file", "--output")
    store = result_store(args)
    variants = spread(store, args.encoder)
    if all(v.score is None for v in variants):
        raise InvalidInputError(
            f"no stored results of {args.encoder!r} under {store.root}; "
            f"benchharness run --encoders '{args.encoder}' --tasks sts,transfer first"
        )
    text = markdown(args.encoder, variants)
    if args.output:
        from benchharness.core.atomic import write_text

        write_text(args.output, text + "\n")
    else:
        print(text)
    return 0
