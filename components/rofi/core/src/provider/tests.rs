use super::*;
use crate::context::SepRequest;
use crate::tag::{LayoutKind, TagMode};

pub(super) fn prov(name: &str, fabric: &str, domain: &str) -> ProviderInfo {
    ProviderInfo {
        name: name.to_owned(),
        fabric: fabric.to_owned(),
        domain: domain.to_owned(),
        ep_rdm: true,
        tagged: true,
        directed_recv: true,
        cq_data_size: 8,
        inject_size: 64,
        max_msg_size: 1 << 30,
        mem_tag_format: 0xAAAA_AAAA_AAAA_AAAA,
        max_ep_tx_ctx: 1,
        max_ep_rx_ctx: 1,
        thread_safe: true,
        manual_progress: true,
        matching: Matching::Unprobed,
        lacks_host_matching: false,
    }
}

/// The providers `fi_getinfo` returns on our build machine, in its order.
fn this_machine() -> Vec<ProviderInfo> {
    let mut sockets = prov("sockets", "192.0.2.0/24", "eth0");
    sockets.max_ep_tx_ctx = 16;
    sockets.max_ep_rx_ctx = 16;
    sockets.inject_size = 255;
    let mut rxm55 = prov("tcp;ofi_rxm", "192.0.2.0/24", "eth0");
    rxm55.mem_tag_format = 0x5555_5555_5555_5555;
    vec![
        prov("tcp;ofi_rxm", "192.0.2.0/24", "eth0"),
        rxm55,
        prov("tcp;ofi_rxm", "127.0.0.1/32", "lo"),
        prov("net", "192.0.2.0/24", "eth0"),
        prov("net;ofi_rxm", "::1/128", "lo"),
        prov("udp;ofi_rxd", "192.0.2.0/24", "eth0"),
        prov("shm", "shm", "shm"),
        sockets,
    ]
}

fn req() -> Requirements {
    Requirements {
        single_node: true,
        ..Requirements::default()
    }
}

fn chosen_name(c: &[ProviderInfo], f: &NameFilter, r: &Requirements) -> Option<String> {
    select(c, f, r).chosen.map(|ch| c[ch.index].name.clone())
}

#[test]
fn default_policy_works_with_only_software_providers() {
    let c = this_machine();
    let s = select(&c, &NameFilter::Default, &req());
    let ch = s.chosen.unwrap();
    assert_eq!(ch.index, 0);
    assert_eq!(ch.layout.kind(), LayoutKind::Full);
    assert_eq!(s.verdicts.len(), c.len());
    assert_eq!(s.verdicts[0].outcome, Outcome::Chosen);
    assert!(
        s.verdicts[1..]
            .iter()
            .all(|v| v.outcome == Outcome::Acceptable)
    );
    // Preference order: tcp-like, shm, udp, sockets.
    let names: Vec<&str> = s.verdicts.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "tcp;ofi_rxm",
            "tcp;ofi_rxm",
            "tcp;ofi_rxm",
            "net;ofi_rxm",
            "net",
            "shm",
            "udp;ofi_rxd",
            "sockets"
        ]
    );
}

#[test]
fn hardware_providers_come_first_wherever_libfabric_lists_them() {
    let mut c = this_machine();
    c.push(prov("psm3", "IB-0x80fe", "hfi1_0"));
    assert_eq!(
        chosen_name(&c, &NameFilter::Default, &req()).unwrap(),
        "psm3"
    );
    let only_local = vec![prov("sockets", "x", "eth0"), prov("shm", "shm", "shm")];
    assert_eq!(
        chosen_name(&only_local, &NameFilter::Default, &req()).unwrap(),
        "shm"
    );
}

