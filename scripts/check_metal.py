"""Check that every kernel of the solver can run on Metal, without a Mac (docs/metal.md).

Usage: python scripts/check_metal.py [--cache FOLDER] [--verbose]
Needs Vulkan (Mesa's lavapipe will do) and the spirv-tools and spirv-cross packages.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from solver.metal.check import main  # noqa: E402 - after the path is set

if __name__ == "__main__":
    sys.exit(main())
