"""Helpers for the kernel-suite tests: nvcc compiles, ptxas -v parsing, NVRTC through ctypes."""

from __future__ import annotations

import ctypes
import functools
import glob
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
KERNELS_DIR = REPO / "kernels"
KERNEL_NAMES: list[str] = sorted(p.parent.name for p in KERNELS_DIR.glob("*/kernel.cu"))

NVCC_BASE = ["-std=c++17", "-arch=sm_90"]
FAST_MATH = ["-use_fast_math", "--expt-relaxed-constexpr"]

#: Every instantiation the launchers dispatch to (``moe_sum`` for top-k 1..8, ``rope`` has no
#: spec); a superset of what the specs ask for (:func:`spec_name_expressions`), which is checked.
NAME_EXPRESSIONS: dict[str, list[str]] = {
    "silu_and_mul": ["silu_and_mul_kernel<__nv_bfloat16>"],
    "fused_add_rmsnorm": ["fused_add_rmsnorm_kernel<__nv_bfloat16>"],
    "rmsnorm": ["rmsnorm_kernel<__nv_bfloat16>"],
    "merge_attn_states": ["merge_attn_states_kernel<__nv_bfloat16>"],
    "per_token_group_quant_fp8": ["per_token_group_quant_8bit_kernel<__nv_bfloat16, __nv_fp8_e4m3>"],
    "moe_sum": [f"moe_sum_kernel<__nv_bfloat16, {k}>" for k in range(1, 9)],
    "act_and_mul_scalar": ["act_and_mul_scalar_kernel<__half>"],
    "moe_sum_scalar": [f"moe_sum_scalar_kernel<__nv_bfloat16, {k}>" for k in range(1, 9)],
    "rope": [
        "rotary_embedding_kernel<__nv_bfloat16, true>",
        "rotary_embedding_kernel<__nv_bfloat16, false>",
    ],
}


#: Kernel folders with a ``ktx.toml``.
SPEC_KERNELS: list[str] = sorted(p.parent.name for p in KERNELS_DIR.glob("*/ktx.toml"))


def spec_name_expressions(name: str) -> list[str]:
    """The instantiations ktx compiles for a kernel: its spec's name expression expanded at
    every point (and odd variant) of every shape set, read through ``ktx.specload.load_spec``."""
    from ktx.measure.types import original_candidate
    from ktx.ir.expr import expand
    from ktx.specload import load_spec

    spec = load_spec(KERNELS_DIR / name)
    cand = original_candidate(spec)
    points = [q for shapes in spec.shapes for p in shapes.points for q in (p, *spec.odd_points(p))]
    return list(dict.fromkeys(expand(cand.name_expression, cand.env(spec, p)) for p in points))


@dataclass
class Compile:
    """One nvcc run."""

    returncode: int
    stdout: str
    stderr: str


@dataclass
class EntryInfo:
    """What ``ptxas -v`` says about one entry function."""

    mangled: str
    registers: int = -1
    stack_frame: int = -1
    spill_stores: int = -1
    spill_loads: int = -1


@dataclass
class SuiteBuild:
    """nvcc results for every kernel folder, keyed by folder name."""

    objects: dict[str, Compile] = field(default_factory=dict)
    device_c: dict[str, Compile] = field(default_factory=dict)
    #: -c -Xptxas -v with the suite specs' flags (ktx.toml [compile]: fast math).
    fast_math: dict[str, Compile] = field(default_factory=dict)


def nvcc_path() -> str | None:
    return shutil.which("nvcc")


def _run_nvcc(args: list[str]) -> Compile:
    nvcc = nvcc_path()
    assert nvcc is not None
    proc = subprocess.run([nvcc, *args], capture_output=True, text=True, timeout=300)
    return Compile(proc.returncode, proc.stdout, proc.stderr)


@functools.cache
def _nvcc_version() -> str:
    nvcc = nvcc_path()
    assert nvcc is not None
    return nvcc + "\n" + subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout


def _run_nvcc_cached(args: list[str], tmp: str, source: Path, cache: Path | None) -> Compile:
    """``_run_nvcc``, its result kept under ``cache`` when it succeeds, keyed by the toolchain,
    the flags (the per-run output folder taken out) and the source's bytes: the tests read only
    the exit status and the ``ptxas -v`` text, and the suite kernels include toolkit headers
    alone, which the toolchain's version covers. A failure is compiled again each time."""
    if cache is None:
        return _run_nvcc(args)
    flags = [a.replace(tmp, "<tmp>") for a in args]
    blob = json.dumps([_nvcc_version(), flags, source.read_text()])
    entry = cache / (hashlib.sha256(blob.encode()).hexdigest()[:32] + ".json")
    if entry.is_file():
        data = json.loads(entry.read_text())
        return Compile(0, data["stdout"], data["stderr"])
    result = _run_nvcc(args)
    if result.returncode == 0:
        cache.mkdir(parents=True, exist_ok=True)
        entry.write_text(json.dumps({"stdout": result.stdout, "stderr": result.stderr}))
    return result


