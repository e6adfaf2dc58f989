"""Sort every vectorize refusal of the held-out sweep (``table.json``) into a category, each
with a verdict: *right* (no safe packing there: already packed by hand, gathers and scatters,
barriers, strided access, GEMM) or *missed* (a safe opportunity vectorize does not take).

Why rules on the remark text rather than a verdict per kernel: the verdicts were read off the
sources one by one (session 9), and the rules encode what was found, so that a later sweep is
sorted the same way and a new refusal falls into "unsorted" instead of being guessed. The first
rule whose pattern matches any remark of a kernel decides; the order puts the decisive reason
first (a kernel refused for aliasing and for a hand-packed float4 loop is hand-packed).

    python benchmarks/vheld/classify.py [table.json]     # prints the markdown table
"""

from __future__ import annotations

import collections
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

_LDG = "`ldg(&p[i])` through a helper in an unseen header, read as an escaping address"
_LOCAL = (
    "a read or write through a local index (`w = id / n`, `index = i * N + j`) "
    "the range check does not follow"
)

#: (pattern over a kernel's remarks, category, verdict), first match wins.
RULES: tuple[tuple[str, str, str], ...] = (
    (
        r"\* \d+ >= \w+\) return|stores through `\w+\.[xyzw]`|elements of 16 bytes|scales the thread index"
        r"|float4|vqkv4|vinput4|vres|vinp1|half2|\.x +=|tmp\.x|and step `blockDim\.y`",
        "already packed by hand (float4/half2/char4 locals, `i * 4 >= n`, 16-byte elements)",
        "right",
    ),
    (r"gemm|C_warp|blockIdx\.z", "GEMM tiles (not memory-bound)", "right"),
    (
        r"__syncthreads|__shfl|with no __syncthreads\(\) in between|a `break`|a while loop|stride \*= 2"
        r"|the loop condition",
        "barriers, shuffles, early exits, scans and sorts in the loop",
        "right",
    ),
    (
        r"start `threadIdx\.y`|p\[k \+ offset\]",
        "column (strided) access: the contiguous axis is another thread dimension",
        "right",
    ),
    (
        r"which is not element|in the body of element|stores through `\*|derives a value from \w+ before"
        r"|scores\[write_index\]|assigns bias_element|flat_2dim",
        "gathers, scatters and index transforms (per-element addresses)",
        "right",
    ),
    (
        r"= threadIdx\.x;` \(line \d+\) is not one element|blockIdx\.x \* hidden_dim \+ threadIdx\.x"
        r"|follows threadIdx\.y",
        "one column per thread with blockDim.x = row length (packs need a block-size change)",
        "right",
    ),
    (
        r"per-thread array|declares more than one variable",
        "per-thread caches indexed by the iteration (local arrays)",
        "right",
    ),
    (r"no launch of|curand_init", "no launch in the file / RNG state set up before the guard", "right"),
    (
        r"has another definition",
        "another definition of the name (a specialization) shares the launches: a grid shrink reaches it",
        "right",
    ),
    (r"ELEMENT_PER_ROUND", "hand-coarsened grid stride (ELEMENT_PER_ROUND elements per thread)", "right"),
    (
        r"blockIdx\.y \* blockDim\.x \+ threadIdx\.x|blockIdx\.y \* gridDim\.x",
        "one element per thread on the grid's y (or a 2-D grid flattened)",
        "missed",
    ),
    (
        r"takes the address of",
        _LDG,
        "missed",
    ),
    (
        r"unknown size of element type",
        "template element type never resolved by a launch in the file (since 8a734e4 only a "
        "one-element-per-thread body: its grid shrinks by VEC on the host, where sizeof is not known)",
        "missed",
    ),
    (
        r"no loop in \w+ and no thread index",
        "the loop is in a helper of a header (`cuda::ilp_reduce`)",
        "missed",
    ),
    (r"`if \(\w+ > ", "guard written `i > n` (bound n + 1)", "missed"),
    (
        r"aliasing: ",
        "a read at another offset than a write, no `__restrict__`: needs a run-time "
        "range check the pass does not have",
        "missed",
    ),
    (r"no unconditional, contiguous access", "no contiguous access (per-row gathers)", "right"),
)


