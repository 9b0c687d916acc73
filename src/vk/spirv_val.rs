//! Full SPIR-V validation of run-time modules with the validator of SPIRV-Tools, before any
//! driver sees them.
//!
//! # Why
//! [`crate::vk::spirv::reflect`] reads only the instructions vkasync needs. Drivers and the validation
//! layer assume valid SPIR-V: `kernels::MIX` with one `OpFunction` turned into
//! `OpFunctionParameter` segfaults in lavapipe's `vkCreateComputePipelines`, and without its final
//! `OpFunctionEnd` it segfaults in the validation layer (and is accepted without it). So every
//! module given to a safe constructor ([`crate::Kernel::from_words`] and
//! [`crate::Kernel::from_spirv`]) goes through `spvValidateBinary` first.
//!
//! # How
//! - The validator is `vkasync_spirv::validate`: SPIRV-Tools' `spvValidateBinary`, taken from the
//!   native libraries that the `shaderc` crate links for the build helper (the Vulkan SDK, a
//!   source build of shaderc, or the Debian/Ubuntu archives beside `libshaderc-dev`), so a crate
//!   using vkasync needs nothing beyond what its build needs. Pure-Rust readers (naga, rspirv)
//!   reject valid modules or accept broken ones (see `DESIGN-NOTES.md`).
//! - It is the cargo feature `spirv-validation` (on by default). Without it, binaries carry no
//!   SPIRV-Tools (smaller, and they link for targets where no shaderc library exists, such as
//!   `x86_64-pc-windows-gnu` built on Linux), and the safe constructors refuse every run-time
//!   module with [`Error::ValidationUnavailable`] instead of handing unchecked words to a driver.
//!   Build-time kernels are unaffected (validated by the build helper).
//! - The environment is `SPV_ENV_VULKAN_1_2` (SPIR-V up to 1.5): the instance is created for
//!   Vulkan 1.2, which is also what `build.rs` compiles for.
//! - The header promises no thread safety for a shared `spv_context` (the C++ wrapper gives only
//!   the "basic" guarantee), so each call creates and destroys its own context; that costs far less
//!   than the validation itself (see README, "What works", for the measured cost).
//! - The validator does not know the device: capabilities, extensions and the workgroup size are
//!   checked against the device in [`crate::vk::spirv_caps`].
//! - Build-time kernels (`crate::kernels`) are validated by `build.rs` with the same library, so
//!   [`crate::Kernel::new`] does not validate them again.

use crate::error::{Error, Result};

