//! mca-harness: launches real `mpirun` jobs against MCA components (in progress).
