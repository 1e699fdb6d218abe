//! The Eternal Engine: harness-edge's checkpoint-chain core, behind a C ABI.
//!
//! This crate is std only. Its C ABI follows the rules in STYLE.md:
//! - names are `eternal_<noun>_<verb>`; handles are opaque and come with `_new`/`_free`;
//! - every fallible function returns an [`EternalStatus`] (0 = ok, values never reused) and writes
//!   its outputs through trailing out-pointers, only on success;
//! - only scalars and pointers cross the boundary, so cgo and purego calls are identical;
//! - input bytes are borrowed for the call (`ptr`, `len`; null with len 0 is empty);
//! - output bytes are owned by Rust and released only by [`eternal_buffer_free`];
//! - error messages come back through an out-parameter (a Rust-owned buffer), never a
//!   thread-local "last error", because a goroutine can move between OS threads between calls;
//! - every export runs inside [`ffi_boundary!`], which turns a panic into
//!   [`EternalStatus::Panic`].

#![deny(unsafe_op_in_unsafe_fn)]

pub mod chain;
pub mod delta;
pub mod hash;
mod paged;

pub use chain::eternal_record_info;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};

/// The ABI version. Both Go backends check it at load and refuse any other value. It grows by one
/// whenever an export changes signature or meaning.
pub const ETERNAL_ABI_VERSION: u32 = 2;

/// The status every fallible export returns. Values are permanent: a retired one stays reserved
/// in a comment and is never reused.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EternalStatus {
    /// Success; the out-pointers were written.
    Ok = 0,
    /// A required pointer was null (or a buffer pointer was null with a non-zero length).
    NullParameter = 1,
    /// A delta was malformed, truncated, or read outside its base.
    InvalidDelta = 2,
    /// A delta was made for a base of another length.
    BaseMismatch = 3,
    /// A result would exceed the limit the caller gave.
    TooLarge = 4,
    /// The engine panicked; the call had no effect on any handle's observable state.
    Panic = 5,
    /// A checkpoint record failed verification (out of sequence, bad delta, hash mismatch).
    InvalidRecord = 6,
}

/// Opaque delta encoder: reusable scratch (anchor tables) so that steady-state encoding
/// allocates only its output. Not thread-safe: one thread at a time per handle.
#[allow(non_camel_case_types)]
pub struct eternal_encoder {
    inner: delta::Encoder,
}

/// Opaque checkpoint chain of one harness: its current state, its head record, and scratch.
/// Not thread-safe: one thread at a time per handle.
#[allow(non_camel_case_types)]
pub struct eternal_chain {
    inner: chain::Chain,
}

/// Number of Rust-owned buffers handed out and not yet freed.
static LIVE_BUFFERS: AtomicU64 = AtomicU64::new(0);

/// Runs an export's body, turning a panic into [`EternalStatus::Panic`].
macro_rules! ffi_boundary {
    ($body:block) => {{
        match catch_unwind(AssertUnwindSafe(|| -> EternalStatus { $body })) {
            Ok(status) => status,
            Err(_) => EternalStatus::Panic,
        }
    }};
}

/// Returns [`EternalStatus::NullParameter`] from the enclosing closure when a pointer is null.
macro_rules! check_not_null {
    ($($p:expr),+ $(,)?) => {
        $(if $p.is_null() {
            return EternalStatus::NullParameter;
        })+
    };
}

/// Borrows `(ptr, len)` as a slice for the call; null with len 0 is the empty slice.
macro_rules! borrow_bytes {
    ($ptr:expr, $len:expr) => {{
        if $len == 0 {
            &[][..]
        } else if $ptr.is_null() {
            return EternalStatus::NullParameter;
        } else {
            // SAFETY: the caller promises `ptr` points at `len` readable bytes for the call.
            unsafe { std::slice::from_raw_parts($ptr, $len) }
        }
    }};
}

/// Hands `bytes` to the caller through `(out_ptr, out_len)` as a Rust-owned buffer.
///
/// # Safety
/// `out_ptr` and `out_len` must be valid for writes.
unsafe fn give(bytes: Vec<u8>, out_ptr: *mut *mut u8, out_len: *mut usize) {
    let boxed: Box<[u8]> = bytes.into_boxed_slice();
    let len = boxed.len();
    let ptr = Box::into_raw(boxed) as *mut u8;
    LIVE_BUFFERS.fetch_add(1, Ordering::Relaxed);
    // SAFETY: guaranteed by the caller.
    unsafe {
        *out_ptr = ptr;
        *out_len = len;
    }
}

