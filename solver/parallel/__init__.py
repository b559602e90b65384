"""Portable parallel building blocks: prefix sum, bucket sort by (key, id), gather, reductions.

Every kernel here is plain Taichi that compiles for CPU, CUDA, Vulkan and Metal: 32-bit types
only, no subgroup or warp-size assumption, no shared memory, and loop bounds passed as kernel
arguments (lavapipe cannot launch constant-bound loops above about 8.4M elements). Each thread
of a scan or reduction works through a fixed, contiguous chunk in order, and the bucket sort's
ranks do not depend on the order its 32-bit atomics took, so results do not depend on the number
of threads, the scheduling or the backend's subgroup size.
"""
