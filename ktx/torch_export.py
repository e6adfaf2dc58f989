"""``ktx export RUN_DIR --torch``: the tuned kernel as a PyTorch extension.

The patch and the C++ dispatch header serve C++ builds; SGLang- and vLLM-style users call
kernels from PyTorch. This writes a folder with

* ``kernels.cu``: every dispatched variant and the original, each in its own namespace
  (``ktx_v0``, ..., ``ktx_original``), and one plain launcher per variant taking device
  pointers as integers, so the file has no torch include and compiles with nvcc alone;
* ``<kernel>_torch.py``: builds ``kernels.cu`` with ``torch.utils.cpp_extension.load_inline``
  on first use and exposes ``<kernel>(tensor, ..., **shape)``, the spec's arguments by name.
  It checks each tensor's dtype, device, contiguity and shape, derives the shape variables
  from the tensors (keywords for the rest), picks the variant from the dispatch table (the
  original where the table says so or the shape was not tuned), and launches it on the current
  stream with the launch expressions of that variant;
* ``README.md``: how to use it.

torch is needed only to build and call the extension, not by ktx (it stays an optional extra).
"""

from __future__ import annotations

import json
import pprint
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ktx.ir.errors import KtxError, Location

from ktx.measure.types import Candidate
from ktx.records import check_schema
from ktx.records.files import check_format
from ktx.spec import Spec

#: Spec dtypes to torch dtypes (attribute names of ``torch``).
from ktx.specload import load_spec

#: Spec dtypes to torch dtypes (attribute names of ``torch``).
TORCH_DTYPES: Mapping[str, str] = {
    "fp64": "float64", "fp32": "float32", "fp16": "float16", "bf16": "bfloat16",
    "fp8_e4m3": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2", "int8": "int8", "uint8": "uint8",
    "int16": "int16", "uint16": "uint16", "int32": "int32", "uint32": "uint32", "int64": "int64",
    "uint64": "uint64", "bool": "bool",
}  # fmt: skip
_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*[<\"].*$", re.M)  # one line each, blank lines kept


@dataclass(frozen=True)
class Variant:
    """One kernel the extension can launch: its namespace, candidate and knob config."""

    namespace: str
    candidate: Candidate


@dataclass(frozen=True)
class Export:
    folder: Path
    files: tuple[Path, ...]