/// Writes an error message through the optional `(out_err, out_err_len)` pair.
///
/// # Safety
/// Each pointer must be null or valid for writes.
unsafe fn give_error(msg: String, out_err: *mut *mut u8, out_err_len: *mut usize) {
    if !out_err.is_null() && !out_err_len.is_null() {
        // SAFETY: both checked non-null; the caller promises they are writable.
        unsafe { give(msg.into_bytes(), out_err, out_err_len) };
    }
}

/// Returns [`ETERNAL_ABI_VERSION`].
///
/// Safety: none required. Threads: any.
#[no_mangle]
pub extern "C" fn eternal_abi_version() -> u32 {
    ETERNAL_ABI_VERSION
}

/// Number of Rust-owned buffers (outputs and error messages) handed out and not yet freed.
/// Leak and double-free tests compare it before and after a workload.
///
/// Safety: none required. Threads: any.
#[no_mangle]
pub extern "C" fn eternal_live_buffers() -> u64 {
    LIVE_BUFFERS.load(Ordering::Relaxed)
}

/// Releases a buffer returned by the engine (a delta, a target, or an error message).
///
/// Arguments: `ptr` and `len` exactly as the engine returned them; a null `ptr` is ignored.
/// Safety: each buffer must be freed exactly once, with this function only (never `free`).
/// Threads: any; the buffer may be freed on another thread than the one that received it.
#[no_mangle]
pub unsafe extern "C" fn eternal_buffer_free(ptr: *mut u8, len: usize) {
    if ptr.is_null() {
        return;
    }
    let _ = catch_unwind(|| {
        // SAFETY: `ptr`/`len` came from `give`, which leaked a `Box<[u8]>` of exactly `len`.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, len)) });
        LIVE_BUFFERS.fetch_sub(1, Ordering::Relaxed);
    });
}

/// Creates a delta encoder.
///
/// Arguments: `out_encoder` receives the handle.
/// Returns: `Ok`, `NullParameter`, or `Panic`.
/// Safety: `out_encoder` must be valid for writes. Free the handle with [`eternal_encoder_free`].
/// Threads: the handle may move between threads but must not be used by two at once.
#[no_mangle]
pub unsafe extern "C" fn eternal_encoder_new(
    out_encoder: *mut *mut eternal_encoder,
) -> EternalStatus {
    ffi_boundary!({
        check_not_null!(out_encoder);
        let enc = Box::new(eternal_encoder {
            inner: delta::Encoder::new(),
        });
        // SAFETY: checked non-null above; the caller promises it is writable.
        unsafe { *out_encoder = Box::into_raw(enc) };
        EternalStatus::Ok
    })
}

/// Frees an encoder. A null handle is ignored.
///
/// Safety: `encoder` must come from [`eternal_encoder_new`] and be freed once; no call may be
/// using it concurrently.
#[no_mangle]
pub unsafe extern "C" fn eternal_encoder_free(encoder: *mut eternal_encoder) {
    if encoder.is_null() {
        return;
    }
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the handle came from `Box::into_raw` in `eternal_encoder_new`.
        drop(unsafe { Box::from_raw(encoder) });
    }));
}

/// Encodes a delta that rebuilds `target` from `base`.
///
/// Arguments: `encoder`; the base and target bytes (borrowed for the call); `out_delta` and
/// `out_delta_len` receive a Rust-owned buffer; `out_err`/`out_err_len` (both may be null)
/// receive a message on failure.
/// Returns: `Ok`, `NullParameter`, or `Panic`.
/// Safety: every non-null pointer must be valid for its length; outputs are written only on `Ok`
/// (the error message only on failure). Free every returned buffer with [`eternal_buffer_free`].
/// Threads: one call at a time per encoder.
#[no_mangle]
pub unsafe extern "C" fn eternal_delta_encode(
    encoder: *mut eternal_encoder,
    base: *const u8,
    base_len: usize,
    target: *const u8,
    target_len: usize,
    out_delta: *mut *mut u8,
    out_delta_len: *mut usize,
    out_err: *mut *mut u8,
    out_err_len: *mut usize,
) -> EternalStatus {
    ffi_boundary!({
        check_not_null!(encoder, out_delta, out_delta_len);
        let base = borrow_bytes!(base, base_len);
        let target = borrow_bytes!(target, target_len);
        // SAFETY: a live handle from `eternal_encoder_new`, used by one thread at a time.
        let enc = unsafe { &mut *encoder };
        let mut out = Vec::with_capacity(64);
        enc.inner.encode(base, target, &mut out);
        let _ = (out_err, out_err_len); // encoding cannot fail on valid pointers
                                        // SAFETY: checked non-null above.
        unsafe { give(out, out_delta, out_delta_len) };
        EternalStatus::Ok
    })
}

