"""``[compile] prelude``: source a project's build generates (FlashInfer's JIT writes the
``__device__`` activation its launcher instantiates the kernel with) compiled in front of the
kernel's file, so a spec's template argument can name it."""

from __future__ import annotations

from pathlib import Path

import pytest
from ktx.ir.errors import KtxError

from ktx.measure.compile import CompileRequest, CompileResult, compile_kernel, find_nvcc
from ktx.measure.refcache import spec_digest
from ktx.spec import Spec, parse_spec

KERNEL = """\
template <typename T, float (*Act)(const float&)>
__global__ void act(T* out, const T* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = T(Act(float(in[i])));
}
"""

PRELUDE = "__device__ __forceinline__ float twice(const float& x) { return 2.0f * x; }\n"

SPEC = """\
kernel = "act"
template_args = ["float", "twice"]

[[args]]
name = "out"
dtype = "fp32"
shape = "[n]"
role = "out"

[[args]]
name = "inp"
dtype = "fp32"
shape = "[n]"

[[args]]
name = "n"
dtype = "int32"
value = "n"

[shapes]
default = [{{ n = 1000 }}]

[launch]
grid = ["(n + 255) // 256"]
block = ["256"]

[compile]
{compile}
"""


def spec_at(tmp_path: Path, compile_lines: str, kernel: str = KERNEL) -> Spec:
    (tmp_path / "kernel.cu").write_text(kernel)
    (tmp_path / "jit.cuh").write_text(PRELUDE)
    path = tmp_path / "ktx.toml"
    path.write_text(SPEC.format(compile=compile_lines))
    return parse_spec(path.read_text(), path)


def test_a_prelude_file_comes_first_and_lines_name_the_kernel_file_again(tmp_path: Path) -> None:
    spec = spec_at(tmp_path, 'prelude = "jit.cuh"')
    text = spec.compile_source(KERNEL)
    assert text.index("float twice") < text.index("__global__ void act")
    assert f'#line 1 "{(tmp_path / "jit.cuh").resolve()}"' in text.splitlines()[0]
    line = f'#line 1 "{(tmp_path / "kernel.cu").resolve()}"'
    assert text.splitlines()[text.splitlines().index(line) + 1] == KERNEL.splitlines()[0]


def test_prelude_source_text_and_no_prelude(tmp_path: Path) -> None:
    spec = spec_at(tmp_path, f'prelude_source = """{PRELUDE}"""')
    assert spec.compile_source(KERNEL).startswith(PRELUDE.rstrip())
    plain = spec_at(tmp_path, "flags = []")
    assert plain.prelude == "" and plain.compile_source(KERNEL) == KERNEL


def test_a_missing_prelude_file_is_named_at_its_key(tmp_path: Path) -> None:
    with pytest.raises(KtxError) as info:
        spec_at(tmp_path, 'prelude = "nowhere.cuh"')
    assert "compile.prelude: file 'nowhere.cuh' not found" in str(info.value)
    assert info.value.location is not None and info.value.location.line == 28


def test_the_reference_cache_key_follows_the_prelude_file(tmp_path: Path) -> None:
    spec = spec_at(tmp_path, 'prelude = "jit.cuh"')
    before = spec_digest(spec)
    (tmp_path / "jit.cuh").write_text(PRELUDE.replace("2.0f", "3.0f"))
    after = spec_digest(parse_spec((tmp_path / "ktx.toml").read_text(), tmp_path / "ktx.toml"))
    assert before != after


def _build(spec: Spec, source: str) -> CompileResult:
    return compile_kernel(
        CompileRequest(source, spec.name_expression, spec.flags, "90", spec.include_dirs, "nvcc")
    )


@pytest.mark.slow
@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not installed")
def test_nvcc_builds_with_the_prelude_and_not_without(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KTX_CACHE_DIR", str(tmp_path / "cache"))
    spec = spec_at(tmp_path, 'prelude = "jit.cuh"')
    built = _build(spec, spec.compile_source(spec.source_text()))
    assert built.ok, built.log
    alone = _build(spec, spec.source_text())
    assert not alone.ok and "twice" in alone.log
    # an error in the kernel's file is reported at that file's own line, not shifted by the prelude
    broken = KERNEL.replace("if (i < n)", "if (i < n) undefined_name;")
    spec = spec_at(tmp_path, 'prelude = "jit.cuh"', broken)
    failed = _build(spec, spec.compile_source(broken))
    assert not failed.ok and "kernel.cu(4)" in failed.log, failed.log


def test_the_prelude_is_part_of_the_measurement_key(tmp_path: Path) -> None:
    from ktx.search.tunable import spec_digest

    spec = spec_at(tmp_path, 'prelude = "jit.cuh"')
    (tmp_path / "jit.cuh").write_text(PRELUDE.replace("2.0f", "3.0f"))
    changed = parse_spec((tmp_path / "ktx.toml").read_text(), tmp_path / "ktx.toml")
    assert spec_digest(changed) != spec_digest(spec)


STRUCT_KERNEL = """\
struct Params { int n; float scale; };
template <float (*Act)(const float&)>
__global__ void act_struct(float* out, Params p) { out[0] = Act(p.scale); }
"""


def test_a_struct_is_laid_out_with_the_prelude_that_defines_the_template_argument(tmp_path: Path) -> None:
    from ktx.ir.facts.structs import kernel_layouts

    from ktx.measure.argpack import struct_layouts

    if not kernel_layouts("struct P { int n; };\n__global__ void k(P p) {}\n", "k"):
        pytest.skip("libclang is not available")
    (tmp_path / "kernel.cu").write_text(STRUCT_KERNEL)
    (tmp_path / "jit.cuh").write_text(PRELUDE)
    text = (
        'kernel = "act_struct"\ntemplate_args = ["twice"]\n[[args]]\nname = "out"\ndtype = "fp32"\n'
        'shape = "[1]"\nrole = "out"\n[[args]]\nname = "p"\nfields = { n = 1, scale = 0.5 }\n'
        '[shapes]\ndefault = [{}]\n[launch]\ngrid = ["1"]\nblock = ["1"]\n[compile]\nprelude = "jit.cuh"\n'
    )
    (tmp_path / "ktx.toml").write_text(text)
    spec = parse_spec(text, tmp_path / "ktx.toml")
    layout = struct_layouts(spec)["p"]
    assert [(leaf.name, leaf.offset) for leaf in layout.leaves] == [("n", 0), ("scale", 4)]
    # the instantiation parsed (not the declaration fallback): without the prelude it does not
    assert kernel_layouts(spec.compile_source(STRUCT_KERNEL), "act_struct", template_args=["twice"])
    assert not kernel_layouts(STRUCT_KERNEL, "act_struct", template_args=["twice"])
