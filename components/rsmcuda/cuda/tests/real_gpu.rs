//! The real CUDA IPC path between two processes, for a machine with an NVIDIA GPU
//! (none is available where this project is built, so it is `#[ignore]`d):
//!
//! ```sh
//! cargo test --release -p rsmcuda-cuda --test real_gpu -- --ignored --nocapture
//! ```
//!
//! The test re-runs its own binary as the exporting process: it allocates device
//! memory, fills it with a pattern, and prints the registration handle rsmcuda's
//! `btl_register_mem` would produce (80 bytes, hex). This process decodes it as the
//! BTL's `btl_get` does, opens it through the handle cache, copies with
//! `cuMemcpyAsync` on the IPC stream, waits for the event, and checks every byte; a
//! second transfer from the same allocation must be served from the cache without
//! reopening. It prints the time of the first get (which opens the handle) and of the
//! second. `RSMCUDA_GPU_DEVICES=exporter,importer` picks the devices (default: 0 and
//! 1 when there are two GPUs, else 0 and 0). Without a driver or a device it says
//! SKIP and why, and passes.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rsmcuda_core::cache::CacheConfig;
use rsmcuda_core::reg::{self, REG_HANDLE_LEN, RemoteMemory};
use rsmcuda_cuda::{DeviceGets, Done, export};

const ROLE: &str = "RSMCUDA_GPU_ROLE";
const LEN: usize = 8 << 20;

fn pattern(i: usize) -> u8 {
    (i.wrapping_mul(31) ^ (i >> 9)) as u8
}

fn devices(count: i32) -> (i32, i32) {
    if let Ok(v) = std::env::var("RSMCUDA_GPU_DEVICES")
        && let Some((a, b)) = v.split_once(',')
        && let (Ok(a), Ok(b)) = (a.trim().parse(), b.trim().parse())
    {
        return (a, b);
    }
    if count > 1 { (0, 1) } else { (0, 0) }
}

/// The exporting process: allocate, fill, print the handle, wait for "done".
fn exporter(driver: &cuda::Driver, device: i32) {
    driver.use_primary_context(device).expect("context");
    let buf = driver.mem_alloc(LEN).expect("cuMemAlloc");
    let host: Vec<u8> = (0..LEN).map(pattern).collect();
    driver.copy_to_device(buf, &host).expect("cuMemcpyHtoD");
    let region = export(driver, buf, LEN as u64)
        .expect("cuIpcGetMemHandle")
        .expect("cuMemAlloc memory is device memory");
    let hex: String = region.encode().iter().map(|b| format!("{b:02x}")).collect();
    println!("HANDLE {hex} {buf}");
    std::io::stdout().flush().unwrap();
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    driver.mem_free(buf).expect("cuMemFree");
}

fn wait<G: rsmcuda_cuda::Gpu>(gets: &mut DeviceGets<'_, G, u32>) -> Vec<Done<u32>> {
    let start = Instant::now();
    let mut done = Vec::new();
    while gets.in_flight() > 0 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "copy never completed"
        );
        while let Some(d) = gets.poll() {
            done.push(d);
        }
    }
    done
}

#[test]
#[ignore = "needs an NVIDIA GPU and driver: run with --ignored on such a machine"]
fn two_processes_open_copy_verify_and_hit_the_cache() {
    let driver = match cuda::Driver::load() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("SKIP: no CUDA driver: {e}");
            return;
        }
    };
    let count = driver.device_count().unwrap_or(0);
    if count == 0 {
        eprintln!("SKIP: the CUDA driver reports no device");
        return;
    }
    let (exp_dev, imp_dev) = devices(count);
    if std::env::var_os(ROLE).is_some() {
        exporter(&driver, exp_dev);
        return;
    }
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "two_processes_open_copy_verify_and_hit_the_cache",
            "--ignored",
            "--nocapture",
        ])
        .env(ROLE, "exporter")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the exporting process");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = lines
        .by_ref()
        .map_while(Result::ok)
        .find(|l| l.starts_with("HANDLE "))
        .expect("the exporter prints its handle");
    let mut words = line.split_whitespace().skip(1);
    let hex = words.next().unwrap();
    let remote_buf: u64 = words.next().unwrap().parse().unwrap();
    let mut bytes = [0u8; REG_HANDLE_LEN];
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
    }
    let RemoteMemory::Device(region) = reg::decode(&bytes).unwrap() else {
        panic!("the exporter sent a host handle")
    };

    driver.use_primary_context(imp_dev).expect("context");
    let same = exp_dev == imp_dev;
    if !same {
        assert!(
            driver.can_access_peer(imp_dev, exp_dev).unwrap(),
            "devices {imp_dev} and {exp_dev} have no peer access: pick others with RSMCUDA_GPU_DEVICES"
        );
    }
    let local = driver.mem_alloc(LEN).expect("cuMemAlloc");
    // Kept from its first use (the BTL keeps a mapping once its allocation is read
    // again), so that the second get shows what a hit costs.
    let cache = CacheConfig {
        keep_first_use: true,
        ..CacheConfig::default()
    };
    let mut gets = DeviceGets::new(&driver, cache, 16).expect("stream/events");
    let half = LEN / 2;

    let t0 = Instant::now();
    // SAFETY: `local` is our allocation of LEN bytes, untouched until the get completes.
    let hit = unsafe { gets.start(0, &region, remote_buf, local, half, 1) }.expect("first get");
    let first_start = t0.elapsed();
    assert!(!hit, "the first get opens the handle");
    assert_eq!(wait(&mut gets), vec![Done::Ok(1)]);
    let first = t0.elapsed();

    let t1 = Instant::now();
    // SAFETY: as above, the second half of `local`.
    let hit = unsafe {
        gets.start(
            0,
            &region,
            remote_buf + half as u64,
            local + half as u64,
            half,
            2,
        )
    }
    .expect("second get");
    let second_start = t1.elapsed();
    assert!(hit, "the second get is served from the cache");
    assert_eq!(wait(&mut gets), vec![Done::Ok(2)]);
    let second = t1.elapsed();

    let mut back = vec![0u8; LEN];
    driver.copy_to_host(&mut back, local).expect("cuMemcpyDtoH");
    let wrong = back
        .iter()
        .enumerate()
        .filter(|(i, b)| **b != pattern(*i))
        .count();
    assert_eq!(wrong, 0, "{wrong} of {LEN} bytes differ");
    assert_eq!(gets.stats().opens, 1, "opened once");
    assert_eq!((gets.stats().hits, gets.stats().misses), (1, 1));
    println!(
        "devices {exp_dev}->{imp_dev}: first get (opens the handle) issued in {:?}, done in \
         {first:?}; second get (cache hit) issued in {:?}, done in {second:?}; {} MiB each",
        first_start,
        second_start,
        half >> 20
    );
    drop(gets);
    driver.mem_free(local).unwrap();
    writeln!(child.stdin.as_mut().unwrap(), "done").unwrap();
    assert!(child.wait().unwrap().success(), "the exporter failed");
}