fn delta_status(e: &delta::DeltaError) -> EternalStatus {
    match e {
        delta::DeltaError::Invalid { .. } => EternalStatus::InvalidDelta,
        delta::DeltaError::BaseMismatch { .. } => EternalStatus::BaseMismatch,
        delta::DeltaError::TooLarge { .. } => EternalStatus::TooLarge,
    }
}

/// Validates a delta in full, without producing its target, and returns the target's length.
/// Callers size the output buffer for [`eternal_delta_apply`] from it, so a forged length never
/// makes them allocate.
///
/// Arguments: `base_len`, the length of the base the delta will be applied to; the delta bytes
/// (borrowed for the call); `max_target_len`, the largest target the caller accepts;
/// `out_target_len` receives the target's length; `out_err`/`out_err_len` (both may be null)
/// receive a Rust-owned message on failure.
/// Returns: `Ok`, `NullParameter`, `InvalidDelta`, `BaseMismatch`, `TooLarge`, or `Panic`.
/// Safety: every non-null pointer must be valid for its length. Threads: any; no shared state.
#[no_mangle]
pub unsafe extern "C" fn eternal_delta_check(
    base_len: usize,
    delta: *const u8,
    delta_len: usize,
    max_target_len: usize,
    out_target_len: *mut usize,
    out_err: *mut *mut u8,
    out_err_len: *mut usize,
) -> EternalStatus {
    ffi_boundary!({
        check_not_null!(out_target_len);
        let delta = borrow_bytes!(delta, delta_len);
        match delta::check(base_len, delta, max_target_len) {
            Ok(n) => {
                // SAFETY: checked non-null above.
                unsafe { *out_target_len = n };
                EternalStatus::Ok
            }
            Err(e) => {
                // SAFETY: each pointer is null or writable, per the contract.
                unsafe { give_error(e.to_string(), out_err, out_err_len) };
                delta_status(&e)
            }
        }
    })
}

/// Applies a delta to `base`, writing the target into the caller's buffer.
///
/// Arguments: the base and delta bytes (borrowed for the call); `out`/`out_cap`, a caller-owned
/// buffer of at least the target's length (from [`eternal_delta_check`]), which must not overlap
/// the base or the delta; `out_len` receives the target's length; `out_err`/`out_err_len` (both
/// may be null) receive a Rust-owned message on failure.
/// Returns: `Ok`, `NullParameter`, `InvalidDelta`, `BaseMismatch`, `TooLarge` (the buffer is too
/// small), or `Panic`. Every op is validated before it writes; on failure the buffer may hold a
/// partial target.
/// Safety: as for [`eternal_delta_encode`]; `out` writable for `out_cap` bytes for the call.
/// Threads: any; no shared state.
#[no_mangle]
pub unsafe extern "C" fn eternal_delta_apply(
    base: *const u8,
    base_len: usize,
    delta: *const u8,
    delta_len: usize,
    out: *mut u8,
    out_cap: usize,
    out_len: *mut usize,
    out_err: *mut *mut u8,
    out_err_len: *mut usize,
) -> EternalStatus {
    ffi_boundary!({
        check_not_null!(out_len);
        let base = borrow_bytes!(base, base_len);
        let delta = borrow_bytes!(delta, delta_len);
        let out: &mut [u8] = if out_cap == 0 {
            &mut []
        } else if out.is_null() {
            return EternalStatus::NullParameter;
        } else {
            // SAFETY: the caller promises `out` is writable for `out_cap` bytes and overlaps
            // neither input.
            unsafe { std::slice::from_raw_parts_mut(out, out_cap) }
        };
        match delta::apply_into(base, delta, out) {
            Ok(n) => {
                // SAFETY: checked non-null above.
                unsafe { *out_len = n };
                EternalStatus::Ok
            }
            Err(e) => {
                // SAFETY: each pointer is null or writable, per the contract.
                unsafe { give_error(e.to_string(), out_err, out_err_len) };
                delta_status(&e)
            }
        }
    })
}

