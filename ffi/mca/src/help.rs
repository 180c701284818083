//! `opal_show_help` with our own help-*.txt files.
//!
//! Open MPI only searches its own data directory for help files. Each component
//! adds the directory its `.so` was loaded from (help files are installed beside
//! the components), so messages work both from `build/mca` and after
//! `make install`, which also copies them into Open MPI's data directory.

use std::ffi::{CStr, CString, c_int};

use std::sync::Once;

use crate::strings::lossy_cstring;
use ompi_sys as sys;

static ADD_OWN_DIR: Once = Once::new();

/// The directory holding the shared object this code was loaded from.
pub fn own_library_dir() -> Option<std::path::PathBuf> {
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    let anchor = own_library_dir as *const () as *const libc::c_void;
    // SAFETY: dladdr only reads the address and fills `info`; a zeroed Dl_info is valid.
    let found = unsafe { libc::dladdr(anchor, info.as_mut_ptr()) };
    if found == 0 {
        return None;
    }
    // SAFETY: dladdr succeeded, so `info` is initialised and dli_fname is either
    // NULL or a NUL-terminated path owned by the dynamic loader.
    let info = unsafe { info.assume_init() };
    if info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: checked non-NULL above; the loader keeps the string alive.
    let path = unsafe { CStr::from_ptr(info.dli_fname) };
    let path = std::path::PathBuf::from(path.to_string_lossy().into_owned());
    path.parent().map(|p| p.to_path_buf())
}

/// Makes show_help look beside our shared object too (idempotent).
pub fn add_own_help_dir() {
    ADD_OWN_DIR.call_once(|| {
        if let Some(dir) = own_library_dir()
            && let Ok(dir) = CString::new(dir.to_string_lossy().into_owned())
        {
            // SAFETY: opal_show_help_add_dir copies the string into its own list.
            unsafe { sys::opal_show_help_add_dir(dir.as_ptr()) };
        }
    });
}

/// The most `%s` arguments a help topic may take: the formatter reads that many
/// varargs whatever is passed, so a topic with more would read past them (a topic
/// with five once crashed rofi when only four were passed).
pub const MAX_HELP_ARGS: usize = 8;

/// Shows `topic` from `file` with up to [`MAX_HELP_ARGS`] `%s` arguments. Falls back
/// to a plain message on stream 0 if the help system cannot find the file or more
/// arguments are given than the formatter can take.
///
/// The text is rendered in this process and written to stream 0 (stderr, which
/// mpirun forwards) rather than sent to mpirun as a show_help request: requests
/// sent while MPI_Init is still opening frameworks were observed to arrive
/// corrupted ("Data unpack would read past end of buffer" in orte/util/show_help.c).
pub fn show_help(file: &str, topic: &str, error_header: bool, args: &[&str]) {
    add_own_help_dir();
    let file_c = lossy_cstring(file);
    let topic_c = lossy_cstring(topic);
    if args.len() > MAX_HELP_ARGS {
        crate::output::emit_always(&format!("[{file}:{topic}] {}", args.join(" | ")));
        return;
    }
    let args_c: Vec<CString> = args.iter().map(|a| lossy_cstring(a)).collect();
    let arg = |i: usize| args_c.get(i).map_or(c"".as_ptr(), |a| a.as_ptr());
    // SAFETY: every pointer is a valid NUL-terminated string that outlives the call;
    // extra arguments beyond the topic's %s count are ignored by the formatter.
    let rendered = unsafe {
        sys::rmca_show_help_string(
            file_c.as_ptr(),
            topic_c.as_ptr(),
            error_header as c_int,
            arg(0),
            arg(1),
            arg(2),
            arg(3),
            arg(4),
            arg(5),
            arg(6),
            arg(7),
        )
    };
    if rendered.is_null() {
        crate::output::emit_always(&format!("[{file}:{topic}] {}", args.join(" | ")));
        return;
    }
    // SAFETY: a NUL-terminated string malloc'ed by opal_show_help_string, freed once here.
    let text = unsafe { CStr::from_ptr(rendered) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: as above.
    unsafe { libc::free(rendered.cast()) };
    crate::output::emit_always(text.trim_end());
}

#[cfg(test)]
mod tests {
    use super::MAX_HELP_ARGS;

    /// Every topic of every help file takes at most MAX_HELP_ARGS `%s` (and no other
    /// conversion, which would read an argument of another type).
    #[test]
    fn every_help_topic_fits_the_formatter() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configure-support/help");
        let mut topics = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let mut topic = String::new();
            let mut count = 0;
            let check = |topic: &str, count: usize| {
                assert!(
                    count <= MAX_HELP_ARGS,
                    "{}: [{topic}] has {count} %s, more than {MAX_HELP_ARGS}",
                    path.display()
                );
            };
            for line in text.lines() {
                if line.starts_with('#') {
                    continue;
                }
                if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                    check(&topic, count);
                    topic = name.to_owned();
                    topics += 1;
                    count = 0;
                    continue;
                }
                let mut rest = line;
                while let Some(i) = rest.find('%') {
                    let next = rest[i + 1..].chars().next();
                    assert!(
                        matches!(next, Some('s') | Some('%')),
                        "{}: [{topic}] uses %{next:?}: only %s and %% are passed",
                        path.display()
                    );
                    count += (next == Some('s')) as usize;
                    rest = &rest[i + 2..];
                }
            }
            check(&topic, count);
        }
        assert!(topics > 10, "no help topics found in {}", dir.display());
    }
}
