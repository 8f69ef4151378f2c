//! One-sided operations between two workers in one thread, over
//! UCX_TLS=tcp (loopback) and UCX_TLS=sm: a put, a get and atomics into
//! memory registered by the other side, each completed by a flush.

mod common;

use common::*;
use tether_ucx::{AtomicOp, Completion, Context, ErrorMode, Event, Worker};

/// Completes a flush of `a`'s endpoint (progressing both workers, since
/// over tcp and sm the target's progress serves the operations).
fn flushed(p: &Pair) {
    match p.a_to_b.flush().expect("flush") {
        Completion::Done(()) => {}
        Completion::Pending(t) => pump(p, 0, |ev| match ev {
            Event::SendDone { token, result, .. } if token == t => {
                result.expect("flush result");
                Some(())
            }
            _ => None,
        }),
    }
}

fn one_sided(tls: &str) {
    let _g = serial();
    let Some(ucp) = ucp() else { return };
    let mut opts = options(tls);
    opts.rma = true;
    let ca = Context::new(ucp, &opts).expect("context a");
    let cb = Context::new(ucp, &opts).expect("context b");
    let a = Worker::new(&ca, &[AM_ID]).expect("worker a");
    let b = Worker::new(&cb, &[AM_ID]).expect("worker b");
    let a_to_b = a.connect(&b.address().unwrap(), ErrorMode::None).unwrap();
    let b_to_a = b.connect(&a.address().unwrap(), ErrorMode::None).unwrap();
    let p = Pair {
        a,
        b,
        a_to_b,
        b_to_a,
    };
    let transports = ca.transports().expect("transports");
    let expected = if tls == "tcp" { "tcp" } else { "cma" };
    assert!(transports.iter().any(|t| t == expected), "{transports:?}");

    let mut window = vec![0u8; 4096];
    let base = window.as_mut_ptr() as u64;
    // SAFETY: `window` outlives the region (dropped at the end).
    let region = unsafe { cb.map(window.as_mut_ptr(), window.len()) }.expect("map");
    let key = p
        .a_to_b
        .unpack_key(&region.pack().expect("pack"))
        .expect("unpack");

    let source: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
    // SAFETY: `source` outlives the flush below; the target range is
    // inside the window.
    unsafe {
        p.a_to_b
            .put_raw(source.as_ptr(), source.len(), base + 100, &key)
    }
    .expect("put");
    flushed(&p);
    assert_eq!(&window[100..1100], &source[..]);

    let mut back = vec![0u8; 1000];
    // SAFETY: as above.
    unsafe {
        p.a_to_b
            .get_raw(back.as_mut_ptr(), back.len(), base + 100, &key)
    }
    .expect("get");
    flushed(&p);
    assert_eq!(back, source);

    window[2048..2056].copy_from_slice(&40u64.to_le_bytes());
    let two = 2u64.to_le_bytes();
    let mut before = [0u8; 8];
    // SAFETY: the operand and reply outlive the flush; 2048 is aligned.
    unsafe {
        p.a_to_b.atomic_raw(
            AtomicOp::Add,
            two.as_ptr(),
            8,
            base + 2048,
            &key,
            Some(before.as_mut_ptr()),
        )
    }
    .expect("fetch-add");
    flushed(&p);
    assert_eq!(u64::from_le_bytes(before), 40);
    let compare = 42u64.to_le_bytes();
    let mut swap = 7u64.to_le_bytes();
    // SAFETY: as above.
    unsafe {
        p.a_to_b.atomic_raw(
            AtomicOp::CompareSwap,
            compare.as_ptr(),
            8,
            base + 2048,
            &key,
            Some(swap.as_mut_ptr()),
        )
    }
    .expect("cswap");
    flushed(&p);
    assert_eq!(u64::from_le_bytes(swap), 42, "cswap returns the old value");
    assert_eq!(window[2048..2056], 7u64.to_le_bytes());
    drop(key);
    drop(region);
}

#[test]
fn one_sided_over_tcp() {
    one_sided("tcp");
}

#[test]
fn one_sided_over_sm() {
    one_sided("sm");
}
