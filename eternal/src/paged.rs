//! Room for a large buffer, its pages mapped in ahead of use.
//!
//! A replay copies a whole keyframe (megabytes) into the chain's state at once. Left to itself,
//! the kernel maps the fresh buffer in one page fault per 4 KiB as the copy first writes it, and
//! on virtual machines a page fault costs more than the copy (about 14 µs each where we measure,
//! 2.5 ms per megabyte). One `madvise(MADV_POPULATE_WRITE)` maps the whole range in at once.

/// Buffers from this size up are mapped in ahead of use.
const MIN: usize = 1 << 20;

/// The alignment of the range given to madvise: a multiple of every page size Linux uses.
const ALIGN: usize = 64 << 10;

/// Makes room for `additional` more bytes in `v`, as `Vec::reserve` does; a new allocation of
/// [`MIN`] bytes or more has its pages mapped in before it is written.
pub fn reserve(v: &mut Vec<u8>, additional: usize) {
    if v.capacity() - v.len() >= additional {
        return;
    }
    v.reserve(additional);
    let spare = v.spare_capacity_mut();
    if spare.len() >= MIN {
        populate(spare.as_mut_ptr() as usize, spare.len());
    }
}

#[cfg(target_os = "linux")]
fn populate(addr: usize, len: usize) {
    /// Linux 5.14 and later; older kernels answer EINVAL and the pages fault in as before.
    const MADV_POPULATE_WRITE: i32 = 23;
    extern "C" {
        fn madvise(addr: *mut u8, len: usize, advice: i32) -> i32;
    }
    let start = (addr + ALIGN - 1) & !(ALIGN - 1);
    let end = (addr + len) & !(ALIGN - 1);
    if end > start {
        // SAFETY: [start, end) lies inside the vector's allocation; populating pages of anonymous
        // memory changes no byte of it. The result is advice only, and a refusal is harmless.
        unsafe {
            madvise(start as *mut u8, end - start, MADV_POPULATE_WRITE);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn populate(_addr: usize, _len: usize) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserve_gives_room_and_keeps_the_bytes() {
        let mut v = b"head".to_vec();
        reserve(&mut v, 3 << 20);
        assert!(v.capacity() - v.len() >= 3 << 20);
        assert_eq!(v, b"head");
        v.resize(v.len() + (3 << 20), 7);
        assert_eq!(&v[..4], b"head");
        assert!(v[4..].iter().all(|&b| b == 7));
        let cap = v.capacity();
        reserve(&mut v, 0);
        assert_eq!(v.capacity(), cap, "no new allocation when there is room");
    }

    #[cfg(target_os = "linux")]
    extern "C" {
        fn mincore(addr: *mut u8, len: usize, vec: *mut u8) -> i32;
        fn getpagesize() -> i32;
        fn mmap(addr: *mut u8, len: usize, prot: i32, flags: i32, fd: i32, off: i64) -> *mut u8;
        fn munmap(addr: *mut u8, len: usize) -> i32;
        fn madvise(addr: *mut u8, len: usize, advice: i32) -> i32;
    }

    /// The pages of [start, end) that are mapped in, and how many pages it has.
    #[cfg(target_os = "linux")]
    fn resident(start: usize, end: usize) -> (usize, usize) {
        // SAFETY: getpagesize has no preconditions.
        let page = unsafe { getpagesize() } as usize;
        let pages = (end - start) / page;
        let mut vec = vec![0u8; pages];
        // SAFETY: [start, end) is mapped and page-aligned; vec has a byte per page.
        let r = unsafe { mincore(start as *mut u8, end - start, vec.as_mut_ptr()) };
        assert_eq!(r, 0, "mincore failed");
        (vec.iter().filter(|&&b| b & 1 == 1).count(), pages)
    }

    /// Whether the kernel maps pages in on MADV_POPULATE_WRITE, probed on a mapping of its own
    /// (not through populate, which the test checks). Linux before 5.14 refuses it; an emulator
    /// such as qemu-user takes the advice and ignores it.
    #[cfg(target_os = "linux")]
    fn populate_honoured() -> bool {
        const PROT_READ_WRITE: i32 = 0x1 | 0x2;
        const MAP_PRIVATE_ANONYMOUS: i32 = 0x02 | 0x20;
        let n = 1 << 20;
        // SAFETY: a fresh private anonymous mapping, unmapped before returning.
        unsafe {
            let p = mmap(
                std::ptr::null_mut(),
                n,
                PROT_READ_WRITE,
                MAP_PRIVATE_ANONYMOUS,
                -1,
                0,
            );
            if p as isize == -1 {
                return false;
            }
            let ok = madvise(p, n, 23) == 0 && {
                let (mapped, pages) = resident(p as usize, p as usize + n);
                mapped == pages
            };
            munmap(p, n);
            ok
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_new_large_buffer_is_mapped_in() {
        if !populate_honoured() {
            eprintln!("MADV_POPULATE_WRITE is refused or ignored here: pages fault in as written");
            return;
        }
        let n = 8 << 20;
        let mut v: Vec<u8> = Vec::new();
        reserve(&mut v, n);
        let p = v.as_mut_ptr() as usize;
        let start = (p + ALIGN - 1) & !(ALIGN - 1);
        let end = (p + n) & !(ALIGN - 1);
        let (mapped, pages) = resident(start, end);
        assert_eq!(mapped, pages, "pages of the aligned range mapped in");
    }
}
