"""Render a run as Markdown (plots as files beside it) and as one self-contained HTML page.

The HTML page needs nothing but itself: styles are inline and plots are base64 ``data:`` PNGs,
so it can be mailed, attached to a pull request or archived. A short inline script marks the
page with how many of its images decoded (``<body data-images="5/5">``), which is what the
headless-browser test reads; the page shows the same without scripts.
"""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ktx.report.data import RunData, dispatched_fast_math
from ktx.report.diffs import PassDiff, pass_diffs, patch, tuned_source
from ktx.report.plots import PLOTS


@dataclass(frozen=True)
class ReportFiles:
    markdown: Path
    html: Path
    patch: Path | None
    plots: tuple[Path, ...]


def _f(value: float | None, spec: str, suffix: str = "") -> str:
    return "-" if value is None else format(value, spec) + suffix


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _config(config: object) -> str:
    if not config:
        return "original"
    return json.dumps(config, separators=(",", ":"))


def _cell(text: str) -> str:
    """Markdown table cell: no pipes or newlines."""
    return " ".join(text.replace("|", "\\|").split())


def fast_math_text(run: RunData) -> str:
    """The spec's flags, the pass, and what counts: the configs the dispatch table runs."""
    fm = run.state.get("fast_math", {}) or {}
    parts = [
        "the spec already builds with -use_fast_math"
        if fm.get("spec_flags")
        else "the spec builds without -use_fast_math"
    ]
    parts.append(
        "the fast-math pass is in the final pipeline"
        if fm.get("pass_in_pipeline")
        else "the fast-math pass was not used"
    )
    if not run.best_round:
        parts.append("the original kernel is kept")
    elif run.dispatch is None:
        chosen = [str(c) for c in fm.get("chosen_at") or []]
        parts.append(
            f"best configs switch it on at {', '.join(chosen)} (no dispatch table to check)"
            if chosen
            else "no best config switches it on (no dispatch table to check)"
        )
    else:
        used = dispatched_fast_math(run.dispatch)
        parts.append(
            f"the dispatch table runs it at {'; '.join(used)}"
            if used
            else "no dispatched config switches it on"
        )
    return "; ".join(parts) + "."


def summary_items(run: RunData) -> list[tuple[str, str]]:
    s = run.state
    req = s.get("request", {}) or {}
    dev = s.get("device", {}) or {}
    usage = s.get("usage", {}) or {}
    copy = dev.get("copy_bandwidth_gbs") or 0
    model = f" ({req.get('model')})" if req.get("model") else ""
    return [
        ("kernel", f"{run.kernel} ({run.source_rel})"),
        ("device", f"{dev.get('name', '?')}, {dev.get('sm_count', '?')} SMs"
                   + (f", copy bandwidth {copy:.0f} GB/s" if copy else "")),
        ("planner", str(req.get("planner", "rules")) + model),
        ("rounds", f"{len(run.rounds)} run, best round {run.best_round}; "
                   f"stopped: {s.get('stop_reason', '?')}"),
        ("final pipeline", f"`{run.pipeline}`" if run.pipeline else "none (the original kernel is kept)"),
        ("geometric-mean speedup", _f(run.geomean, ".3f", "x")),
        ("wall time" + (" of the replay (the recorded run's: see the note above)"
                        if any(n.startswith("replay:") for n in run.notes) else ""),
         _f(s.get("wall_s"), ".1f", " s")),
        ("LLM tokens", f"{usage.get('total_tokens', 0)} in {usage.get('requests', 0)} request(s), "
                       f"{usage.get('cache_hits', 0)} cached answer(s)"),
        ("fast math", fast_math_text(run)),
    ]  # fmt: skip


def shape_rows(run: RunData) -> list[list[str]]:
    return [
        [
            s.shape, s.metric, _f(s.original_us, ".2f"), _f(s.final_us, ".2f"), _f(s.speedup, ".3f", "x"),
            s.remeasured or "-", _pct(s.original_sol), _pct(s.final_sol), _config(s.config),
        ]
        for s in run.shapes
    ]  # fmt: skip


SHAPE_HEAD = [
    "shape", "metric", "original µs", "tuned µs", "speedup", "re-measured [95%]", "SOL before", "SOL after",
    "config",
]  # fmt: skip
ROUND_HEAD = ["round", "planner", "pipeline", "why", "status", "geomean", "did not apply", "evals", "tokens"]


def round_rows(run: RunData) -> list[list[str]]:
    rows = []
    for r in run.rounds:
        failed = "; ".join(f"{n}: {'; '.join(why[:2]) or 'no sites'}" for n, why in r.failures)
        planner = r.planner + (f" ({r.attempts} attempt(s); {r.fallback})" if r.fallback else "")
        note = f" {r.note}" if r.note else ""
        rows.append([
            str(r.index), planner, f"`{r.pipeline}`" if r.pipeline else "-", r.rationale, r.status + note,
            _f(r.geomean, ".3f", "x"), failed or "-", str(r.evaluations), str(r.tokens),
        ])  # fmt: skip
    return rows


