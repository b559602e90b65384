"""Checking, without a Mac, that every kernel of the solver is one Metal can take.

Taichi's Metal backend converts each kernel's SPIR-V to Metal Shading Language with
SPIRV-Cross and hands it to Apple's compiler. The first two steps run anywhere: `check` compiles
every kernel on Vulkan into a private offline cache, `taichi_cache` takes the SPIR-V modules out
of it, and `spirv` reads them for what Metal cannot run. docs/metal.md says what this proves.
"""
