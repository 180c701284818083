//! Streams, events and the operations a stream queues: the data, below the state that
//! holds them. Running the queues: `queue`.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::codes::*;

/// Event progress: `recorded` counts records, `completed` is the highest record number
/// that ran, `time_ns` when it ran. In the heap, or in a shared file for IPC events.
#[derive(Debug)]
pub struct EvShared {
    words: *const AtomicU64,
    /// Mapped file (length); None for heap.
    mapped: Option<usize>,
    /// The file, when this process created it (unlinked at destroy / exit).
    owned_file: Option<String>,
}

// SAFETY: the words are atomics in memory that lives as long as this value.
unsafe impl Send for EvShared {}
// SAFETY: as above; all access is atomic.
unsafe impl Sync for EvShared {}

const EV_FILE_LEN: usize = 4096;

pub fn event_file(pid: u32, id: u64) -> String {
    format!(
        "{}/{}{pid}-ev{id}",
        crate::memory::SHM_DIR,
        crate::memory::PREFIX
    )
}

impl EvShared {
    pub fn heap() -> EvShared {
        let b: Box<[AtomicU64; 3]> =
            Box::new([AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)]);
        EvShared {
            words: Box::into_raw(b).cast(),
            mapped: None,
            owned_file: None,
        }
    }

    /// Maps (creating when `create`) the shared event file at `path`.
    pub fn file(path: &str, create: bool) -> Result<EvShared, CuResult> {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::OpenOptionsExt;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(create)
            .mode(0o600)
            .open(path)
            .map_err(|_| if create { OUT_OF_MEMORY } else { INVALID_VALUE })?;
        if create {
            f.set_len(EV_FILE_LEN as u64).map_err(|_| OUT_OF_MEMORY)?;
        } else if f
            .metadata()
            .map(|m| m.len() < EV_FILE_LEN as u64)
            .unwrap_or(true)
        {
            return Err(INVALID_VALUE);
        }
        // SAFETY: a shared mapping of a file at least EV_FILE_LEN long.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                EV_FILE_LEN,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            if create {
                let _ = std::fs::remove_file(path);
            }
            return Err(OUT_OF_MEMORY);
        }
        Ok(EvShared {
            words: p.cast(),
            mapped: Some(EV_FILE_LEN),
            owned_file: create.then(|| path.to_owned()),
        })
    }

    fn word(&self, i: usize) -> &AtomicU64 {
        // SAFETY: `words` points at three live, aligned atomics (heap box or page).
        unsafe { &*self.words.add(i) }
    }

    pub fn recorded(&self) -> &AtomicU64 {
        self.word(0)
    }

    pub fn completed(&self) -> &AtomicU64 {
        self.word(1)
    }

    pub fn time_ns(&self) -> &AtomicU64 {
        self.word(2)
    }

    pub fn is_complete(&self) -> bool {
        self.completed().load(Ordering::Acquire) >= self.recorded().load(Ordering::Acquire)
    }

    pub fn unlink(&self) {
        if let Some(f) = &self.owned_file {
            let _ = std::fs::remove_file(f);
        }
    }
}

impl Drop for EvShared {
    fn drop(&mut self) {
        self.unlink();
        match self.mapped {
            // SAFETY: the page mapped in `file`, no longer referenced.
            Some(len) => unsafe {
                libc::munmap(self.words as *mut libc::c_void, len);
            },
            // SAFETY: the box leaked in `heap`, no longer referenced.
            None => drop(unsafe { Box::from_raw(self.words as *mut [AtomicU64; 3]) }),
        }
    }
}

#[derive(Debug)]
pub struct Event {
    pub flags: u32,
    pub ctx: usize,
    /// Process-unique id (names the IPC file).
    pub id: u64,
    pub shared: Arc<EvShared>,
    /// Stream of the last record in this process (to advance it on query).
    pub last_stream: Option<usize>,
    pub ipc_opened: bool,
}

#[derive(Debug)]
pub enum Op {
    Copy {
        dst: usize,
        src: usize,
        n: usize,
    },
    Set {
        dst: usize,
        value: u8,
        n: usize,
    },
    Record {
        ev: Arc<EvShared>,
        number: u64,
    },
    Wait {
        ev: Arc<EvShared>,
        number: u64,
        stream: Option<usize>,
    },
}

#[derive(Debug, Default)]
pub struct Stream {
    pub ctx: usize,
    pub flags: u32,
    pub queue: VecDeque<Op>,
}

/// The legacy default stream and its aliases (NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD).
pub fn stream_key(s: usize) -> usize {
    if s <= 2 { 0 } else { s }
}
