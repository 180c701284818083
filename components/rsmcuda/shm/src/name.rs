//! Segment names.

use std::ffi::CString;
use std::path::PathBuf;

use crate::ShmError;

/// Longest name accepted (NAME_MAX for the file under /dev/shm, plus the leading '/').
const MAX_NAME: usize = 255;

/// A POSIX shared-memory object name: `/` followed by `[A-Za-z0-9._-]`, unique per job
/// and node.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SegmentName {
    name: String,
    cname: CString,
}

/// The key of a node's name in segment names (FNV-1a of the name): processes whose
/// keys differ are on different nodes.
pub fn node_key(node: &str) -> u64 {
    fnv1a64(node)
}

fn fnv1a64(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn valid_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

impl SegmentName {
    /// `"/rsmcuda-<job_key>-<fnv1a64(node)>"`. `job_key` must be unique per job on the
    /// node (e.g. the jobid in hex, plus the uid if several users share nodes) and use only
    /// `[A-Za-z0-9._-]`; `node` is any string naming the node (hashed).
    pub fn for_job(job_key: &str, node: &str) -> Result<Self, ShmError> {
        if job_key.is_empty() || !job_key.chars().all(valid_char) {
            return Err(ShmError::InvalidName {
                name: job_key.to_owned(),
                reason: "job key must be non-empty [A-Za-z0-9._-]",
            });
        }
        Self::new(&format!("/rsmcuda-{job_key}-{:016x}", fnv1a64(node)))
    }

    /// A name given in full; must be `/` followed by 1..=254 characters of `[A-Za-z0-9._-]`.
    pub fn new(name: &str) -> Result<Self, ShmError> {
        let bad = |reason| ShmError::InvalidName {
            name: name.to_owned(),
            reason,
        };
        let rest = name
            .strip_prefix('/')
            .ok_or_else(|| bad("must start with '/'"))?;
        if rest.is_empty() || name.len() > MAX_NAME {
            return Err(bad("length must be 2..=255"));
        }
        if !rest.chars().all(valid_char) || rest == "." || rest == ".." {
            return Err(bad("only [A-Za-z0-9._-] may follow the leading '/'"));
        }
        let cname = CString::new(name).map_err(|_| bad("contains NUL"))?;
        Ok(Self {
            name: name.to_owned(),
            cname,
        })
    }

    /// The name, with its leading '/'.
    pub fn as_str(&self) -> &str {
        &self.name
    }

    /// The same, as a C string.
    pub(crate) fn as_cstr(&self) -> &std::ffi::CStr {
        &self.cname
    }

    /// The name of an anonymous (memfd) segment: without the leading '/'.
    pub(crate) fn memfd_cstr(&self) -> CString {
        CString::new(&self.name[1..]).expect("checked: no NUL")
    }

    /// What `/proc/<pid>/fd/<n>` of the process holding the anonymous segment reads.
    pub(crate) fn memfd_link(&self) -> String {
        format!("/memfd:{} (deleted)", &self.name[1..])
    }

    /// Where glibc on Linux keeps the object (`/dev/shm/<name>`): for tests and diagnostics.
    pub fn dev_shm_path(&self) -> PathBuf {
        PathBuf::from(format!("/dev/shm{}", self.name))
    }
}

impl std::fmt::Display for SegmentName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        let n = SegmentName::for_job("1a2b.3", "node01").unwrap();
        assert!(n.as_str().starts_with("/rsmcuda-1a2b.3-"));
        assert_eq!(n.as_str().len(), "/rsmcuda-1a2b.3-".len() + 16);
        assert_eq!(n, SegmentName::for_job("1a2b.3", "node01").unwrap());
        assert_ne!(n, SegmentName::for_job("1a2b.3", "node02").unwrap());
        assert_eq!(n.dev_shm_path().to_str().unwrap(), format!("/dev/shm{n}"));
        for bad in ["", "a/b", "x y", "é"] {
            assert!(SegmentName::for_job(bad, "n").is_err(), "{bad:?}");
        }
        for bad in [
            "noslash",
            "/",
            "/a/b",
            "/..",
            &format!("/{}", "a".repeat(255)),
        ] {
            assert!(SegmentName::new(bad).is_err(), "{bad:?}");
        }
        assert!(SegmentName::new(&format!("/{}", "a".repeat(254))).is_ok());
    }
}