def _md_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def _diffs(run: RunData) -> list[PassDiff]:
    if run.trace is None or not run.original:
        return []
    try:
        return pass_diffs(run.original, run.trace)
    except Exception:  # a trace from another source: the report says so instead of failing
        return []


def markdown(run: RunData, plots: Sequence[tuple[str, str, str | None]], patch_name: str | None) -> str:
    """``plots``: (stem, title, relative file or None)."""
    out = [f"# ktx optimize: {run.kernel}", ""]
    out += [f"> {n}" for n in run.notes] + ([""] if run.notes else [])
    out += [f"- **{k}**: {v}" for k, v in summary_items(run)] + [""]
    out += ["## Per shape", "", *_md_table(SHAPE_HEAD, shape_rows(run)), ""]
    out += ["## What each round tried, and why", "", *_md_table(ROUND_HEAD, round_rows(run)), ""]
    out += ["## Plots", ""]
    for _, title, rel in plots:
        out += [f"### {title}", "", f"![{title}]({rel})" if rel else "_nothing to plot_", ""]
    out += ["## Knob importance", "", run.importance_note, ""]
    if run.importance:
        out += [*_md_table(["knob", "importance"], [[k, f"{v:.3f}"] for k, v in run.importance.items()]), ""]
    out += ["## Failures by type", ""]
    failures = run.failures
    out += _md_table(["type", "count"], [[k, str(v)] for k, v in failures.items()]) if failures else ["none"]
    out += ["", "## The diff each pass made (final pipeline)", ""]
    diffs = _diffs(run)
    if not diffs:
        out += ["No pass changed the kernel." if not run.pipeline else "The trace could not be replayed.", ""]
    for d in diffs:
        out += [f"### {d.pass_name}" + (f" (`{d.invocation}`)" if d.invocation != d.pass_name else ""), ""]
        if d.reason and d.reason != "pipeline":
            out += [f"_{d.reason}_", ""]
        out += [f"- {o}" for o in d.outcomes] + ([""] if d.outcomes else [])
        out += ["```diff", d.diff.rstrip("\n") or "(no change)", "```", ""]
    out += ["## Files", ""]
    if patch_name:
        out += [
            f"- `{patch_name}`: unified diff of `{run.source_rel}` and the new dispatch header (`patch -p1`)"
        ]
    if run.dispatch_header:
        out += ["", "### Dispatch header", "", "```cpp", run.dispatch_header.rstrip("\n"), "```"]
    return "\n".join(out) + "\n"


CSS = "".join(
    (
        "body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;",
        "max-width:1180px;margin:24px auto;padding:0 16px;color:#222}",
        "h1{font-size:24px}",
        "h2{font-size:19px;margin-top:32px;border-bottom:1px solid #ddd}",
        "h3{font-size:15px}",
        "table{border-collapse:collapse;margin:8px 0;font-size:13px}",
        "th,td{border:1px solid #ddd;padding:3px 7px;vertical-align:top}",
        "th{background:#f5f5f5;text-align:left}",
        "td.n{text-align:right;font-variant-numeric:tabular-nums}",
        "code,pre{font:12px/1.35 ui-monospace,SFMono-Regular,Menlo,monospace}",
        "pre{background:#fafafa;border:1px solid #eee;padding:8px;overflow-x:auto}",
        ".add{color:#1b5e20;background:#e8f5e9}",
        ".del{color:#b71c1c;background:#ffebee}",
        ".hunk{color:#6a1b9a}",
        ".note{background:#fff8e1;border-left:4px solid #ffb300;padding:6px 10px}",
        "img{max-width:100%;border:1px solid #eee}",
        ".improved{color:#2e7d32;font-weight:600}",
        ".no-gain{color:#757575}",
        ".template-failed,.search-failed{color:#c62828}",
    )
)

CHECK = (
    "<script>window.addEventListener('load',function(){var i=document.images,n=0;"
    "for(var k=0;k<i.length;k++){if(i[k].complete&&i[k].naturalWidth>0)n++;}"
    "document.body.setAttribute('data-images',n+'/'+i.length);});</script>"
)


def _h(text: str) -> str:
    return html.escape(text, quote=True)


