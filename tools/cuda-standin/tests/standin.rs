//! The stand-in's semantics through its exported functions. Each scenario runs in a
//! child process (this test binary re-run with `STANDIN_SCENARIO`), because the
//! configuration is read from the environment once per process.

use std::collections::HashMap;
use std::ffi::{CString, c_void};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Output, Stdio};

use cuda_standin::*;

const SCENARIO: &str = "STANDIN_SCENARIO";

/// Calls an entry point (all are `unsafe extern "C"`).
macro_rules! cu {
    ($e:expr) => {
        // SAFETY: the tests pass valid out-pointers and buffers to the C API.
        unsafe { $e }
    };
}

fn ok(r: i32) {
    assert_eq!(r, 0, "CUDA call failed with {r}");
}

fn command(scenario: &str, env: &[(&str, &str)]) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env(SCENARIO, scenario)
        .env_remove("RMCA_CUDA_STANDIN")
        .env_remove("CUDA_VISIBLE_DEVICES");
    for (k, v) in env {
        c.env(k, v);
    }
    c
}

fn run(scenario: &str, env: &[(&str, &str)]) -> Output {
    let out = command(scenario, env).output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "scenario {scenario} failed:\n{text}");
    assert!(text.contains(&format!("SCENARIO {scenario} OK")), "{text}");
    out
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> IpcHandle {
    let mut h = IpcHandle { reserved: [0; 64] };
    for (i, b) in h.reserved.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap();
    }
    h
}

fn setup(device: i32) -> Handle {
    ok(cu!(cuInit(0)));
    let mut ctx: Handle = std::ptr::null_mut();
    ok(cu!(cuDevicePrimaryCtxRetain(&mut ctx, device)));
    ok(cu!(cuCtxSetCurrent(ctx)));
    ctx
}

fn alloc(n: usize) -> CuPtr {
    let mut p: CuPtr = 0;
    ok(cu!(cuMemAlloc_v2(&mut p, n)));
    p
}

fn count(name: &str) -> u64 {
    let c = CString::new(name).unwrap();
    let mut v = 0u64;
    if cu!(rmcaCudaStandinCount(c.as_ptr(), &mut v)) != 0 {
        return 0;
    }
    v
}

fn attr_u64(attr: i32, p: CuPtr) -> (i32, u64) {
    let mut v = 0u64;
    let r = cu!(cuPointerGetAttribute((&mut v as *mut u64).cast(), attr, p));
    (r, v)
}

