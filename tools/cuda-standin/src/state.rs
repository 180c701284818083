//! The process-wide state behind one mutex, the per-thread context stack, and the
//! unlinking of every /dev/shm file this process still owns (from `report`'s exit
//! hook). Stream work on the state: `queue`; IPC on it: `ipc`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use crate::codes::*;
use crate::config::CONFIG;
use crate::memory::Memory;
use crate::stream::{Event, Stream};

/// A context (primary or created).
#[derive(Debug)]
pub struct Ctx {
    /// Visible ordinal of its device.
    pub ordinal: i32,
    pub primary: bool,
    /// Primary contexts: retain count (active while > 0).
    pub retained: u32,
    pub flags: u32,
}

#[derive(Debug, Default)]
pub struct State {
    pub initialized: bool,
    /// Physical device of each visible ordinal.
    pub devices: Vec<i32>,
    pub contexts: HashMap<usize, Ctx>,
    /// Handle of each ordinal's primary context.
    pub primary: Vec<usize>,
    next_handle: usize,
    pub mem: Memory,
    pub streams: HashMap<usize, Stream>,
    pub events: HashMap<usize, Event>,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

thread_local! {
    /// This thread's context stack (top = current), as in the driver.
    static CURRENT: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// Base of the opaque handle values (contexts, streams, events): never dereferenced,
/// only looked up.
const HANDLE_BASE: usize = 0x7e57_0000_0000;

pub fn lock() -> MutexGuard<'static, Option<State>> {
    STATE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs `f` on the initialized state, or answers CUDA_ERROR_NOT_INITIALIZED.
pub fn with<R: From<CuResult>>(f: impl FnOnce(&mut State) -> R) -> R {
    let mut g = lock();
    match g.as_mut() {
        Some(s) if s.initialized => f(s),
        _ => R::from(NOT_INITIALIZED),
    }
}

/// Like `with`, for results.
pub fn run(f: impl FnOnce(&mut State) -> Result<(), CuResult>) -> CuResult {
    with(|s| match f(s) {
        Ok(()) => SUCCESS,
        Err(e) => e,
    })
}

pub fn current() -> Option<usize> {
    CURRENT.with(|c| c.borrow().last().copied())
}

pub fn set_current(ctx: Option<usize>) {
    CURRENT.with(|c| {
        let mut c = c.borrow_mut();
        c.pop();
        if let Some(ctx) = ctx {
            c.push(ctx);
        }
    });
}

pub fn push_current(ctx: usize) {
    CURRENT.with(|c| c.borrow_mut().push(ctx));
}

pub fn pop_current() -> Option<usize> {
    CURRENT.with(|c| c.borrow_mut().pop())
}

/// `cuInit`.
pub fn init(flags: u32) -> CuResult {
    if !CONFIG.enabled {
        crate::log!(
            "this libcuda.so.1 is the rmca test stand-in, not a CUDA driver; \
             set RMCA_CUDA_STANDIN=1 to use it (cuInit returns CUDA_ERROR_NO_DEVICE)"
        );
        return NO_DEVICE;
    }
    if flags != 0 {
        return INVALID_VALUE;
    }
    if CONFIG.visible.is_empty() {
        return NO_DEVICE;
    }
    let mut g = lock();
    if g.as_ref().is_some_and(|s| s.initialized) {
        return SUCCESS;
    }
    let mut s = State {
        next_handle: HANDLE_BASE,
        devices: CONFIG.visible.clone(),
        ..State::default()
    };
    if let Err(e) = s.mem.reserve() {
        return e;
    }
    crate::memory::remove_stale_files();
    for ordinal in 0..s.devices.len() as i32 {
        let h = s.new_handle();
        s.contexts.insert(
            h,
            Ctx {
                ordinal,
                primary: true,
                retained: 0,
                flags: 0,
            },
        );
        s.primary.push(h);
    }
    s.initialized = true;
    *g = Some(s);
    SUCCESS
}

impl State {
    pub fn new_handle(&mut self) -> usize {
        self.next_handle += 16;
        self.next_handle
    }

    /// The current context of this thread, checked.
    pub fn current_ctx(&self) -> Result<usize, CuResult> {
        match current() {
            Some(c) if self.contexts.contains_key(&c) => Ok(c),
            _ => Err(INVALID_CONTEXT),
        }
    }

    /// Visible ordinal of a context.
    pub fn ctx_ordinal(&self, ctx: usize) -> Result<i32, CuResult> {
        self.contexts
            .get(&ctx)
            .map(|c| c.ordinal)
            .ok_or(INVALID_CONTEXT)
    }

    /// Physical device of a visible ordinal.
    pub fn physical(&self, ordinal: i32) -> Result<i32, CuResult> {
        usize::try_from(ordinal)
            .ok()
            .and_then(|o| self.devices.get(o).copied())
            .ok_or(INVALID_DEVICE)
    }
}

/// (live allocations, live IPC mappings): the report's live gauges.
pub fn live_counts() -> (u64, u64) {
    match lock().as_ref() {
        Some(s) => s.mem.live_counts(),
        None => (0, 0),
    }
}

/// (mappings of freed allocations, their bytes, bytes of all IPC mappings): the
/// report's gauges of what IPC mappings hold (see `Memory::ipc_freed`).
pub fn ipc_held() -> (u64, u64, u64) {
    match lock().as_ref() {
        Some(s) => {
            let (freed, freed_bytes) = s.mem.ipc_freed();
            (freed, freed_bytes, s.mem.ipc_bytes())
        }
        None => (0, 0, 0),
    }
}

/// At exit: unlinks every file this process still owns. Waits a little for the lock in
/// case another thread holds it, and gives up rather than hang the exit.
pub fn unlink_all_at_exit() {
    for _ in 0..200 {
        match STATE.try_lock() {
            Ok(mut g) => {
                if let Some(s) = g.as_mut() {
                    s.mem.unlink_all();
                    for e in s.events.values() {
                        e.shared.unlink();
                    }
                }
                return;
            }
            Err(std::sync::TryLockError::Poisoned(p)) => {
                if let Some(s) = p.into_inner().as_mut() {
                    s.mem.unlink_all();
                }
                return;
            }
            Err(std::sync::TryLockError::WouldBlock) => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        }
    }
}
