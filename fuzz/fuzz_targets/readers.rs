//! The .npy and .safetensors readers of the `gather` command on arbitrary bytes: every input is
//! read or refused with a message, never a panic, an abort or a huge allocation.
#![no_main]

use gather_cli::tensor_io::{parse_npy, parse_safetensors};
use gather_fuzz::Bytes;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes::new(data);
    let mode = b.below(4);
    let rest = b.rest();
    match mode {
        0 => {
            let _ = parse_npy(rest, false);
        }
        1 => {
            let _ = parse_npy(rest, true);
        }
        2 => {
            let _ = parse_safetensors(rest, None);
        }
        _ => {
            let _ = parse_safetensors(rest, Some("x"));
        }
    }
    // A well-formed .npy header in front of the bytes reaches the data-size checks.
    let mut npy = b"\x93NUMPY\x01\x00".to_vec();
    let header = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': ({}, {}), }}",
        rest.len(),
        rest.first().copied().unwrap_or(0) as usize * 1_000_000_007
    );
    let mut h = header.into_bytes();
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(b' ');
    }
    h.push(b'\n');
    npy.extend_from_slice(&(h.len() as u16).to_le_bytes());
    npy.extend_from_slice(&h);
    npy.extend_from_slice(rest);
    let _ = parse_npy(&npy, false);
});
