"""Fixtures for the search tests: a SYNTHETIC recording (analytic model, not measurements).

Real recordings, once committed (``kernels/<name>/recorded/*.json`` or ``results/**/recording*.json``),
are picked up by ``test_real_recordings.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ktx.search import synthetic
from ktx.search.recording import Recording, write

ROOT = Path(__file__).resolve().parents[2]
SILU = ROOT / "kernels" / "silu_and_mul"
#: Tuned shapes of the CLI tests, and the midpoints ``--holdout auto`` picks between them.
TUNED = ((1, 4096), (16, 4096), (256, 4096), (1, 11008))
HOLDOUT = ((4, 4096), (64, 4096))
TUNED_ARG = ";".join(synthetic.shape_name(t, d) for t, d in TUNED)


@pytest.fixture(scope="session")
def recording_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("recording") / "synthetic_silu.json"
    write(synthetic.recording((*TUNED, *HOLDOUT), kernel="silu_and_mul"), path)
    return path


@pytest.fixture(scope="session")
def recording(recording_path: Path) -> Recording:
    return Recording.load(recording_path)
