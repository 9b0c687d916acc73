//! SPIRV-Tools' validator (`spvValidateBinary`) for Vulkan 1.2 modules.
//!
//! The few C functions below are declared from SPIRV-Tools' `libspirv.h`. The header promises
//! no thread safety for a shared `spv_context`, so each call creates and destroys its own; that
//! costs far less than the validation itself.
//!
//! ```
//! // Not a module: the header alone is rejected.
//! let err = vkasync_spirv::validate::validate(&[0x0723_0203]).unwrap_err();
//! assert!(!err.0.is_empty());
//! ```

use crate::reflect::InvalidSpirv;
use std::ffi::{c_char, c_int, c_void, CStr};

/// `spv_position_t`.
#[repr(C)]
struct SpvPosition {
    line: usize,
    column: usize,
    index: usize,
}

/// `spv_diagnostic_t`.
#[repr(C)]
struct SpvDiagnostic {
    position: SpvPosition,
    error: *mut c_char,
    is_text_source: bool,
}

/// `spv_target_env::SPV_ENV_VULKAN_1_2`.
const SPV_ENV_VULKAN_1_2: c_int = 23;
/// `spv_result_t::SPV_SUCCESS`.
const SPV_SUCCESS: c_int = 0;

extern "C" {
    fn spvContextCreate(env: c_int) -> *mut c_void;
    fn spvContextDestroy(context: *mut c_void);
    fn spvValidateBinary(
        context: *const c_void,
        words: *const u32,
        num_words: usize,
        diagnostic: *mut *mut SpvDiagnostic,
    ) -> c_int;
    fn spvDiagnosticDestroy(diagnostic: *mut SpvDiagnostic);
}

/// Destroys the context and the diagnostic on every path out of [`validate`].
struct Owned {
    context: *mut c_void,
    diagnostic: *mut SpvDiagnostic,
}

impl Drop for Owned {
    fn drop(&mut self) {
        // SAFETY: both pointers are null or were returned by SPIRV-Tools and not freed yet;
        // `spvDiagnosticDestroy` accepts null, and the context is destroyed only when non-null.
        unsafe {
            spvDiagnosticDestroy(self.diagnostic);
            if !self.context.is_null() {
                spvContextDestroy(self.context);
            }
        }
    }
}

/// Validates a whole module with SPIRV-Tools for Vulkan 1.2 (SPIR-V up to 1.5). On rejection,
/// the validator's message, with the word index it points at.
pub fn validate(words: &[u32]) -> Result<(), InvalidSpirv> {
    // SAFETY: `spvContextCreate` has no preconditions; it returns null only for an unknown
    // environment, which is checked below.
    let context = unsafe { spvContextCreate(SPV_ENV_VULKAN_1_2) };
    let mut owned = Owned { context, diagnostic: std::ptr::null_mut() };
    if context.is_null() {
        return Err(InvalidSpirv("the SPIR-V validator could not start".into()));
    }
    // SAFETY: the context is live; `words` is a valid slice for `words.len()` words (an empty
    // slice passes a dangling but aligned pointer with a length of 0, which the validator
    // rejects without reading); the diagnostic out-pointer is valid and starts null.
    let result = unsafe { spvValidateBinary(context, words.as_ptr(), words.len(), &mut owned.diagnostic) };
    if result == SPV_SUCCESS {
        return Ok(());
    }
    if owned.diagnostic.is_null() {
        return Err(InvalidSpirv(format!("rejected by the SPIR-V validator (code {result})")));
    }
    // SAFETY: a non-null diagnostic is a live `spv_diagnostic_t` owned by `owned`; its `error`
    // is null or a NUL-terminated string it owns.
    let message = unsafe {
        let d = &*owned.diagnostic;
        let text = if d.error.is_null() {
            format!("code {result}")
        } else {
            CStr::from_ptr(d.error).to_string_lossy().trim().to_string()
        };
        if d.is_text_source {
            text
        } else {
            format!("{text} (word {})", d.position.index)
        }
    };
    Err(InvalidSpirv(message))
}

#[cfg(test)]
mod tests {
    use super::validate;

    #[test]
    fn rejects_what_is_not_a_module() {
        assert!(validate(&[]).is_err());
        assert!(validate(&[0x0723_0203]).is_err());
        assert!(validate(&[0xdead_beef; 8]).is_err());
    }
}
