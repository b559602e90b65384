"""The `dambreak` command: parses arguments and hands over to the module doing the work."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from solver import __version__

TAICHI_BANNER = "ENABLE_TAICHI_HEADER_PRINT"
"""Taichi's switch for the "[Taichi] version ..." line it prints when imported (read once, at
import); solver.backend applies it to the "[Taichi] Starting on arch=..." line of ti.init too.
The run summary names the backend and device in our words, so both lines are only noise unless
asked for with --verbose."""


def _add_run(commands: argparse._SubParsersAction) -> None:
    from solver.backend import BACKEND_CHOICES  # imports taichi: only once TAICHI_BANNER is set

    run = commands.add_parser(
        "run",
        help="run a simulation from a TOML config",
        description="Run a simulation. With no CONFIG, runs configs/quick.toml.",
    )
    run.add_argument("config", nargs="?", help="TOML config file (default: configs/quick.toml)")
    run.add_argument(
        "--backend",
        choices=BACKEND_CHOICES,
        default="auto",
        help="compute backend (default auto: cuda, else metal on macOS, else cpu)",
    )
    run.add_argument("--threads", type=int, help="CPU threads (cpu backend; 1 = sequential)")
    run.add_argument("--out", help="output folder (default outputs/<config name>/)")
    run.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override a config value (repeatable)",
    )
    run.add_argument(
        "--checkpoint-every",
        type=_positive_seconds,
        metavar="T",
        help="write checkpoint.npz every T simulated seconds (the latest is kept)",
    )
    start = run.add_mutually_exclusive_group()
    start.add_argument(
        "--force", action="store_true", help="start again, removing results in the output folder"
    )
    start.add_argument(
        "--resume",
        metavar="DIR",
        help="continue the stopped run in DIR from its checkpoint (CONFIG, if given, must match)",
    )
    run.set_defaults(handler=_run)


def _positive_seconds(text: str) -> float:
    """A positive, finite number of seconds (argparse type)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (0.0 < value < float("inf")):
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive number of seconds")
    return value


def _run(args: argparse.Namespace) -> int:
    from solver.run import run_command

    return run_command(args)


TOOLS = (
    ("compare", "solver.validation.compare", "compare two runs (e.g. GPU against CPU)",
     "Compare two run folders particle by particle and in macroscopic quantities."),
    ("validate", "solver.validation.experiments", "compare a case with experimental data",
     "Run (or read) a reference case and compare it with experiments; or compare runs of "
     "spheric_test2 at successive resolutions (--runs)."),
    ("render", "solver.validation.render", "draw PNG frames and a GIF of a run",
     "Render a run's snapshots to PNG frames and an animated GIF, without ParaView."),
    ("bench", "solver.bench", "measure the speed of a whole SPH step",
     "Run the scene (default: the seed dam break) for a number of steps and report "
     "particle-steps and neighbour interactions per second, per-phase times, compile time "
     "and device memory per particle."),
    ("selftest", "solver.selftest.command", "check this machine's backend",
     "Building blocks against numpy and a short dam break against the CPU backend."),
)  # fmt: skip
"""(command, module, help, description): each module has add_arguments(parser) and main(args)."""


def _add_tool(
    commands: argparse._SubParsersAction, name: str, module: str, help_text: str, description: str
) -> None:
    parser = commands.add_parser(name, help=help_text, description=description)
    importlib.import_module(module).add_arguments(parser)
    parser.set_defaults(handler=lambda args: int(importlib.import_module(module).main(args)))


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `dambreak` command."""
    parser = argparse.ArgumentParser(
        prog="dambreak",
        description="3D SPH dam-break solver on Taichi (CPU, CUDA, Vulkan, Metal).",
    )
    parser.add_argument("--version", action="version", version=f"dambreak {__version__}")
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="show Taichi's start-up lines (its version, the arch it starts on)",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_run(commands)
    for tool in TOOLS:
        _add_tool(commands, *tool)
    return parser


def _verbose(argv: Sequence[str]) -> bool:
    """Whether --verbose is among the options before the command, where the parser takes it.

    Decided before the parser exists because building it imports the tools, and with them
    taichi, which prints its version line at import unless TAICHI_BANNER says not to. No option
    before the command takes a value, so the command is the first word not starting with "-".
    """
    for arg in argv:
        if arg == "--verbose":
            return True
        if not arg.startswith("-"):
            return False
    return False


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `dambreak` console script; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    os.environ[TAICHI_BANNER] = "1" if _verbose(argv) else "0"  # also for child processes
    args = build_parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
