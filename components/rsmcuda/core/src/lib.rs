//! rsmcuda core: CUDA IPC handshake state machine and remote memory-handle cache (sans-IO)