/// Creates an empty checkpoint chain.
///
/// Arguments: `max_replay`, the most deltas that may follow a keyframe (0: the default, 1000);
/// `max_delta_pct`, the delta bytes since the last keyframe allowed as a percentage of the
/// state's size before a keyframe is forced (0: the default, 200); `out_chain` receives the handle.
/// Returns: `Ok`, `NullParameter`, or `Panic`.
/// Safety: `out_chain` writable. Free the handle with [`eternal_chain_free`].
/// Threads: the handle may move between threads but must not be used by two at once.
#[no_mangle]
pub unsafe extern "C" fn eternal_chain_new(
    max_replay: u32,
    max_delta_pct: u32,
    out_chain: *mut *mut eternal_chain,
) -> EternalStatus {
    ffi_boundary!({
        check_not_null!(out_chain);
        let d = chain::Policy::default();
        let policy = chain::Policy {
            max_replay: if max_replay == 0 {
                d.max_replay
            } else {
                max_replay
            },
            max_delta_pct: if max_delta_pct == 0 {
                d.max_delta_pct
            } else {
                max_delta_pct
            },
        };
        let h = Box::new(eternal_chain {
            inner: chain::Chain::new(policy),
        });
        // SAFETY: checked non-null above.
        unsafe { *out_chain = Box::into_raw(h) };
        EternalStatus::Ok
    })
}

/// Frees a chain. A null handle is ignored.
///
/// Safety: `chain` must come from [`eternal_chain_new`], be freed once, and not be in use.
#[no_mangle]
pub unsafe extern "C" fn eternal_chain_free(chain: *mut eternal_chain) {
    if chain.is_null() {
        return;
    }
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the handle came from `Box::into_raw` in `eternal_chain_new`.
        drop(unsafe { Box::from_raw(chain) });
    }));
}

/// Makes the next record of the chain for a new state.
///
/// Arguments: `chain`; the new state's canonical bytes (borrowed for the call); `prefix_hint`,
/// how many leading bytes the caller knows are unchanged since the previous state (0 when it
/// knows nothing; a wrong hint corrupts the chain); `insert_hint`, how many bytes after that
/// prefix the caller knows are new, the rest of the previous state following them (0 when it
/// knows nothing; advice: a wrong hint costs only bytes); `out_info` receives the record's header;
/// `out_payload`/`out_payload_len` receive the payload (Rust-owned: free it with
/// [`eternal_buffer_free`]); `out_err`/`out_err_len` (may be null) receive a message on failure.
/// Returns: `Ok`, `NullParameter`, or `Panic`.
/// Safety: every non-null pointer valid for its length. Threads: one call at a time per chain.
#[no_mangle]
pub unsafe extern "C" fn eternal_chain_append(
    chain: *mut eternal_chain,
    state: *const u8,
    state_len: usize,
    prefix_hint: usize,
    insert_hint: usize,
    out_info: *mut eternal_record_info,
    out_payload: *mut *mut u8,
    out_payload_len: *mut usize,
    out_err: *mut *mut u8,
    out_err_len: *mut usize,
) -> EternalStatus {
    ffi_boundary!({
        check_not_null!(chain, out_info, out_payload, out_payload_len);
        let state = borrow_bytes!(state, state_len);
        // SAFETY: a live handle, used by one thread at a time.
        let c = unsafe { &mut *chain };
        let (info, payload) = c.inner.append_inserted(state, prefix_hint, insert_hint);
        let _ = (out_err, out_err_len); // appending cannot fail on valid pointers
                                        // SAFETY: checked non-null above.
        unsafe {
            *out_info = info;
            give(payload, out_payload, out_payload_len);
        }
        EternalStatus::Ok
    })
}

