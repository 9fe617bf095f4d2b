"""``benchharness report``: one self-contained HTML page of the stored results, readable offline.

Everything is inside the file: the styles, a small sort-and-filter script (no framework, no CDN) and
its own figures as inline SVG drawn by matplotlib (the analysis figures, files from elsewhere, as
``<img>`` data URIs: never markup of the page, so a script inside one never runs). The page holds,
per leaderboard section:

- the leaderboard table (``reporting.table_formats.html_table``), sortable by any column and
  filterable by encoder name and row group, with the 95% intervals under each score;
- per-task bars with interval whiskers, one panel per task, every panel from zero on one shared axis;
- the pairwise-significance matrix: for rows A and columns B, on how many of the section's tasks A
  is significantly better than B (the leaderboard's paired tests, p < 0.05, no multiplicity
  correction), over the results that keep per-item outputs;

then each encoder's sizes, quality against bytes per vector (``reporting.size_curve``); on the
tasks where a sparse or multi-vector model has a search result, every kind's quality against bytes
per document and operations per query-document pair, as a figure and a table a task
(``reporting.cost_curve``); each base encoder's protocol spread (``reporting.protocol_spread``), the
analysis figures of ``benchharness analyze`` (when its folder is given) and, per encoder, its
provenance: identity, model and revision, recipe, versions, protocol variants and date, and for an
encoder with prompts, its prompts by task and the text each task's roles got in front of their
sentences (``prompts_applied``). Under each table, as on the leaderboard, the prompts of its rows
and the instructions of its tasks (``table_formats.html_prompt_notes``), all as escaped text.

The sort and filter state can be set from the address (``#sort=<table>:<column>:asc|desc`` and
``&filter=<text>``), so a sorted view can be linked, and a headless browser can check the script.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchharness.core.provenance import now
from benchharness.core.results import Result, ResultStore
from benchharness.core.version import __version__
from benchharness.reporting.board import Board, Table
from benchharness.reporting.cost_curve import BYTES_UNIT, WORK_UNIT, CostPoint, amount, cost_figure, cost_points
from benchharness.reporting.leaderboard import ALPHA, build, prompt_text, prompts_of
from benchharness.reporting.size_curve import size_families, size_figure
from benchharness.reporting.table_formats import html_prompt_notes, html_table

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.5em;color:#222;max-width:1400px}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:2em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;font-size:12px;margin:.5em 0}
th,td{border:1px solid #ddd;padding:2px 6px;text-align:right;white-space:nowrap}
th{background:#f4f4f4;cursor:pointer;position:sticky;top:0}th.sorted-asc:after{content:" \\25B2"}
th.sorted-desc:after{content:" \\25BC"}
td:first-child,td:nth-child(2),th:first-child,th:nth-child(2){text-align:left;white-space:normal;max-width:20em;
overflow-wrap:anywhere}
td.best{font-weight:bold}td .ci{display:block;color:#888;font-size:10px}
tr[data-group=published] td{color:#666;font-style:italic}
.controls{position:sticky;top:0;background:#fff;padding:.5em 0;z-index:2;border-bottom:1px solid #eee}
.note{color:#666;font-size:12px}.matrix td{text-align:center;min-width:1.6em}
details{margin:.3em 0}summary{cursor:pointer}figure{margin:.5em 0}svg,img{max-width:100%;height:auto}
"""