def parse_ptxas(text: str) -> dict[str, EntryInfo]:
    """Entry functions reported by ``-Xptxas -v``, keyed by mangled name."""
    entries: dict[str, EntryInfo] = {}
    current: EntryInfo | None = None
    for line in text.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            current = entries.setdefault(m.group(1), EntryInfo(m.group(1)))
            continue
        if current is None:
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            current.stack_frame = int(m.group(1))
            current.spill_stores = int(m.group(2))
            current.spill_loads = int(m.group(3))
            continue
        m = re.search(r"Used (\d+) registers", line)
        if m:
            current.registers = int(m.group(1))
    return entries


def build_suite(tmp: str, cache: Path | None = None) -> SuiteBuild:
    """Compile every kernel.cu: -c -Xptxas -v, --device-c, and -c with fast math; in parallel.
    With ``cache``, unchanged sources reuse earlier successful results (see _run_nvcc_cached)."""
    build = SuiteBuild()
    jobs: dict[tuple[str, str], list[str]] = {}
    for name in KERNEL_NAMES:
        src = str(KERNELS_DIR / name / "kernel.cu")
        obj = os.path.join(tmp, f"{name}.o")
        jobs[("obj", name)] = [*NVCC_BASE, "-c", "-Xptxas", "-v", "-o", obj, src]
        dc = os.path.join(tmp, f"{name}.dc.o")
        jobs[("dc", name)] = [*NVCC_BASE, "--device-c", "-o", dc, src]
        fm = os.path.join(tmp, f"{name}.fm.o")
        jobs[("fm", name)] = [*NVCC_BASE, *FAST_MATH, "-c", "-Xptxas", "-v", "-o", fm, src]
    workers = max(2, os.cpu_count() or 2)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {
            key: pool.submit(_run_nvcc_cached, args, tmp, KERNELS_DIR / key[1] / "kernel.cu", cache)
            for key, args in jobs.items()
        }
        for (kind, name), fut in futures.items():
            targets = {"obj": build.objects, "dc": build.device_c, "fm": build.fast_math}
            targets[kind][name] = fut.result()
    return build


# --------------------------------------------------------------------------------------------
# NVRTC through ctypes (the path CuPy's RawModule takes), when a libnvrtc can be found.


def _nvrtc_candidates() -> list[str]:
    found: list[str] = []
    env = os.environ.get("KTX_NVRTC_LIB")
    if env:
        found.append(env)
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    nvcc = nvcc_path()
    if nvcc:
        roots.append(str(Path(nvcc).resolve().parent.parent))
    for root in roots:
        if root:
            found += sorted(glob.glob(os.path.join(root, "lib64", "libnvrtc.so*")))
            found += sorted(glob.glob(os.path.join(root, "lib", "libnvrtc.so*")))
    for entry in os.environ.get("KTX_NVRTC_PATH", "").split(os.pathsep):
        if entry:
            found += sorted(glob.glob(os.path.join(entry, "**", "libnvrtc.so*"), recursive=True))
    found.append("libnvrtc.so")
    return [f for f in found if "builtins" not in f and ".alt." not in f]


def load_nvrtc() -> ctypes.CDLL | None:
    for cand in _nvrtc_candidates():
        # NVRTC dlopens its builtins library by soname; preload the one beside it, if any.
        folder = os.path.dirname(cand)
        if folder:
            for builtins in sorted(glob.glob(os.path.join(folder, "libnvrtc-builtins.so*"))):
                if ".alt." in builtins:
                    continue
                try:
                    ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
                    break
                except OSError:
                    continue
        try:
            return ctypes.CDLL(cand)
        except OSError:
            continue
    return None


def cuda_include_dir() -> str | None:
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    nvcc = nvcc_path()
    if nvcc:
        roots.append(str(Path(nvcc).resolve().parent.parent))
    roots.append("/usr/local/cuda")
    for root in roots:
        if root and os.path.isfile(os.path.join(root, "include", "cuda_bf16.h")):
            return os.path.join(root, "include")
    return None


@dataclass
class NvrtcResult:
    ok: bool
    log: str
    lowered: dict[str, str]


def nvrtc_compile(
    lib: ctypes.CDLL, source: str, name: str, options: list[str], name_expressions: list[str]
) -> NvrtcResult:
    prog = ctypes.c_void_p()
    rc = lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None, None)
    assert rc == 0, f"nvrtcCreateProgram failed ({rc})"
    try:
        for expr in name_expressions:
            assert lib.nvrtcAddNameExpression(prog, expr.encode()) == 0
        opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
        rc = lib.nvrtcCompileProgram(prog, len(options), opts)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value + 1)
        lib.nvrtcGetProgramLog(prog, buf)
        log = buf.value.decode(errors="replace")
        lowered: dict[str, str] = {}
        if rc == 0:
            for expr in name_expressions:
                out = ctypes.c_char_p()
                assert lib.nvrtcGetLoweredName(prog, expr.encode(), ctypes.byref(out)) == 0
                lowered[expr] = (out.value or b"").decode()
        return NvrtcResult(rc == 0, log, lowered)
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def load_reference(name: str) -> Any:
    """kernels/<name>/reference.py as a module (each folder's file has the same basename)."""
    path = KERNELS_DIR / name / "reference.py"
    spec = importlib.util.spec_from_file_location(f"ktx_kernel_ref_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