/// Replays one record onto the chain, verifying sequence, delta, state hash and chain hash. A
/// keyframe may start an empty chain; every other record must follow the head.
///
/// Arguments: `chain`; `info`, the record's header; the payload (borrowed for the call);
/// `out_err`/`out_err_len` (may be null) receive a message on failure.
/// Returns: `Ok`, `NullParameter`, `InvalidRecord` (the chain is then reset to empty), or `Panic`.
/// Safety: every non-null pointer valid for its length. Threads: one call at a time per chain.
#[no_mangle]
pub unsafe extern "C" fn eternal_chain_push(
    chain: *mut eternal_chain,
    info: *const eternal_record_info,
    payload: *const u8,
    payload_len: usize,
    out_err: *mut *mut u8,
    out_err_len: *mut usize,
) -> EternalStatus {
    ffi_boundary!({
        check_not_null!(chain, info);
        let payload = borrow_bytes!(payload, payload_len);
        // SAFETY: a live handle used by one thread at a time; `info` readable for the call.
        let (c, info) = unsafe { (&mut *chain, &*info) };
        match c.inner.push(info, payload) {
            Ok(()) => EternalStatus::Ok,
            Err(e) => {
                // SAFETY: each pointer is null or writable, per the contract.
                unsafe { give_error(e.to_string(), out_err, out_err_len) };
                EternalStatus::InvalidRecord
            }
        }
    })
}

/// Writes the head record's header (all zero for an empty chain); its `state_len` sizes the
/// buffer for [`eternal_chain_state`].
///
/// Returns: `Ok`, `NullParameter`, or `Panic`. Threads: one call at a time per chain.
/// Safety: `chain` live; `out_info` writable.
#[no_mangle]
pub unsafe extern "C" fn eternal_chain_head(
    chain: *const eternal_chain,
    out_info: *mut eternal_record_info,
) -> EternalStatus {
    ffi_boundary!({
        check_not_null!(chain, out_info);
        // SAFETY: live handle; checked non-null.
        unsafe { *out_info = (*chain).inner.head() };
        EternalStatus::Ok
    })
}

/// Copies the chain's current state into the caller's buffer.
///
/// Arguments: `chain`; `out`/`out_cap`, a caller-owned buffer; `out_len` receives the state's
/// length. Returns: `Ok`, `NullParameter`, `TooLarge` (the buffer is too small), or `Panic`.
/// Safety: `out` writable for `out_cap` bytes. Threads: one call at a time per chain.
#[no_mangle]
pub unsafe extern "C" fn eternal_chain_state(
    chain: *const eternal_chain,
    out: *mut u8,
    out_cap: usize,
    out_len: *mut usize,
) -> EternalStatus {
    ffi_boundary!({
        check_not_null!(chain, out_len);
        // SAFETY: live handle.
        let state = unsafe { (*chain).inner.state() };
        if state.len() > out_cap {
            return EternalStatus::TooLarge;
        }
        if !state.is_empty() {
            check_not_null!(out);
            // SAFETY: `out` writable for `out_cap` >= `state.len()` bytes and not overlapping.
            unsafe { std::ptr::copy_nonoverlapping(state.as_ptr(), out, state.len()) };
        }
        // SAFETY: checked non-null above.
        unsafe { *out_len = state.len() };
        EternalStatus::Ok
    })
}

