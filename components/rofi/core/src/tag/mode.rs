//! The user-facing tag mode (MCA enum `mtl_rofi_tag_mode`).

use std::fmt;
use std::str::FromStr;

use super::TagError;

/// How MPI matching information is split between the 64-bit tag and remote CQ data.
///
/// Values and names are those of the C OFI MTL's `mtl_ofi_tag_mode` enum so users can carry
/// their settings over.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TagMode {
    /// Full layout when the provider has remote CQ data and directed receive, else tag_1.
    #[default]
    Auto,
    /// 12-bit CID, 18-bit source, 32-bit tag; no CQ data needed.
    OfiTag1,
    /// 24-bit CID, 18-bit source, 20-bit tag; no CQ data needed.
    OfiTag2,
    /// 30-bit CID, 32-bit tag, source rank in remote CQ data; fails without provider support.
    OfiTagFull,
}

impl TagMode {
    /// Every mode, in MCA enum order.
    pub const ALL: [TagMode; 4] = [
        TagMode::Auto,
        TagMode::OfiTag1,
        TagMode::OfiTag2,
        TagMode::OfiTagFull,
    ];

    /// The string users write (`--mca mtl_rofi_tag_mode ofi_tag_2`).
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            TagMode::Auto => "auto",
            TagMode::OfiTag1 => "ofi_tag_1",
            TagMode::OfiTag2 => "ofi_tag_2",
            TagMode::OfiTagFull => "ofi_tag_full",
        }
    }

    /// The integer the MCA enum variable stores (1..=4, as in the C MTL).
    #[must_use]
    pub const fn mca_value(self) -> i32 {
        match self {
            TagMode::Auto => 1,
            TagMode::OfiTag1 => 2,
            TagMode::OfiTag2 => 3,
            TagMode::OfiTagFull => 4,
        }
    }

    /// Inverse of [`TagMode::mca_value`]; the MCA layer hands us the integer.
    #[must_use]
    pub const fn from_mca_value(value: i32) -> Option<TagMode> {
        match value {
            1 => Some(TagMode::Auto),
            2 => Some(TagMode::OfiTag1),
            3 => Some(TagMode::OfiTag2),
            4 => Some(TagMode::OfiTagFull),
            _ => None,
        }
    }
}

impl FromStr for TagMode {
    type Err = TagError;

    /// Accepts the enum names case-insensitively (environment variables are often
    /// upper-cased by scripts) and the integer values the MCA layer also accepts.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        if let Some(m) = TagMode::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(t))
        {
            return Ok(m);
        }
        t.parse::<i32>()
            .ok()
            .and_then(TagMode::from_mca_value)
            .ok_or_else(|| TagError::UnknownMode(s.to_owned()))
    }
}

impl fmt::Display for TagMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