def _inline(text: str) -> str:
    """Escape, then render `code` spans."""
    parts = _h(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def _html_table(head: Sequence[str], rows: Sequence[Sequence[str]], numeric: Callable[[int], bool]) -> str:
    out = ["<table><tr>" + "".join(f"<th>{_h(h)}</th>" for h in head) + "</tr>"]
    for row in rows:
        cells = []
        for i, c in enumerate(row):
            cls = ' class="n"' if numeric(i) else ""
            cells.append(f"<td{cls}>{_inline(c)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    return "\n".join(out) + "</table>"


def _diff_html(text: str) -> str:
    lines = []
    for line in text.splitlines():
        cls = ""
        if line.startswith("@@"):
            cls = "hunk"
        elif line.startswith("+") and not line.startswith("+++"):
            cls = "add"
        elif line.startswith("-") and not line.startswith("---"):
            cls = "del"
        lines.append(f'<span class="{cls}">{_h(line)}</span>' if cls else _h(line))
    return "<pre>" + "\n".join(lines) + "</pre>"


def html_page(run: RunData, plots: Sequence[tuple[str, str, bytes | None]], patch_name: str | None) -> str:
    b: list[str] = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>ktx optimize: {_h(run.kernel)}</title><style>{CSS}</style></head><body>",
        f"<h1>ktx optimize: <code>{_h(run.kernel)}</code></h1>",
    ]
    b += [f'<p class="note">{_h(n)}</p>' for n in run.notes]
    b.append(
        "<ul>" + "".join(f"<li><b>{_h(k)}</b>: {_inline(v)}</li>" for k, v in summary_items(run)) + "</ul>"
    )
    b += ["<h2>Per shape</h2>", _html_table(SHAPE_HEAD, shape_rows(run), lambda i: 2 <= i <= 7)]
    b.append("<h2>What each round tried, and why</h2>")
    table = _html_table(ROUND_HEAD, round_rows(run), lambda i: i in (0, 5, 7, 8))
    for r in run.rounds:  # colour the status cells
        table = table.replace(f"<td>{_h(r.status)}", f'<td class="{_h(r.status)}">{_h(r.status)}', 1)
    b.append(table)
    b.append("<h2>Plots</h2>")
    for stem, title, png in plots:
        b.append(f"<h3>{_h(title)}</h3>")
        if png is None:
            b.append("<p><i>nothing to plot</i></p>")
        else:
            data = base64.b64encode(png).decode("ascii")
            b.append(f'<img id="plot-{stem}" alt="{_h(title)}" src="data:image/png;base64,{data}">')
    b += ["<h2>Knob importance</h2>", f"<p>{_h(run.importance_note)}</p>"]
    if run.importance:
        rows = [[k, f"{v:.3f}"] for k, v in run.importance.items()]
        b.append(_html_table(["knob", "importance"], rows, lambda i: i == 1))
    b.append("<h2>Failures by type</h2>")
    failures = run.failures
    if failures:
        b.append(_html_table(["type", "count"], [[k, str(v)] for k, v in failures.items()], lambda i: i == 1))
    else:
        b.append("<p>none</p>")
    b.append("<h2>The diff each pass made (final pipeline)</h2>")
    diffs = _diffs(run)
    if not diffs:
        b.append(
            "<p>"
            + ("No pass changed the kernel." if not run.pipeline else "The trace could not be replayed.")
            + "</p>"
        )
    for d in diffs:
        b.append(f"<h3>{_h(d.pass_name)}</h3>")
        if d.outcomes:
            b.append("<ul>" + "".join(f"<li>{_h(o)}</li>" for o in d.outcomes) + "</ul>")
        b.append(_diff_html(d.diff or "(no change)"))
    b.append("<h2>Files</h2>")
    if patch_name:
        b.append(f"<p><code>{_h(patch_name)}</code>: unified diff of <code>{_h(run.source_rel)}</code> "
                 "and the new dispatch header (apply with <code>patch -p1</code>).</p>")  # fmt: skip
    if run.dispatch_header:
        b += ["<h3>Dispatch header</h3>", f"<pre>{_h(run.dispatch_header)}</pre>"]
    b += [CHECK, "</body></html>"]
    return "\n".join(b) + "\n"


def write_report(run: RunData, out_dir: Path) -> ReportFiles:
    """report.md (+ plots/*.png), report.html (self-contained) and ktx.patch in ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    plot_dir = out_dir / "plots"
    plot_dir.mkdir(exist_ok=True)
    drawn: list[tuple[str, str, bytes | None]] = [(stem, title, draw(run)) for stem, title, draw in PLOTS]
    files: list[Path] = []
    for stem, _, png in drawn:
        if png is not None:
            path = plot_dir / f"{stem}.png"
            path.write_bytes(png)
            files.append(path)
    patch_path: Path | None = None
    header_name = f"{run.kernel}_dispatch.h"
    tuned, _what = tuned_source(run.original, run.variants, run.dispatch, header_name)
    text = (
        patch(run.original, run.source_rel, tuned, run.dispatch_header, header_name) if run.best_round else ""
    )
    if text:
        patch_path = out_dir / "ktx.patch"
        patch_path.write_text(text)
    rel = [(stem, title, f"plots/{stem}.png" if png is not None else None) for stem, title, png in drawn]
    md = out_dir / "report.md"
    md.write_text(markdown(run, rel, patch_path.name if patch_path else None))
    page = out_dir / "report.html"
    page.write_text(html_page(run, drawn, patch_path.name if patch_path else None))
    return ReportFiles(md, page, patch_path, tuple(files))
