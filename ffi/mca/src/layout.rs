//! The layout check Open MPI's loader does not make.
//!
//! The loader compares only the MCA base version and a component's type and name, so a
//! component built against one Open MPI build loads into another of the same release
//! and misreads its structures when they differ (a debug build's objects carry a magic
//! number and a file/line, a CUDA-aware build's BTL module has more fields, a vendor
//! patch moves a field). Every Open MPI object class exports its descriptor,
//! `<type>_class`, whose `cls_sizeof` is the size of the structure as the running
//! library was compiled: comparing those with the sizes bindgen gave us, for the
//! structures ours reads, catches such a build before anything is misread.

use std::ffi::CString;
use std::mem::size_of;

use ompi_sys as sys;

/// Where a class descriptor lives: OPAL's in libopen-pal (always loaded with ours),
/// OMPI's in libmpi (loaded in MPI processes; a process without it reads none of them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Library {
    Opal,
    Ompi,
}

/// One structure ours reads, with its size as built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassSize {
    /// The C type name; its descriptor is `<type>_class`.
    pub type_name: &'static str,
    pub library: Library,
    /// `size_of` of bindgen's structure for the headers we were built against.
    pub built: usize,
}

macro_rules! class_sizes {
    ($($library:ident $type_name:ident),* $(,)?) => {
        [$(ClassSize {
            type_name: stringify!($type_name),
            library: Library::$library,
            built: size_of::<sys::$type_name>(),
        }),*]
    };
}

/// The object classes whose structures ours reads or embeds, in both series.
#[must_use]
pub fn built_classes() -> [ClassSize; 17] {
    class_sizes![
        Opal opal_object_t,
        Opal opal_list_t,
        Opal opal_list_item_t,
        Opal opal_free_list_t,
        Opal opal_free_list_item_t,
        Opal opal_mutex_t,
        Opal opal_convertor_t,
        Opal opal_datatype_t,
        Opal opal_proc_t,
        Opal opal_pointer_array_t,
        Opal mca_btl_base_descriptor_t,
        Opal mca_rcache_base_registration_t,
        Ompi ompi_proc_t,
        Ompi ompi_request_t,
        Ompi ompi_communicator_t,
        Ompi ompi_datatype_t,
        Ompi ompi_message_t,
    ]
}

/// What the running library says of one class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Running {
    /// Its descriptor's `cls_sizeof`.
    Size(usize),
    /// The descriptor is not exported although its library is loaded.
    Missing,
    /// Its library is not in this process (OMPI's, in an OPAL-only tool).
    LibraryAbsent,
}

/// A 64-bit FNV-1a digest of the class names and sizes: the "layout fingerprint" the
/// refusal names, so that two builds can be compared at a glance.
#[must_use]
pub fn fingerprint(sizes: impl IntoIterator<Item = (&'static str, usize)>) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for (name, size) in sizes {
        eat(name.as_bytes());
        eat(&(size as u64).to_le_bytes());
    }
    hash
}

