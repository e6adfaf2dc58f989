"""Source -> cubin, on CPU processes, with NVRTC first and nvcc as the fallback.

Compiling needs no GPU, only the target architecture, so it runs in a pool of CPU processes
while the GPU worker measures earlier candidates. NVRTC (through CuPy's bindings) is tried
first; a flag it rejects that only lets more code compile (``--expt-relaxed-constexpr``,
:data:`PERMISSIVE_FLAGS`) is dropped and NVRTC tried again; when it still fails (another flag it
rejects, a host header), ``nvcc -cubin`` is tried; when there is no nvcc and NVRTC only rejected
flags, NVRTC is retried without them. The result says which flags were dropped
(``dropped_flags``) and why the first choice was not used (``fallback``); ``ktx run`` and ``ktx
bench`` print a note when either happened. Either way the kernel is found by the symbol the
compiler lowered its name expression to (NVRTC's ``nvrtcGetLoweredName``; under nvcc,
:func:`instantiation_stub`), never by matching a demangler's spelling. cubins are cached on disk
by a hash of everything that goes into them (the request, the compilers' versions, the headers
in the include folders), so a repeated configuration costs nothing.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import shutil
import stat
import struct
import subprocess
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import asdict, dataclass, fields, replace
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from ktx.measure.compile_prune import PRUNE_VERSION, prune
from ktx.measure.compile_prune import enabled as prune_enabled

CACHE_ENV = "KTX_CACHE_DIR"


def cache_dir() -> Path:
    base = os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "ktx")
    return Path(base)


@dataclass(frozen=True)
class CompileRequest:
    source: str
    name_expression: str
    flags: tuple[str, ...]
    arch: str  # compute capability digits, e.g. "90"
    include_dirs: tuple[str, ...] = ()
    backend: str = "auto"  # auto | nvrtc | nvcc
    param_names: tuple[str, ...] = ()
    """The spec's argument names, given only where the kernel's name has several overloads in
    ``source`` (:func:`ktx.measure.overload.overload_params`): they pick the overload."""

    @property
    def key(self) -> str:
        """The cubin cache key: the request, the toolchain's versions and the headers it may include."""
        data = asdict(self)
        if not self.param_names:
            del data["param_names"]  # keys of requests without overloads stay as they were
        blob = json.dumps(data, sort_keys=True).encode()
        digest = hashlib.sha256(blob)
        digest.update(toolchain_id(self.backend).encode())
        digest.update(headers_digest(self.include_dirs).encode())
        if prune_enabled():  # the cubin of a pruned text (ktx.measure.compile_prune) is keyed apart
            digest.update(PRUNE_VERSION.encode())
        return digest.hexdigest()[:24]


@dataclass(frozen=True)
class CompileResult:
    ok: bool
    name_expression: str
    cubin_path: str = ""
    lowered_name: str = ""
    compiler: str = ""
    log: str = ""
    seconds: float = 0.0
    cached: bool = False
    dropped_flags: tuple[str, ...] = ()  # spec flags NVRTC rejected and compiled without
    fallback: str = ""  # why the first choice (NVRTC under "auto") was not the compiler used

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompileResult:
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs["dropped_flags"] = tuple(kwargs.get("dropped_flags", ()))
        return cls(**kwargs)


_NVCC_VERSIONS: dict[str, str] = {}
_NVRTC_VERSION: str | None = None
HEADER_SUFFIXES = (".h", ".cuh", ".hpp")


def nvcc_version(nvcc: str) -> str:
    """A digest of ``nvcc --version`` (cached per process and path): two toolkits installed
    at the same path, one after the other, give different cubins and must not share a key."""
    if nvcc not in _NVCC_VERSIONS:
        try:
            proc = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60)
            text = proc.stdout + proc.stderr
        except (OSError, subprocess.SubprocessError) as exc:
            text = f"unrunnable: {exc}"
        _NVCC_VERSIONS[nvcc] = hashlib.sha256(text.encode()).hexdigest()[:16]
    return _NVCC_VERSIONS[nvcc]


