//! Include/exclude lists over provider names.

use std::fmt;

/// The user's provider lists (`mtl_rofi_provider_include` / `_exclude`), at most one set.
///
/// Items are comma-separated and match by case-insensitive *prefix*, as in the C MTL, so
/// `tcp` matches `tcp;ofi_rxm` (and also `tcpx`: name items precisely).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum NameFilter {
    /// Neither list set: the default preference order applies (see the module docs).
    #[default]
    Default,
    /// Only these, in this order of preference.
    Include(Vec<String>),
    /// Everything but these.
    Exclude(Vec<String>),
}

/// The lists cannot be combined.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterError {
    pub include: String,
    pub exclude: String,
}

impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "mtl_rofi_provider_include ({:?}) and mtl_rofi_provider_exclude ({:?}) are \
             mutually exclusive; set only one of them",
            self.include, self.exclude
        )
    }
}

impl std::error::Error for FilterError {}

/// Why a name did not pass the lists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NameRejection {
    /// No include item is a prefix of the name.
    NotIncluded,
    /// This exclude item is a prefix of the name.
    Excluded(String),
}

impl fmt::Display for NameRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameRejection::NotIncluded => f.write_str("not in mtl_rofi_provider_include"),
            NameRejection::Excluded(item) => {
                write!(f, "excluded by {item:?} in mtl_rofi_provider_exclude")
            }
        }
    }
}

fn parse_list(s: Option<&str>) -> Vec<String> {
    s.unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|i| !i.is_empty())
        .map(str::to_owned)
        .collect()
}

fn is_prefix_ci(item: &str, name: &str) -> bool {
    name.as_bytes()
        .get(..item.len())
        .is_some_and(|p| p.eq_ignore_ascii_case(item.as_bytes()))
}

impl NameFilter {
    /// Build from the two MCA strings; `None`, `""` and lists of only commas and blanks all
    /// mean "unset", so a user can clear a default from the command line.
    pub fn from_params(include: Option<&str>, exclude: Option<&str>) -> Result<Self, FilterError> {
        let inc = parse_list(include);
        let exc = parse_list(exclude);
        match (inc.is_empty(), exc.is_empty()) {
            (true, true) => Ok(NameFilter::Default),
            (false, true) => Ok(NameFilter::Include(inc)),
            (true, false) => Ok(NameFilter::Exclude(exc)),
            (false, false) => Err(FilterError {
                include: include.unwrap_or("").to_owned(),
                exclude: exclude.unwrap_or("").to_owned(),
            }),
        }
    }

    /// Whether `name` passes the lists.
    pub fn check(&self, name: &str) -> Result<(), NameRejection> {
        match self {
            NameFilter::Default => Ok(()),
            NameFilter::Include(_) => match self.include_rank(name) {
                Some(_) => Ok(()),
                None => Err(NameRejection::NotIncluded),
            },
            NameFilter::Exclude(items) => match items.iter().find(|i| is_prefix_ci(i, name)) {
                Some(i) => Err(NameRejection::Excluded(i.clone())),
                None => Ok(()),
            },
        }
    }

    /// Position of the first include item matching `name`: the user's preference order.
    #[must_use]
    pub fn include_rank(&self, name: &str) -> Option<usize> {
        match self {
            NameFilter::Include(items) => items.iter().position(|i| is_prefix_ci(i, name)),
            _ => None,
        }
    }
}
