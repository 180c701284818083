//! rsmcuda shared memory: the segment and the lock-free multi-writer FIFOs inside it (raw)
