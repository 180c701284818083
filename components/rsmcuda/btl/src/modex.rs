//! What each rank publishes in the modex: who it is on the node and the segment
//! name it would create were it the leader. Pure encoding, checked on decode.

use std::fmt;

const MAGIC: u32 = 0x7273_6d33; // "rsm3"
const FIXED: usize = 4 + 4 + 8 + 8 + 4 + 4 + 8 + 2;
const MAX_NAME: usize = 255;

/// One rank's modex blob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contact {
    /// The rank's process id (CMA target, diagnostics).
    pub pid: u32,
    /// Its eager and max fragment sizes: ranks share a segment only if they agree.
    pub eager: u64,
    pub max: u64,
    /// The NUMA node the rank is bound within, if any: the segment's creator places the
    /// rank's memory there.
    pub numa_node: Option<u32>,
    /// CUDA IPC is active in this rank. Registration handles change size with it, so it
    /// is used only when every rank of the segment has it.
    pub cuda_ipc: bool,
    /// The node's key (`rsmcuda_shm::node_key` of its host name): Open MPI does not know
    /// the locality of every process of another job (MPI_Intercomm_create between jobs
    /// that never connected), this does.
    pub node: u64,
    /// `/rsmcuda-...`: the name this rank creates the segment under if it leads.
    pub segment: String,
}

/// Why a peer's blob is unusable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BadContact {
    TooShort(usize),
    WrongMagic(u32),
    NameLength { declared: usize, present: usize },
    NameNotUtf8,
}

impl fmt::Display for BadContact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooShort(n) => write!(f, "{n} bytes, shorter than the {FIXED}-byte header"),
            Self::WrongMagic(m) => write!(
                f,
                "magic {m:#010x} instead of {MAGIC:#010x} (a different rsmcuda version?)"
            ),
            Self::NameLength { declared, present } => write!(
                f,
                "segment name of {declared} bytes declared, {present} present"
            ),
            Self::NameNotUtf8 => write!(f, "segment name is not UTF-8"),
        }
    }
}

impl Contact {
    pub fn encode(&self) -> Vec<u8> {
        let name = &self.segment.as_bytes()[..self.segment.len().min(MAX_NAME)];
        let mut out = Vec::with_capacity(FIXED + name.len());
        out.extend_from_slice(&MAGIC.to_le_bytes());
        out.extend_from_slice(&self.pid.to_le_bytes());
        out.extend_from_slice(&self.eager.to_le_bytes());
        out.extend_from_slice(&self.max.to_le_bytes());
        out.extend_from_slice(&self.numa_node.map_or(-1, |n| n as i32).to_le_bytes());
        out.extend_from_slice(&u32::from(self.cuda_ipc).to_le_bytes());
        out.extend_from_slice(&self.node.to_le_bytes());
        out.extend_from_slice(&(name.len() as u16).to_le_bytes());
        out.extend_from_slice(name);
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Contact, BadContact> {
        if bytes.len() < FIXED {
            return Err(BadContact::TooShort(bytes.len()));
        }
        let word = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().expect("4 bytes"));
        if word(0) != MAGIC {
            return Err(BadContact::WrongMagic(word(0)));
        }
        let long = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
        let numa = i32::from_le_bytes(bytes[24..28].try_into().expect("4 bytes"));
        let cuda_ipc = word(28) != 0;
        let node = long(32);
        let declared = usize::from(u16::from_le_bytes([bytes[40], bytes[41]]));
        let present = bytes.len() - FIXED;
        if declared != present || declared > MAX_NAME {
            return Err(BadContact::NameLength { declared, present });
        }
        let segment = std::str::from_utf8(&bytes[FIXED..])
            .map_err(|_| BadContact::NameNotUtf8)?
            .to_owned();
        Ok(Contact {
            pid: word(4),
            eager: long(8),
            max: long(16),
            numa_node: u32::try_from(numa).ok(),
            cuda_ipc,
            node,
            segment,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_every_malformation_is_named() {
        let c = Contact {
            pid: 4242,
            eager: 4096,
            max: 32768,
            numa_node: Some(1),
            cuda_ipc: true,
            node: 0x1234_5678_9abc_def0,
            segment: "/rsmcuda-1a2b-4242-00ff".into(),
        };
        let bytes = c.encode();
        assert_eq!(Contact::decode(&bytes), Ok(c.clone()));
        let unbound = Contact {
            numa_node: None,
            cuda_ipc: false,
            ..c.clone()
        };
        assert_eq!(Contact::decode(&unbound.encode()), Ok(unbound));
        assert_eq!(Contact::decode(&bytes[..3]), Err(BadContact::TooShort(3)));
        let mut bad = bytes.clone();
        bad[0] ^= 1;
        assert!(matches!(
            Contact::decode(&bad),
            Err(BadContact::WrongMagic(_))
        ));
        assert!(matches!(
            Contact::decode(&bytes[..bytes.len() - 1]),
            Err(BadContact::NameLength { .. })
        ));
        let mut bad = bytes.clone();
        let last = bad.len() - 1;
        bad[last] = 0xff;
        assert_eq!(Contact::decode(&bad), Err(BadContact::NameNotUtf8));
    }
}