def _run_info(run_dir: Path) -> tuple[Spec, str, Path]:
    """(spec, pipeline, folder with dispatch.json) of an optimize or a tune run folder."""
    from ktx.commands._checks import read_json

    hint = "the run folder is damaged: run ktx optimize or ktx tune again"
    state = run_dir / "optimize.json"
    if state.is_file():
        data = read_json(state, hint)
        if not isinstance(data, dict):
            raise KtxError("not a ktx optimize state (expected a JSON object)", Location(str(state)), hint)
        recorded = [str(data.get("spec") or "")]
        if data.get("source_rel"):
            recorded.append(str(Path(str(data["source_rel"])).parent / "ktx.toml"))
        spec_path = spec_of_run(run_dir, recorded, state)
        return load_spec(spec_path), str(data.get("pipeline") or ""), run_dir / "final"
    log = run_dir / "log.jsonl"
    if log.is_file():
        for number, line in enumerate(log.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            try:
                event = json.loads(line)
            except json.JSONDecodeError as exc:
                where = Location(str(log), number, exc.colno)
                raise KtxError(f"corrupt JSON: {exc.msg}", where, hint) from None
            if isinstance(event, dict):
                check_schema(event, "log", Location(str(log), number, 1))
            if isinstance(event, dict) and event.get("event") == "start":
                req = event.get("request")
                if not isinstance(req, dict) or not req.get("kernel_dir"):
                    raise KtxError("the start event names no kernel folder", Location(str(log), number), hint)
                folder = str(req["kernel_dir"])
                spec_path = spec_of_run(run_dir, [str(Path(folder) / "ktx.toml")], Location(str(log), number))
                return load_spec(spec_path), str(req.get("passes", "")), run_dir
    raise KtxError(
        "not a run folder (no optimize.json or log.jsonl)",
        Location(str(run_dir)),
        "give the --out folder of ktx optimize or ktx tune",
    )


def unfinished(run: Path, final: Path, dispatch: Path) -> None:
    """Refuse a run that never wrote its outputs (killed, or still running): exporting it would
    ship only the original kernel, with no word of why (issue 21). An optimize run that
    finished with no winning round has ``final/`` without a table: that exports the original,
    as the run decided."""
    again = "let the run finish (run the same command again with the same --out), then export"
    if (run / "optimize.json").is_file():
        if not final.is_dir():
            what = "the optimize run has no final/ folder: it did not finish"
            raise KtxError(what, Location(str(run)), again)
    elif not dispatch.is_file():
        raise KtxError("the tune run has no dispatch.json: it did not finish", Location(str(run)), again)


def spec_of_run(run_dir: Path, recorded: Sequence[str], where: Path | Location) -> Path:
    """The spec a run folder names, found from any working directory.

    New runs record absolute paths. Older ones recorded paths relative to the folder the run
    was started in, which is not known; it is usually an ancestor of the run folder (the
    default ``--out`` is ``.ktx/optimize/KERNEL`` under it), so each ancestor is tried, then
    the working directory. The first existing ``ktx.toml`` wins."""
    bases = [Path.cwd(), *run_dir.resolve().parents]
    for text in recorded:
        if not text:
            continue
        path = Path(text)
        tries = [path] if path.is_absolute() else [base / path for base in bases]
        for candidate in tries:
            if candidate.is_file():
                return candidate
    loc = where if isinstance(where, Location) else Location(str(where))
    names = ", ".join(repr(t) for t in dict.fromkeys(recorded) if t) or "none"
    raise KtxError(
        f"cannot find the run's spec (recorded: {names})",
        loc,
        "run ktx export from the folder the run was started in, or run it again",
    )


def _variants(spec: Spec, pipeline: str, table: Mapping[str, Any] | None, final: Path) -> list[Variant]:
    """The original and each dispatched variant, instantiated through the harness's own seam
    (:func:`ktx.pipeline.candidate_from_template`), and checked byte for byte against the
    source the run measured (``final/best/variant_N.cu``): an export ships what was verified,
    or says why it cannot."""
    from ktx.pipeline import candidate, candidate_from_template, template_for_spec

    out = [Variant("ktx_original", candidate(spec, "", {}))]
    if table and table.get("variants"):
        template = template_for_spec(spec, pipeline)
        for i, config in enumerate(table["variants"]):
            full = {**dict(table.get("defaults", {})), **dict(config)}
            cand = candidate_from_template(spec, template, full)
            measured = measured_source(final / "best" / f"variant_{i}.cu")
            if measured is not None and measured != cand.source:
                raise KtxError(
                    f"variant {i} ({', '.join(f'{k}={v}' for k, v in config.items())}) is not the "
                    "source the run measured: the kernel file or ktx changed since the run",
                    Location(str(final / "best" / f"variant_{i}.cu")),
                    "run ktx optimize again, then export",
                )
            out.append(Variant(f"ktx_v{i}", cand))
    return out


#: The first line ``ktx tune`` and ``ktx optimize`` write above a measured variant's source.
VARIANT_HEADER = "// ktx tune: "


def measured_source(path: Path) -> str | None:
    """The instantiated source a run measured for one variant (its knob line removed), or None
    when the run did not keep it."""
    if not path.is_file():
        return None
    return without_knob_line(path.read_text(encoding="utf-8", errors="surrogateescape"))


def without_knob_line(text: str) -> str:
    """A variant file's text less the ``// ktx tune: K=V,...`` line above the source."""
    first, newline, rest = text.partition("\n")
    return rest if first.startswith(VARIANT_HEADER) and newline else text


def _wrapped(namespace: str, source: str) -> tuple[list[str], str]:
    """The includes (hoisted: a system header cannot sit inside a namespace) and the rest."""
    includes = [m.group(0).strip() for m in _INCLUDE.finditer(source)]
    body = _INCLUDE.sub("", source)
    return includes, f"namespace {namespace} {{\n{body}\n}}  // namespace {namespace}\n"


def _kernel_params(spec: Spec, cand: Candidate) -> list[str]:
    """The C++ type of each kernel parameter as the launcher passes it (template args substituted)."""
    from ktx.ir import parse

    module = parse(cand.source)
    fn = module.kernel(spec.kernel)
    targs = re.findall(r"<(.*)>", cand.name_expression)
    values = [a.strip() for a in targs[0].split(",")] if targs else []
    subst = dict(zip((t.name for t in fn.template_params), values, strict=False))
    types = []
    for p in fn.params:
        base = subst.get(p.base_type, p.base_type)
        if p.is_pointer:
            types.append(f"{'const ' if p.const else ''}{base}*")
        else:
            types.append(base)
    return types


def _carrier(ctype: str) -> str:
    """How a launcher receives a kernel argument: pointers and integers as int64, floats as double."""
    if ctype.endswith("*"):
        return "int64_t"
    return "double" if ctype in ("float", "double", "half", "__half", "__nv_bfloat16") else "int64_t"


def cuda_source(spec: Spec, variants: Sequence[Variant]) -> str:
    struct = next((a for a in spec.args if a.is_struct), None)
    if struct is not None:  # its launcher would need the struct's declaration and a packer
        raise KtxError(
            f"arg {struct.name!r} is a struct passed by value: the torch export does not take one yet",
            struct.where,
            "call the tuned kernel from your own launcher (the tuned source is in the run folder)",
        )
    includes: list[str] = ["#include <cstdint>", "#include <cuda_runtime.h>"]
    bodies: list[str] = []
    launchers: list[str] = []
    for v in variants:
        if "{" in v.candidate.name_expression:
            raise KtxError(
                f"template arguments that follow the shape ({v.candidate.name_expression}) are not exported",
                Location(str(spec.path)),
            )
        inc, body = _wrapped(v.namespace, v.candidate.source)
        includes += [i for i in inc if i not in includes]
        bodies.append(body)
        types = _kernel_params(spec, v.candidate)
        params = ", ".join(f"{_carrier(t)} a{i}" for i, t in enumerate(types))
        args = ", ".join(
            f"reinterpret_cast<{t}>(a{i})" if t.endswith("*") else f"static_cast<{t}>(a{i})"
            for i, t in enumerate(types)
        )
        launchers.append(
            f'extern "C" void launch_{v.namespace}(int64_t gx, int64_t gy, int64_t gz, '
            f"int64_t bx, int64_t by, int64_t bz, int64_t shared, int64_t stream"
            f"{', ' if params else ''}{params}) {{\n"
            f"  {v.namespace}::{v.candidate.name_expression}<<<dim3(gx, gy, gz), dim3(bx, by, bz), shared, "
            f"reinterpret_cast<cudaStream_t>(stream)>>>({args});\n}}\n"
        )
    head = f"// {spec.name}: generated by `ktx export --torch`; the dispatched variants and the original.\n"
    return head + "\n".join(includes) + "\n\n" + "\n".join(bodies) + "\n" + "\n".join(launchers)


def wrapper_source(spec: Spec, variants: Sequence[Variant], table: Mapping[str, Any] | None) -> str:
    arrays = [a for a in spec.args if a.is_array]
    scalars = [a for a in spec.args if not a.is_array]
    data = {
        "kernel": spec.name,
        "variables": list(spec.variables),
        "derived": [(n, e.text) for n, e in spec.derived],
        "args": [
            {
                "name": a.name,
                "array": a.is_array,
                "dtype": TORCH_DTYPES.get(a.dtype.name, a.dtype.name),
                "shape": [e.text.strip() for e in a.shape] if a.is_array else None,
                "value": None if a.value is None else a.value.text.strip(),
                "int": a.dtype.kind != "float",
            }
            for a in spec.args
        ],
        "variants": {
            v.namespace: {
                "grid": list(v.candidate.grid),
                "block": list(v.candidate.block),
                "shared": v.candidate.shared,
                "config": dict(v.candidate.config),
            }
            for v in variants
        },
        "table": table,
        "carriers": [_carrier(t) for t in _kernel_params(spec, variants[0].candidate)],
    }
    names = ", ".join(a.name for a in arrays)
    return _WRAPPER.format(
        kernel=spec.name,
        doc_args=names,
        scalars=", ".join(a.name for a in scalars) or "none",
        data=pprint.pformat(data, indent=1, width=100, sort_dicts=False),
    )


_WRAPPER = '''"""{kernel}, tuned by ktx, callable from PyTorch: ``{kernel}({doc_args}, **shape)``.

Generated by ``ktx export --torch``. Tensors in the spec's argument order; shape variables the
tensors do not determine go as keywords. Scalars ({scalars}) are computed from the shape as the
spec says. The dispatch table picks the variant; the original kernel runs where it says so.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch

DATA: dict[str, Any] = {data}

HERE = Path(__file__).resolve().parent
_EXT: Any = None
_FUNCS = {{
    "min": min, "max": max, "abs": abs, "ceil": math.ceil, "floor": math.floor,
    "ceil_div": lambda a, b: -(-a // b), "cdiv": lambda a, b: -(-a // b),
    "log2": lambda x: (
        x.bit_length() - 1 if isinstance(x, int) and x > 0 and x & (x - 1) == 0 else math.log2(x)
    ),
    "pow2": lambda n: 1 << n if isinstance(n, int) and n >= 0 else 2.0 ** n,
}}


def _eval(text: str, env: dict[str, Any]) -> Any:
    return eval(text, {{"__builtins__": {{}}, **_FUNCS}}, env)  # noqa: S307 - the spec's expressions


def _decls() -> str:
    params = "".join(", " + c + " a" + str(i) for i, c in enumerate(DATA["carriers"]))
    return "\\n".join(
        'extern "C" void launch_' + v + "(int64_t gx, int64_t gy, int64_t gz, int64_t bx, int64_t by, "
        "int64_t bz, int64_t shared, int64_t stream" + params + ");"
        for v in DATA["variants"]
    )


def _build_with_nvcc() -> Any:
    """No ninja for torch's JIT: nvcc builds a shared library, ctypes loads it."""
    import ctypes
    import subprocess
    import types

    major, minor = torch.cuda.get_device_capability()
    lib = HERE / "build" / ("libktx_" + DATA["kernel"] + "_sm" + str(major) + str(minor) + ".so")
    src = HERE / "kernels.cu"
    if not lib.is_file() or lib.stat().st_mtime < src.stat().st_mtime:
        lib.parent.mkdir(exist_ok=True)
        cmd = ["nvcc", "-O3", "-std=c++17", "--expt-relaxed-constexpr", "-shared", "-Xcompiler", "-fPIC",
               "-arch=sm_" + str(major) + str(minor), "-o", str(lib), str(src)]
        subprocess.run(cmd, check=True)
    handle = ctypes.CDLL(str(lib))
    kinds = [ctypes.c_int64] * 8
    kinds += [ctypes.c_double if c == "double" else ctypes.c_int64 for c in DATA["carriers"]]
    funcs = {{}}
    for v in DATA["variants"]:
        f = getattr(handle, "launch_" + v)
        f.argtypes, f.restype = kinds, None
        funcs["launch_" + v] = f
    return types.SimpleNamespace(**funcs)


def extension() -> Any:
    """Build (once) and load the extension: torch's load_inline where ninja is installed,
    else nvcc and ctypes (same kernels.cu)."""
    global _EXT
    if _EXT is None:
        from torch.utils import cpp_extension

        if not cpp_extension.is_ninja_available():
            _EXT = _build_with_nvcc()
            return _EXT
        _EXT = cpp_extension.load_inline(
            name="ktx_" + DATA["kernel"],
            cpp_sources=["#include <cstdint>\\n" + _decls()],
            cuda_sources=[(HERE / "kernels.cu").read_text()],
            functions=["launch_" + v for v in DATA["variants"]],
            extra_cuda_cflags=["-O3", "-std=c++17", "--expt-relaxed-constexpr"],
        )
    return _EXT


def _choose(env: dict[str, Any]) -> str:
    table = DATA["table"]
    if not table:
        return "ktx_original"
    bucket = table.get("bucket")
    for rule in table.get("rules", []):
        if any(env.get(k) != v for k, v in rule.get("when", {{}}).items()):
            continue
        lo, hi = (rule.get("range") or [None, None])[:2]
        x = env.get(bucket) if bucket else None
        if x is not None and ((lo is not None and x < lo) or (hi is not None and x >= hi)):
            continue
        v = rule.get("variant", -1)
        return "ktx_original" if v is None or v < 0 else "ktx_v" + str(v)
    return "ktx_original"


def shape_of(*tensors: torch.Tensor, **shape: int) -> dict[str, Any]:
    """The shape variables: bare names in the spec's shapes read off the tensors, then keywords."""
    env: dict[str, Any] = dict(shape)
    arrays = [a for a in DATA["args"] if a["array"]]
    for spec_arg, t in zip(arrays, tensors):
        if len(spec_arg["shape"]) != t.dim():
            want = str(len(spec_arg["shape"]))
            raise ValueError(spec_arg["name"] + ": expected " + want + " dimensions, got " + str(t.dim()))
        for dim, size in zip(spec_arg["shape"], t.shape):
            if dim.isidentifier() and dim not in env:
                env[dim] = int(size)
    missing = [v for v in DATA["variables"] if v not in env]
    if missing:
        raise ValueError("pass the shape variables the tensors do not give: " + ", ".join(missing))
    for name, text in DATA["derived"]:
        env[name] = _eval(text, env)
    return env


def {kernel}(*tensors: torch.Tensor, variant: str | None = None, **shape: int) -> None:
    """Launch the dispatched kernel on the current stream (``variant`` forces one, e.g. "ktx_original")."""
    arrays = [a for a in DATA["args"] if a["array"]]
    if len(tensors) != len(arrays):
        raise TypeError("expected tensors " + ", ".join(a["name"] for a in arrays))
    env = shape_of(*tensors, **shape)
    device = tensors[0].device
    by_name = {{}}
    for a, t in zip(arrays, tensors):
        if t.dtype != getattr(torch, a["dtype"]):
            raise TypeError(a["name"] + ": dtype " + str(t.dtype) + ", expected torch." + a["dtype"])
        if t.device.type != "cuda" or t.device != device:
            where = "expected a CUDA tensor on " + str(device) + ", got " + str(t.device)
            raise ValueError(a["name"] + ": " + where)
        if not t.is_contiguous():
            raise ValueError(a["name"] + ": expected a contiguous tensor (call .contiguous())")
        want = tuple(int(_eval(d, env)) for d in a["shape"])
        if tuple(t.shape) != want:
            raise ValueError(a["name"] + ": shape " + str(tuple(t.shape)) + ", the spec says " + str(want))
        by_name[a["name"]] = t
    name = variant or _choose(env)
    v = DATA["variants"][name]
    kenv = {{**env, **v["config"]}}
    grid = [int(_eval(g, kenv)) for g in v["grid"]] + [1, 1]
    block = [int(_eval(b, kenv)) for b in v["block"]] + [1, 1]
    shared = int(_eval(v["shared"], kenv))
    args = []
    for a in DATA["args"]:
        if a["array"]:
            args.append(by_name[a["name"]].data_ptr())
        else:
            value = _eval(a["value"], env)
            args.append(int(value) if a["int"] else value)
    stream = torch.cuda.current_stream(device).cuda_stream
    with torch.cuda.device(device):
        getattr(extension(), "launch_" + name)(*grid[:3], *block[:3], shared, stream, *args)
'''


def export_torch(run_dir: str | Path, out: str | Path | None = None) -> Export:
    """Write the extension of ``run_dir``'s dispatched kernel into ``out`` (default RUN_DIR/torch)."""
    run = Path(run_dir)
    if not run.is_dir():
        what = "is a file, not a run folder" if run.exists() else "no such run folder"
        raise KtxError(what, Location(str(run)), "give the --out folder of ktx optimize or ktx tune")
    spec, pipeline, final = _run_info(run)
    dispatch = final / "dispatch.json"
    unfinished(run, final, dispatch)
    from ktx.commands._checks import read_json

    hint = "the run folder is damaged: run ktx optimize or ktx tune again"
    table = read_json(dispatch, hint) if dispatch.is_file() else None
    if isinstance(table, dict):  # the export embeds the table as it is, after its version is checked
        check_format(table, "dispatch", Location(str(dispatch)))
    variants = _variants(spec, pipeline, table, final)
    folder = Path(out) if out is not None else run / "torch"
    folder.mkdir(parents=True, exist_ok=True)
    cu = folder / "kernels.cu"
    cu.write_text(cuda_source(spec, variants), encoding="utf-8")
    py = folder / f"{spec.name}_torch.py"
    py.write_text(wrapper_source(spec, variants, table), encoding="utf-8")
    readme = folder / "README.md"
    arrays = ", ".join(a.name for a in spec.args if a.is_array)
    readme.write_text(
        f"# {spec.name} for PyTorch\n\nGenerated by `ktx export --torch` from `{run}`.\n\n"
        f"```python\nimport sys; sys.path.insert(0, '{folder}')\nfrom {spec.name}_torch import {spec.name}\n"
        f"{spec.name}({arrays})  # CUDA tensors, contiguous, the spec's dtypes\n```\n\n"
        f"Variants: {', '.join(v.namespace for v in variants)} (`variant=` forces one). The first call "
        "builds `kernels.cu` with `torch.utils.cpp_extension.load_inline` (cached by torch).\n",
        encoding="utf-8",
    )
    return Export(folder, (cu, py, readme))
