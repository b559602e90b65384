"""dambreak: a 3D weakly compressible SPH dam-break solver on Taichi."""

__version__ = "0.1.0"
