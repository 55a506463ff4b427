//! The codecs measured, behind one function: compress every chunk of `data` (fixed `chunk`-byte
//! pieces), keep the compressed form only where it saves at least 1/16 of the chunk (the
//! client's `auto` rule), and return the bytes that would travel (data only, no frame heads).
//! Codec 0 = zstd (C, the `zstd` crate) at `level`, 1 = ruzstd (pure Rust, its one level
//! "Fastest"), 2 = lz4_flex (block format).

pub fn stored_len(codec: u32, level: i32, data: &[u8], chunk: usize) -> u64 {
    let mut total = 0u64;
    #[cfg(feature = "zstd-c")]
    let mut cx = zstd::bulk::Compressor::new(level).unwrap();
    let _ = level;
    for c in data.chunks(chunk) {
        let n = match codec {
            #[cfg(feature = "zstd-c")]
            0 => cx.compress(c).unwrap().len(),
            1 => ruzstd::encoding::compress_to_vec(c, ruzstd::encoding::CompressionLevel::Fastest).len(),
            2 => lz4_flex::compress(c).len(),
            _ => panic!("codec {codec} not built"),
        } + 4;
        total += if n + c.len() / 16 <= c.len() { n as u64 } else { c.len() as u64 };
    }
    total
}

/// Decompresses every chunk (compressed once first): the bytes out, to time the decoder.
pub fn compress_all(codec: u32, level: i32, data: &[u8], chunk: usize) -> Vec<Vec<u8>> {
    #[cfg(feature = "zstd-c")]
    let mut cx = zstd::bulk::Compressor::new(level).unwrap();
    let _ = level;
    data.chunks(chunk)
        .map(|c| match codec {
            #[cfg(feature = "zstd-c")]
            0 => cx.compress(c).unwrap(),
            1 => ruzstd::encoding::compress_to_vec(c, ruzstd::encoding::CompressionLevel::Fastest),
            2 => lz4_flex::compress(c),
            _ => panic!(),
        })
        .collect()
}

pub fn decompress_all(codec: u32, frames: &[Vec<u8>], chunk: usize) -> u64 {
    let mut out = vec![0u8; chunk];
    let mut total = 0u64;
    for f in frames {
        let n = match codec {
            #[cfg(feature = "zstd-c")]
            0 => zstd::bulk::decompress_to_buffer(f, &mut out).unwrap(),
            1 => {
                use std::io::Read;
                let mut d = ruzstd::decoding::StreamingDecoder::new(&f[..]).unwrap();
                let mut n = 0;
                loop {
                    let k = d.read(&mut out[n..]).unwrap();
                    if k == 0 { break; }
                    n += k;
                }
                n
            }
            2 => lz4_flex::decompress_into(f, &mut out).unwrap(),
            _ => panic!(),
        };
        total += n as u64;
    }
    total
}

// wasm32 exports: the page of memory for the input, and the measured call (timed by the caller).
#[cfg(target_arch = "wasm32")]
#[no_mangle]
pub extern "C" fn input(len: usize) -> *mut u8 {
    let v = vec![0u8; len];
    Box::leak(v.into_boxed_slice()).as_mut_ptr()
}

#[cfg(target_arch = "wasm32")]
#[no_mangle]
pub extern "C" fn stored(codec: u32, level: i32, ptr: *const u8, len: usize) -> f64 {
    let data = unsafe { std::slice::from_raw_parts(ptr, len) };
    stored_len(codec, level, data, 8192) as f64
}