fn shm_files(pid: u32) -> Vec<String> {
    let prefix = format!("rmca-cuda-standin-{pid}-");
    std::fs::read_dir("/dev/shm")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

/// The child side: dispatch on the scenario; a plain run of this test does nothing.
#[test]
fn child() {
    let Ok(s) = std::env::var(SCENARIO) else {
        return;
    };
    match s.as_str() {
        "disabled" => assert_eq!(cu!(cuInit(0)), 100),
        "no_visible" => assert_eq!(cu!(cuInit(0)), 100),
        "visible" => {
            ok(cu!(cuInit(0)));
            let mut n = 0;
            ok(cu!(cuDeviceGetCount(&mut n)));
            assert_eq!(n, 1);
        }
        "memory" => memory(),
        "exporter" => exporter(),
        "importer" => importer(),
        "holder" => holder(),
        "async" => lazy_streams(),
        "inject" => inject(),
        "report" => {
            setup(0);
            alloc(4096); // left allocated: live.allocations 1, file unlinked at exit
            let p = alloc(4096);
            ok(cu!(cuMemFree_v2(p)));
        }
        other => panic!("unknown scenario {other}"),
    }
    println!("SCENARIO {s} OK");
}

fn memory() {
    let ctx = setup(0);
    assert_eq!(cu!(cuCtxGetCurrent(&mut std::ptr::null_mut())), 0);
    // Reuse: free then allocate the same size at the same address, new buffer id.
    let a = alloc(100_000);
    let (r, id_a) = attr_u64(7, a);
    ok(r);
    ok(cu!(cuMemFree_v2(a)));
    let b = alloc(100_000);
    assert_eq!(a, b, "freed address reused");
    let (_, id_b) = attr_u64(7, b);
    assert!(id_b > id_a, "buffer id changes on reuse");
    // Attributes, interior pointers.
    let (r, t) = attr_u64(2, b + 10);
    ok(r);
    assert_eq!(t as u32, 2, "device memory");
    let (_, c) = attr_u64(1, b);
    assert_eq!(c as usize, ctx as usize);
    let (mut base, mut size) = (0u64, 0usize);
    ok(cu!(cuMemGetAddressRange_v2(&mut base, &mut size, b + 777)));
    assert_eq!((base, size), (b, 100_000));
    assert_eq!(attr_u64(11, b + 5).1, b);
    assert_eq!(attr_u64(12, b + 5).1, 100_000);
    assert_eq!(attr_u64(6, b).1 as u32, 0);
    let one: u32 = 1;
    ok(cu!(cuPointerSetAttribute(
        (&one as *const u32).cast(),
        6,
        b
    )));
    assert_eq!(attr_u64(6, b).1 as u32, 1);
    assert_eq!(attr_u64(5, b).0, 801, "unmodelled attribute");
    // Unknown host memory: single query fails, multi query succeeds with zeros.
    let host = [7u8; 64];
    let hp = host.as_ptr() as CuPtr;
    assert_eq!(attr_u64(2, hp).0, 1);
    let (mut mt, mut mc, mut mm) = (9u32, 9usize, 9u32);
    let attrs = [2i32, 1, 8];
    let mut data: [*mut c_void; 3] = [
        (&mut mt as *mut u32).cast(),
        (&mut mc as *mut usize).cast(),
        (&mut mm as *mut u32).cast(),
    ];
    ok(cu!(cuPointerGetAttributes(
        3,
        attrs.as_ptr(),
        data.as_mut_ptr(),
        hp
    )));
    assert_eq!((mt, mc, mm), (0, 0, 0));
    // Registered host memory is host memory.
    let mut reg = vec![0u8; 8192];
    ok(cu!(cuMemHostRegister_v2(
        reg.as_mut_ptr().cast(),
        reg.len(),
        0
    )));
    assert_eq!(attr_u64(2, reg.as_ptr() as CuPtr + 1).1 as u32, 1);
    assert_eq!(
        cu!(cuMemHostRegister_v2(reg.as_mut_ptr().cast(), 16, 0)),
        712
    );
    ok(cu!(cuMemHostUnregister(reg.as_mut_ptr().cast())));
    // Copies, bounds.
    let src: Vec<u8> = (0..100_000).map(|i| (i % 251) as u8).collect();
    ok(cu!(cuMemcpyHtoD_v2(b, src.as_ptr().cast(), src.len())));
    let mut back = vec![0u8; 100_000];
    ok(cu!(cuMemcpyDtoH_v2(
        back.as_mut_ptr().cast(),
        b,
        back.len()
    )));
    assert_eq!(src, back);
    assert_eq!(
        cu!(cuMemcpyHtoD_v2(b + 1, src.as_ptr().cast(), src.len())),
        1
    );
    assert_eq!(
        cu!(cuMemcpyDtoH_v2(back.as_mut_ptr().cast(), b + 200_000, 1)),
        1
    );
    ok(cu!(cuMemsetD8_v2(b, 0xab, 10)));
    ok(cu!(cuMemcpy(back.as_mut_ptr() as CuPtr, b, 10)));
    assert_eq!(&back[..10], &[0xab; 10]);
    assert_eq!(count("copy.htod.count"), 1);
    assert_eq!(count("copy.dtoh.bytes"), 100_010);
    // Managed memory: device range, IS_MANAGED, no IPC.
    let mut m: CuPtr = 0;
    ok(cu!(cuMemAllocManaged(&mut m, 4096, 1)));
    assert_eq!(attr_u64(8, m).1 as u32, 1);
    let mut h = IpcHandle { reserved: [0; 64] };
    assert_eq!(cu!(cuIpcGetMemHandle(&mut h, m)), 1);
    // Own handle in the same process: refused.
    ok(cu!(cuIpcGetMemHandle(&mut h, b)));
    let mut opened: CuPtr = 0;
    assert_eq!(cu!(cuIpcOpenMemHandle_v2(&mut opened, h, 1)), 201);
    // Unsupported and cuGetProcAddress.
    assert_eq!(cuLaunchKernel(), 801);
    let name = CString::new("cuMemAlloc").unwrap();
    let mut f: *mut c_void = std::ptr::null_mut();
    ok(cu!(cuGetProcAddress(name.as_ptr(), &mut f, 12090, 0)));
    assert!(!f.is_null());
    let bogus = CString::new("cuNoSuchThing").unwrap();
    assert_eq!(cu!(cuGetProcAddress(bogus.as_ptr(), &mut f, 12090, 0)), 500);
    assert_eq!(count("call.cuMemAlloc"), 2);
    assert_eq!(count("alloc.count"), 3);
    assert_eq!(count("live.allocations"), 2);
}

/// Exports a buffer and an IPC event; on each stdin line, frees and reallocates.
fn exporter() {
    setup(0);
    let n = 1 << 20;
    let p = alloc(n);
    let data: Vec<u8> = (0..n).map(|i| (i * 7 % 256) as u8).collect();
    ok(cu!(cuMemcpyHtoD_v2(p, data.as_ptr().cast(), n)));
    let mut h = IpcHandle { reserved: [0; 64] };
    ok(cu!(cuIpcGetMemHandle(&mut h, p)));
    let mut ev: Handle = std::ptr::null_mut();
    ok(cu!(cuEventCreate(&mut ev, 0x6)));
    ok(cu!(cuEventRecord(ev, std::ptr::null_mut())));
    let mut eh = IpcHandle { reserved: [0; 64] };
    ok(cu!(cuIpcGetEventHandle(&mut eh, ev)));
    println!("MEM {} EVT {}", hex(&h.reserved), hex(&eh.reserved));
    std::io::stdout().flush().unwrap();
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    ok(cu!(cuMemFree_v2(p)));
    let q = alloc(n);
    assert_eq!(p, q);
    ok(cu!(cuMemcpyHtoD_v2(q, data.as_ptr().cast(), n)));
    ok(cu!(cuIpcGetMemHandle(&mut h, q)));
    println!("REUSED {}", hex(&h.reserved));
    std::io::stdout().flush().unwrap();
    line.clear();
    std::io::stdin().read_line(&mut line).unwrap();
}

/// Opens `MEM` (and `EVT`), expects `EXPECT` (a result code); on success checks bytes.
fn importer() {
    let device: i32 = std::env::var("DEVICE").map_or(0, |d| d.parse().unwrap());
    setup(device);
    let expect: i32 = std::env::var("EXPECT").unwrap().parse().unwrap();
    let h = unhex(&std::env::var("MEM").unwrap());
    let mut p: CuPtr = 0;
    let r = cu!(cuIpcOpenMemHandle_v2(&mut p, h, 1));
    assert_eq!(r, expect);
    if r != 0 {
        assert_eq!(count("ipc.open.failed"), 1);
        return;
    }
    let n = 1 << 20;
    let mut back = vec![0u8; n];
    ok(cu!(cuMemcpyDtoH_v2(back.as_mut_ptr().cast(), p, n)));
    assert!(
        back.iter()
            .enumerate()
            .all(|(i, &b)| b == (i * 7 % 256) as u8)
    );
    assert_eq!(
        attr_u64(2, p).1 as u32,
        2,
        "an IPC mapping is device memory"
    );
    let mut again: CuPtr = 0;
    assert_eq!(cu!(cuIpcOpenMemHandle_v2(&mut again, h, 1)), 208);
    if let Ok(e) = std::env::var("EVT") {
        let mut ev: Handle = std::ptr::null_mut();
        ok(cu!(cuIpcOpenEventHandle(&mut ev, unhex(&e))));
        ok(cu!(cuEventQuery(ev)));
        ok(cu!(cuEventRecord(ev, std::ptr::null_mut())));
        ok(cu!(cuStreamWaitEvent(std::ptr::null_mut(), ev, 0)));
        ok(cu!(cuEventDestroy_v2(ev)));
    }
    assert_eq!(count("live.ipc_mappings"), 1);
    ok(cu!(cuIpcCloseMemHandle(p)));
    assert_eq!(cu!(cuIpcCloseMemHandle(p)), 1);
    assert_eq!((count("ipc.open.ok"), count("ipc.close")), (1, 1));
}

/// Opens `MEM` and holds it while the exporter frees it (one stdin line brings the
/// reallocated buffer's handle): the mapping is then counted as one of a freed
/// allocation, its bytes still readable, until it is closed.
fn holder() {
    setup(0);
    let n = 1 << 20;
    let h = unhex(&std::env::var("MEM").unwrap());
    let mut p: CuPtr = 0;
    ok(cu!(cuIpcOpenMemHandle_v2(&mut p, h, 1)));
    assert_eq!(
        (
            count("live.ipc_mappings_freed"),
            count("live.ipc_mapped_bytes")
        ),
        (0, n as u64)
    );
    println!("HELD");
    std::io::stdout().flush().unwrap();
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    let reused = unhex(line.trim().strip_prefix("REUSED ").unwrap());
    assert_eq!(
        (
            count("live.ipc_mappings_freed"),
            count("live.ipc_freed_bytes")
        ),
        (1, n as u64),
        "the exporter freed it"
    );
    let mut back = vec![0u8; n];
    ok(cu!(cuMemcpyDtoH_v2(back.as_mut_ptr().cast(), p, n)));
    assert!(
        back.iter()
            .enumerate()
            .all(|(i, &b)| b == (i * 7 % 256) as u8),
        "the mapping keeps the freed allocation's bytes alive"
    );
    // Opening the reallocated buffer samples what is held at that moment.
    let mut q: CuPtr = 0;
    ok(cu!(cuIpcOpenMemHandle_v2(&mut q, reused, 1)));
    assert_eq!(
        (
            count("ipc.freed_held.max"),
            count("ipc.freed_held.max_bytes")
        ),
        (1, n as u64)
    );
    ok(cu!(cuIpcCloseMemHandle(p)));
    assert_eq!(
        (
            count("live.ipc_mappings_freed"),
            count("live.ipc_freed_bytes"),
            count("live.ipc_mappings")
        ),
        (0, 0, 1)
    );
    ok(cu!(cuIpcCloseMemHandle(q)));
}

fn lazy_streams() {
    setup(0);
    let n = 4096;
    let d = alloc(n);
    let mut s: Handle = std::ptr::null_mut();
    ok(cu!(cuStreamCreate(&mut s, 0)));
    let mut ev: Handle = std::ptr::null_mut();
    ok(cu!(cuEventCreate(&mut ev, 2)));
    let src = vec![5u8; n];
    let mut dst = vec![0u8; n];
    ok(cu!(cuMemcpyHtoDAsync_v2(d, src.as_ptr().cast(), n, s)));
    ok(cu!(cuMemcpyDtoHAsync_v2(dst.as_mut_ptr().cast(), d, n, s)));
    ok(cu!(cuEventRecord(ev, s)));
    assert!(dst.iter().all(|&b| b == 0), "nothing ran before a query");
    let mut not_ready = 0;
    loop {
        match cu!(cuEventQuery(ev)) {
            0 => break,
            600 => not_ready += 1,
            r => panic!("cuEventQuery: {r}"),
        }
        assert!(not_ready < 10);
    }
    assert!(not_ready >= 1);
    assert!(dst.iter().all(|&b| b == 5));
    // A second stream waits for an event of the first; synchronize runs both.
    let mut s2: Handle = std::ptr::null_mut();
    ok(cu!(cuStreamCreate(&mut s2, 1)));
    let src2 = vec![9u8; n];
    ok(cu!(cuMemcpyHtoDAsync_v2(d, src2.as_ptr().cast(), n, s)));
    ok(cu!(cuEventRecord(ev, s)));
    ok(cu!(cuStreamWaitEvent(s2, ev, 0)));
    ok(cu!(cuMemcpyDtoHAsync_v2(dst.as_mut_ptr().cast(), d, n, s2)));
    assert_eq!(cu!(cuStreamQuery(s2)), 600);
    ok(cu!(cuStreamSynchronize(s2)));
    assert!(dst.iter().all(|&b| b == 9));
    ok(cu!(cuStreamDestroy_v2(s2)));
    ok(cu!(cuStreamDestroy_v2(s)));
}

fn inject() {
    setup(0);
    let mut p: CuPtr = 0;
    ok(cu!(cuMemAlloc_v2(&mut p, 10)));
    assert_eq!(cu!(cuMemAlloc(&mut p, 10)), 999);
    ok(cu!(cuMemAlloc_v2(&mut p, 10)));
    let mut ev: Handle = std::ptr::null_mut();
    ok(cu!(cuEventCreate(&mut ev, 2)));
    assert_eq!(cu!(cuEventQuery(ev)), 700);
    assert_eq!(cu!(cuEventQuery(ev)), 700);
    assert_eq!(count("inject.failures"), 3);
    assert_eq!(count("call.cuMemAlloc"), 3);
}

#[test]
fn refuses_without_the_switch_and_honours_visible_devices() {
    let o = run("disabled", &[]);
    assert!(stderr(&o).contains("not a CUDA driver"), "{}", stderr(&o));
    run(
        "no_visible",
        &[("RMCA_CUDA_STANDIN", "1"), ("CUDA_VISIBLE_DEVICES", "")],
    );
    run(
        "visible",
        &[
            ("RMCA_CUDA_STANDIN", "1"),
            ("RMCA_CUDA_STANDIN_DEVICES", "2"),
            ("CUDA_VISIBLE_DEVICES", "1"),
        ],
    );
}

#[test]
fn memory_attributes_copies_reuse_and_counters() {
    run("memory", &[("RMCA_CUDA_STANDIN", "1")]);
}

#[test]
fn lazy_streams_report_not_ready_and_run_in_order() {
    run(
        "async",
        &[("RMCA_CUDA_STANDIN", "1"), ("RMCA_CUDA_STANDIN_ASYNC", "1")],
    );
}

#[test]
fn injected_failures() {
    let o = run(
        "inject",
        &[
            ("RMCA_CUDA_STANDIN", "1"),
            (
                "RMCA_CUDA_STANDIN_FAIL",
                "cuMemAlloc_v2:2,cuEventQuery:1+:700",
            ),
        ],
    );
    assert_eq!(stderr(&o).matches("injected failure").count(), 3);
}

#[test]
fn report_file_and_no_residue() {
    let dir = std::env::temp_dir().join(format!("standin-report-{}", std::process::id()));
    let d = dir.to_str().unwrap();
    let child = command(
        "report",
        &[("RMCA_CUDA_STANDIN", "1"), ("RMCA_CUDA_STANDIN_REPORT", d)],
    )
    .output()
    .unwrap();
    assert!(child.status.success());
    let files: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
    assert_eq!(files.len(), 1);
    let pid: u32 = files[0]
        .file_name()
        .to_str()
        .unwrap()
        .trim_end_matches(".counts")
        .parse()
        .unwrap();
    let text = std::fs::read_to_string(files[0].path()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut sorted = lines.clone();
    sorted.sort();
    assert_eq!(lines, sorted);
    let map: HashMap<&str, &str> = lines.iter().filter_map(|l| l.split_once(' ')).collect();
    assert_eq!(map["call.cuInit"], "1");
    assert_eq!(map["call.cuMemAlloc"], "2");
    assert_eq!(map["free.count"], "1");
    assert_eq!(map["live.allocations"], "1");
    assert!(
        shm_files(pid).is_empty(),
        "left in /dev/shm: {:?}",
        shm_files(pid)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An importer holding a mapping while the exporter frees the allocation: the
/// stand-in counts it as a mapping of a freed allocation (what a transport's IPC cache
/// can leak) until it is closed.
#[test]
fn a_mapping_held_after_the_owner_frees_is_counted() {
    let (mut exp, mut out) = spawn_exporter();
    let mem = read_tagged(&mut out, "MEM ")[0].clone();
    let mut holder = command("holder", &[("RMCA_CUDA_STANDIN", "1"), ("MEM", &mem)])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut held = BufReader::new(holder.stdout.take().unwrap());
    read_tagged(&mut held, "HELD");
    let mut stdin = exp.stdin.take().unwrap();
    writeln!(stdin, "free").unwrap();
    let reused = read_tagged(&mut out, "REUSED ")[0].clone();
    let mut to_holder = holder.stdin.take().unwrap();
    writeln!(to_holder, "REUSED {reused}").unwrap();
    drop(to_holder);
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut held, &mut rest);
    assert!(holder.wait().unwrap().success(), "{rest}");
    assert!(rest.contains("SCENARIO holder OK"), "{rest}");
    writeln!(stdin, "exit").unwrap();
    drop(stdin);
    assert!(exp.wait().unwrap().success());
}

fn spawn_exporter() -> (Child, BufReader<std::process::ChildStdout>) {
    let mut c = command("exporter", &[("RMCA_CUDA_STANDIN", "1")])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = BufReader::new(c.stdout.take().unwrap());
    (c, out)
}

fn read_tagged(out: &mut BufReader<std::process::ChildStdout>, tag: &str) -> Vec<String> {
    loop {
        let mut line = String::new();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the child ended before {tag}"
        );
        // libtest prints "test child ... " on the same line before the child's output.
        if let Some(at) = line.find(tag) {
            return line[at + tag.len()..]
                .split_whitespace()
                .map(str::to_owned)
                .collect();
        }
    }
}

#[test]
fn ipc_across_processes_stale_handles_and_peer_refusal() {
    let (mut exp, mut out) = spawn_exporter();
    let pid = exp.id();
    let words = read_tagged(&mut out, "MEM ");
    let (mem, evt) = (words[0].clone(), words[2].clone());
    run(
        "importer",
        &[
            ("RMCA_CUDA_STANDIN", "1"),
            ("MEM", &mem),
            ("EVT", &evt),
            ("EXPECT", "0"),
        ],
    );
    // No peer access between the devices: refused with PEER_ACCESS_UNSUPPORTED.
    run(
        "importer",
        &[
            ("RMCA_CUDA_STANDIN", "1"),
            ("RMCA_CUDA_STANDIN_DEVICES", "2"),
            ("RMCA_CUDA_STANDIN_NO_PEER", "0-1"),
            ("DEVICE", "1"),
            ("MEM", &mem),
            ("EXPECT", "217"),
        ],
    );
    let mut stdin = exp.stdin.take().unwrap();
    writeln!(stdin, "free").unwrap();
    let reused = read_tagged(&mut out, "REUSED ")[0].clone();
    assert_ne!(reused, mem, "a reused address has a new handle");
    run(
        "importer",
        &[("RMCA_CUDA_STANDIN", "1"), ("MEM", &mem), ("EXPECT", "1")],
    );
    run(
        "importer",
        &[
            ("RMCA_CUDA_STANDIN", "1"),
            ("MEM", &reused),
            ("EXPECT", "0"),
        ],
    );
    writeln!(stdin, "exit").unwrap();
    drop(stdin);
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut out, &mut rest);
    assert!(exp.wait().unwrap().success());
    assert!(rest.contains("SCENARIO exporter OK"), "{rest}");
    assert!(
        shm_files(pid).is_empty(),
        "left in /dev/shm: {:?}",
        shm_files(pid)
    );
}
