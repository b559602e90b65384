"""Helpers shared by the comparison and validation reports: matplotlib set up for files only
(the Agg backend, no display needed), and the small pieces of report writing (Markdown tables,
JSON without NaN, number formatting).

matplotlib is imported inside `pyplot()` so that importing this module stays cheap.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from solver.output.files import atomic_write_text

__all__ = [
    "fmt",
    "json_ready",
    "markdown_table",
    "pyplot",
    "save_figure",
    "write_json",
    "write_report_md",
]


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (files only; works without a display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: Path, dpi: int = 120) -> Path:
    """Save `fig` as a PNG at `path` and close it (figures are not kept open)."""
    plt = pyplot()
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return Path(path)


def fmt(value: Any, digits: int = 4) -> str:
    """A number for a report table: `digits` significant digits, "-" for None or NaN."""
    if value is None:
        return "-"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    x = float(value)
    if math.isnan(x):
        return "-"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.{digits}g}"


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-flavoured Markdown table; cells that are not strings go through `fmt`.

    A "|" inside a cell is escaped, so that |x| stays one cell.
    """
    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---" for _ in headers) + "|",
    ]
    for row in rows:
        cells = [(cell if isinstance(cell, str) else fmt(cell)).replace("|", "\\|") for cell in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def json_ready(value: Any) -> Any:
    """`value` with numpy scalars and arrays turned into Python ones and NaN/inf into None.

    Strict JSON has no NaN; None (null) marks an undefined number.
    """
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if isinstance(value, np.ndarray):
        return [json_ready(v) for v in value.tolist()]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        x = float(value)
        return x if math.isfinite(x) else None
    if isinstance(value, Path):
        return str(value)
    return value


def write_json(path: Path, data: Any) -> None:
    """Write `data` (through `json_ready`) as indented, strict JSON, atomically."""
    text = json.dumps(json_ready(data), indent=2, allow_nan=False) + "\n"
    atomic_write_text(path, text)


def write_report_md(out_dir: Path, lines: list[str], notes: list[str], figures: list[Path]) -> None:
    """report.md in `out_dir`: the body `lines`, then the notes (if any) and the figures."""
    if notes:
        lines = lines + ["", "## Notes", ""] + [f"- {note}" for note in notes]
    lines = lines + ["", "## Figures", ""] + [f"![{f.stem}]({f.name})" for f in figures]
    atomic_write_text(out_dir / "report.md", "\n".join(lines) + "\n")