def nvrtc_version() -> str:
    """NVRTC's version through CuPy (cached per process), or ``nonvrtc``."""
    global _NVRTC_VERSION
    if _NVRTC_VERSION is None:
        try:
            from cupy_backends.cuda.libs import nvrtc  # type: ignore[import-untyped,import-not-found,unused-ignore]

            major, minor = nvrtc.getVersion()
            _NVRTC_VERSION = f"nvrtc{major}.{minor}"
        except Exception:
            _NVRTC_VERSION = "nonvrtc"
    return _NVRTC_VERSION


def toolchain_id(backend: str = "auto") -> str:
    """Versions of the compilers ``backend`` may use (NVRTC's, and a digest of ``nvcc --version``),
    for cache keys; a compiler the backend never uses is left out."""
    parts = []
    if backend in ("auto", "nvrtc"):
        parts.append(nvrtc_version())
    if backend in ("auto", "nvcc"):
        nvcc = find_nvcc()
        parts.append(f"nvcc-{nvcc_version(nvcc)}" if nvcc else "nonvcc")
    return ":".join(parts)


#: Kept for ``ktx.search.evaluate``, which looks it up by this name.
_toolchain_id = toolchain_id


def headers_digest(include_dirs: Sequence[str]) -> str:
    """A digest of the headers (``*.h``, ``*.cuh``, ``*.hpp``, not recursive) in ``include_dirs``:
    a kernel that includes a local header must recompile when the header changes."""
    digest = hashlib.sha256()
    for folder in include_dirs:
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            path = os.path.join(folder, name)
            if not name.endswith(HEADER_SUFFIXES):
                continue
            try:
                st = os.stat(path)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            # A file's digest is read again only when its size, time or inode changed: the key is
            # asked several times a measurement, and reading a project's headers each time cost
            # 16 ms a key (ggml's four include folders, a loaded two-core host).
            stamp = (st.st_size, st.st_mtime_ns, st.st_ino)
            known = _HEADER_DIGESTS.get(path)
            if known is None or known[0] != stamp:
                try:
                    data = Path(path).read_bytes()
                except OSError:
                    continue
                known = (stamp, f"{len(data)}:{hashlib.sha256(data).hexdigest()}")
                _HEADER_DIGESTS[path] = known
            digest.update(f"{folder}/{name}:{known[1]}:".encode())
    return digest.hexdigest()[:16]


#: Per header path: (size, mtime, inode) when read, and its length and digest then.
_HEADER_DIGESTS: dict[str, tuple[tuple[int, int, int], str]] = {}


def find_nvcc() -> str | None:
    for var in ("CUDA_PATH", "CUDA_HOME"):
        root = os.environ.get(var)
        if root and os.path.isfile(os.path.join(root, "bin", "nvcc")):
            return os.path.join(root, "bin", "nvcc")
    found = shutil.which("nvcc")
    if found:
        return found
    if os.path.isfile("/usr/local/cuda/bin/nvcc"):
        return "/usr/local/cuda/bin/nvcc"
    return None


def cuda_include_dirs() -> list[str]:
    """CUDA headers for NVRTC: the toolkit's, and those of NVIDIA's pip packages."""
    roots: list[str] = []
    for var in ("CUDA_PATH", "CUDA_HOME"):
        if os.environ.get(var):
            roots.append(os.path.join(os.environ[var], "include"))
    nvcc = find_nvcc()
    if nvcc:
        roots.append(os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))), "include"))
    roots.append("/usr/local/cuda/include")
    try:
        import nvidia  # type: ignore[import-untyped,import-not-found,unused-ignore]

        for base in list(getattr(nvidia, "__path__", [])):
            for sub in sorted(os.listdir(base)):
                roots.append(os.path.join(base, sub, "include"))
    except ImportError:
        pass
    out: list[str] = []
    for root in roots:
        for path in (root, os.path.join(root, "cccl")):
            if os.path.isdir(path) and path not in out:
                out.append(path)
    return out


