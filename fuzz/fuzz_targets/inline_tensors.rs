//! The CLI's parsing of tensor arguments: inline literals (`'[[1, 2], [3, 4]]'`, any text) in
//! both roles and with every `--dtype`, and the classification of an argument as inline, .npy or
//! .safetensors. Every input is parsed or refused with a message and a hint, never a panic.
#![no_main]

use gather::DType;
use gather_cli::tensor_io::{Role, Source, parse_inline};
use libfuzzer_sys::fuzz_target;

const DTYPES: [Option<DType>; 6] = [
    None,
    Some(DType::F16),
    Some(DType::BF16),
    Some(DType::U8),
    Some(DType::I64),
    Some(DType::Bool),
];

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let role = if sel & 1 == 0 {
        Role::Data
    } else {
        Role::Index
    };
    let dtype = DTYPES[(sel as usize >> 1) % DTYPES.len()];
    let _ = parse_inline(&text, role, dtype);
    let _ = Source::parse(&text);
});