_SCRIPT = """
function sortTable(table, col, dir) {
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  const key = r => { const c = r.cells[col]; const v = c.dataset.v;
    return (v === undefined) ? c.textContent.trim().toLowerCase() : (v === '' ? null : parseFloat(v)); };
  rows.sort((a, b) => { const x = key(a), y = key(b);
    if (x === null && y === null) return 0; if (x === null) return 1; if (y === null) return -1;
    const c = (typeof x === 'number') ? x - y : String(x).localeCompare(String(y));
    return dir === 'asc' ? c : -c; });
  rows.forEach(r => body.appendChild(r));
  table.querySelectorAll('th').forEach(th => th.classList.remove('sorted-asc', 'sorted-desc'));
  table.tHead.rows[0].cells[col].classList.add('sorted-' + dir);
  table.dataset.sort = col + ':' + dir;
}
function applyFilter() {
  const text = document.getElementById('filter').value.toLowerCase();
  const groups = new Set(Array.from(document.querySelectorAll('.group:checked')).map(c => c.value));
  document.querySelectorAll('table.board tbody tr').forEach(r => {
    const show = r.dataset.encoder.toLowerCase().includes(text) && groups.has(r.dataset.group);
    r.style.display = show ? '' : 'none'; });
}
document.querySelectorAll('table.board').forEach(table => {
  table.querySelectorAll('th').forEach((th, col) => th.addEventListener('click', () => {
    const [c, d] = (table.dataset.sort || '').split(':');
    sortTable(table, col, (parseInt(c) === col && d === 'desc') ? 'asc' : 'desc'); }));
});
document.getElementById('filter').addEventListener('input', applyFilter);
document.querySelectorAll('.group').forEach(c => c.addEventListener('change', applyFilter));
const params = new URLSearchParams(location.hash.slice(1));
if (params.get('filter')) document.getElementById('filter').value = params.get('filter');
if (params.get('sort')) { const [t, c, d] = params.get('sort').split(':');
  const table = document.getElementById('board-' + t); if (table) sortTable(table, parseInt(c), d || 'desc'); }
applyFilter();
document.body.dataset.ready = 'yes';
"""


def _svg(fig) -> str:
    """A matplotlib figure as inline SVG markup (no XML prolog, fixed ids so rewrites are stable)."""
    import matplotlib.pyplot as plt

    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def _plain(text: str) -> str:
    """A name as matplotlib text: its dollar signs escaped, so a name is never read as mathtext."""
    return text.replace("$", r"\$")


def axis_range(table: Table) -> tuple[float, float]:
    """One x range for every panel of a table's bars: from zero (or the lowest negative score or
    interval end) to past the highest score or interval end, so bars of different panels compare at
    a glance and no whisker leaves its frame."""
    ends = [0.0]
    for line in table.lines:
        if line.group == "published":
            continue
        for cell in line.cells:
            if cell.value is not None:
                ends += [cell.value, *(cell.interval or ())]
    low, high = min(ends), max(ends)
    pad = 0.03 * ((high - low) or 1.0)
    return (low - pad if low < 0 else 0.0, high + pad)


def bars(table: Table) -> str:
    """Per-task horizontal bars of the measured rows with their 95% interval whiskers, as SVG: bars
    start at zero and every panel shares one x range (``axis_range``)."""
    from benchharness.reporting.analysis import pyplot_agg

    plt = pyplot_agg()
    lines = [line for line in table.lines if line.group != "published"]
    if not lines:
        return ""
    columns = len(table.headers)
    fig, axes = plt.subplots(1, columns, figsize=(2.1 * columns, 0.22 * len(lines) + 1.2), sharey=True, squeeze=False)
    names = [_plain(line.encoder) for line in lines][::-1]
    left, right = axis_range(table)
    for j, header in enumerate(table.headers):
        ax = axes[0, j]
        values = [line.cells[j].value for line in lines][::-1]
        ivs = [line.cells[j].interval for line in lines][::-1]
        ys = range(len(lines))
        ax.barh(list(ys), [v if v is not None else 0 for v in values], color="tab:blue", alpha=0.6)
        for y, v, iv in zip(ys, values, ivs):
            if v is not None and iv is not None:
                # a percentile bootstrap interval may leave out its own estimate: whiskers never negative
                ax.errorbar(
                    [v],
                    [y],
                    xerr=[[max(0.0, v - iv[0])], [max(0.0, iv[1] - v)]],
                    color="black",
                    capsize=2,
                    linewidth=0.8,
                )
        ax.set_xlim(left, right)
        ax.axvline(0.0, color="black", linewidth=0.6)
        ax.set_title(_plain(header), fontsize=9)
        ax.tick_params(labelsize=7)
    axes[0, 0].set_yticks(list(range(len(lines))), names, fontsize=7)
    return _svg(fig)


