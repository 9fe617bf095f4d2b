"""``benchharness export mteb``: stored results in mteb's results layout."""

from __future__ import annotations

import argparse

from benchharness.core.errors import InvalidInputError

HELP = "write stored results in another benchmark's results layout"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "format",
        choices=["mteb"],
        help="mteb: results/<org__name>/<revision>/<Task>.json + model_meta.json, loadable by mteb's "
        "ResultCache (results whose protocol is not an mteb task's are listed, not written)",
    )
    p.add_argument(
        "--out",
        required=True,
        help="an mteb cache folder: mteb.ResultCache(OUT) loads it (mteb's own: $MTEB_CACHE); only files an "
        "export wrote there are replaced",
    )
    p.add_argument("--encoders", help="comma list of encoder names (default: every stored encoder)")
    p.add_argument("--results-dir", help="where the stored result JSON files are (default: results/)")


def main(args: argparse.Namespace) -> int:
    from benchharness.cli.leaderboard import stored_results
    from benchharness.cli.options import check_output
    from benchharness.mteb_bridge import mteb_needed

    with mteb_needed("benchharness export mteb"):  # the missing extra first: nothing else can help without it
        import benchharness.mteb_bridge.export as export
    check_output(args.out, "folder", "--out")
    store = stored_results(args)
    wanted = None if not args.encoders else {n.strip() for n in args.encoders.split(",") if n.strip()}
    results = [r for r in store if wanted is None or r.encoder in wanted]
    if wanted is not None and wanted - {r.encoder for r in results}:
        raise InvalidInputError(
            f"no stored results under {store.root} for encoder(s) "
            f"{', '.join(sorted(wanted - {r.encoder for r in results}))}"
        )
    report = export.export_results(results, args.out)
    print("\n".join(report.lines()))
    print(f"{len(report.exported)} result(s) exported to {args.out}, {len(report.skipped)} not exported")
    return 0