/// Rules that the validator of SPIRV-Tools 2023.1 does not check but Mesa relies on (found by the
/// fuzz test in `tests/spirv_safety.rs`; each crashed or failed in lavapipe):
/// - the header's schema word must be 0 (SPIR-V 2.3, "Physical Layout");
/// - a compute shader has no user-defined interface: every `Input` or `Output` variable must be a
///   built-in (decorated `BuiltIn`, or a block whose members are). Without its `BuiltIn`
///   decoration, MIX's `gl_GlobalInvocationID` segfaulted a lavapipe worker thread;
/// - the compute built-ins have their declared types (3 × 32-bit int or a 32-bit int): MIX's
///   `gl_GlobalInvocationID` decorated `LocalInvocationIndex` segfaulted lavapipe too;
/// - one decoration of a kind per target (or per struct member): with two `Binding`s on one
///   buffer, reflection and the driver could disagree on the binding (it segfaulted lavapipe).
///
/// Reads only instructions whose length fits; malformed streams are left to the validator.
fn missed_rules(words: &[u32]) -> Result<()> {
    const OP_TYPE_POINTER: u32 = 32;
    const OP_VARIABLE: u32 = 59;
    const OP_DECORATE: u32 = 71;
    const OP_MEMBER_DECORATE: u32 = 72;
    const DEC_BUILT_IN: u32 = 11;
    const SC_INPUT: u32 = 1;
    const SC_OUTPUT: u32 = 3;
    if let Some(&schema) = words.get(4) {
        if schema != 0 {
            return Err(Error::InvalidSpirv(format!("the header's schema word is {schema:#x}; it must be 0")));
        }
    }
    const OP_TYPE_INT: u32 = 21;
    const OP_TYPE_VECTOR: u32 = 23;
    let mut builtin: std::collections::HashSet<u32> = Default::default();
    let mut builtin_of: Vec<(u32, u32)> = Vec::new();
    let mut int32: std::collections::HashSet<u32> = Default::default();
    let mut decorated: std::collections::HashSet<(u32, u32, u32)> = Default::default();
    let mut vectors: std::collections::HashMap<u32, (u32, u32)> = Default::default();
    let mut pointee: std::collections::HashMap<u32, u32> = Default::default();
    let mut interface: Vec<(u32, u32, u32)> = Vec::new();
    let mut i = 5;
    while i < words.len() {
        let count = (words[i] >> 16) as usize;
        if count == 0 || i + count > words.len() {
            break;
        }
        let ops = &words[i + 1..i + count];
        let once = match (words[i] & 0xffff, ops) {
            (OP_DECORATE, [id, dec, ..]) => Some((*id, u32::MAX, *dec)),
            (OP_MEMBER_DECORATE, [id, member, dec, ..]) => Some((*id, *member, *dec)),
            _ => None,
        };
        // UserSemantic (5635) and UserTypeGOOGLE (5636) may repeat.
        if let Some(key @ (id, _, dec)) = once.filter(|k| k.2 != 5635 && k.2 != 5636) {
            if !decorated.insert(key) {
                return Err(Error::InvalidSpirv(format!("%{id} has decoration {dec} more than once")));
            }
        }
        match (words[i] & 0xffff, ops) {
            (OP_DECORATE, [id, DEC_BUILT_IN, which, ..]) => {
                builtin.insert(*id);
                builtin_of.push((*id, *which));
            }
            (OP_MEMBER_DECORATE, [id, _, DEC_BUILT_IN, ..]) => {
                builtin.insert(*id);
            }
            (OP_TYPE_INT, [id, 32, ..]) => {
                int32.insert(*id);
            }
            (OP_TYPE_VECTOR, [id, component, n, ..]) => {
                vectors.insert(*id, (*component, *n));
            }
            (OP_TYPE_POINTER, [id, _, ty, ..]) => {
                pointee.insert(*id, *ty);
            }
            (OP_VARIABLE, [ty, id, class @ (SC_INPUT | SC_OUTPUT), ..]) => interface.push((*ty, *id, *class)),
            _ => {}
        }
        i += count;
    }
    let var_types: std::collections::HashMap<u32, u32> =
        interface.iter().filter_map(|&(ty, id, _)| Some((id, *pointee.get(&ty)?))).collect();
    for (id, which) in builtin_of {
        let Some(&ty) = var_types.get(&id) else { continue };
        // NumWorkgroups, WorkgroupSize, WorkgroupId, LocalInvocationId, GlobalInvocationId: uvec3;
        // LocalInvocationIndex, SubgroupSize, NumSubgroups, SubgroupId, SubgroupLocalInvocationId: uint.
        let fits = match which {
            24..=28 => vectors.get(&ty).is_some_and(|&(c, n)| n == 3 && int32.contains(&c)),
            29 | 36 | 38 | 40 | 41 => int32.contains(&ty),
            _ => true,
        };
        if !fits {
            return Err(Error::InvalidSpirv(format!("built-in {which} on %{id} has the wrong type")));
        }
    }
    for (ty, id, class) in interface {
        let block_builtin = pointee.get(&ty).is_some_and(|t| builtin.contains(t));
        if !builtin.contains(&id) && !block_builtin {
            let class = if class == SC_INPUT { "Input" } else { "Output" };
            return Err(Error::InvalidSpirv(format!(
                "{class} variable %{id} is not a built-in; compute shaders have no user-defined interface"
            )));
        }
    }
    Ok(())
}

/// Validates a whole module for Vulkan 1.2. The validator's message (with the word index it
/// points at) becomes an [`Error::InvalidSpirv`]; a build without a validator refuses every
/// module with [`Error::ValidationUnavailable`].
pub(crate) fn validate(words: &[u32]) -> Result<()> {
    missed_rules(words)?;
    #[cfg(feature = "spirv-validation")]
    return vkasync_spirv::validate::validate(words).map_err(|e| Error::InvalidSpirv(format!("spirv-val: {}", e.0)));
    #[cfg(not(feature = "spirv-validation"))]
    Err(Error::ValidationUnavailable)
}

#[cfg(all(test, feature = "spirv-validation"))]
mod tests {
    use super::validate;
    use crate::kernels;

    #[test]
    fn accepts_every_build_time_kernel_and_times_it() {
        for k in kernels::ALL {
            validate(k.spirv).unwrap_or_else(|e| panic!("{}: {e}", k.path));
            let runs = 20;
            let t = std::time::Instant::now();
            for _ in 0..runs {
                validate(k.spirv).unwrap();
            }
            let us = t.elapsed().as_secs_f64() * 1e6 / runs as f64;
            println!("spirv-val {:<24} {:>6} words: {us:>8.1} µs", k.name, k.spirv.len());
        }
    }

    #[test]
    fn rejects_a_module_without_its_final_function_end() {
        let words = &kernels::MIX.spirv[..kernels::MIX.spirv.len() - 1];
        let err = validate(words).unwrap_err().to_string();
        assert!(err.contains("spirv-val"), "{err}");
        assert!(validate(&[]).is_err());
        assert!(validate(&[0x0723_0203]).is_err());
    }
}
