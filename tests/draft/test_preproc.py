"""Which includes a plain CUDA build reaches, and which macros a file tests (ktx.draft.preproc)."""

from __future__ import annotations

from ktx.draft.preproc import condition, directives

GGML_LIKE = """#pragma once
#ifndef COMMON_H
#define COMMON_H
#include "ggml.h"
#if defined(GGML_USE_HIP)
#include "vendors/hip.h"
#elif defined(GGML_USE_MUSA)
#include "vendors/musa.h"
#else
#include "vendors/cuda.h"
#endif
#if CUDART_VERSION >= 11070
#include <cuda/barrier>
#endif
#ifdef BF16_AVAILABLE
#include <cuda_bf16.h>
#endif
#if defined(CUBLAS_API_H_) || defined(CUSPARSEAPI) || defined(WIN32)
#endif
#define HAVE_X
#if defined(HAVE_X) && !defined(GGML_CUDA_F16)
#include <x.h>
#endif
#endif
"""


def test_the_else_of_another_platforms_branch_is_live_and_its_branches_are_dead() -> None:
    got = {i.name: i.live for i in directives(GGML_LIKE).includes}
    assert got["ggml.h"] is True  # inside an include guard: taken
    assert got["vendors/hip.h"] is False and got["vendors/musa.h"] is False
    assert got["vendors/cuda.h"] is True


def test_a_condition_on_a_value_is_unknown_and_an_undefined_ifdef_is_dead() -> None:
    got = {i.name: i.live for i in directives(GGML_LIKE).includes}
    assert got["cuda/barrier"] is None
    assert got["cuda_bf16.h"] is False


def test_a_macro_the_file_defines_before_the_test_counts_as_defined() -> None:
    got = {i.name: i.live for i in directives(GGML_LIKE).includes}
    assert got["x.h"] is True


def test_the_tested_macros_leave_out_guards_own_defines_and_other_platforms() -> None:
    tested = directives(GGML_LIKE).tested
    assert tested == ("BF16_AVAILABLE", "GGML_CUDA_F16")


def test_condition_evaluates_defined_and_logic_and_gives_up_on_values() -> None:
    assert condition("defined(A) || !defined(B)", set()) is True
    assert condition("defined A && defined(B)", {"A"}) is False
    assert condition("defined(A) && X > 3", {"A"}) is None
    assert condition("defined(A) || X > 3", {"A"}) is True
    assert condition("0 // off", set()) is False
