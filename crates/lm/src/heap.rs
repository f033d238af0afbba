//! The C heap libtorch takes its tensors from. glibc's malloc serves every block above a dynamic
//! threshold (at most 32 MB) with a fresh mmap and unmaps it on free, so each training step and
//! each scoring batch faults in and zeroes its large activations again: profiled (`just profile
//! train`), 16% of a bf16 training step ran in the kernel, most of it page faults and page
//! clearing. [`keep_freed_memory`] has malloc serve blocks below 1 GB from its heap and keep what
//! is freed for the next step. It changes where tensors live, never a value.
use std::sync::Once;

/// Sets glibc's mmap threshold to 1 GB and its trim threshold to 1 GB (once per process; a no-op
/// off glibc). Call it before the first tensor is made.
pub fn keep_freed_memory() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        // SAFETY: mallopt only sets two of malloc's parameters; valid at any time.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 30);
            libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
        }
    });
}
