"""``ktx report``: a ``ktx optimize`` run as Markdown, one self-contained HTML page, and a patch.

>>> from pathlib import Path
>>> files = make_report(Path(".ktx/optimize/silu_and_mul"))     # doctest: +SKIP
>>> files.html.name, files.patch.name                              # doctest: +SKIP
('report.html', 'ktx.patch')
"""

from __future__ import annotations

from pathlib import Path

from ktx.report.data import RunData, load_run
from ktx.report.render import ReportFiles, write_report


def make_report(run_dir: Path, out_dir: Path | None = None) -> ReportFiles:
    """Read ``run_dir`` and write the report into ``out_dir`` (default ``run_dir/report``)."""
    run = load_run(run_dir)
    return write_report(run, out_dir or run_dir / "report")


__all__ = ["ReportFiles", "RunData", "load_run", "make_report", "write_report"]