def significance_matrix(table: Table, store: ResultStore) -> tuple[str, int]:
    """The pairwise matrix of significant wins over the section's tasks, as an HTML table, and the
    number of tests made."""
    from benchharness.core.errors import InvalidInputError
    from benchharness.scoring.confidence import column_test_p

    lines = [line for line in table.lines if line.results]
    columns = list(table.section.columns)
    items: dict[tuple[str, str], Any] = {}
    for line in lines:
        for column in columns:
            result = line.results.get(column.task)
            if result is not None and store.has_items(result):
                items[(line.encoder, column.task)] = (result, store.load_items(result))
    usable = [line for line in lines if any((line.encoder, c.task) in items for c in columns)]
    if len(usable) < 2:
        return "", 0
    wins = {(a.encoder, b.encoder): 0 for a in usable for b in usable}
    tests = 0
    for i, a in enumerate(usable):
        for b in usable[i + 1 :]:
            for j, column in enumerate(columns):
                if (a.encoder, column.task) not in items or (b.encoder, column.task) not in items:
                    continue
                (ra, ia), (_, ib) = items[(a.encoder, column.task)], items[(b.encoder, column.task)]
                try:
                    p = column_test_p(column.task, column.metric or ra.main_metric, ia, ib)
                except InvalidInputError:
                    continue
                tests += 1
                va, vb = a.cells[j].value, b.cells[j].value
                if p < ALPHA and va is not None and vb is not None and va != vb:
                    wins[(a.encoder, b.encoder) if va > vb else (b.encoder, a.encoder)] += 1
    head = "".join(f'<th title="{html.escape(b.encoder)}">{k + 1}</th>' for k, b in enumerate(usable))
    rows = []
    for k, a in enumerate(usable):
        cells = []
        for b in usable:
            n = wins[(a.encoder, b.encoder)]
            shade = "" if a is b else f' style="background:rgba(40,120,200,{min(1.0, n / len(columns)):.2f})"'
            cells.append(f"<td{shade}>{'' if a is b else n}</td>")
        rows.append(f"<tr><td>{k + 1}. {html.escape(a.encoder)}</td>{''.join(cells)}</tr>")
    return (
        f'<table class="matrix"><thead><tr><th>row beats column on n of {len(columns)} tasks</th>{head}'
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    ), tests


def _by_set(results: list[Result], of: Callable[[Result], str]) -> list[tuple[str, list[str]]]:
    """The distinct texts ``of(result)`` gives, each with the tasks of the results that give it."""
    tasks: dict[str, list[str]] = {}
    for r in sorted(results, key=lambda r: r.task):
        tasks.setdefault(of(r), []).append(r.task)
    return list(tasks.items())


def _prompts_rows(results: list[Result]) -> list[tuple[str, str]]:
    """The provenance rows of an encoder's prompts: each set with its tasks where they differ, and
    what each task's roles got in front of their sentences; none for an encoder without prompts."""
    sets = _by_set(results, lambda r: ", ".join(prompt_text(prompts_of(r))))
    if all(not text for text, _ in sets):
        return []
    shown = sets[0][0] if len(sets) == 1 else "; ".join(f"{', '.join(tasks)}: {text or 'none'}" for text, tasks in sets)

    def applied(r: Result) -> str:
        roles = r.encoder_metadata.get("prompts_applied")
        return ", ".join(f"{role}={str(text)!r}" for role, text in roles.items()) if isinstance(roles, dict) else ""

    by_text = "; ".join(f"{', '.join(tasks)}: {text}" for text, tasks in _by_set(results, applied) if text)
    return [("prompts", shown), ("prompts applied", by_text)]


