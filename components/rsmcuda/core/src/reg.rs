//! The registration handle rsmcuda hands ob1 when CUDA IPC is active, and how `btl_get`
//! tells a device transfer from a host (CMA) one by it.
//!
//! ob1 copies `btl_registration_handle_size` bytes of the sender's handle into the RGET
//! header and gives them back to the receiver's `btl_get` as the remote handle. With
//! CUDA IPC active that size is [`REG_HANDLE_LEN`]: the 64-byte `CUipcMemHandle`, then
//! the base and size of the whole allocation (`cuMemGetAddressRange`), little endian.
//! Host buffers get an all-zero handle (size 0): the receiver reads them with CMA as on
//! a host without CUDA. Device buffers registered only for their owner's use (a get's
//! destination, a put's target) get [`UNSHARED_DEVICE_HANDLE`], so that a peer's put
//! is refused rather than written with CMA. Without CUDA IPC the size stays 0 and
//! nothing here is used.

use std::fmt;

use crate::cache::IpcHandle;

/// Bytes of an encoded handle.
pub const REG_HANDLE_LEN: usize = 64 + 8 + 8;

/// A peer's device allocation as its `btl_register_mem` described it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceRegion {
    pub handle: IpcHandle,
    /// Base of the allocation containing the registered buffer, in the exporter's
    /// address space.
    pub base: u64,
    /// Bytes of that allocation (never 0).
    pub size: u64,
}

/// What a remote handle says about the buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RemoteMemory {
    /// Host memory: read it with CMA.
    Host,
    /// Device memory: open the handle (through the cache) and copy on the GPU.
    Device(DeviceRegion),
    /// Device memory registered for its owner's own transfers (a get's destination, a
    /// put's target): neither CMA nor IPC may touch it.
    UnsharedDevice,
}

/// Bytes that are not a handle of ours.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadHandle {
    /// A size of 0 with a non-zero IPC handle or base.
    ZeroSizedDevice,
    /// `base + size` overflows.
    Overflow,
}

impl fmt::Display for BadHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadHandle::ZeroSizedDevice => {
                f.write_str("registration handle names a device allocation of 0 bytes")
            }
            BadHandle::Overflow => f.write_str("registration handle: base + size overflows"),
        }
    }
}

impl std::error::Error for BadHandle {}

/// The handle of a host buffer.
pub const HOST_HANDLE: [u8; REG_HANDLE_LEN] = [0; REG_HANDLE_LEN];

/// The handle of device memory registered without remote read: no IPC handle, base
/// `u64::MAX`, size 0.
pub const UNSHARED_DEVICE_HANDLE: [u8; REG_HANDLE_LEN] = {
    let mut b = [0; REG_HANDLE_LEN];
    let mut i = 64;
    while i < 72 {
        b[i] = 0xff;
        i += 1;
    }
    b
};

impl DeviceRegion {
    #[must_use]
    pub fn encode(&self) -> [u8; REG_HANDLE_LEN] {
        let mut b = [0u8; REG_HANDLE_LEN];
        b[..64].copy_from_slice(&self.handle.0);
        b[64..72].copy_from_slice(&self.base.to_le_bytes());
        b[72..].copy_from_slice(&self.size.to_le_bytes());
        b
    }

    /// Whether `[addr, addr + len)` lies inside the allocation.
    #[must_use]
    pub fn contains(&self, addr: u64, len: u64) -> bool {
        addr.checked_sub(self.base)
            .and_then(|off| off.checked_add(len))
            .is_some_and(|end| end <= self.size)
    }
}

/// Reads a remote handle.
pub fn decode(bytes: &[u8; REG_HANDLE_LEN]) -> Result<RemoteMemory, BadHandle> {
    let mut handle = [0u8; 64];
    handle.copy_from_slice(&bytes[..64]);
    let word = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
    let (base, size) = (word(64), word(72));
    if size == 0 {
        return match (base, handle == [0; 64]) {
            (0, true) => Ok(RemoteMemory::Host),
            (u64::MAX, true) => Ok(RemoteMemory::UnsharedDevice),
            _ => Err(BadHandle::ZeroSizedDevice),
        };
    }
    base.checked_add(size).ok_or(BadHandle::Overflow)?;
    Ok(RemoteMemory::Device(DeviceRegion {
        handle: IpcHandle(handle),
        base,
        size,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_handles_round_trip_and_host_is_all_zero() {
        let mut h = [0u8; 64];
        h[0] = 0xab;
        h[63] = 0x01;
        let r = DeviceRegion {
            handle: IpcHandle(h),
            base: 0x7f00_0000_1000,
            size: 1 << 20,
        };
        assert_eq!(decode(&r.encode()), Ok(RemoteMemory::Device(r)));
        assert_eq!(decode(&HOST_HANDLE), Ok(RemoteMemory::Host));
        assert_eq!(
            decode(&UNSHARED_DEVICE_HANDLE),
            Ok(RemoteMemory::UnsharedDevice)
        );
        let mut b = UNSHARED_DEVICE_HANDLE;
        b[0] = 1;
        assert_eq!(decode(&b), Err(BadHandle::ZeroSizedDevice));
    }

    #[test]
    fn inconsistent_handles_are_refused() {
        let mut b = HOST_HANDLE;
        b[3] = 1;
        assert_eq!(decode(&b), Err(BadHandle::ZeroSizedDevice));
        let mut b = HOST_HANDLE;
        b[64] = 1;
        assert_eq!(decode(&b), Err(BadHandle::ZeroSizedDevice));
        let r = DeviceRegion {
            handle: IpcHandle([1; 64]),
            base: u64::MAX - 10,
            size: 100,
        };
        assert_eq!(decode(&r.encode()), Err(BadHandle::Overflow));
    }

    #[test]
    fn containment_is_checked_without_overflow() {
        let r = DeviceRegion {
            handle: IpcHandle([1; 64]),
            base: 1000,
            size: 100,
        };
        assert!(r.contains(1000, 100));
        assert!(r.contains(1050, 50));
        assert!(!r.contains(1050, 51));
        assert!(!r.contains(999, 1));
        assert!(!r.contains(1050, u64::MAX));
    }
}
