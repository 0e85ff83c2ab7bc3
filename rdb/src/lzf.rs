//! LZF through Redis's own liblzf (vendor/lzf, compiled by build.rs).

use std::os::raw::c_void;

extern "C" {
    fn lzf_compress(
        in_data: *const c_void,
        in_len: usize,
        out_data: *mut c_void,
        out_len: usize,
    ) -> usize;
    fn lzf_decompress(
        in_data: *const c_void,
        in_len: usize,
        out_data: *mut c_void,
        out_len: usize,
    ) -> usize;
}

/// rdbSaveLzfStringObject's attempt: the compressed form when it fits in
/// `len - 4` bytes (else it is not worth it), None otherwise.
pub fn compress(input: &[u8]) -> Option<Vec<u8>> {
    let len = input.len();
    if len <= 4 {
        return None;
    }
    let mut out = vec![0u8; input.len() - 4];
    // SAFETY: both buffers are valid for the lengths passed; liblzf writes
    // at most `out_len` bytes and returns 0 when they do not suffice.
    let written =
        unsafe { lzf_compress(input.as_ptr().cast(), len, out.as_mut_ptr().cast(), len - 4) };
    if written == 0 {
        return None;
    }
    out.truncate(written);
    Some(out)
}

/// Decompresses to exactly `plain_len` bytes; None when the data is
/// corrupt or does not come out at that length.
pub fn decompress(input: &[u8], plain_len: usize) -> Option<Vec<u8>> {
    let (in_len, out_len) = (input.len(), plain_len);
    let mut out = vec![0u8; plain_len];
    // SAFETY: both buffers are valid for the lengths passed; liblzf is built
    // with CHECK_INPUT, so corrupt input cannot make it read past `in_len`
    // or write past `out_len` (it returns 0 instead).
    let written = unsafe {
        lzf_decompress(
            input.as_ptr().cast(),
            in_len,
            out.as_mut_ptr().cast(),
            out_len,
        )
    };
    (written == plain_len).then_some(out)
}
