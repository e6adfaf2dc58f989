"""Templates: knob space, instantiation (lowering), name expression, launch, trace round trip."""

from __future__ import annotations

import json

import pytest
from ktx.ir.errors import KtxError
from ktx.ir.launch import LaunchMapping

from ktx.passbase import Knob
from ktx.pipeline import run
from ktx.template import KnobSpace, Template, Trace, lower
from ktx.usercode import HEADER_BEGIN

KERNEL = """\
template <typename T>
__global__ void k(T* x, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    x[i] = x[i] * 2;
  }
}

void launch(float* x, int n) {
  dim3 block(std::min(n, 256));
  dim3 grid((n + 255) / 256);
  k<float><<<grid, block>>>(x, n);
}
"""


def space() -> KnobSpace:
    return KnobSpace(
        (Knob("B", (32, 64, 128), 64, "threads"), Knob("K", (1, 2, 4), 1)),
        ("B * K <= 256", "d % B == 0"),
    )


def test_knob_validates_its_domain() -> None:
    assert Knob("A", (4, 1, 2, 2), 1).values == (1, 2, 4)
    with pytest.raises(KtxError, match="not in its domain"):
        Knob("A", (1, 2), 3)
    with pytest.raises(KtxError, match="upper-case"):
        Knob("a", (1,), 1)


def test_complete_fills_defaults_and_rejects_bad_values() -> None:
    s = space()
    assert s.complete({"K": 4}) == {"B": 64, "K": 4}
    with pytest.raises(KtxError, match="48 is not a value of knob B") as info:
        s.complete({"B": 48})
    assert "B takes {32, 64, 128}" in info.value.hint
    with pytest.raises(KtxError, match="no knob 'C'") as info:
        s.complete({"C": 1})
    assert "B, K" in info.value.hint


def test_constraints_with_shapes_are_checked_only_with_shapes() -> None:
    s = space()
    assert s.violations({"B": 128, "K": 4}) == ("B * K <= 256",)
    assert s.violations({"B": 64}) == ()
    assert s.violations({"B": 64}, {"d": 96}) == ("d % B == 0",)
    with pytest.raises(KtxError, match=r"breaks constraint 'B \* K <= 256' \(B=128, K=4\)") as info:
        s.check({"B": 128, "K": 4})
    assert "K takes {1, 2, 4}" in info.value.hint


def test_sample_is_feasible_and_repeatable() -> None:
    s = space()
    draws = [s.sample(seed) for seed in range(20)]
    assert all(s.feasible(c) for c in draws)
    assert draws == [s.sample(seed) for seed in range(20)]
    assert len({json.dumps(c, sort_keys=True) for c in draws}) > 1
    assert s.size == 9


def test_lower_helpers() -> None:
    src = (
        "// ktx:knobs begin\n#define KTX_A 0\n// ktx:knobs end\n"
        "__global__ void __launch_bounds__(KTX_B * 2, KTX_M) k() {\n"
        "#pragma unroll ktx_U\n"
        "  for (;;) {}\n"
        "  int b = KTX_PICK(KTX_A, (std::min(n, 256)));\n"
        "  int g = KTX_CDIV((n + 1) / 2, KTX_C);\n"
        "}\n"
    )
    out = lower(src, {"A": 0, "B": 64, "M": 0, "U": 4, "C": 1}, "p")
    assert out.splitlines() == [
        "// ktx: `p` instantiated with A=0, B=64, M=0, U=4, C=1",
        "__global__ void __launch_bounds__(128) k() {",
        "#pragma unroll 4",
        "  for (;;) {}",
        "  int b = std::min(n, 256);",
        "  int g = (n + 1) / 2;",
        "}",
    ]
    out = lower(src, {"A": 8, "B": 0, "M": 0, "U": 0, "C": 4}, "p")
    assert "__global__ void k() {" in out
    assert "#pragma" not in out
    assert "int b = 8;" in out
    assert "int g = ((n + 1) / 2 + 3) / 4;" in out


def test_lower_refuses_missing_values() -> None:
    with pytest.raises(KtxError, match="KTX_X has no value"):
        lower("int a = KTX_X;", {})


def test_template_compiles_as_is_and_instantiates_clean() -> None:
    t = run(KERNEL, "block-size,coarsen,unroll")
    assert HEADER_BEGIN in t.source
    assert "#ifndef KTX_BLOCK_X" in t.source
    out = t.instantiate({"BLOCK_X": 128, "COARSEN": 2})
    assert "KTX_" not in out and "ktx_UNROLL" not in out
    assert "dim3 block(128);" in out
    assert "dim3 grid(((n + 255) / 256 + 1) / 2);" in out
    assert "__launch_bounds__(128)" in out


