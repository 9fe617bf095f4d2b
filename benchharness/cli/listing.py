"""``benchharness list encoders|tasks``: every name the resolver and the task plugins know."""

from __future__ import annotations

import argparse

HELP = "list encoders or tasks"


#: the terminal width the short listing fits
WIDTH = 100


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("what", choices=["encoders", "tasks"])
    p.add_argument("--long", action="store_true", help="every column in full (sources, settings), however wide")
    p.add_argument(
        "--mteb",
        action="store_true",
        help="with tasks: mteb's benchmarks and tasks (from the installed mteb's metadata, offline), to run as "
        "mteb:<Name>",
    )


def _clip(text: str, width: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def short_rows(rows: list[dict[str, str]], width: int = WIDTH) -> list[list[str]]:
    """Name, the first words of the source and the description, clipped to fit ``width`` columns of
    a GitHub-style table (3 columns: 10 characters of borders and padding)."""
    name_w = min(36, max(len(r["name"]) for r in rows))
    source_w = min(18, max(len(r["source"]) for r in rows))
    rest = max(20, width - 10 - name_w - source_w)
    return [
        [_clip(r["name"], name_w), _clip(_short_source(r["source"]), source_w), _clip(r["description"], rest)]
        for r in rows
    ]


def _short_source(source: str) -> str:
    """A file named as the source (a config, a runs folder) by its last part: ``--long`` has the path."""
    head, sep, tail = source.partition(" ")
    return (head.rstrip("/").rsplit("/", 1)[-1] + sep + tail) if "/" in head else source


def main(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    if args.what == "encoders":
        from benchharness.evaluation.resolver import Resolver, families

        rows = Resolver(config=args.configuration).describe()
        if args.long:
            print(
                tabulate(
                    [[r["name"], r["source"], r["description"], r["settings"]] for r in rows],
                    headers=["name", "source", "description", "settings"],
                    tablefmt="github",
                )
            )
        else:
            print(tabulate(short_rows(rows), headers=["name", "source", "description"], tablefmt="github"))
            print("(clipped to 100 columns; --long for sources and settings in full)")
        import textwrap

        print(
            "\n"
            + textwrap.fill(
                f"Ad-hoc specs: {', '.join(f.usage for f in families().values())}; compose "
                "post-processors with base+post(k=v,...).",
                WIDTH if not args.long else 10**6,
                break_on_hyphens=False,
            )
        )
        return 0
    if args.mteb:
        return mteb_listing(args.long)
    from benchharness import tasks

    table = tasks.catalogue(args.configuration)
    groups: dict[str, str] = {}
    for group, names in table.groups.items():  # a task's first group: senteval-all holds the others' tasks too
        for name in names:
            groups.setdefault(name, group)
    task_rows: list[list[object]] = []
    for name, factory in table.factories.items():
        try:
            m = factory().metadata  # type: ignore[operator]
        except Exception as exc:
            task_rows.append([name, groups.get(name, ""), "", "", "", "", f"unavailable: {type(exc).__name__}: {exc}"])
            continue
        task_rows.append([name, groups.get(name, ""), m.split, m.main_score, m.protocol, m.n_samples, m.description])
    print(
        tabulate(
            task_rows,
            headers=["task", "group", "split", "main score", "protocol", "n", "description"],
            tablefmt="github",
        )
    )
    return 0


def mteb_listing(long: bool) -> int:
    """mteb's benchmarks, then its tasks, from the metadata the installed mteb ships (no download)."""
    from tabulate import tabulate

    from benchharness.mteb_bridge import mteb_needed

    with mteb_needed("benchharness list tasks --mteb"):
        import mteb
    width = 10**6 if long else 60
    benchmarks = [[f"mteb:{b.name}", len(b.tasks), _clip(b.description or "", width)] for b in mteb.get_benchmarks()]
    print(tabulate(benchmarks, headers=["benchmark", "tasks", "description"], tablefmt="github"))
    print()
    rows = [
        [f"mteb:{t.metadata.name}", t.metadata.type, len(t.metadata.languages), t.metadata.main_score]
        for t in mteb.get_tasks(exclude_superseded=False)
    ]
    print(tabulate(rows, headers=["task", "type", "languages", "main score"], tablefmt="github"))
    print(
        f"\nmteb {mteb.__version__}: {len(benchmarks)} benchmarks, {len(rows)} tasks. Filter with "
        "mteb:<Name>[languages=eng; subsets=...; splits=test; exclusive] (see docs/mteb.md)."
    )
    return 0
