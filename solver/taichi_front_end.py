"""Taichi 1.7.4's Python front end, made cheaper by memoising three of its pure helpers.

Every process turns each kernel's Python source into Taichi's IR before the first launch, even
when the offline cache holds the compiled kernel: the cache's key is computed from that IR. A
`ti.func` is parsed and transformed again at every call site, and for every statement and
expression the front end formats a source-position message (`ASTTransformerContext.
get_pos_info`, kept for error messages), wrapping the source line and a caret line with a new
`textwrap.TextWrapper(width=80)`. Profiled on the quick case on two CPU cores (cProfile, warm
offline cache), that work was about half of the kernels' preparation before the first step:

- 23,165 position messages and in them 51,508 wraps, of 4,042 distinct strings (the same
  source lines, once per call site);
- 631 `getsourcefile` / `getsourcelines` of the same few dozen functions, each scanning
  `sys.modules` (`inspect.getmodule`) and re-tokenising the file.

`memoise_front_end` makes each of them remember its answers: the position message by what it
reads (`position_key`), the wrap by its text, the source look-ups by the function's code
object. All three are pure functions of their key within a process (Python's `linecache`,
which `inspect` reads, keeps a file's lines for the process's life too), so the IR, the
offline cache's keys, the kernels and every message stay the same; only the repeated work
goes. Measured (quick case, CPU, warm cache, three rounds alternating): the 20 kernels of the
first step took 2.9 to 3.4 s to prepare before, 1.6 to 2.0 s after. It is applied for Taichi
1.7.4 only, the version this package pins, whose internals it names; any other version runs
unchanged.
"""

from __future__ import annotations

import functools
import textwrap
from collections.abc import Callable
from types import CodeType, FunctionType

import taichi as ti

PINNED_TAICHI = (1, 7, 4)
"""The Taichi version whose front-end helpers `memoise_front_end` replaces."""


class MemoisedTextWrapper(textwrap.TextWrapper):
    """A TextWrapper whose `wrap` answers a repeated text from memory.

    Taichi creates one per source-position message with the same options (width 80), so the
    memory is kept per set of options, shared by every instance."""

    _memory: dict[tuple, dict[str, list[str]]] = {}

    def wrap(self, text: str) -> list[str]:
        options = (
            self.width, self.initial_indent, self.subsequent_indent, self.expand_tabs,
            self.replace_whitespace, self.fix_sentence_endings, self.break_long_words,
            self.drop_whitespace, self.break_on_hyphens, self.tabsize, self.max_lines,
            self.placeholder,
        )  # fmt: skip
        known = self._memory.setdefault(options, {})
        lines = known.get(text)
        if lines is None:
            lines = known[text] = super().wrap(text)
        return list(lines)


def _memoised_by_code(look_up: Callable[[FunctionType], object]) -> Callable:
    """`look_up(function)` remembered for each function's code object: closures built from
    one definition (a `ti.func` made per config) share their source."""
    memory: dict[CodeType, object] = {}

    def memoised(function: FunctionType) -> object:
        code = function.__code__
        if code not in memory:
            memory[code] = look_up(function)
        return memory[code]

    return memoised


def _memoised_source_lines(look_up: Callable) -> Callable:
    """getsourcelines remembered per code object, returning a fresh list each time (the
    caller may change it)."""
    remembered = _memoised_by_code(look_up)

    def source_lines(function: FunctionType) -> tuple[list[str], int]:
        lines, first = remembered(function)
        return list(lines), first

    return source_lines


BLOCK_STATEMENTS = ("For", "While", "FunctionDef", "If")
"""Statements whose position message Taichi 1.7.4 cuts at their body's first line."""


def position_key(ctx: object, node: object) -> tuple:
    """What Taichi 1.7.4's `ASTTransformerContext.get_pos_info(node)` reads: the file, the
    function (its name, and its first line, which with the file fixes its source lines and
    their indent), the node's kind and its span, and for a block statement its body's first
    line."""
    kind = type(node).__name__
    body_line = node.body[0].lineno if kind in BLOCK_STATEMENTS else None  # type: ignore[attr-defined]
    return (
        ctx.file, ctx.lineno_offset, ctx.func.func.__name__, kind,  # type: ignore[attr-defined]
        node.lineno, node.end_lineno, node.col_offset, node.end_col_offset,  # type: ignore[attr-defined]
        body_line,
    )  # fmt: skip


def _memoised_position_info(get_pos_info: Callable) -> Callable:
    """get_pos_info remembered per `position_key` (a ti.func is transformed again at every
    call site, its position messages with it)."""
    memory: dict[tuple, str] = {}

    @functools.wraps(get_pos_info)
    def position_info(ctx: object, node: object) -> str:
        key = position_key(ctx, node)
        message = memory.get(key)
        if message is None:
            message = memory[key] = get_pos_info(ctx, node)
        return message

    return position_info


def taichi_version() -> tuple[int, ...]:
    """The running Taichi's version as a tuple of ints."""
    version = ti.__version__
    if isinstance(version, str):
        return tuple(int(part) for part in version.split(".")[:3])
    return tuple(version)


_installed = False


def memoise_front_end() -> bool:
    """Install the memoised helpers in Taichi 1.7.4's front end (once; later calls do
    nothing). Returns whether they are installed."""
    global _installed
    if taichi_version() != PINNED_TAICHI:
        return False
    if not _installed:
        from taichi.lang import kernel_impl  # noqa: PLC0415 (internals of the pinned version)
        from taichi.lang.ast import ast_transformer_utils  # noqa: PLC0415

        context = ast_transformer_utils.ASTTransformerContext
        context.get_pos_info = _memoised_position_info(context.get_pos_info)
        ast_transformer_utils.TextWrapper = MemoisedTextWrapper
        kernel_impl.getsourcefile = _memoised_by_code(kernel_impl.getsourcefile)
        kernel_impl.getsourcelines = _memoised_source_lines(kernel_impl.getsourcelines)
        _installed = True
    return True
