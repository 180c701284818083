//! Provider settings that must be in the environment before libfabric initialises, and
//! the choice handed on to spawned jobs through it.

use std::sync::Once;

const DYN_RBUF: &str = "FI_OFI_RXM_ENABLE_DYN_RBUF";

/// Turns off ofi_rxm's dynamic receive buffers unless the user set the variable
/// (`mtl_rofi_rxm_dyn_rbuf false`). libfabric reads the variable once, when its
/// providers are first loaded, i.e. at rofi's first fi_getinfo in this process.
pub fn disable_rxm_dyn_rbuf() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if std::env::var_os(DYN_RBUF).is_none() {
            // SAFETY: called during MPI_Init's component selection, before rofi starts
            // any thread; Open MPI's own helper threads do not write the environment,
            // and this is the same setenv the C components use for provider settings.
            unsafe { std::env::set_var(DYN_RBUF, "0") };
        }
    });
}

/// Names the process whose choice `OMPI_MCA_mtl_rofi_inherited_choice` holds.
const CHOICE_MADE_BY: &str = "ROFI_CHOICE_MADE_BY_PID";

/// Puts this process's choice where `MPI_Comm_spawn` copies it into the jobs it
/// spawns: `OMPI_MCA_mtl_rofi_inherited_choice` in our own environment
/// (rofi_core::provider::inherit). Open MPI read its parameters at registration, so
/// this MPI Session is not affected; a later one in this process chooses the same
/// (`choice_is_own`).
pub fn hand_on_choice(value: &str) {
    // SAFETY: called from the MTL's init, before rofi starts any thread; as above,
    // Open MPI's own helper threads do not write the environment, and Open MPI sets
    // OMPI_MCA_ variables in its own environment the same way (opal_setenv).
    unsafe {
        std::env::set_var(rofi_core::provider::inherit::ENV, value);
        std::env::set_var(CHOICE_MADE_BY, std::process::id().to_string());
    }
}

/// Whether the handed-on choice in our environment is this process's own, from an
/// earlier MPI Session (not its parent's).
pub fn choice_is_own() -> bool {
    std::env::var(CHOICE_MADE_BY).is_ok_and(|pid| pid == std::process::id().to_string())
}