# -- NVRTC --------------------------------------------------------------------------------

_UNKNOWN_OPTION = re.compile(r"unrecognized option (\S+)")


#: Flags that only let more code compile (nvcc's relaxed constexpr and extended lambdas): code
#: that compiles without them means the same, so NVRTC rejecting one is no reason to pay for
#: nvcc. NVRTC 13 rejects ``--expt-relaxed-constexpr``, which 8 of ktx's own kernels carry and
#: NVRTC builds once it is dropped. (The real-code specs carry it too, but their host headers,
#: ``stdlib.h`` and ``cstdint``, are beyond NVRTC: they still go to nvcc, after one failed call.)
PERMISSIVE_FLAGS = frozenset(
    {"--expt-relaxed-constexpr", "-expt-relaxed-constexpr", "--extended-lambda", "-extended-lambda"}
)


def permissive_rejects(log: str, flags: Sequence[str]) -> tuple[str, ...]:
    """The flags NVRTC's ``log`` calls unrecognized, when every one of them is permissive
    (:data:`PERMISSIVE_FLAGS`); () when any other flag was rejected (its meaning may matter, so
    nvcc compiles with it).

    >>> permissive_rejects("nvrtc: error: unrecognized option --expt-relaxed-constexpr found",
    ...                    ["-std=c++17", "--expt-relaxed-constexpr"])
    ('--expt-relaxed-constexpr',)
    >>> permissive_rejects("unrecognized option -O3 found", ["-O3", "--expt-relaxed-constexpr"])
    ()
    """
    bad = [b for b in _UNKNOWN_OPTION.findall(log) if b in flags]
    if not bad or any(b not in PERMISSIVE_FLAGS for b in bad):
        return ()
    return tuple(dict.fromkeys(bad))


#: NVRTC's words for the code it cannot take: host headers (it has no C or C++ library) and host
#: functions ("not allowed in JIT mode"). The real-code benchmark's files all hit one of them (their
#: projects' headers include ``<cstdint>``, ``<string>``, ...; their launchers are host code), so
#: they compile with nvcc; libstdc++ with gcc's predefined macros then fails on its first host
#: function. (Checked with libnvrtc 13.0 on the CPU host, 2026-11-28.)
_HOST_CODE = ("cannot open source file", "host functions are not allowed")


def nvrtc_failure_kind(log: str) -> str:
    """Why NVRTC failed, as the compile counts name it: host code, or any other failure.

    >>> nvrtc_failure_kind('k.cu(1): catastrophic error: cannot open source file "cstdint"')
    'NVRTC cannot take host code'
    >>> nvrtc_failure_kind("k.cu(3): error: identifier x is undefined")
    'NVRTC failed'
    """
    return "NVRTC cannot take host code" if any(h in log for h in _HOST_CODE) else "NVRTC failed"


class _NvrtcFailure(Exception):
    def __init__(self, log: str, invalid_option: bool) -> None:
        super().__init__(log)
        self.log = log
        self.invalid_option = invalid_option


def _nvrtc(req: CompileRequest, flags: Sequence[str]) -> tuple[bytes, str, str]:
    from cupy_backends.cuda.libs import nvrtc  # type: ignore[import-untyped,import-not-found,unused-ignore]

    includes = [f"-I{d}" for d in (*req.include_dirs, *cuda_include_dirs())]
    options = (*flags, f"-arch=sm_{req.arch}", *includes)
    prog = nvrtc.createProgram(req.source, "kernel.cu", (), ())
    try:
        nvrtc.addNameExpression(prog, req.name_expression)
        try:
            nvrtc.compileProgram(prog, options)
        except nvrtc.NVRTCError as exc:
            log = nvrtc.getProgramLog(prog)
            raise _NvrtcFailure(f"{exc}\n{log}".strip(), "INVALID_OPTION" in str(exc)) from None
        lowered = nvrtc.getLoweredName(prog, req.name_expression)
        return bytes(nvrtc.getCUBIN(prog)), lowered, nvrtc.getProgramLog(prog)
    finally:
        nvrtc.destroyProgram(prog)


