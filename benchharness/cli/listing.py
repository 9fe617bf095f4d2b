"""``benchharness list encoders|tasks``: every name the resolver and the task plugins know."""

from __future__ import annotations

import argparse

HELP = "list encoders or tasks"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("what", choices=["encoders", "tasks"])


def main(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    if args.what == "encoders":
        from benchharness.evaluation.resolver import Resolver, families

        rows = Resolver().describe()
        print(tabulate([[r["name"], r["source"], r["description"], r["settings"]] for r in rows],
                       headers=["name", "source", "description", "settings"], tablefmt="github"))
        print(f"\nAd-hoc specs: {', '.join(f.usage for f in families().values())}; "
              "compose post-processors with base+post(k=v,...).")
        return 0
    from benchharness import tasks
    table = tasks.catalogue()
    groups = {t: g for g, names in table.groups.items() for t in names}
    rows = []
    for name, factory in table.factories.items():
        m = factory().metadata  # type: ignore[operator]
        rows.append([name, groups.get(name, ""), m.split, m.main_score, m.protocol, m.n_samples, m.description])
    print(tabulate(rows, headers=["task", "group", "split", "main score", "protocol", "n", "description"],
                   tablefmt="github"))
    return 0
