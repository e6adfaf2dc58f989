"""#define integers, constexpr integers (also computed from other constants), shared arrays."""

from __future__ import annotations

from ktx.ir import parse
from ktx.ir.consteval import int_literal
from ktx.ir.index import blank_comments, eval_int_text

SRC = """\
#define BLOCK 256  // threads per block
#define WARPS (BLOCK / 32)
#define HEX 0x1F
#define SHIFTED (1u << 10)
#define SIZED (16 / sizeof(__nv_bfloat16))
#define FLOATY 0.5f
#define RUNTIME (threadIdx.x * 2)
#define FN(a) ((a) + 1)
#define MULTI (BLOCK \\
               * 2)

constexpr int kA = 4;
constexpr int kB = kA * BLOCK;
static constexpr unsigned kC = (kB >> 2) - 1;
const int kD{kC % 7};
constexpr float kF = 1.5f;
int not_const = 3;

template <int N>
__global__ void k(float* out) {
  constexpr int kLocal = N * 2;
  constexpr int kInner = WARPS + 1;
  __shared__ float tile[WARPS][BLOCK + 1];
  __shared__ int counter;
  extern __shared__ __align__(16) unsigned char dyn[];
  out[0] = tile[0][0] + counter + dyn[0] + kInner;
}
"""


def test_define_integers() -> None:
    m = parse(SRC)
    got = {x.name: x.int_value for x in m.macros}
    assert got == {
        "BLOCK": 256,
        "WARPS": 8,
        "HEX": 31,
        "SHIFTED": 1024,
        "SIZED": 8,
        "FLOATY": None,
        "RUNTIME": None,
        "FN": None,
        "MULTI": 512,
    }
    block = next(x for x in m.macros if x.name == "BLOCK")
    assert block.value == "256" and block.params is None
    assert block.value_span is not None and m.text(block.value_span) == "256"  # comment excluded
    fn = next(x for x in m.macros if x.name == "FN")
    assert fn.params == ("a",) and fn.value == "((a) + 1)"


def test_constexpr_integers_computed_from_other_constants() -> None:
    m = parse(SRC)
    got = {(c.name, c.function): c.int_value for c in m.constants}
    assert got == {
        ("kA", None): 4,
        ("kB", None): 1024,
        ("kC", None): 255,
        ("kD", None): 3,
        ("kInner", "k"): 9,
    }
    kb = next(c for c in m.constants if c.name == "kB")
    assert kb.value == "kA * BLOCK" and kb.type == "int" and m.text(kb.value_span) == "kA * BLOCK"
    assert "kLocal" not in {c.name for c in m.constants}  # depends on a template parameter


def test_shared_arrays_static_and_extern() -> None:
    m = parse(SRC)
    got = [(a.name, a.type, a.dims, a.extern, a.function) for a in m.shared_arrays]
    assert got == [
        ("tile", "float", ("WARPS", "BLOCK + 1"), False, "k"),
        ("counter", "int", (), False, "k"),
        ("dyn", "unsigned char", ("",), True, "k"),
    ]


def test_helpers() -> None:
    assert [int_literal(t) for t in ("0", "017", "0x10", "0b101", "1'000", "42u", "4ULL", "x")] == [
        0,
        15,
        16,
        5,
        1000,
        42,
        4,
        None,
    ]
    assert eval_int_text("(A + 1) * 2", {"A": 3}) == 8
    assert eval_int_text("7 / 0") is None
    assert eval_int_text("-7 / 2") == -3 and eval_int_text("-7 % 2") == -1  # C truncates
    assert eval_int_text("") is None and eval_int_text("x +") is None
    assert eval_int_text("-16") == -16 and int_literal("-0x10") == -16 and int_literal("+3") == 3
    assert blank_comments(b'1 /* a */ + "//s" // c') == b'1         + "//s"     '