# -- nvcc ---------------------------------------------------------------------------------


PROBE_PREFIX = "__ktx_kernel_ref_"


def probe_symbol(name_expression: str) -> str:
    """The device variable the nvcc stub initialises with ``&name_expression``; keyed by the
    expression, so a cubin answers only for the expression it was compiled for."""
    return PROBE_PREFIX + hashlib.sha256(name_expression.encode()).hexdigest()[:16]


def instantiation_stub(name_expression: str, source: str = "", param_names: Sequence[str] = ()) -> str:
    """Source appended to the kernel for ``nvcc -cubin``: a ``__device__`` pointer initialised
    with the kernel's address. Taking the address instantiates a template kernel, and the
    compiler resolves the expression exactly as C++ does (a namespace, ``int32_t`` for ``int``,
    an enum constant, a function or a ``static`` function's address, an ``enable_if`` return
    type): the relocation of that pointer names the kernel's symbol, the compiler's own lowered
    name (:func:`probed_name`). A plain kernel is always emitted and is found by its mangled
    name (its address would be ambiguous where a host function shares its name: llm.c's
    ``fused_residual_forward2`` kernel and launcher), so it gets no stub.

    Where the name has several ``__global__`` overloads in ``source``, ``param_names`` (the
    spec's arguments) pick one and the address is taken through a cast to its type
    (:mod:`ktx.measure.overload`)."""
    if "<" not in name_expression:
        return ""
    address = f"&{name_expression}"
    if param_names:
        from ktx.measure.overload import overload_address

        address = overload_address(source, name_expression, param_names) or address
    return (
        "\n// ktx: instantiate the requested kernel and record its symbol (nvcc -cubin)\n"
        f"__device__ void* {probe_symbol(name_expression)} = (void*){address};\n"
    )


def _nvcc(req: CompileRequest, nvcc: str) -> tuple[bytes, str, str]:
    """nvcc -cubin with :func:`instantiation_stub`; the kernel's lowered name is read from the
    cubin (:func:`mangled_name`)."""
    with tempfile.TemporaryDirectory(prefix="ktx-nvcc-") as tmp:
        src = Path(tmp) / "kernel.cu"
        out = Path(tmp) / "kernel.cubin"
        src.write_text(req.source + instantiation_stub(req.name_expression, req.source, req.param_names))
        cmd = [
            nvcc, "-cubin", f"-gencode=arch=compute_{req.arch},code=sm_{req.arch}", *req.flags,
            *(f"-I{d}" for d in req.include_dirs), "-o", str(out), str(src),
        ]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        log = (proc.stdout + proc.stderr).replace(str(src), "kernel.cu")
        if proc.returncode != 0:
            raise RuntimeError(log.strip() or f"nvcc exited with {proc.returncode}")
        cubin = out.read_bytes()
    return cubin, mangled_name(cubin, req.name_expression), log


@dataclass(frozen=True)
class ElfSymbol:
    name: str
    info: int
    other: int
    shndx: int
    value: int


@dataclass(frozen=True)
class _Section:
    sh_type: int
    offset: int
    size: int
    link: int
    info: int
    entsize: int


def _sections(image: bytes) -> list[_Section]:
    if image[:4] != b"\x7fELF" or image[4] != 2:
        raise ValueError("not an ELF64 image")
    shoff = struct.unpack_from("<Q", image, 0x28)[0]
    shentsize, shnum = struct.unpack_from("<HH", image, 0x3A)
    out = []
    for i in range(shnum):
        _name, sh_type, _flags, _addr, offset, size, link, info, _align, entsize = struct.unpack_from(
            "<IIQQQQIIQQ", image, shoff + i * shentsize
        )
        out.append(_Section(sh_type, offset, size, link, info, entsize))
    return out


