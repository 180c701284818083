//! Sizing scalable endpoints from the MCA parameters and the provider's limits.

use std::fmt;

/// The user asked for scalable endpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SepRequest {
    /// `mtl_rofi_num_ctxts` (at least 1).
    pub num_ctxts: u32,
    /// `mtl_rofi_thread_grouping`: communicators spread over the contexts; without it
    /// only context 0 is used (as in the C MTL).
    pub grouping: bool,
    /// Processes of this job on this node, including this one; they split the provider's
    /// contexts between them.
    pub local_ranks: u32,
}

/// Validate the SEP-related MCA parameters. `Ok(None)`: no scalable endpoint.
pub fn sep_request(
    enable_sep: bool,
    thread_grouping: bool,
    num_ctxts: i32,
    local_ranks: u32,
) -> Result<Option<SepRequest>, SepError> {
    if thread_grouping && !enable_sep {
        return Err(SepError::GroupingNeedsSep);
    }
    if !enable_sep {
        return Ok(None);
    }
    if num_ctxts < 1 {
        return Err(SepError::BadContextCount(num_ctxts));
    }
    Ok(Some(SepRequest {
        num_ctxts: num_ctxts as u32,
        grouping: thread_grouping,
        local_ranks: local_ranks.max(1),
    }))
}

/// Scalable-endpoint dimensions for one provider.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SepPlan {
    /// Contexts this process opens (`tx_ctx_cnt = rx_ctx_cnt`).
    pub num_ctxts: u32,
    /// Set when the request exceeded this process's share: the request, for the warning.
    pub clamped_from: Option<u32>,
    /// `rx_ctx_bits` for `fi_av_open` and `fi_rx_addr`: enough for any receive context
    /// the provider can have, because peers on other nodes may open more than we do.
    pub rx_ctx_bits: u32,
    pub grouping: bool,
}

impl SepPlan {
    /// Split the provider's contexts between the local ranks and clamp the request to
    /// this process's share.
    pub fn compute(
        req: SepRequest,
        max_ep_tx_ctx: usize,
        max_ep_rx_ctx: usize,
    ) -> Result<SepPlan, SepError> {
        let available = max_ep_tx_ctx.min(max_ep_rx_ctx);
        if available <= 1 {
            return Err(SepError::Unavailable { available });
        }
        if req.num_ctxts as usize > available {
            return Err(SepError::TooManyContexts {
                asked: req.num_ctxts,
                available,
            });
        }
        let local = req.local_ranks.max(1) as usize;
        if available < local {
            return Err(SepError::LocalRanksExceedContexts {
                available,
                local_ranks: req.local_ranks,
            });
        }
        let share = u32::try_from(available / local).unwrap_or(u32::MAX);
        let num_ctxts = req.num_ctxts.clamp(1, share);
        let highest = u32::try_from(available - 1).unwrap_or(u32::MAX);
        Ok(SepPlan {
            num_ctxts,
            clamped_from: (req.num_ctxts > share).then_some(req.num_ctxts),
            rx_ctx_bits: (u32::BITS - highest.leading_zeros()).max(1),
            grouping: req.grouping,
        })
    }

    /// Contexts the process opens: all of them with thread grouping, else one.
    #[must_use]
    pub fn contexts_used(&self) -> u32 {
        if self.grouping { self.num_ctxts } else { 1 }
    }
}

/// Scalable endpoints cannot be set up as asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SepError {
    /// `thread_grouping` without `enable_sep`.
    GroupingNeedsSep,
    /// `num_ctxts` below 1.
    BadContextCount(i32),
    /// The provider offers at most one context per endpoint.
    Unavailable { available: usize },
    /// `num_ctxts` above what one endpoint of the provider can have.
    TooManyContexts { asked: u32, available: usize },
    /// Fewer contexts than processes on this node.
    LocalRanksExceedContexts { available: usize, local_ranks: u32 },
}

impl fmt::Display for SepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SepError::GroupingNeedsSep => {
                f.write_str("mtl_rofi_thread_grouping requires mtl_rofi_enable_sep=1")
            }
            SepError::BadContextCount(n) => {
                write!(f, "mtl_rofi_num_ctxts must be at least 1, got {n}")
            }
            SepError::Unavailable { available } => write!(
                f,
                "scalable endpoints unavailable: the provider offers {available} context(s) \
                 per endpoint"
            ),
            SepError::TooManyContexts { asked, available } => write!(
                f,
                "mtl_rofi_num_ctxts={asked} exceeds the provider's {available} contexts \
                 per endpoint"
            ),
            SepError::LocalRanksExceedContexts {
                available,
                local_ranks,
            } => write!(
                f,
                "{local_ranks} local ranks exceed the provider's {available} endpoint contexts"
            ),
        }
    }
}

impl std::error::Error for SepError {}
