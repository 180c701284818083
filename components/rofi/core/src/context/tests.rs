use super::*;
use seeded_rng::Rng;

const EDGE_CIDS: [u32; 9] = [
    0,
    1,
    2,
    3,
    4095,
    (1 << 24) - 1,
    (1 << 30) - 1,
    3_000_000_000,
    u32::MAX,
];

#[test]
fn without_grouping_everything_uses_context_zero() {
    let plan = SepPlan::compute(req(8, 1, false), 16, 16).unwrap();
    for m in [
        ContextMap::single(),
        ContextMap::of_plan(None),
        ContextMap::of_plan(Some(&plan)),
    ] {
        assert_eq!(m.num_ctxts(), 1);
        for cid in EDGE_CIDS {
            assert_eq!(m.local(cid), 0);
        }
    }
}

#[test]
fn no_cid_maps_outside_the_contexts() {
    let mut rng = Rng::new(0x5EB);
    for n in 1..=16u32 {
        let plan = SepPlan::compute(req(n, 1, true), 16, 16).unwrap();
        let m = ContextMap::of_plan(Some(&plan));
        assert_eq!(m.num_ctxts(), n);
        let random = (0..2000).map(|_| rng.next_u64() as u32);
        for cid in EDGE_CIDS.into_iter().chain(random) {
            assert!(m.local(cid) < n, "cid {cid} with {n} contexts");
        }
    }
    // A peer that published 0 contexts (never: it opens at least one) is context 0.
    assert_eq!(ContextMap::remote(u32::MAX, 0), 0);
}

#[test]
fn every_member_agrees_on_the_receive_context() {
    // Processes with different context counts (other nodes, other shares): a sender
    // computes the receiver's context from the receiver's published count, which is
    // the context the receiver posts on, whatever either created before.
    let mut rng = Rng::new(0xA9EE);
    for _ in 0..5000 {
        let cid = rng.next_u64() as u32;
        let receiver = ContextMap::of_plan(Some(
            &SepPlan::compute(req(1 + rng.below(16) as u32, 1, true), 16, 16).unwrap(),
        ));
        assert_eq!(
            ContextMap::remote(cid, receiver.num_ctxts()),
            receiver.local(cid)
        );
    }
}

#[test]
fn consecutive_communicators_get_distinct_contexts() {
    // One communicator per thread (MPI_Comm_dup in a loop: consecutive CIDs) spreads
    // over every context before any two share one.
    let m = ContextMap::of_plan(Some(&SepPlan::compute(req(4, 2, true), 16, 16).unwrap()));
    let ctxs: Vec<u32> = (3..7).map(|cid| m.local(cid)).collect();
    let mut sorted = ctxs.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, [0, 1, 2, 3], "{ctxs:?}");
}

fn req(n: u32, local: u32, grouping: bool) -> SepRequest {
    SepRequest {
        num_ctxts: n,
        grouping,
        local_ranks: local,
    }
}

#[test]
fn sep_plans_clamp_and_compute_rx_bits() {
    let req = |n, local| req(n, local, true);
    // sockets: 16 contexts, 2 ranks per node -> 8 each; rx bits address all 16.
    let p = SepPlan::compute(req(4, 2), 16, 16).unwrap();
    assert_eq!((p.num_ctxts, p.clamped_from, p.rx_ctx_bits), (4, None, 4));
    let p = SepPlan::compute(req(12, 2), 16, 16).unwrap();
    assert_eq!(
        (p.num_ctxts, p.clamped_from, p.rx_ctx_bits),
        (8, Some(12), 4)
    );
    let p = SepPlan::compute(req(1, 1), 16, 4).unwrap();
    assert_eq!((p.num_ctxts, p.rx_ctx_bits), (1, 2));
    let p = SepPlan::compute(req(2, 1), 2, 2).unwrap();
    assert_eq!((p.num_ctxts, p.rx_ctx_bits), (2, 1));
    let p = SepPlan::compute(req(16, 1), 16, 16).unwrap();
    assert_eq!(
        (p.num_ctxts, p.clamped_from, p.contexts_used()),
        (16, None, 16)
    );
    // More than one endpoint of the provider can have: refused, not clamped.
    let e = SepPlan::compute(req(17, 1), 16, 16).unwrap_err();
    assert_eq!(
        e,
        SepError::TooManyContexts {
            asked: 17,
            available: 16
        }
    );
    assert!(e.to_string().contains("mtl_rofi_num_ctxts=17"), "{e}");
    assert_eq!(
        SepPlan::compute(req(1, 1), 1, 1),
        Err(SepError::Unavailable { available: 1 })
    );
    assert!(matches!(
        SepPlan::compute(req(2, 17), 16, 16),
        Err(SepError::LocalRanksExceedContexts { .. })
    ));
    assert_eq!(
        sep_request(false, true, 1, 2),
        Err(SepError::GroupingNeedsSep)
    );
    assert_eq!(
        sep_request(true, false, 0, 2),
        Err(SepError::BadContextCount(0))
    );
    assert_eq!(sep_request(false, false, 0, 2), Ok(None));
    assert_eq!(sep_request(true, true, 3, 0), Ok(Some(req(3, 1))));
    assert!(!sep_request(true, false, 3, 1).unwrap().unwrap().grouping);
    assert!(
        SepError::GroupingNeedsSep
            .to_string()
            .contains("enable_sep")
    );
}
