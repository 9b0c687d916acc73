//! SPIR-V reflection. The reader is `vkasync_spirv::reflect`, shared with the build helper `vkasync-build` (which
//! reflects kernels at build time); here its errors become [`Error::InvalidSpirv`].

use crate::error::{Error, Result};

pub use vkasync_spirv::reflect::{BindingInfo, BindingKind, Reflection};

/// Reads what vkasync needs from a SPIR-V module.
pub(crate) fn reflect(words: &[u32]) -> Result<Reflection> {
    vkasync_spirv::reflect::reflect(words).map_err(|e| Error::InvalidSpirv(e.0))
}

/// Turns bytes into words, checking length and alignment.
pub(crate) fn words_from_bytes(bytes: &[u8]) -> Result<Vec<u32>> {
    vkasync_spirv::reflect::words_from_bytes(bytes).map_err(|e| Error::InvalidSpirv(e.0))
}
