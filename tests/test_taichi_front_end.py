"""The memoised helpers of Taichi's front end (solver/taichi_front_end.py) answer exactly as the
ones they replace, and Taichi's messages still point at the source."""

from __future__ import annotations

import ast
import inspect
import textwrap

import pytest
import taichi as ti
from conftest import use_backend

from solver.taichi_front_end import MemoisedTextWrapper, memoise_front_end

TEXTS = [
    "",
    "    ",
    "        x_i = position[i]",
    "        x_i = position[i]   ",
    "                                ^^^^^^^^^^^",
    "\tif r2 < support2 and j != i and removed[j] == 0:",
    "                            if r2 < support2 and j != i and removed[j] == 0:  # a long line",
    "a" * 200,
    "word " * 40,
    "    acc -= mass * (pressure_term + pi_ij) * grad  \t trailing",
]


@pytest.mark.parametrize("width", [80, 20])
def test_the_memoised_wrap_answers_as_textwrap(width):
    memoised = MemoisedTextWrapper(width=width)
    for text in TEXTS:
        expected = textwrap.TextWrapper(width=width).wrap(text)
        assert memoised.wrap(text) == expected
        assert MemoisedTextWrapper(width=width).wrap(text) == expected  # from memory


def test_the_memoised_wrap_hands_out_a_fresh_list():
    first = MemoisedTextWrapper(width=80).wrap("a b c")
    first.append("changed by the caller")
    assert MemoisedTextWrapper(width=80).wrap("a b c") == ["a b c"]


def _sample(x):
    return x + 1


def test_taichi_1_7_4_looks_up_sources_through_the_memory():
    from taichi.lang import kernel_impl  # the pinned version's internals

    assert memoise_front_end()
    assert memoise_front_end()  # a second call changes nothing
    for _ in range(2):
        lines, first = kernel_impl.getsourcelines(_sample)
        assert (lines, first) == inspect.getsourcelines(_sample)
        lines.append("changed by the caller")
    assert kernel_impl.getsourcefile(_sample) == inspect.getsourcefile(_sample)


def test_a_kernel_error_still_names_its_file_line_and_source():
    use_backend("cpu")

    @ti.kernel
    def faulty():
        print(undefined_name + 1)  # noqa: F821

    line = inspect.getsourcelines(faulty.__wrapped__)[1] + 2
    with pytest.raises(ti.TaichiNameError) as raised:
        faulty()
    message = str(raised.value)
    assert f'test_taichi_front_end.py", line {line}, in faulty' in message
    assert "print(undefined_name + 1)" in message
    assert "^^^^" in message


@ti.func
def _walk_sample(x, n):
    total = x
    for k in range(n):
        if total > 2.0 * k:
            total -= ti.sqrt(total + k)
        else:
            total += ti.static(3) * (k
                                     + 1)  # fmt: skip
    return total


def test_the_memoised_position_messages_are_taichis():
    from taichi.lang import kernel_impl
    from taichi.lang.ast.ast_transformer_utils import ASTTransformerContext

    assert memoise_front_end()
    memoised = ASTTransformerContext.get_pos_info
    original = memoised.__wrapped__
    nodes = 0
    for _ in range(2):  # the second pass answers from memory
        tree, ctx = kernel_impl._get_tree_and_ctx(_walk_sample.func, is_kernel=False)
        for node in ast.walk(tree):
            if isinstance(node, (ast.stmt, ast.expr)):
                assert memoised(ctx, node) == original(ctx, node)
                nodes += 1
    assert nodes > 60