#[test]
fn multi_node_jobs_skip_shm_and_loopback() {
    let c = vec![
        prov("shm", "shm", "shm"),
        prov("tcp;ofi_rxm", "127.0.0.1/32", "lo"),
        prov("net;ofi_rxm", "::1/128", "lo"),
        prov("sockets", "192.0.2.0/24", "eth0"),
    ];
    let r = Requirements {
        single_node: false,
        ..req()
    };
    let s = select(&c, &NameFilter::Default, &r);
    assert_eq!(c[s.chosen.unwrap().index].name, "sockets");
    let rej: Vec<_> = s
        .verdicts
        .iter()
        .filter_map(|v| match &v.outcome {
            Outcome::Rejected(r) => Some(r.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        rej,
        [
            Rejection::LoopbackMultiNode,
            Rejection::LoopbackMultiNode,
            Rejection::SharedMemoryMultiNode
        ]
    );
    // Even an explicit include cannot make shm reach another node.
    let inc = NameFilter::from_params(Some("shm"), None).unwrap();
    assert_eq!(chosen_name(&c, &inc, &r), None);
}

#[test]
fn include_list_is_a_case_insensitive_prefix_preference_order() {
    let c = this_machine();
    let f = NameFilter::from_params(Some("shm, TCP"), None).unwrap();
    let s = select(&c, &f, &req());
    assert_eq!(c[s.chosen.unwrap().index].name, "shm");
    assert_eq!(s.verdicts[1].name, "tcp;ofi_rxm");
    let excluded = s
        .verdicts
        .iter()
        .filter(|v| v.outcome == Outcome::Rejected(Rejection::Name(NameRejection::NotIncluded)))
        .count();
    assert_eq!(excluded, 4, "net, net;ofi_rxm, udp;ofi_rxd, sockets");
    let f = NameFilter::from_params(Some("udp;OFI_RXD"), Some("")).unwrap();
    assert_eq!(chosen_name(&c, &f, &req()).unwrap(), "udp;ofi_rxd");
}

#[test]
fn exclude_list_keeps_the_default_order_for_the_rest() {
    let c = this_machine();
    let f = NameFilter::from_params(None, Some("tcp")).unwrap();
    assert_eq!(chosen_name(&c, &f, &req()).unwrap(), "net;ofi_rxm");
    let f = NameFilter::from_params(Some(""), Some("tcp,net,shm")).unwrap();
    let s = select(&c, &f, &req());
    assert_eq!(c[s.chosen.unwrap().index].name, "udp;ofi_rxd");
    assert!(
        s.verdicts.iter().any(|v| v.outcome
            == Outcome::Rejected(Rejection::Name(NameRejection::Excluded("tcp".into()))))
    );
    // The C default exclude list, set explicitly, leaves nothing here.
    let f = NameFilter::from_params(None, Some("shm,sockets,tcp,udp,rstream,usnic,net")).unwrap();
    let s = select(&c, &f, &req());
    assert!(s.chosen.is_none());
    assert!(s.report().contains("excluded by \"tcp\""), "{}", s.report());
}

#[test]
fn lists_are_mutually_exclusive_and_empty_means_unset() {
    let e = NameFilter::from_params(Some("tcp"), Some("shm")).unwrap_err();
    assert!(e.to_string().contains("mutually exclusive"));
    assert_eq!(
        NameFilter::from_params(Some(""), Some("")),
        Ok(NameFilter::Default)
    );
    assert_eq!(
        NameFilter::from_params(Some(" , "), None),
        Ok(NameFilter::Default)
    );
    assert_eq!(NameFilter::from_params(None, None), Ok(NameFilter::Default));
    assert_eq!(
        NameFilter::from_params(Some(" , "), Some("psm2")),
        Ok(NameFilter::Exclude(vec!["psm2".into()]))
    );
    // Prefix, not substring: "rxm" does not match "tcp;ofi_rxm".
    let f = NameFilter::from_params(Some("rxm"), None).unwrap();
    assert_eq!(f.check("tcp;ofi_rxm"), Err(NameRejection::NotIncluded));
}

#[test]
fn capability_checks_reject_with_reasons_and_fall_through() {
    let mut no_tag = prov("verbs;ofi_rxm", "mlx5", "mlx5_0");
    no_tag.tagged = false;
    let mut no_dr = prov("cxi", "cxi0", "cxi0");
    no_dr.directed_recv = false;
    let mut not_safe = prov("opx", "opx", "hfi1_0");
    not_safe.thread_safe = false;
    let mut reserved = prov("efa", "efa", "rdmap0");
    reserved.mem_tag_format = 0x00FF_FFFF_FFFF_FFFF;
    let c = vec![
        no_tag,
        no_dr,
        not_safe,
        reserved,
        prov("tcp;ofi_rxm", "n", "eth0"),
    ];
    let r = Requirements {
        tag_mode: TagMode::OfiTagFull,
        thread_multiple: true,
        ..req()
    };
    let s = select(&c, &NameFilter::Default, &r);
    // efa keeps 22 CID bits (30 - 8 reserved): enough for full mode, and hardware wins.
    assert_eq!(s.chosen.unwrap().index, 3);
    let outcomes: Vec<_> = s.verdicts.iter().map(|v| v.outcome.clone()).collect();
    assert_eq!(outcomes[0], Outcome::Rejected(Rejection::NotTaggedRdm));
    assert!(matches!(outcomes[1], Outcome::Rejected(Rejection::Tag(_))));
    assert_eq!(outcomes[2], Outcome::Rejected(Rejection::NotThreadSafe));
    assert_eq!(outcomes[3], Outcome::Chosen);
    assert_eq!(outcomes[4], Outcome::Acceptable);
    let r1 = Requirements {
        tag_mode: TagMode::OfiTag1,
        ..r
    };
    // tag_1 has 12 CID bits: 8 reserved leaves 4, too few.
    let s = select(&c[3..4], &NameFilter::Default, &r1);
    assert!(s.chosen.is_none());
    assert!(s.report().contains("not enough tag bits"), "{}", s.report());
}

#[test]
fn sep_requests_pick_a_provider_with_contexts() {
    let c = this_machine();
    let r = Requirements {
        sep: Some(SepRequest {
            num_ctxts: 4,
            grouping: true,
            local_ranks: 2,
        }),
        ..req()
    };
    let s = select(&c, &NameFilter::Default, &r);
    let ch = s.chosen.unwrap();
    assert_eq!(c[ch.index].name, "sockets");
    assert_eq!(ch.sep.unwrap().num_ctxts, 4);
    assert!(s.report().contains("scalable endpoints unavailable"));
    assert!(
        select(&c, &NameFilter::Default, &req())
            .chosen
            .unwrap()
            .sep
            .is_none()
    );
}

#[test]
fn empty_candidate_list_reports_it() {
    let s = select(&[], &NameFilter::Default, &req());
    assert!(s.chosen.is_none());
    assert!(s.report().contains("no tagged RDM provider"));
}

/// shm as the matching probe finds it on each libfabric (tests/libfabric/shm_matching.c
/// and the probe's own tests): what selection then does under each policy.
#[test]
fn probed_shm_gets_host_matching_or_is_refused_with_the_probes_findings() {
    use probe::{Check, CheckSet};
    let on_1_17 = CheckSet::of(&[
        Check::IgnoreAfterExact,
        Check::ExactAfterAny,
        Check::Peek,
        Check::PeekClaim,
        Check::TruncationPosted,
        Check::TruncationUnexpected,
    ]);
    let on_2_1 = CheckSet::of(&[Check::TruncationPosted, Check::TruncationUnexpected]);
    let shm = NameFilter::from_params(Some("shm"), None).unwrap();
    for (matching, why) in [
        (Matching::Unprobed, None),
        (Matching::Correct, None),
        (
            Matching::Failed(on_1_17),
            Some("ignore_after_exact (receives with ignore bits miss unexpected messages"),
        ),
        (
            Matching::Failed(on_2_1),
            Some("found its tagged matching wrong: truncation_posted, truncation_unexpected"),
        ),
        (
            Matching::Unverified(probe::Unverified::NoLoopback),
            Some("unverified: rofi's matching probe could not open a loopback pair"),
        ),
    ] {
        let mut c = this_machine();
        c[6].matching = matching;
        for policy in [
            HostMatching::Auto,
            HostMatching::Always,
            HostMatching::Never,
        ] {
            let r = Requirements {
                host_matching: policy,
                ..req()
            };
            let s = select(&c, &shm, &r);
            if let Some(why) = why
                && policy == HostMatching::Never
            {
                assert!(s.chosen.is_none());
                assert!(s.report().contains(why), "{}", s.report());
                assert!(s.report().contains("host_matching never"), "{}", s.report());
            } else {
                let chosen = s.chosen.expect("shm usable");
                let host = policy == HostMatching::Always || why.is_some();
                assert_eq!(chosen.host_matching, host, "{matching:?} {policy:?}");
                assert_eq!(chosen.defect, matching.defect());
                // Unprobed native matching is what the glue probes before opening.
                assert_eq!(
                    wants_probe(&c[chosen.index], &chosen),
                    !host && matching == Matching::Unprobed
                );
            }
            // Only shm is affected.
            let tcp = select(&c, &NameFilter::Default, &r).chosen.unwrap();
            assert_eq!(c[tcp.index].name, "tcp;ofi_rxm");
            assert_eq!(tcp.host_matching, policy == HostMatching::Always);
        }
    }
}

/// Under `never` a candidate the probe found wrong is passed over for the next one,
/// which the glue then probes in turn.
#[test]
fn never_passes_over_a_probed_defect_to_the_next_candidate() {
    let mut c = this_machine();
    c[0].matching = Matching::Failed(probe::CheckSet::of(&[probe::Check::Peek]));
    let r = Requirements {
        host_matching: HostMatching::Never,
        ..req()
    };
    let s = select(&c, &NameFilter::Default, &r);
    let chosen = s.chosen.unwrap();
    assert_eq!(chosen.index, 1);
    assert!(wants_probe(&c[1], &chosen));
    assert!(
        s.report()
            .contains("rejected: rofi's matching probe found its tagged matching wrong: peek"),
        "{}",
        s.report()
    );
}

#[test]
fn rxd_gets_host_matching_on_every_version_or_is_refused_with_the_reason() {
    let c = this_machine();
    let rxd = NameFilter::from_params(Some("udp;ofi_rxd"), None).unwrap();
    // Whatever the probe says (a short probe passes rxd).
    for matching in [Matching::Unprobed, Matching::Correct] {
        let mut c = c.clone();
        c[5].matching = matching;
        for policy in [
            HostMatching::Auto,
            HostMatching::Always,
            HostMatching::Never,
        ] {
            let r = Requirements {
                host_matching: policy,
                ..req()
            };
            let s = select(&c, &rxd, &r);
            if policy == HostMatching::Never {
                assert!(s.chosen.is_none());
                assert!(s.report().contains("FI_PEEK|FI_CLAIM"), "{}", s.report());
            } else {
                assert!(
                    s.chosen.expect("rxd usable").host_matching,
                    "{matching:?} {policy:?}"
                );
            }
        }
    }
    assert!(prov("UDP;ofi_rxd", "f", "d").is_rxd());
    assert!(!prov("udp", "f", "d").is_rxd());
    assert!(!prov("tcp;ofi_rxm", "f", "d").is_rxd());
}

#[test]
fn host_matching_refuses_scalable_endpoints() {
    let mut c = this_machine();
    c[6].matching = Matching::Failed(probe::CheckSet::of(&[probe::Check::Peek]));
    let r = Requirements {
        sep: Some(
            crate::context::sep_request(true, false, 2, 1)
                .unwrap()
                .unwrap(),
        ),
        ..req()
    };
    let shm = NameFilter::from_params(Some("shm"), None).unwrap();
    let s = select(&c, &shm, &r);
    assert!(s.chosen.is_none());
    assert!(
        s.report().contains("scalable endpoints were requested"),
        "{}",
        s.report()
    );
}

#[test]
fn sockets_under_manual_progress_gets_no_inject() {
    let c = this_machine();
    let sockets = c.iter().find(|p| p.name == "sockets").unwrap();
    assert!(!sockets.inject_leaves_on_post());
    assert_eq!(sockets.usable_inject_size(), 0);
    let auto = ProviderInfo {
        manual_progress: false,
        ..sockets.clone()
    };
    assert_eq!(auto.usable_inject_size(), 255);
    for p in c.iter().filter(|p| p.name != "sockets") {
        assert_eq!(p.usable_inject_size(), p.inject_size, "{}", p.name);
    }
}

#[test]
fn shm_region_paths_come_from_endpoint_names() {
    assert_eq!(
        shm_region_path(b"fi_shm://4242:0:0\0").as_deref(),
        Some("/dev/shm/4242:0:0")
    );
    assert_eq!(
        shm_region_path(b"4242:0:1").as_deref(),
        Some("/dev/shm/4242:0:1")
    );
    for bad in [
        &b"fi_shm://\0"[..],
        b"",
        b"fi_shm://a/b",
        b"..",
        b"\xff\xfe",
    ] {
        assert_eq!(shm_region_path(bad), None, "{bad:?}");
    }
}

#[test]
fn lnx_probed_wrong_is_refused_when_it_cannot_take_host_matching() {
    let mut c = this_machine();
    let mut lnx = prov(
        "shm+tcp;ofi_rxm:lnx",
        "ofi_lnx_fabric",
        "shm+eth0:ofi_lnx_domain",
    );
    // What the probe finds on 2.1's lnx (tests/libfabric2.rs).
    lnx.matching = Matching::Failed(probe::CheckSet::of(&[
        probe::Check::Peek,
        probe::Check::PeekClaim,
        probe::Check::TruncationPosted,
        probe::Check::TruncationUnexpected,
    ]));
    c.insert(0, lnx);
    assert!(c[0].is_lnx());
    assert!(!prov("tcp;ofi_rxm", "f", "d").is_lnx());
    let lnx = NameFilter::from_params(Some("shm+tcp"), None).unwrap();
    let s = select(&c, &lnx, &req());
    let chosen = s.chosen.expect("lnx selected, for host matching");
    assert!(chosen.host_matching);
    assert!(
        chosen
            .defect
            .unwrap()
            .to_string()
            .contains("peek (FI_PEEK takes or misses messages (MPI_Iprobe)), peek_claim")
    );
    let refused = s.refuse_host_matching();
    assert!(refused.chosen.is_none());
    let report = refused.report();
    assert!(
        report.contains(
            "shm+tcp;ofi_rxm:lnx [ofi_lnx_fabric]: rejected: rofi's matching probe found"
        ) && report.contains("lacks untagged messages or RMA reads"),
        "{report}"
    );
    // lnx lists itself with FI_MSG but injects nothing: refused at selection.
    c[0].inject_size = 0;
    let s = select(&c, &lnx, &req());
    assert!(s.chosen.is_none());
    assert!(
        s.report().contains("but the provider lacks an inject size"),
        "{}",
        s.report()
    );
    let never = Requirements {
        host_matching: HostMatching::Never,
        ..req()
    };
    let s = select(&c, &lnx, &never);
    assert!(s.chosen.is_none());
    assert!(s.report().contains("host_matching never"), "{}", s.report());
}

/// sockets takes a sender missing from the AV for anyone, so its source rank travels in
/// the tag: auto gives it ofi_tag_1, a forced ofi_tag_full passes it over with the reason;
/// the other providers keep the full layout.
#[test]
fn sockets_carries_the_source_in_the_tag() {
    let c = this_machine();
    let sockets = NameFilter::from_params(Some("sockets"), None).unwrap();
    let s = select(&c, &sockets, &req());
    let ch = s.chosen.unwrap();
    assert_eq!(c[ch.index].name, "sockets");
    assert_eq!(ch.layout.kind(), LayoutKind::Tag1);
    let full = Requirements {
        tag_mode: TagMode::OfiTagFull,
        ..req()
    };
    let s = select(&c, &sockets, &full);
    assert!(s.chosen.is_none());
    assert!(
        s.report().contains("not yet in the address vector"),
        "{}",
        s.report()
    );
    for p in c.iter().filter(|p| p.name != "sockets") {
        assert!(!p.unknown_sender_matches_any(), "{}", p.name);
    }
}

/// What libfabric 2.1 (Debian 13's) lists on one node without FI_PROVIDER, in its
/// order: its own tcp RDM endpoints first, then sm2, whose matching probe loses remote
/// CQ data and which is not listed with FI_MSG and reads.
fn libfabric_2_1_machine() -> Vec<ProviderInfo> {
    let mut sm2 = prov("sm2", "sm2", "sm2");
    sm2.matching = Matching::Failed(probe::CheckSet::of(&[probe::Check::RemoteCqData]));
    vec![
        sm2,
        prov("tcp", "192.0.2.0/24", "eth0"),
        prov("tcp", "127.0.0.1/32", "lo"),
        prov("tcp;ofi_rxm", "192.0.2.0/24", "eth0"),
        prov("tcp;ofi_rxm", "127.0.0.1/32", "lo"),
    ]
}

#[test]
fn sm2_is_shared_memory_and_rxm_over_tcp_comes_before_tcp_alone() {
    let c = libfabric_2_1_machine();
    assert_eq!(Tier::of(&c[0]), Tier::SharedMemory);
    let s = select(&c, &NameFilter::Default, &req());
    let names: Vec<&str> = s.verdicts.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["tcp;ofi_rxm", "tcp;ofi_rxm", "tcp", "tcp", "sm2"]);
    assert_eq!(c[s.chosen.unwrap().index].fabric, "192.0.2.0/24");
    // Across nodes sm2 cannot reach the peers.
    let multi = Requirements {
        single_node: false,
        ..req()
    };
    let s = select(&c, &NameFilter::Default, &multi);
    assert!(
        s.report()
            .contains("sm2 [sm2]: rejected: shm reaches only this node"),
        "{}",
        s.report()
    );
}

/// Asked for by name, sm2 needs host matching (its probe failed) and cannot have it:
/// selection passes it over for the next name of the list instead of declining.
#[test]
fn a_provider_lacking_host_matching_is_passed_over_for_the_next() {
    let mut c = libfabric_2_1_machine();
    let filter = NameFilter::from_params(Some("sm2,tcp;ofi_rxm"), None).unwrap();
    let first = select(&c, &filter, &req());
    let chosen = first.chosen.unwrap();
    assert_eq!(c[chosen.index].name, "sm2");
    assert!(chosen.host_matching);
    // What the glue learns by asking libfabric again with FI_MSG and FI_RMA.
    c[0].lacks_host_matching = true;
    let again = select(&c, &filter, &req());
    let chosen = again.chosen.expect("the next provider of the list");
    assert_eq!(c[chosen.index].name, "tcp;ofi_rxm");
    assert!(!chosen.host_matching);
    assert!(
        again.report().contains(
            "sm2 [sm2]: rejected: rofi's matching probe found its tagged matching wrong: \
             remote_cq_data"
        ) && again
            .report()
            .contains("but the provider lacks untagged messages or RMA reads"),
        "{}",
        again.report()
    );
}