/// Why the running library's layouts differ from ours, or `None` when they agree on
/// every class that is there to compare. Pure: `running` answers for each class.
pub fn mismatch(built: &[ClassSize], running: impl Fn(&ClassSize) -> Running) -> Option<String> {
    let answers: Vec<(ClassSize, Running)> = built.iter().map(|c| (*c, running(c))).collect();
    let differing: Vec<String> = answers
        .iter()
        .filter_map(|(c, r)| match r {
            Running::Size(size) if *size != c.built => Some(format!(
                "{} is {size} bytes there, {} in ours",
                c.type_name, c.built
            )),
            Running::Missing => Some(format!("{} is not there", c.type_name)),
            _ => None,
        })
        .collect();
    if differing.is_empty() {
        return None;
    }
    let ours = fingerprint(built.iter().map(|c| (c.type_name, c.built)));
    let theirs = fingerprint(answers.iter().map(|(c, r)| match r {
        Running::Size(size) => (c.type_name, *size),
        Running::Missing => (c.type_name, 0),
        Running::LibraryAbsent => (c.type_name, c.built),
    }));
    const NAMED: usize = 3;
    let more = match differing.len().saturating_sub(NAMED) {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    Some(format!(
        "it was built against an Open MPI {} whose structures differ from this one's \
         (layout {ours:016x} in ours, {theirs:016x} in this Open MPI: {}{more}): a build of \
         the same release configured otherwise (debug, CUDA, another PMIx) or patched. \
         Rebuild it against this installation (make OMPI_PREFIX=<its prefix>).",
        sys::versions::BUILT_AGAINST_VERSION_STRING,
        differing[..differing.len().min(NAMED)].join("; ")
    ))
}

/// Whether `library`'s symbols are there to look up. A library dlsym cannot see (linked
/// into a static executable, where ours is compiled in and shares its headers by
/// construction) is not compared.
fn loaded(library: Library) -> bool {
    lookup(match library {
        Library::Opal => "opal_object_t_class",
        Library::Ompi => "ompi_mpi_comm_world",
    })
    .is_some()
}

/// The running library's answer for `class`, from its exported descriptor.
fn running_size(class: &ClassSize) -> Running {
    let Some(descriptor) = lookup(&format!("{}_class", class.type_name)) else {
        return Running::Missing;
    };
    // SAFETY: `<type>_class` symbols are `opal_class_t` descriptors, exported and
    // initialised statically by the library that defines the class; `cls_sizeof` is a
    // plain field written at compile time.
    let size = unsafe { (*descriptor.cast::<sys::opal_class_t>()).cls_sizeof };
    Running::Size(size)
}

fn lookup(symbol: &str) -> Option<*const libc::c_void> {
    let name = CString::new(symbol).ok()?;
    // SAFETY: dlsym with RTLD_DEFAULT searches the already loaded objects for a
    // NUL-terminated name; it only reads.
    let found = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    (!found.is_null()).then_some(found.cast_const())
}

/// Why this process's Open MPI lays out the structures ours reads differently, if it does.
#[must_use]
pub fn runtime_mismatch() -> Option<String> {
    // Each library is looked for once, not once per class.
    let (opal, ompi) = (loaded(Library::Opal), loaded(Library::Ompi));
    mismatch(&built_classes(), |class| {
        let present = match class.library {
            Library::Opal => opal,
            Library::Ompi => ompi,
        };
        if present {
            running_size(class)
        } else {
            Running::LibraryAbsent
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(type_name: &'static str, library: Library, built: usize) -> ClassSize {
        ClassSize {
            type_name,
            library,
            built,
        }
    }

    #[test]
    fn equal_sizes_pass_and_an_absent_library_is_not_compared() {
        let built = [
            class("opal_object_t", Library::Opal, 16),
            class("ompi_request_t", Library::Ompi, 200),
        ];
        assert_eq!(mismatch(&built, |c| Running::Size(c.built)), None);
        let opal_only = |c: &ClassSize| match c.library {
            Library::Opal => Running::Size(c.built),
            Library::Ompi => Running::LibraryAbsent,
        };
        assert_eq!(mismatch(&built, opal_only), None);
    }

    #[test]
    fn a_different_size_or_a_missing_class_is_named_with_both_fingerprints() {
        let built = [
            class("opal_object_t", Library::Opal, 16),
            class("opal_list_t", Library::Opal, 40),
            class("ompi_request_t", Library::Ompi, 200),
        ];
        let debug = |c: &ClassSize| match c.type_name {
            "opal_object_t" => Running::Size(32),
            "ompi_request_t" => Running::Missing,
            _ => Running::Size(c.built),
        };
        let why = mismatch(&built, debug).unwrap();
        assert!(
            why.contains("opal_object_t is 32 bytes there, 16 in ours"),
            "{why}"
        );
        assert!(why.contains("ompi_request_t is not there"), "{why}");
        assert!(!why.contains("opal_list_t"), "{why}");
        let ours = fingerprint(built.iter().map(|c| (c.type_name, c.built)));
        assert!(
            why.contains(&format!("layout {ours:016x} in ours")),
            "{why}"
        );
    }

    #[test]
    fn the_message_names_three_differences_and_counts_the_rest() {
        let built = built_classes();
        let why = mismatch(&built, |c| Running::Size(c.built + 8)).unwrap();
        assert!(why.contains("opal_object_t is"), "{why}");
        assert!(
            why.contains(&format!(" and {} more)", built.len() - 3)),
            "{why}"
        );
        assert_eq!(why.matches(" bytes there, ").count(), 3, "{why}");
    }

    #[test]
    fn the_fingerprint_depends_on_every_name_and_size() {
        let a = fingerprint([("opal_object_t", 16), ("opal_list_t", 40)]);
        assert_ne!(a, fingerprint([("opal_object_t", 16), ("opal_list_t", 48)]));
        assert_ne!(a, fingerprint([("opal_object_t", 16), ("opal_lifo_t", 40)]));
        assert_eq!(a, fingerprint([("opal_object_t", 16), ("opal_list_t", 40)]));
    }

    /// In this test binary (linked against the Open MPI the bindings came from) the
    /// running descriptors agree with bindgen.
    #[test]
    fn the_installation_we_were_built_against_agrees() {
        assert!(loaded(Library::Opal));
        for c in built_classes()
            .iter()
            .filter(|c| c.library == Library::Opal)
        {
            assert_eq!(running_size(c), Running::Size(c.built), "{}", c.type_name);
        }
        assert_eq!(runtime_mismatch(), None);
    }
}
