"""The sub-particle-scale (SPS) turbulence closure: the stress of the unresolved scales.

Dalrymple and Rogers 2006 ("Numerical modeling of water waves with the SPH method", Coastal
Engineering 53, 141-147, eq. 9-11), after Lo and Shao 2002 and Gotoh et al. 2001, as DualSPHysics
implements it (Crespo et al. 2015, CPC 187, eq. 9-10; Dominguez et al. 2022, CPM 9; the code is
JSphCpu::ComputeSpsTau):

    tau_ab / rho = 2 nu_t S_ab - (2/3) k delta_ab - (2/3) C_I Delta^2 |S|^2 delta_ab,
    nu_t = (C_s Delta)^2 |S|,   |S| = sqrt(2 S_ab S_ab),   S = (grad v + grad v^T) / 2,

with the Smagorinsky constant C_s, Blin's constant C_I and the filter width Delta = dp. The
turbulent kinetic energy is closed as DualSPHysics closes it, (2/3) k = (2/3) nu_t S_kk
(S_kk = div v): the eddy-viscosity part becomes 2 nu_t (S - S_kk I / 3), the trace-free
(deviatoric) strain, as Smagorinsky's model requires, and the isotropic stress is left to the
Blin term alone. The stress enters the momentum equation as

    dv_i/dt += sum_j m_j (tau_i / rho_i^2 + tau_j / rho_j^2) . grad_i W_ij,

so each particle carries tau / rho^2 (what DualSPHysics stores), as its six components xx, xy,
xz, yy, yz, zz (STRESS_COMPONENTS).
"""

from typing import Any

SMAGORINSKY_CS = 0.12
"""C_s, the Smagorinsky constant (Dalrymple and Rogers 2006; DualSPHysics' value)."""
BLIN_CI = 0.0066
"""C_I, Blin's constant of the isotropic SPS stress (Blin et al. 2002, as cited by Dalrymple
and Rogers 2006; DualSPHysics' value)."""
STRESS_COMPONENTS = 6
"""tau / rho^2 is symmetric: xx, xy, xz, yy, yz, zz."""


def sps_stress(
    sxx: Any, syy: Any, szz: Any, sxy: Any, sxz: Any, syz: Any, rho: Any, width: float
) -> tuple[Any, Any, Any, Any, Any, Any]:
    """tau / rho^2 of a particle with strain rate S and density rho, as (xx, xy, xz, yy, yz,
    zz), for filter width Delta = `width` (arithmetic only, one function so that Taichi
    kernels run it whole)."""
    s2 = 2.0 * (sxx * sxx + syy * syy + szz * szz) + 4.0 * (sxy * sxy + sxz * sxz + syz * syz)
    nu_t = (SMAGORINSKY_CS * width) ** 2 * s2**0.5  # |S|^2 = s2
    isotropic = -(2.0 / 3.0) * (nu_t * (sxx + syy + szz) + BLIN_CI * width**2 * s2)
    two_nu_t = 2.0 * nu_t
    return (
        (two_nu_t * sxx + isotropic) / rho,
        two_nu_t * sxy / rho,
        two_nu_t * sxz / rho,
        (two_nu_t * syy + isotropic) / rho,
        two_nu_t * syz / rho,
        (two_nu_t * szz + isotropic) / rho,
    )
