"""Optuna plumbing: storages, samplers, study names.

The study *is* the record of a search: every trial's config, outcome and measurement live in it
(``user_attrs["ktx"]``), so a run resumes from its storage, several workers share one study
through an RDB URL, and every output can be rebuilt from the storage alone. Nothing here
coordinates workers itself; Optuna's RDB storage does (row locks, heartbeats for dead workers).
"""

from __future__ import annotations

import hashlib
import warnings
from pathlib import Path
from typing import Any

import optuna
from ktx.ir.errors import KtxError

from ktx.search.space import Space

SAMPLERS = ("auto", "model", "tpe", "random", "grid", "cmaes", "gp")

#: A worker that has not beaten its heartbeat for GRACE_S seconds is dead; its running trial fails.
HEARTBEAT_S = 10
GRACE_S = 40


#: The scheme of a one-process study journal (:mod:`ktx.search.journal`).
JOURNAL = "journal:"


def default_url(run_dir: Path, shared: bool = False) -> str:
    """A run folder's own study: a journal file (``study.jsonl``), read and written by the one
    process that holds the folder's run lock, 8x cheaper a trial than SQLite; SQLite
    (``study.db``) where several local processes share it (``--workers N``), or where a folder
    from before the journal holds one (its run resumes in it)."""
    folder = run_dir.resolve()
    if shared or ((folder / "study.db").exists() and not (folder / "study.jsonl").exists()):
        return f"sqlite:///{folder / 'study.db'}"
    return f"{JOURNAL}{folder / 'study.jsonl'}"


def is_run_folder_url(url: str, run_dir: Path) -> bool:
    """Whether ``url`` is one of the run folder's own studies (not a server's)."""
    folder = run_dir.resolve()
    return url in (f"sqlite:///{folder / 'study.db'}", f"{JOURNAL}{folder / 'study.jsonl'}")


def run_folder_storage(run_dir: Path) -> optuna.storages.BaseStorage | None:
    """The study a finished run folder holds (journal or SQLite), for reading; None if none."""
    folder = run_dir.resolve()
    if (folder / "study.jsonl").exists():
        from ktx.search.journal import journal_storage

        return journal_storage(folder / "study.jsonl", writable=False)  # a run may be writing it
    if (folder / "study.db").exists():
        return open_storage(f"sqlite:///{folder / 'study.db'}")
    return None


def open_storage(url: str, heartbeat: bool = False) -> optuna.storages.BaseStorage:
    """``:memory:``, ``journal:PATH`` (one process: :mod:`ktx.search.journal`), or an SQLAlchemy
    URL (``sqlite:///path``, ``postgresql://user@host/db``)."""
    if url == ":memory:":
        return optuna.storages.InMemoryStorage()
    if url.startswith(JOURNAL):
        from ktx.search.journal import journal_storage

        return journal_storage(Path(url[len(JOURNAL) :]))
    url = with_driver(url)
    engine_kwargs: dict[str, Any] = {}
    if url.startswith("sqlite"):
        engine_kwargs["connect_args"] = {"timeout": 60}  # several local workers wait on the lock
    else:
        engine_kwargs["pool_pre_ping"] = True
    kwargs: dict[str, Any] = {"engine_kwargs": engine_kwargs}
    if heartbeat:
        kwargs.update(heartbeat_interval=HEARTBEAT_S, grace_period=GRACE_S)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            storage = optuna.storages.RDBStorage(url, **kwargs)
        if url.startswith("sqlite"):
            _sqlite_wal(storage)
        return storage
    except ModuleNotFoundError as exc:
        hint = "pip install psycopg2-binary" if "psycopg" in str(exc) else f"install {exc.name}"
        raise KtxError(f"storage {redact(url)}: driver missing ({exc})", hint=hint) from None
    except Exception as exc:  # SQLAlchemy raises many kinds; the message is what matters
        raise KtxError(
            f"cannot open storage {redact(url)}: {str(exc).splitlines()[0]}",
            hint="check the URL, the server and the credentials",
        ) from None


