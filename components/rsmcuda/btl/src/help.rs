//! The component's help file and the reports more than one module makes from it.

use rsmcuda_shm::{AbandonOutcome, Segment};

/// The help file of this component.
pub const HELP: &str = "help-mpi-btl-rsmcuda.txt";

/// The creator gives up on peers that never attached: unlink now, say who. Returns
/// true if every peer had attached after all (nothing was abandoned).
pub fn abandon(seg: &Segment) -> bool {
    match seg.abandon_waiting() {
        Ok(AbandonOutcome::AllAttached) => true,
        Ok(AbandonOutcome::Abandoned { attached, missing }) => {
            let missing: Vec<String> = missing.iter().map(u32::to_string).collect();
            mca::help::show_help(
                HELP,
                "peers never attached",
                true,
                &[
                    seg.name().as_str(),
                    &attached.to_string(),
                    &missing.join(", "),
                ],
            );
            false
        }
        Err(e) => {
            mca::help::show_help(
                HELP,
                "segment failed",
                true,
                &["unlink", seg.name().as_str(), &e.to_string()],
            );
            false
        }
    }
}
