"""The outcome of one self-test item: what was checked, whether it passed, and the figures."""

from dataclasses import dataclass


@dataclass(frozen=True)
class CheckResult:
    """One item: `figures` says what was measured, so a failure report is useful on its own."""

    name: str
    passed: bool
    figures: str