def with_driver(url: str) -> str:
    """``postgresql://`` means psycopg 3 to SQLAlchemy 2.1 and psycopg2 to older ones; use
    whichever of the two is installed (ktx's dev extra brings psycopg2-binary)."""
    import importlib.util

    if url.startswith("postgresql://") or url.startswith("postgres://"):
        rest = url.split("://", 1)[1]
        if importlib.util.find_spec("psycopg") is None and importlib.util.find_spec("psycopg2") is not None:
            return f"postgresql+psycopg2://{rest}"
        return f"postgresql://{rest}"
    return url


def _sqlite_wal(storage: optuna.storages.RDBStorage) -> None:
    """WAL journal, ``synchronous=NORMAL``: a commit no longer waits for the disk, readers do not
    block the writer (several local workers), and a killed process still loses nothing that
    was committed (only a power cut could lose the last transactions)."""
    from sqlalchemy import event

    def pragmas(connection: Any, _record: Any) -> None:
        cursor = connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    event.listen(storage.engine, "connect", pragmas)
    storage.engine.dispose()  # connections made so far lack the pragmas


def redact(url: str) -> str:
    """The URL without its password, for messages."""
    head, sep, tail = url.partition("@")
    if not sep or ":" not in head.split("//", 1)[-1]:
        return url
    scheme, _, cred = head.partition("//")
    user = cred.split(":", 1)[0]
    return f"{scheme}//{user}:***@{tail}"


def seed_for(seed: int | None, *parts: str) -> int | None:
    """A per-study seed derived from the run's seed, stable across resumes and shape orders."""
    if seed is None:
        return None
    digest = hashlib.sha256("|".join((str(seed), *parts)).encode()).digest()
    return int.from_bytes(digest[:4], "little")


def resolve_sampler(name: str, space_size: int | None, budget: int) -> str:
    """``auto``: grid when the whole (finite) space fits in the budget; the cost model
    (:mod:`ktx.search.costmodel`) when the space can be enumerated; TPE otherwise.

    On the exhaustive act_and_mul_scalar recording (H200, tokens=4096, 2,304 configs) the model
    reaches 0.98 of the optimum in fewer evaluations than TPE (results/search_model/).

    >>> [resolve_sampler("auto", size, 100) for size in (100, 2304, None)]
    ['grid', 'model', 'tpe']
    """
    if name != "auto":
        return name
    if space_size is not None and space_size <= budget:
        return "grid"
    return "model" if space_size is not None else "tpe"


def make_sampler(
    name: str, space: Space, seed: int | None, budget: int, concurrent: bool
) -> optuna.samplers.BaseSampler:
    """One of :data:`SAMPLERS` (``auto`` resolved already), seeded."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if name == "tpe":
            conditional = any(k.condition is not None for k in space.knobs)
            return optuna.samplers.TPESampler(
                seed=seed,
                n_startup_trials=max(3, min(10, budget // 4)),
                multivariate=True,
                group=conditional,
                constant_liar=concurrent,
            )
        if name == "random":
            return optuna.samplers.RandomSampler(seed=seed)
        if name == "model":
            # The cost model needs the shape's candidates (ktx.search.engine.model_sampler builds
            # it); where there is no one shape to enumerate (a joint search) TPE stands in.
            return make_sampler("tpe", space, seed, budget, concurrent)
        if name == "grid":
            # The grid itself is enqueued as trials (see ktx.search.engine.enqueue_grid); the
            # sampler only answers if the queue runs dry, which the budget check prevents.
            return optuna.samplers.RandomSampler(seed=seed)
        if name == "cmaes":
            _need("cmaes", "cmaes")
            return optuna.samplers.CmaEsSampler(
                seed=seed, n_startup_trials=max(3, min(10, budget // 4)), warn_independent_sampling=False
            )
        if name == "gp":
            _need("torch", "torch scipy")
            _need("scipy", "torch scipy")
            return optuna.samplers.GPSampler(seed=seed, n_startup_trials=max(3, min(10, budget // 4)))
    raise KtxError(f"unknown sampler {name!r}", hint="samplers: " + ", ".join(SAMPLERS))


def _need(module: str, packages: str) -> None:
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise KtxError(f"this sampler needs the {module!r} package", hint=f"pip install {packages}")