def _provenance(results: list[Result]) -> str:
    by_encoder: dict[str, list[Result]] = {}
    for r in results:
        by_encoder.setdefault(r.encoder, []).append(r)
    parts = []
    for encoder, rs in sorted(by_encoder.items()):
        first = rs[0]
        identity = {k: v for k, v in first.encoder_identity.items() if k != "modules"}
        recipe = (first.encoder_metadata.get("training") or {}).get("recipe") or {}
        variants = sorted({f"{r.task}: {r.protocol.get('variant')}" for r in rs})
        versions = {
            k: first.versions.get(k)
            for k in ("benchharness", "git_commit", "torch", "transformers", "sentence_transformers", "python")
            if k in first.versions
        }
        rows = [
            ("identity", identity.pop("hash", "")),
            ("encoder", identity),
            ("recipe", recipe.get("command", "")),
            *_prompts_rows(rs),
            ("versions", versions),
            ("protocols", "; ".join(variants)),
            ("dates", f"{min(r.date for r in rs)[:10]} .. {max(r.date for r in rs)[:10]}"),
        ]
        body = "".join(
            f"<tr><td>{html.escape(k)}</td><td style='text-align:left;white-space:normal'>"
            f"{html.escape(str(v))}</td></tr>"
            for k, v in rows
            if v
        )
        parts.append(
            f"<details><summary>{html.escape(encoder)} ({len(rs)} results)</summary><table>{body}</table></details>"
        )
    return "\n".join(parts)


def _analysis(folder: Path | None) -> str:
    if folder is None:
        return (
            '<p class="note">No analysis folder given: <code>benchharness analyze A B ... --out DIR</code>, '
            "then <code>benchharness report --analysis DIR</code>.</p>"
        )
    shown = []
    for name in ("alignment-uniformity.svg", "cosine-levels.svg", "size-curve.svg", "cost.svg"):
        if (folder / name).is_file():
            # a file from elsewhere is an image, never markup of the page: scripts in an <img> never run
            data = base64.b64encode((folder / name).read_bytes()).decode("ascii")
            shown.append(
                f'<figure><img src="data:image/svg+xml;base64,{data}" alt="{name}">'
                f"<figcaption>{name}</figcaption></figure>"
            )
    return "\n".join(shown) or f'<p class="note">{html.escape(str(folder))} holds no analysis figures (SVG).</p>'


def cost_section(by_task: dict[str, list[CostPoint]]) -> str:
    """Every kind's quality against cost (``reporting.cost_curve``): the figure, then a table a task
    of the points it draws; nothing without points."""
    figure = cost_figure(by_task)
    if figure is None:
        return ""
    tables = []
    for task, points in by_task.items():
        rows = "".join(
            f"<tr><td>{html.escape(p.encoder)}</td><td>{html.escape(p.kind)}</td><td>{p.score:.2f}"
            + (f'<span class="ci">[{p.interval[0]:.2f}, {p.interval[1]:.2f}]</span>' if p.interval else "")
            + f"</td><td>{amount(p.bytes_per_document)}</td><td>{amount(p.work)}</td></tr>"
            for p in points
        )
        tables.append(
            f"<details><summary>{html.escape(task)} ({html.escape(points[0].metric)})</summary><table><thead><tr>"
            f"<th>encoder</th><th>kind</th><th>score</th><th>{BYTES_UNIT}</th><th>{WORK_UNIT}</th></tr></thead>"
            f"<tbody>{rows}</tbody></table></details>"
        )
    return (
        "<h2>Quality against cost</h2>"
        f"<figure>{_svg(figure)}</figure>{''.join(tables)}"
        '<p class="note">On each task where a sparse or multi-vector model has a search result, every result: the '
        "score and its 95% interval against the bytes one document takes in the index (a dense vector's, or the "
        "task's quantized index's; a sparse row's values and indices; a multi-vector model's float32 token "
        "vectors) and against the operations that score one query against one document (dense: d multiply-adds, "
        "binary d one-bit operations, 64 to a word; sparse: the expected terms active in both, avg_flops; "
        "multi-vector: query tokens x document tokens x dimension), both on log scales.</p>"
    )


