"""Portable parallel building blocks: prefix sum, stable key sort, gather, reductions.

Every kernel here is plain Taichi that compiles for CPU, CUDA, Vulkan and Metal: 32-bit types
only, no subgroup or warp-size assumption, no shared memory, and loop bounds passed as kernel
arguments (lavapipe cannot launch constant-bound loops above about 8.4M elements). Each thread
works through a fixed, contiguous chunk in order, so results do not depend on the number of
threads, the scheduling or the backend's subgroup size.
"""