_LOADED = (
    "a read at an index loaded from memory (`ia3_tasks[batch_id]`, `batch_id` from "
    "`padding_offset[...]`) beside a write, no `__restrict__`: no range a check could test"
)

#: Kernels whose remark does not say enough to sort them (the same "aliasing" line for different
#: causes), with what reading the source found, and the remark pattern the reading was made for
#: (a later sweep that refuses the kernel for another reason falls to the rules instead).
OVERRIDES: dict[str, tuple[str, str, str]] = {
    "addBiasGeluV2": (_LDG, "missed", r"takes the address"),
    "add_bias_tanh": (_LDG, "missed", r"aliasing|takes the address"),
    "generalAddResidualT5LayerNorm": (_LDG, "missed", r"aliasing|takes the address"),
    "generic_activation": (_LOCAL, "missed", r"padding_offset\[word_id\]"),
    "length_criterion": (_LOCAL, "missed", r"aliasing"),
    "LayerNormForwardCUDAKernel": (_LOCAL, "missed", r"aliasing"),
    "dequantize_gemm_output_kernel": (
        "a read at a conditional index (`a[t ? j : i]`): two ranges",
        "missed",
        r"aliasing",
    ),
    "add_bias_slice": (
        "gathers, scatters and index transforms (per-element addresses)",
        "right",
        r"aliasing",
    ),
    # read again in s10-vheld4: y is only written (once per element, in every branch of an
    # if / else if / else chain); the reads out of line are of x, which a range check covers
    "rotary_kernel": (
        "the one store `y[i]` written in every branch of an if / else if / else chain",
        "missed",
        r"out of line",
    ),
    # s9-vheld2 (after the ldg helper, local indices, `__restrict` and grid y): read again
    "add_bias_concat_clstoken_add_posembed": (
        "the one store `out[id]` written in both branches of an if/else (packs need one store)",
        "missed",
        r"out of line",
    ),
    "add_bias_layernorm_v2": (
        "a block-stride loop written as a counter (`col_id = i * blockDim.x + tid`: stride blockDim.x in i)",
        "missed",
        r"aliasing: out\[offset \+ col_id\]",
    ),
    "addBiasResidual": (
        "stores only under compile-time conditions (`if (RESIDUAL_NUM == 1)`, `std::is_same`)",
        "missed",
        r"no unconditional access",
    ),
}
for _k in ("addBiasGeluV2", "generic_activation"):
    OVERRIDES[_k + "@ia3"] = (_LOADED, "missed", r"aliasing: ia3_tasks\[batch_id\]")


def classify(remarks: list[str], kernel: str = "") -> tuple[str, str]:
    text = "\n".join(remarks)
    for key in (kernel, kernel + "@ia3"):
        if key in OVERRIDES and re.search(OVERRIDES[key][2], text):
            return OVERRIDES[key][0], OVERRIDES[key][1]
    for pattern, category, verdict in RULES:
        if re.search(pattern, text):
            return category, verdict
    return "unsorted", "?"


def main(argv: list[str]) -> int:
    path = Path(argv[1]) if len(argv) > 1 else HERE / "table.json"
    data = json.loads(path.read_text())
    groups: dict[tuple[str, str], list[str]] = collections.defaultdict(list)
    for row in data["kernels"]:
        if row["status"] == "refused":
            groups[classify(row["remarks"], row["kernel"])].append(row["kernel"])
    verdicts = collections.Counter()
    for (_, verdict), kernels in groups.items():
        verdicts[verdict] += len(kernels)
    print(f"Refusals of ktx {data['ktx']}: " + ", ".join(f"{v} {n}" for v, n in sorted(verdicts.items())))
    print()
    print("| verdict | kernels | category | which |")
    print("|---|---:|---|---|")
    for (category, verdict), kernels in sorted(groups.items(), key=lambda kv: (kv[0][1], -len(kv[1]))):
        print(f"| {verdict} | {len(kernels)} | {category} | {', '.join(f'`{k}`' for k in kernels)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