def _symtab(image: bytes, sections: list[_Section], index: int) -> list[ElfSymbol]:
    sec = sections[index]
    str_off = sections[sec.link].offset
    out = []
    for j in range(sec.size // (sec.entsize or 24)):
        st_name, st_info, st_other, st_shndx, st_value = struct.unpack_from(
            "<IBBHQ", image, sec.offset + j * (sec.entsize or 24)
        )
        end = image.index(b"\0", str_off + st_name)
        out.append(ElfSymbol(image[str_off + st_name : end].decode(), st_info, st_other, st_shndx, st_value))
    return out


def elf_symbol_table(image: bytes) -> list[ElfSymbol]:
    """Every symbol of an ELF64 image (a cubin), with its section and value."""
    sections = _sections(image)
    return [s for i, sec in enumerate(sections) if sec.sh_type == 2 for s in _symtab(image, sections, i)]


def elf_symbols(image: bytes) -> list[tuple[str, int, int]]:
    """(name, st_info, st_other) of every symbol in an ELF64 image (a cubin)."""
    return [(s.name, s.info, s.other) for s in elf_symbol_table(image)]


def probed_name(image: bytes, name_expression: str) -> str | None:
    """The symbol that :func:`instantiation_stub`'s pointer for ``name_expression`` points at:
    the relocation (SHT_RELA) at the pointer's offset in its section names it. None when the
    cubin holds no such pointer (a plain kernel, or a cubin built without the stub)."""
    want = probe_symbol(name_expression)
    sections = _sections(image)
    for tab_index, tab in enumerate(sections):
        if tab.sh_type != 2:  # SHT_SYMTAB
            continue
        symbols = _symtab(image, sections, tab_index)
        probe = next((s for s in symbols if s.name == want), None)
        if probe is None:
            continue
        for rela in sections:
            if rela.sh_type != 4 or rela.info != probe.shndx or rela.link != tab_index:  # SHT_RELA
                continue
            for k in range(rela.size // (rela.entsize or 24)):
                r_offset, r_info = struct.unpack_from("<QQ", image, rela.offset + k * (rela.entsize or 24))
                if r_offset == probe.value:
                    target: str = symbols[r_info >> 32].name
                    return target
    return None


def _demangle(names: list[str]) -> list[str]:
    for tool in ("cu++filt", "c++filt"):
        path = shutil.which(tool)
        if path is None and tool == "cu++filt" and find_nvcc():
            candidate = os.path.join(os.path.dirname(find_nvcc() or ""), tool)
            path = candidate if os.path.isfile(candidate) else None
        if path:
            proc = subprocess.run([path], input="\n".join(names), capture_output=True, text=True)
            if proc.returncode == 0:
                return proc.stdout.splitlines()
    return names


_CAST = re.compile(r"\((?:(?:unsigned|signed|long|short)\s+)*(?:int|long|short|char|bool|__int128)\)")
_LITERAL_SUFFIX = re.compile(r"(?<![\w.])(-?\d+)(?:[uU](?:ll|LL|l|L)?|(?:ll|LL|l|L)[uU]?)(?!\w)")


def _normalise(text: str) -> str:
    """One spelling for a template argument list, whichever demangler printed it: CUDA's
    ``cu++filt`` writes a non-type argument with its cast (``(int)2``, ``(bool)1``), GNU
    ``c++filt`` writes ``2``, ``true`` or ``2u``, and a spec writes what its author typed."""
    text = _CAST.sub("", text)
    text = _LITERAL_SUFFIX.sub(r"\1", text)
    text = re.sub(r"\btrue\b", "1", re.sub(r"\bfalse\b", "0", text))
    return re.sub(r"\s+", "", text)


def demangled_head(plain: str) -> str:
    """``ns::k<T, (int)2>`` from a demangled kernel signature such as
    ``void ns::k<T, (int)2>(T1 *, const T1 *, int)``: the text before the parameter list, found
    at bracket depth 0 (a cast inside the template arguments opens a parenthesis too), without
    the return type that a template function's demangling starts with."""
    depth = 0
    end = len(plain)
    for i, ch in enumerate(plain):
        if ch in "<[":
            depth += 1
        elif ch in ">]":
            depth = max(0, depth - 1)
        elif ch == "(":
            if depth == 0:
                end = i
                break
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
    head = plain[:end].strip()
    # The return type is separated from the name by a space at depth 0 ("void ns::k<...>").
    depth = 0
    cut = 0
    for i, ch in enumerate(head):
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth = max(0, depth - 1)
        elif ch == " " and depth == 0:
            cut = i + 1
    return head[cut:]


_BUILTIN = {
    "v": "void", "b": "bool", "c": "char", "a": "signed char", "h": "unsigned char", "s": "short",
    "t": "unsigned short", "i": "int", "j": "unsigned int", "l": "long", "m": "unsigned long",
    "x": "long long", "y": "unsigned long long", "f": "float", "d": "double",
}  # fmt: skip


class _Mangled:
    """A reader of the few Itanium-ABI productions a kernel's name uses: a plain or namespaced
    name and template arguments that are builtin types, class names or integer literals. Anything
    else (substitutions, pointers, function types) gives up (None): the demanglers handle those."""

    def __init__(self, text: str) -> None:
        self.text, self.pos = text, 0

    def peek(self) -> str:
        return self.text[self.pos : self.pos + 1]

    def take(self, n: int = 1) -> str:
        out = self.text[self.pos : self.pos + n]
        self.pos += n
        return out

    def source_name(self) -> str | None:
        digits = re.match(r"\d+", self.text[self.pos :])
        if digits is None:
            return None
        self.pos += len(digits.group())
        name = self.take(int(digits.group()))
        return name if len(name) == int(digits.group()) else None

    def name(self) -> str | None:
        """``ns::k<args>``: an unscoped name or ``N ... E``, each part perhaps with ``I ... E``."""
        nested = self.peek() == "N"
        if nested:
            self.take()
        parts: list[str] = []
        while True:
            part = self.source_name()
            if part is None:
                return None
            if self.peek() == "I":
                args = self.template_args()
                if args is None:
                    return None
                part += "<" + ", ".join(args) + ">"
            parts.append(part)
            if not nested:
                break
            if self.peek() == "E":
                self.take()
                break
        return "::".join(parts)

    def template_args(self) -> list[str] | None:
        self.take()  # I
        args: list[str] = []
        while self.peek() and self.peek() != "E":
            arg = self.template_arg()
            if arg is None:
                return None
            args.append(arg)
        return args if self.take() == "E" else None

    def template_arg(self) -> str | None:
        head = self.peek()
        if head == "L":
            self.take()
            kind = self.take()
            value = re.match(r"n?\d+", self.text[self.pos :])
            if kind not in _BUILTIN or value is None:
                return None
            self.pos += len(value.group())
            if self.take() != "E":
                return None
            return value.group().replace("n", "-")
        if head in _BUILTIN:
            return _BUILTIN[self.take()]
        if head.isdigit() or head == "N":
            return self.name()
        return None


def mangled_head(mangled: str) -> str | None:
    """``ns::k<__nv_bfloat16, 2>`` read straight from ``_ZN2ns1kI13__nv_bfloat16Li2EEEv...``, for
    when no demangler is installed; None where the name uses more of the ABI than this reads."""
    if not mangled.startswith("_Z"):
        return None
    reader = _Mangled(mangled)
    reader.pos = 2
    return reader.name()


def kernel_symbols(cubin: bytes) -> list[str]:
    """The function symbols (STT_FUNC) of a cubin: its kernels and out-of-line device functions."""
    return [name for name, info, _ in elf_symbols(cubin) if info & 0xF == 2]


#: An anonymous namespace in a mangled name (``_GLOBAL__N_1``): C++ names its members without it.
_ANONYMOUS = re.compile(r"_GLOBAL__N_\w*?::")


def mangled_name(cubin: bytes, name_expression: str) -> str:
    """The symbol of kernel ``name_expression`` (``ns::k<int32_t, 8>``) in ``cubin``, as the
    compiler lowered it. A template kernel is found through the pointer :func:`instantiation_stub`
    compiled in (:func:`probed_name`), never by comparing a demangler's spelling with the spec's:
    ``int32_t`` is ``int``, a function argument may be ``&f`` or ``f``, and ``cu++filt`` prints an
    ``enable_if`` return type its own way. A plain kernel is its ``extern "C"`` name, or the symbol
    whose mangled name (read, not demangled) is that qualified name; a namespace the expression
    leaves out may precede it (``ns::k`` for ``k``, as a ``using namespace`` allows)."""
    found = probed_name(cubin, name_expression)
    if found is not None:
        return found
    funcs = kernel_symbols(cubin)
    if "<" not in name_expression:
        want = re.sub(r"\s+", "", name_expression).lstrip(":")
        heads = {n: _ANONYMOUS.sub("", mangled_head(n) or "") for n in funcs}
        exact = [n for n in funcs if n == want or heads[n] == want]
        hits = exact or [n for n in funcs if heads[n].endswith("::" + want)]
        if len(hits) == 1:
            return hits[0]
    raise RuntimeError(not_found_message(name_expression, funcs))


def closest_kernels(name_expression: str, funcs: Sequence[str], count: int = 5) -> list[tuple[str, str]]:
    """(readable name, symbol) of the ``count`` symbols whose names are closest to
    ``name_expression`` (difflib's ratio on the spellings): a hint, never the lookup."""
    plain = _demangle(list(funcs))
    readable: list[tuple[str, str]] = []
    for symbol, text in zip(funcs, plain, strict=False):
        head = (mangled_head(symbol) or symbol) if text == symbol else demangled_head(text)
        readable.append((head, symbol))
    want = _normalise(name_expression)
    scored = sorted(readable, key=lambda hs: -difflib.SequenceMatcher(None, want, _normalise(hs[0])).ratio())
    return scored[:count]


def not_found_message(name_expression: str, funcs: Sequence[str]) -> str:
    """One line naming the closest few kernels (not every symbol of the cubin)."""
    if not funcs:
        return f"kernel {name_expression!r} not found: the cubin defines no functions"
    near = closest_kernels(name_expression, funcs)
    listed = "; ".join(f"{head} ({symbol})" if head != symbol else symbol for head, symbol in near)
    more = f" (of {len(funcs)} functions)" if len(funcs) > len(near) else ""
    return (
        f"kernel {name_expression!r} not found in the cubin; closest{more}: {listed} "
        "(check the spec's kernel, with its namespace, and template_args)"
    )


# -- driver -------------------------------------------------------------------------------


def compile_kernel(req: CompileRequest) -> CompileResult:
    """Compile (or fetch from the cache) one instantiation. Never raises: failures are results."""
    start = time.perf_counter()
    root = cache_dir() / "cubin"
    meta_path = root / f"{req.key}.json"
    if meta_path.is_file():
        try:
            meta = CompileResult.from_dict(json.loads(meta_path.read_text()))
            if meta.ok and Path(meta.cubin_path).is_file():
                return CompileResult(**{**asdict(meta), "cached": True, "seconds": 0.0})
        except (ValueError, TypeError, OSError):
            pass
    logs: list[str] = []
    result: tuple[bytes, str, str] | None = None
    compiler = ""
    fallback = ""
    dropped: list[str] = []
    nvcc = find_nvcc()
    key = req.key
    # only the requested kernel is generated: the file's other kernels keep their signatures
    # (its host code still compiles) but not their bodies (ktx.measure.compile_prune)
    pruned = prune(req.source, req.name_expression)
    if pruned.emptied:
        req = replace(req, source=pruned.source)
    if req.backend in ("auto", "nvrtc"):
        try:
            result, compiler = _nvrtc(req, req.flags), "nvrtc"
        except _NvrtcFailure as exc:
            logs.append(f"NVRTC: {exc.log}")
            invalid = exc.invalid_option
            fallback = "NVRTC rejected an option" if invalid else "NVRTC failed"
            permissive = permissive_rejects(exc.log, req.flags) if invalid else ()
            if permissive:
                try:
                    kept = [f for f in req.flags if f not in permissive]
                    result = _nvrtc(req, kept)
                    dropped = list(permissive)
                    compiler = f"nvrtc (dropped {' '.join(dropped)})"
                except Exception as again:  # still failing: nvcc compiles with every flag
                    text = again.log if isinstance(again, _NvrtcFailure) else str(again)
                    logs.append(f"NVRTC without {' '.join(permissive)}: {text}")
                    if isinstance(again, _NvrtcFailure) and not again.invalid_option:
                        fallback = nvrtc_failure_kind(text)
        except Exception as exc:  # no NVRTC library, ...
            logs.append(f"NVRTC unavailable: {exc}")
            invalid = False
            fallback = "NVRTC unavailable"
    else:
        invalid = False
    if result is None and nvcc and req.backend in ("auto", "nvcc"):
        try:
            result, compiler = _nvcc(req, nvcc), "nvcc"
        except Exception as exc:
            logs.append(f"nvcc: {exc}")
    if result is None and invalid and req.backend in ("auto", "nvrtc"):
        flags = list(req.flags)
        for _ in range(len(flags)):
            bad = _UNKNOWN_OPTION.findall(logs[0]) if logs else []
            bad = [b for b in bad if b in flags]
            if not bad:
                break
            for b in bad:
                flags.remove(b)
                dropped.append(b)
            try:
                result = _nvrtc(req, flags)
                compiler = f"nvrtc (dropped {' '.join(dropped)})"
                break
            except _NvrtcFailure as exc:
                logs[0] = f"NVRTC: {exc.log}"
                if not exc.invalid_option:
                    break
    seconds = time.perf_counter() - start
    if result is None:
        return CompileResult(False, req.name_expression, log=failure_log(logs), seconds=seconds)
    if compiler == "nvcc" and fallback:
        compiler = f"nvcc ({fallback})"
    elif compiler.startswith("nvrtc"):
        fallback = ""  # NVRTC itself, perhaps without some flags (``dropped``)
    cubin, lowered, log = result
    root.mkdir(parents=True, exist_ok=True)
    cubin_path = root / f"{key}.cubin"
    tmp = cubin_path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_bytes(cubin)
    tmp.replace(cubin_path)
    done = CompileResult(
        True, req.name_expression, str(cubin_path), lowered, compiler, log.strip(), seconds,
        dropped_flags=tuple(dropped), fallback=fallback,
    )  # fmt: skip
    tmp_meta = meta_path.with_suffix(f".tmp{os.getpid()}")
    tmp_meta.write_text(json.dumps(done.to_dict()))
    tmp_meta.replace(meta_path)
    return done


def failure_log(logs: Sequence[str]) -> str:
    """The logs of the attempts that failed, the last attempt first: it is the real failure
    (nvcc's error on the kernel), where an earlier one may only say why that compiler could not
    be used (NVRTC's ``cannot open source file`` for a host header), and a clipped or one-line
    report must show the real one."""
    if not logs:
        return ""
    last, earlier = logs[-1], logs[:-1]
    if not earlier:
        return last.strip()
    return "\n".join([last.strip(), "", "earlier attempts:", *(log.strip() for log in earlier)])


class CompilePool:
    """Compiles in CPU processes (spawned: no CUDA state is ever forked)."""

    def __init__(self, workers: int | None = None) -> None:
        count = workers or max(1, min(8, (os.cpu_count() or 2) - 1))
        self._pool = ProcessPoolExecutor(max_workers=count, mp_context=get_context("spawn"))
        self._futures: dict[str, Future[CompileResult]] = {}

    def submit(self, req: CompileRequest) -> Future[CompileResult]:
        key = req.key
        if key not in self._futures:
            self._futures[key] = self._pool.submit(compile_kernel, req)
        return self._futures[key]

    def result(self, req: CompileRequest) -> CompileResult:
        try:
            return self.submit(req).result()
        except Exception as exc:  # a compile process died
            return CompileResult(False, req.name_expression, log=f"compile process failed: {exc}")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