def protocol_tables(board: Board, store: ResultStore) -> str:
    """The protocol spread (``reporting.protocol_spread``) of each base encoder shown: its score
    under every variant papers report, with the distance from the harness's default."""
    from benchharness.reporting.protocol_spread import PAPERS, delta_text, spread

    encoders = list(dict.fromkeys(line.encoder for t in board.tables for line in t.lines if line.group == "base"))
    parts = []
    for encoder in encoders:
        rows, default = [], None
        for v in spread(store, encoder):
            if v.score is None:
                continue
            default = v.score if v.default else default
            delta = "" if v.default or default is None else delta_text(v.score - default)
            rows.append(
                f"<tr><td>{html.escape(v.task)}</td><td>{html.escape(v.variant)}"
                f"{' (default)' if v.default else ''}</td><td>{v.score:.2f}</td><td>{delta}</td></tr>"
            )
        parts.append(
            f"<details><summary>{html.escape(encoder)}</summary><table><thead><tr><th>task</th>"
            f"<th>variant</th><th>score</th><th>vs default</th></tr></thead><tbody>{''.join(rows)}"
            "</tbody></table></details>"
        )
    papers = "".join(f"<li>{html.escape(p)}: {html.escape(t)}</li>" for p, t in PAPERS.items())
    which = (
        "the published rows" if board.published_rows else "the method papers (no published row is shown on this page)"
    )
    return "\n".join(parts) + f'<p class="note">Variants {which} report:</p><ul class="note">{papers}</ul>'


def render(board: Board, store: ResultStore, analysis_dir: Path | None = None) -> str:
    """The whole page."""
    sections = []
    for n, table in enumerate(board.tables):
        matrix, tests = significance_matrix(table, store)
        sections += [
            f"<h2>{html.escape(table.section.title)}</h2>",
            html_table(table, n),
            *html_prompt_notes(table),
            *(f'<p class="note">{html.escape(note)}</p>' for note in table.notes),
        ]
        figure = bars(table)
        if figure:
            sections.append(
                f"<details open><summary>Per-task scores with 95% intervals</summary>"
                f"<figure>{figure}</figure></details>"
            )
        if matrix:
            sections.append(
                f"<details><summary>Pairwise significance ({tests} paired tests, p &lt; {ALPHA}, "
                f"no multiplicity correction)</summary>{matrix}</details>"
            )
    groups = sorted({line.group for t in board.tables for line in t.lines})
    checks = "".join(f'<label><input type="checkbox" class="group" value="{g}" checked> {g}</label> ' for g in groups)
    results = [r for r in store if any(r.encoder == line.encoder for t in board.tables for line in t.lines)]
    sizes = size_figure(size_families(results))
    size_section = (
        "<h2>Quality against size</h2>"
        f"<figure>{_svg(sizes)}</figure>"
        '<p class="note">Each encoder\'s truncated and quantized variants, with the encoder itself as the full '
        "vector: the score and its 95% interval against the bytes one vector takes (log scale). Whether a size is "
        "below the full vector: <code>benchharness compare</code> with its value list.</p>"
        if sizes is not None
        else ""
    ) + cost_section(cost_points(results))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>benchharness report</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_STYLE}</style></head>
<body>
<h1>benchharness report</h1>
<p class="note">From the result files under <code>{html.escape(board.results_label)}</code>, made {now()[:19]}
by benchharness {html.escape(__version__)}. Bold: best in its column; &dagger;: not significantly different
from the best measured score (paired test on per-item outputs, p &ge; {ALPHA}); grey under a score: its 95%
bootstrap interval. Click a column to sort.</p>
<div class="controls">Filter encoders: <input id="filter" type="search" placeholder="name contains...">
{checks}</div>
{"".join(sections)}
{size_section}
<h2>Why papers disagree: the protocol spread</h2>
{protocol_tables(board, store)}
<h2>Analysis</h2>
{_analysis(analysis_dir)}
<h2>Provenance</h2>
{_provenance(results)}
<script>{_SCRIPT}</script>
</body></html>
"""


def write_report(
    store: ResultStore,
    out: Path,
    published_dir: Path | Traversable | None,
    *,
    analysis_dir: Path | None = None,
    results_label: str | None = None,
    **filters: Any,
) -> Path:
    """Write ``<out>/index.html``; returns its path."""
    from benchharness.core.atomic import write_text

    board = build(store, published_dir, results_label=results_label, **filters)
    path = out / "index.html"
    write_text(path, render(board, store, analysis_dir))
    return path