def test_default_instantiation_is_the_original_plus_one_comment() -> None:
    t = run(KERNEL, "block-size,unroll,launch-bounds")
    out = t.instantiate()
    lines = [line for line in out.splitlines(keepends=True) if not line.startswith("// ktx: ")]
    assert "".join(lines) == KERNEL


def test_name_expression_and_launch() -> None:
    t = run(KERNEL, "block-size,coarsen")
    assert t.name_expression() == "k<float>"
    launch = t.launch()
    assert launch is not None
    assert launch.grid == ("ceil_div((n + 255) // 256, COARSEN)",)
    assert launch.block == ("BLOCK_X if BLOCK_X else min(n, 256)",)
    assert launch.evaluate({"n": 1000, "BLOCK_X": 0, "COARSEN": 2}) == ((2,), (256,), 0)
    fields = t.candidate_fields({"COARSEN": 4})
    assert fields["config"] == {"BLOCK_X": 0, "COARSEN": 4}
    assert "KTX_" not in fields["source"]


def test_name_expression_keeps_spec_placeholders_and_fills_knobs() -> None:
    t = run(KERNEL, "", template_args=("__nv_bfloat16", "{topk}"))
    assert t.name_expression() == "k<__nv_bfloat16, {topk}>"
    t2 = Template(
        t.kernel, t.path, t.original, t.source, KnobSpace((Knob("VEC", (4, 8), 8),)), None,
        ("T", "{VEC}", "{topk}"), t.trace,
    )  # fmt: skip
    assert t2.name_expression({"VEC": 4}) == "k<T, 4, {topk}>"


def test_caller_mapping_is_used_and_transformed() -> None:
    spec = LaunchMapping(("tokens",), ("max(1, min(d // 8, 256))",), "0")
    t = run(KERNEL, "coarsen", mapping=spec)
    launch = t.launch()
    assert launch is not None and launch.grid == ("ceil_div(tokens, COARSEN)",)


def test_trace_round_trip_and_replay() -> None:
    t = run(KERNEL, "block-size,coarsen,unroll")
    data = json.loads(t.trace.dumps())
    assert [s["pass"] for s in data["steps"]] == ["block-size", "coarsen", "unroll", "ktx"]
    trace = Trace.from_json(data)
    assert trace.replay(KERNEL.encode()) == t.source.encode()
    again = Template.from_trace(KERNEL, trace)
    assert again.source == t.source
    assert again.space == t.space
    assert again.launch() == t.launch()
    assert again.instantiate({"COARSEN": 8}) == t.instantiate({"COARSEN": 8})
    with pytest.raises(KtxError, match="different source"):
        trace.replay(b"// other\n" + KERNEL.encode())


def test_empty_pipeline_is_the_identity() -> None:
    t = run(KERNEL, "")
    assert t.source == KERNEL
    assert t.instantiate() == KERNEL
    assert t.trace.steps == ()


def test_a_users_ktx_names_are_code_not_placeholders() -> None:
    """A template knows exactly its placeholders: a user's ``#define KTX_HOLDOUT_WARP 32`` is
    neither a knob with no value (instantiating a template without knobs used to fail on it)
    nor a knob of the template."""
    from ktx.pipeline import run

    src = (
        "#define KTX_HOLDOUT_WARP 32\n"
        "__global__ void k(float* x, int n) {\n"
        "  for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] = KTX_HOLDOUT_WARP;\n"
        "}\n"
        "void launch(float* x, int n) { k<<<1, KTX_HOLDOUT_WARP>>>(x, n); }\n"
    )
    bare = run(src, "hoist")  # nothing to hoist: no knobs, no header
    assert not bare.knobs and "KTX_HOLDOUT_WARP" not in bare.placeholders
    assert bare.instantiate({}) == src
    with pytest.raises(KtxError, match="placeholder KTX_X has no value"):
        lower("int a = KTX_X; int b = KTX_HOLDOUT_WARP;", {}, "p", frozenset({"KTX_X"}))
    assert lower("int b = KTX_HOLDOUT_WARP;", {}, "p", frozenset({"KTX_X"})) == "int b = KTX_HOLDOUT_WARP;"
