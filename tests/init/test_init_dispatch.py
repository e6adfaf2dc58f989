"""``ktx init`` on kernels whose element types the host code picks at run time: a dispatch
macro around the launch (``tests/init/dispatch/kernel.cu``), or calls of a template launcher
whose types are deduced from their arguments' casts, one template caller up
(``convert.cu``, as ggml's get_rows writes it). The draft takes one case as a guess (fp32
first), under a TODO that names the others, and flags the element types that follow.

Regenerate the goldens after a deliberate change with ``KTX_UPDATE_GOLDEN=1``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from ktx.draft.drafter import draft

HERE = Path(__file__).parent / "dispatch"


@pytest.mark.parametrize(("source", "kernel"), [("kernel.cu", "scale_rows"), ("convert.cu", "convert_k")])
def test_draft_guesses_a_dispatched_type_under_a_todo(source: str, kernel: str, tmp_path: Path) -> None:
    for f in HERE.iterdir():
        if f.suffix in (".cu", ".h"):
            shutil.copy(f, tmp_path / f.name)
    text = draft(tmp_path / source, kernel, tmp_path).text.replace(str(tmp_path) + "/", "")
    golden = HERE / f"{kernel}.toml"
    if os.environ.get("KTX_UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text()
    lines = text.splitlines()
    targs = next(i for i, ln in enumerate(lines) if ln.startswith("template_args"))
    assert lines[targs] == 'template_args = ["float", "float"]'
    assert lines[targs - 1].startswith("# TODO: template arguments of") and "guessed" in lines[targs - 1]
    assert "others give" in lines[targs - 1]  # the other cases are named
    for i, ln in enumerate(lines):
        if ln == 'dtype = "fp32"' and lines[i - 2].startswith("name = ") and "n" not in lines[i - 2][7:]:
            assert lines[i - 1].startswith("# TODO: element type of")  # a guessed type is flagged