/// Computes the XXH64 (seed 0) content hash of `data`.
///
/// Arguments: the bytes (borrowed for the call); `out_hash` receives the hash.
/// Returns: `Ok`, `NullParameter`, or `Panic`.
/// Safety: `data` valid for `len` bytes (or null with 0); `out_hash` writable. Threads: any.
#[no_mangle]
pub unsafe extern "C" fn eternal_hash64(
    data: *const u8,
    len: usize,
    out_hash: *mut u64,
) -> EternalStatus {
    ffi_boundary!({
        check_not_null!(out_hash);
        let data = borrow_bytes!(data, len);
        // SAFETY: checked non-null above.
        unsafe { *out_hash = hash::xxh64(data) };
        EternalStatus::Ok
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ptr::{null, null_mut};

    #[test]
    fn boundary_turns_panics_into_status() {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let status = ffi_boundary!({
            if eternal_abi_version() == ETERNAL_ABI_VERSION {
                panic!("engine bug");
            }
            EternalStatus::Ok
        });
        std::panic::set_hook(prev);
        assert_eq!(status, EternalStatus::Panic);
    }

    #[test]
    fn null_parameters_are_refused() {
        unsafe {
            assert_eq!(
                eternal_encoder_new(null_mut()),
                EternalStatus::NullParameter
            );
            let mut h = 0u64;
            assert_eq!(
                eternal_hash64(null(), 3, &mut h),
                EternalStatus::NullParameter
            );
            assert_eq!(eternal_hash64(null(), 0, &mut h), EternalStatus::Ok);
            assert_eq!(h, hash::xxh64(b""));
            let mut n = 0usize;
            assert_eq!(
                eternal_delta_check(0, null(), 5, 10, &mut n, null_mut(), null_mut()),
                EternalStatus::NullParameter
            );
            assert_eq!(
                eternal_delta_apply(
                    null(),
                    0,
                    null(),
                    0,
                    null_mut(),
                    5,
                    &mut n,
                    null_mut(),
                    null_mut()
                ),
                EternalStatus::NullParameter
            );
        }
    }

    #[test]
    fn encode_apply_through_the_abi_frees_every_buffer() {
        let base = b"hello, eternal world".repeat(100);
        let mut target = base.clone();
        target.extend_from_slice(b" and more");
        let before = eternal_live_buffers();
        unsafe {
            let mut enc = null_mut();
            assert_eq!(eternal_encoder_new(&mut enc), EternalStatus::Ok);
            let (mut d, mut dn) = (null_mut(), 0usize);
            let st = eternal_delta_encode(
                enc,
                base.as_ptr(),
                base.len(),
                target.as_ptr(),
                target.len(),
                &mut d,
                &mut dn,
                null_mut(),
                null_mut(),
            );
            assert_eq!(st, EternalStatus::Ok);
            let mut tn = 0usize;
            let st = eternal_delta_check(
                base.len(),
                d,
                dn,
                usize::MAX,
                &mut tn,
                null_mut(),
                null_mut(),
            );
            assert_eq!(st, EternalStatus::Ok);
            assert_eq!(tn, target.len());
            let mut t = vec![0u8; tn];
            let mut written = 0usize;
            let st = eternal_delta_apply(
                base.as_ptr(),
                base.len(),
                d,
                dn,
                t.as_mut_ptr(),
                t.len(),
                &mut written,
                null_mut(),
                null_mut(),
            );
            assert_eq!(st, EternalStatus::Ok);
            assert_eq!(written, target.len());
            assert_eq!(t, target);
            // A buffer one byte short is refused.
            let st = eternal_delta_apply(
                base.as_ptr(),
                base.len(),
                d,
                dn,
                t.as_mut_ptr(),
                t.len() - 1,
                &mut written,
                null_mut(),
                null_mut(),
            );
            assert_eq!(st, EternalStatus::TooLarge);
            // A bad delta yields a message buffer, and no length.
            let (mut e, mut en) = (null_mut(), 0usize);
            let mut tn2 = 12345usize;
            let st =
                eternal_delta_check(base.len(), d, dn - 1, usize::MAX, &mut tn2, &mut e, &mut en);
            assert_eq!(st, EternalStatus::InvalidDelta);
            assert_eq!(tn2, 12345, "outputs are written only on success");
            let msg = String::from_utf8_lossy(std::slice::from_raw_parts(e, en)).into_owned();
            assert!(msg.contains("invalid delta"), "{msg}");
            assert_eq!(eternal_live_buffers(), before + 2);
            eternal_buffer_free(d, dn);
            eternal_buffer_free(e, en);
            eternal_encoder_free(enc);
        }
        assert_eq!(eternal_live_buffers(), before);
    }

    #[test]
    fn header_matches_crate() {
        let h = include_str!("../include/eternal.h");
        let want = format!(
            "#define ETERNAL_CRATE_VERSION \"{}\"",
            env!("CARGO_PKG_VERSION")
        );
        assert!(
            h.contains(&want),
            "include/eternal.h lacks `{want}`: update cbindgen.toml"
        );
        let abi = format!("#define ETERNAL_ABI_VERSION {ETERNAL_ABI_VERSION}");
        assert!(
            h.contains(&abi),
            "include/eternal.h lacks `{abi}`: run `make header`"
        );
    }
}
