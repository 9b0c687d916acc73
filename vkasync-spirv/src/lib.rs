//! SPIR-V support shared by [vkasync](https://docs.rs/vkasync) (at run time) and
//! [vkasync-build](https://docs.rs/vkasync-build) (at build time).
//!
//! - [`reflect`]: the small reader both use to check a dispatch against its kernel: storage and
//!   uniform bindings of descriptor set 0, which of them are read-only, the push-constant
//!   block's size and the workgroup size. Pure Rust, no dependencies.
//! - `validate` (feature `validate`): SPIRV-Tools' validator with Vulkan 1.2 rules. It is not
//!   a separate dependency: SPIRV-Tools comes from the native libraries the `shaderc` crate links
//!   (the Vulkan SDK, a source build of shaderc, or Debian's and Ubuntu's `libshaderc-dev` with
//!   the `glslang-dev` and `spirv-tools` archives beside it; see this crate's `build.rs`).
//!
//! ```
//! // The smallest valid module is still not a compute kernel this reader accepts.
//! assert!(vkasync_spirv::reflect::reflect(&[]).is_err());
//! ```

#![warn(missing_docs)]

pub mod reflect;
#[cfg(feature = "validate")]
pub mod validate;

// The validator's C functions come from the native libraries shaderc-sys links. Nothing here
// names a Rust item of shaderc-sys, and a crate that is never named is not linked: where
// SPIRV-Tools lives only in shaderc-sys's combined archive (a source build of shaderc, the
// Vulkan SDK), `spvValidateBinary` would be undefined. So there (the build script says where)
// it is named. Not on Debian and Ubuntu, whose SPIRV-Tools the build script links itself: there
// shaderc-sys would also bring the system's under-linked `libshaderc.so`.
#[cfg(all(feature = "validate", vkasync_link_shaderc_sys))]
use shaderc_sys as _;
