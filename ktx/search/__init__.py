"""Search: Optuna over a template's knobs, per shape, within the GPU's limits.

The pieces, in the order a config meets them:

* :mod:`ktx.search.space`: knobs as Optuna distributions (order kept), conditions, constraints;
* :mod:`ktx.search.evaluate`: constraint and launch-limit checks before compiling, the cache,
  the backend, the resource policy; the objective time (graph-mode under 20 µs);
* :mod:`ktx.search.engine`: one study per shape (or one for all), budgets, warm starts;
* :mod:`ktx.search.study`: storages (SQLite by default, any RDB URL) and samplers;
* :mod:`ktx.search.dispatch`: shape buckets to configs, JSON and a C++ header;
* :mod:`ktx.search.report`, :mod:`ktx.search.runner`: outputs and the ``ktx tune`` flow;
* :mod:`ktx.search.recording`, :mod:`ktx.search.synthetic`, :mod:`ktx.search.compare`: replay
  of recorded spaces and sampler comparisons on a CPU.
"""

from ktx.search.dispatch import DispatchTable, build_table
from ktx.search.engine import Settings, search_joint, search_shape, study_stats
from ktx.search.evaluate import Evaluation, Evaluator, Policy
from ktx.search.recording import Recording, RecordingBackend
from ktx.search.runner import TuneRequest
from ktx.search.space import Knob, Space
from ktx.search.workers import run_tune

__all__ = [
    "DispatchTable",
    "Evaluation",
    "Evaluator",
    "Knob",
    "Policy",
    "Recording",
    "RecordingBackend",
    "Settings",
    "Space",
    "TuneRequest",
    "build_table",
    "run_tune",
    "search_joint",
    "search_shape",
    "study_stats",
]
