//! Run-time SPIR-V is validated before any driver sees it: broken modules that used to crash
//! lavapipe or the validation layer give typed errors, capabilities are checked against the
//! enabled features, and a seeded fuzz of `kernels::MIX` never crashes.
//!
//! Built without the `spirv-validation` feature (no SPIRV-Tools linked, as in the Windows build
//! of `scripts/windows-wine.sh`), the same tests check what such a build promises instead: the
//! safe constructors refuse every module (`Error::ValidationUnavailable`, or `InvalidSpirv` for
//! what the cheap checks before the validator catch), so nothing unvalidated reaches the driver;
//! the device checks are then exercised through `Kernel::from_words_unchecked` on modules that
//! the validator accepts in the other build.

mod common;
use common::*;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use vkasync::{kernels, Arg, BindingKind, Buffer, CommandList, Device, Error, Kernel, MemoryKind, Recorder};

const OP_FUNCTION: u32 = 54;
const OP_FUNCTION_PARAMETER: u32 = 55;
const OP_FUNCTION_END: u32 = 56;
const OP_CAPABILITY: u32 = 17;
const OP_EXTENSION: u32 = 10;
const OP_EXECUTION_MODE: u32 = 16;
const OP_CONSTANT: u32 = 43;
/// OpSourceContinued, OpSource, OpSourceExtension, OpName, OpMemberName, OpString, OpLine,
/// OpNoLine, OpModuleProcessed: they do not change what a module computes.
const DEBUG_OPS: [u32; 9] = [2, 3, 4, 5, 6, 7, 8, 317, 330];

/// `(first word, word count, opcode)` of every instruction after the header.
fn instructions(words: &[u32]) -> Vec<(usize, usize, u32)> {
    let mut out = Vec::new();
    let mut i = 5;
    while i < words.len() {
        let count = (words[i] >> 16) as usize;
        if count == 0 || i + count > words.len() {
            break;
        }
        out.push((i, count, words[i] & 0xffff));
        i += count;
    }
    out
}

/// Opcodes whose change can make `mix`'s loop run forever: integer constants (the increment, the
/// bound), `OpIAdd`/`OpISub` (the increment), the integer comparisons (the loop test), and
/// `OpPhi` to `OpSwitch` (the loop's control flow).
const LOOP_OPS: [u32; 3] = [43, 128, 130];

fn may_not_terminate(op: u32) -> bool {
    LOOP_OPS.contains(&op) || (170..=179).contains(&op) || (245..=251).contains(&op)
}

/// Whether a mutant of `base` is safe to dispatch: same length, and no instruction that steers
/// the loop changed. A valid module may loop forever (case 286 of the fuzz turned `i < rounds`
/// into `gid < rounds`); Mesa 22's llvmpipe ended such loops after 65,535 iterations, Mesa 25's
/// runs them forever, so the fuzz dispatches only mutants that keep `mix`'s loop intact.
fn terminates(base: &[u32], mutant: &[u32]) -> bool {
    if base.len() != mutant.len() {
        return false;
    }
    let (a, b) = (instructions(base), instructions(mutant));
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(&b).all(|(x, y)| {
        let same = x == y && base[x.0..x.0 + x.1] == mutant[y.0..y.0 + y.1];
        same || !(may_not_terminate(x.2) || may_not_terminate(y.2))
    })
}

/// Whether this build validates run-time SPIR-V (feature `spirv-validation`). The fuzz below
/// runs the same cases either way; only what it expects differs.
const VALIDATOR: bool = cfg!(feature = "spirv-validation");

fn instruction_word(count: usize, op: u32) -> u32 {
    ((count as u32) << 16) | op
}

fn mix() -> Vec<u32> {
    kernels::MIX.spirv.to_vec()
}

#[cfg(feature = "spirv-validation")]
fn assert_invalid(device: &Device, words: &[u32]) -> String {
    match Kernel::from_words(device, "broken", words) {
        Err(Error::InvalidSpirv(msg)) => msg,
        other => panic!("expected Error::InvalidSpirv, got {other:?}"),
    }
}

/// A build without the validator refuses the module, through both safe constructors.
#[cfg(not(feature = "spirv-validation"))]
fn assert_refused_unvalidated(device: &Device, words: &[u32]) {
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    assert_eq!(Kernel::from_words(device, "unvalidated", words).unwrap_err(), Error::ValidationUnavailable);
    assert_eq!(Kernel::from_spirv(device, "unvalidated", &bytes).unwrap_err(), Error::ValidationUnavailable);
}

/// A kernel from `words`, through the validator where the build has one. Without it, checks
/// that the safe constructor refuses the module, then creates it unchecked: for modules that
/// the validator accepts (`spirv-validation` builds of these tests pass them to the device
/// checks through `Kernel::from_words`), so that the device checks stay tested.
fn device_checked(device: &Device, name: &str, words: &[u32]) -> Result<Kernel, Error> {
    #[cfg(feature = "spirv-validation")]
    return Kernel::from_words(device, name, words);
    #[cfg(not(feature = "spirv-validation"))]
    {
        assert_refused_unvalidated(device, words);
        // SAFETY: only called with `kernels::MIX` and variants that differ in a capability, an
        // extension or the workgroup size, which SPIRV-Tools' validator accepts for Vulkan 1.2
        // (the `spirv-validation` build runs these very words through it in `from_words`).
        unsafe { Kernel::from_words_unchecked(device, name, words) }
    }
}

/// Dispatches `kernel` once with a 256-element buffer per binding and push constants
/// `[n = 64, K = 3, 0, ...]`; returns the buffers read back.
fn dispatch_once(device: &Device, kernel: &Kernel, input: &[u32]) -> Result<Vec<Vec<u32>>, Error> {
    let r = kernel.reflection();
    let buffers: Vec<Buffer<u32>> = r
        .bindings
        .iter()
        .map(|_| Buffer::<u32>::new(device, input.len(), MemoryKind::Device))
        .collect::<Result<_, _>>()?;
    let args: Vec<Arg> = r
        .bindings
        .iter()
        .zip(&buffers)
        .map(|(b, buf)| if b.kind == BindingKind::Uniform { Arg::uniform(buf) } else { Arg::storage(buf) })
        .collect();
    let mut push = vec![0u8; r.push_constant_size as usize];
    for (i, v) in [64u32, 3].iter().enumerate() {
        if push.len() >= 4 * (i + 1) {
            push[4 * i..4 * (i + 1)].copy_from_slice(&v.to_le_bytes());
        }
    }
    let mut cmds = CommandList::new(device);
    for buf in &buffers {
        cmds.upload(buf, input)?;
    }
    cmds.dispatch(kernel, [1, 1, 1], &args, &push)?;
    let reads = buffers.iter().map(|b| cmds.read_back(b)).collect::<Result<Vec<_>, _>>()?;
    cmds.submit_and_wait()?;
    reads.into_iter().map(|r| r.into_vec()).collect()
}

#[test]
fn mix_with_op_function_changed_to_op_function_parameter_is_invalid_spirv() {
    // This module used to segfault inside lavapipe's vkCreateComputePipelines.
    let device = device();
    let mut words = mix();
    let (at, _, _) = instructions(&words).into_iter().find(|&(_, _, op)| op == OP_FUNCTION).unwrap();
    words[at] = (words[at] & 0xffff_0000) | OP_FUNCTION_PARAMETER;
    #[cfg(feature = "spirv-validation")]
    {
        let msg = assert_invalid(&device, &words);
        assert!(msg.contains("spirv-val"), "{msg}");
        // The byte path is validated the same way.
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        assert!(matches!(Kernel::from_spirv(&device, "broken", &bytes), Err(Error::InvalidSpirv(_))));
    }
    // Without a validator it is refused unchecked (had it reached lavapipe, the process would
    // have crashed).
    #[cfg(not(feature = "spirv-validation"))]
    assert_refused_unvalidated(&device, &words);
    finish(device);
}

#[test]
fn mix_without_its_final_op_function_end_is_invalid_spirv() {
    // This module used to segfault inside the validation layer, and was accepted without it.
    let device = device();
    let words = mix();
    assert_eq!(instructions(&words).last().unwrap().2, OP_FUNCTION_END);
    #[cfg(feature = "spirv-validation")]
    {
        let msg = assert_invalid(&device, &words[..words.len() - 1]);
        assert!(msg.contains("spirv-val"), "{msg}");
        let bytes: Vec<u8> = words[..words.len() - 1].iter().flat_map(|w| w.to_be_bytes()).collect();
        assert!(matches!(Kernel::from_spirv(&device, "broken", &bytes), Err(Error::InvalidSpirv(_))));
    }
    #[cfg(not(feature = "spirv-validation"))]
    {
        assert_refused_unvalidated(&device, &words[..words.len() - 1]);
        // Big-endian bytes too.
        let bytes: Vec<u8> = words[..words.len() - 1].iter().flat_map(|w| w.to_be_bytes()).collect();
        assert_eq!(Kernel::from_spirv(&device, "broken", &bytes).unwrap_err(), Error::ValidationUnavailable);
    }
    finish(device);
}

#[test]
fn valid_run_time_modules_still_work_checked_and_unchecked() {
    let device = device();
    let data: Vec<u32> = (0..256).map(|i| i * 7 + 1).collect();
    let expected: Vec<u32> = data.iter().enumerate().map(|(i, &x)| if i < 64 { mix_cpu(x, 3) } else { x }).collect();
    // Without a validator, `device_checked` asserts that the safe constructor refuses MIX, then
    // creates it unchecked.
    let checked = device_checked(&device, "mix-checked", kernels::MIX.spirv).unwrap();
    assert_eq!(dispatch_once(&device, &checked, &data).unwrap(), vec![expected.clone()]);
    // SAFETY: MIX was validated by build.rs.
    let unchecked = unsafe { Kernel::from_words_unchecked(&device, "mix-unchecked", kernels::MIX.spirv) }.unwrap();
    assert_eq!(dispatch_once(&device, &unchecked, &data).unwrap(), vec![expected]);
    assert_eq!(unchecked.local_size(), [64, 1, 1]);
    for k in kernels::ALL {
        #[cfg(feature = "spirv-validation")]
        Kernel::from_words(&device, k.name, k.spirv).unwrap_or_else(|e| panic!("{}: {e}", k.path));
        #[cfg(not(feature = "spirv-validation"))]
        assert_refused_unvalidated(&device, k.spirv);
    }
    finish(device);
}

/// MIX with one instruction inserted after its `OpCapability Shader`.
fn mix_with(extra: &[u32]) -> Vec<u32> {
    let words = mix();
    let (at, count, _) = instructions(&words).into_iter().find(|&(_, _, op)| op == OP_CAPABILITY).unwrap();
    let mut out = words[..at + count].to_vec();
    out.extend_from_slice(extra);
    out.extend_from_slice(&words[at + count..]);
    out
}

#[test]
fn capabilities_and_extensions_the_device_did_not_enable_are_refused_by_name() {
    // A device with buffer device addresses on (for the library's copy kernel).
    let device = builder().compute_copies(true).build().unwrap();
    assert!(device.compute_copies(), "lavapipe offers buffer device addresses: the device enables them");
    // Int64, Float64, Int16, Int8, StorageBuffer8BitAccess, VariablePointers: vkasync enables none
    // of their features (lavapipe supports most of them).
    for (cap, name) in [
        (11, "Int64"),
        (10, "Float64"),
        (22, "Int16"),
        (39, "Int8"),
        (4448, "StorageBuffer8BitAccess"),
        (4442, "VariablePointers"),
        // Enabled on the device for the library's own copy kernel, never for users' kernels:
        // device addresses reach past any buffer's range (see `Device::compute_copies`).
        (5347, "PhysicalStorageBufferAddresses"),
    ] {
        let words = mix_with(&[instruction_word(2, OP_CAPABILITY), cap]);
        match device_checked(&device, "caps", &words) {
            Err(e @ Error::UnsupportedCapability { .. }) => {
                let Error::UnsupportedCapability { ref capability, ref requires, .. } = e else { unreachable!() };
                assert_eq!(capability, name);
                assert!(requires.contains("feature"), "{e}");
                assert!(e.to_string().contains(name), "{e}");
            }
            other => panic!("{name}: expected UnsupportedCapability, got {other:?}"),
        }
    }
    // Capabilities core in Vulkan 1.2 are allowed (the module is valid with them declared).
    for cap in [0, 50, 4437] {
        device_checked(&device, "caps", &mix_with(&[instruction_word(2, OP_CAPABILITY), cap])).unwrap();
    }
    // An extension that needs a device extension vkasync does not enable.
    let name = b"SPV_KHR_shader_clock\0\0\0\0";
    let mut ext = vec![instruction_word(1 + name.len() / 4, OP_EXTENSION)];
    ext.extend(name.chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())));
    match device_checked(&device, "ext", &mix_with(&ext)) {
        Err(Error::UnsupportedCapability { capability, .. }) => {
            assert_eq!(capability, "extension SPV_KHR_shader_clock")
        }
        other => panic!("expected UnsupportedCapability, got {other:?}"),
    }
    finish(device);
}

#[test]
fn a_workgroup_larger_than_the_device_allows_is_refused() {
    let device = device();
    let max = device.limits().max_compute_work_group_size[0];
    let mut words = mix();
    // LocalSize 64 and the WorkgroupSize built-in (a composite of the constant 64) both grow.
    for (at, _, op) in instructions(&words) {
        if (op == OP_EXECUTION_MODE && words[at + 2] == 17) || (op == OP_CONSTANT && words[at + 3] == 64) {
            words[at + 3] = max * 2;
        }
    }
    match device_checked(&device, "big", &words) {
        Err(Error::WorkgroupSize { size, .. }) => assert_eq!(size, [max * 2, 1, 1]),
        other => panic!("expected WorkgroupSize, got {other:?}"),
    }
    finish(device);
}

#[test]
fn a_local_size_literal_beyond_the_device_is_refused_even_where_the_built_in_overrides_it() {
    let device = device();
    let max = device.limits().max_compute_work_group_size[2];
    let mut words = mix();
    // Only the LocalSize literal's z grows; the WorkgroupSize built-in (64, 1, 1) still wins by
    // the specification, but a literal beyond the device is refused (older validation layers
    // check it).
    for (at, _, op) in instructions(&words) {
        if op == OP_EXECUTION_MODE && words[at + 2] == 17 {
            words[at + 5] = max + 1;
        }
    }
    match device_checked(&device, "z", &words) {
        Err(Error::WorkgroupSize { size, .. }) => assert_eq!(size, [64, 1, max + 1]),
        other => panic!("expected WorkgroupSize, got {other:?}"),
    }
    finish(device);
}

/// splitmix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One random mutation of `words`; returns its description.
fn mutate(words: &mut Vec<u32>, rng: &mut Rng) -> String {
    if words.len() < 5 {
        return "none (already truncated)".into();
    }
    let insts = instructions(words);
    let semantic: Vec<_> = insts.iter().copied().filter(|i| !DEBUG_OPS.contains(&i.2)).collect();
    let opcodes: Vec<u32> = semantic.iter().map(|i| i.2).collect();
    let pick = |rng: &mut Rng| if semantic.is_empty() { None } else { Some(semantic[rng.below(semantic.len())]) };
    match rng.below(10) {
        0 => {
            let at = rng.below(words.len());
            let bit = rng.below(32);
            words[at] ^= 1 << bit;
            format!("flip bit {bit} of word {at}")
        }
        1 | 2 => {
            // A bit flip inside an instruction that matters.
            let Some((at, count, _)) = pick(rng) else { return "none".into() };
            let w = at + rng.below(count);
            let bit = rng.below(32);
            words[w] ^= 1 << bit;
            format!("flip bit {bit} of word {w}")
        }
        3 => {
            let len = rng.below(words.len());
            words.truncate(len);
            format!("truncate to {len} words")
        }
        4 => {
            let Some((at, count, old)) = pick(rng) else { return "none".into() };
            let op = if rng.below(2) == 0 { opcodes[rng.below(opcodes.len())] } else { rng.below(400) as u32 };
            words[at] = instruction_word(count, op);
            format!("opcode {old} -> {op} at word {at}")
        }
        5 | 6 => {
            let Some((at, count, op)) = pick(rng) else { return "none".into() };
            if count < 2 {
                return "none".into();
            }
            let w = at + 1 + rng.below(count - 1);
            let old = words[w];
            words[w] = match rng.below(5) {
                0 => rng.below(8) as u32,
                1 => rng.below(words[3] as usize + 2) as u32,
                2 => old.wrapping_add(1),
                3 => old.wrapping_sub(1),
                _ => rng.next() as u32,
            };
            format!("operand of op {op} at word {w}: {old} -> {}", words[w])
        }
        7 => {
            let Some((at, count, op)) = pick(rng) else { return "none".into() };
            let new = match rng.below(3) {
                0 => count + 1,
                1 => count.saturating_sub(1),
                _ => rng.below(8),
            };
            words[at] = instruction_word(new, op);
            format!("word count of op {op} at word {at}: {count} -> {new}")
        }
        8 => {
            let Some((at, count, op)) = pick(rng) else { return "none".into() };
            if rng.below(2) == 0 {
                words.drain(at..at + count);
                format!("delete op {op} at word {at}")
            } else {
                let copy = words[at..at + count].to_vec();
                let (to, _, _) = semantic[rng.below(semantic.len())];
                words.splice(to..to, copy);
                format!("copy op {op} from word {at} to word {to}")
            }
        }
        _ => {
            // Header: version, generator, bound, schema.
            let w = 1 + rng.below(4);
            let old = words[w];
            words[w] = match rng.below(3) {
                0 => old ^ (1 << rng.below(32)),
                1 => old.wrapping_add(1),
                _ => old.wrapping_sub(1),
            };
            format!("header word {w}: {old:#x} -> {:#x}", words[w])
        }
    }
}

/// The words that change what a module computes: everything but debug instructions.
fn semantic_hash(words: &[u32]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    words[..5.min(words.len())].hash(&mut h);
    for (at, count, op) in instructions(words) {
        if !DEBUG_OPS.contains(&op) {
            words[at..at + count].hash(&mut h);
        }
    }
    h.finish()
}

/// 2,500 seeded mutations of MIX (1 to 3 each). Every case must be a typed error or a kernel; every
/// kernel is created as a pipeline, and every one whose non-debug instructions differ from all
/// kernels dispatched before is dispatched and read back (modules that differ only in debug
/// instructions compute the same thing, and lavapipe compiles each distinct module at its first
/// dispatch, which costs tens of milliseconds). A dispatch may fail with a typed error, never crash.
/// A build without the validator must refuse every case: none becomes a kernel.
#[test]
fn fuzzed_mix_modules_give_typed_errors_or_working_kernels() {
    let _watchdog = Watchdog::new(std::time::Duration::from_secs(300));
    let device = device();
    // VKASYNC_FUZZ_CASES and VKASYNC_FUZZ_SEED widen the search locally.
    let env = |name: &str, default: u64| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    let cases = env("VKASYNC_FUZZ_CASES", 2500) as usize;
    // VKASYNC_FUZZ_TRACE=1 prints each case before it runs and writes its words to
    // $TMPDIR/vkasync-fuzz-case.spv, to find one that crashes.
    let trace = std::env::var("VKASYNC_FUZZ_TRACE").is_ok_and(|v| v == "1");
    let started = std::time::Instant::now();
    let base = mix();
    let mix_hash = semantic_hash(&base);
    let input: Vec<u32> = (0..256).map(|i| i * 7 + 1).collect();
    let expected: Vec<u32> = input.iter().enumerate().map(|(i, &x)| if i < 64 { mix_cpu(x, 3) } else { x }).collect();
    let mut rng = Rng(env("VKASYNC_FUZZ_SEED", 0x5eed_f00d));
    let mut dispatched: HashSet<u64> = HashSet::new();
    let (mut ok, mut dispatch_err, mut checked_output, mut unsafe_loops) = (0, 0, 0, 0);
    let mut errors: std::collections::BTreeMap<&'static str, usize> = Default::default();
    for case in 0..cases {
        let mut words = base.clone();
        let rounds = 1 + usize::from(rng.below(5) == 0) + usize::from(rng.below(10) == 0);
        let what: Vec<String> = (0..rounds).map(|_| mutate(&mut words, &mut rng)).collect();
        let what = what.join("; ");
        if trace {
            eprintln!("case {case}: {what}");
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            std::fs::write(std::env::temp_dir().join("vkasync-fuzz-case.spv"), bytes).unwrap();
        }
        match Kernel::from_words(&device, "fuzz", &words) {
            Ok(kernel) => {
                if !VALIDATOR {
                    panic!("case {case} ({what}): an unvalidated module became a kernel");
                }
                ok += 1;
                let key = semantic_hash(&words);
                if !terminates(&base, &words) {
                    unsafe_loops += 1;
                } else if dispatched.insert(key) {
                    match dispatch_once(&device, &kernel, &input) {
                        Ok(out) if key == mix_hash => {
                            assert_eq!(out, vec![expected.clone()], "case {case} ({what})");
                            checked_output += 1;
                        }
                        Ok(out) => assert_eq!(out.len(), kernel.reflection().bindings.len()),
                        Err(e) => {
                            assert!(!e.is_device_lost(), "case {case} ({what}) lost the device");
                            dispatch_err += 1;
                        }
                    }
                }
            }
            Err(e) => {
                let kind = match e {
                    // Without a validator only the checks before it (the header, rules the
                    // validator misses) can find a module invalid.
                    Error::InvalidSpirv(msg) if !VALIDATOR && msg.contains("spirv-val") => {
                        panic!("case {case} ({what}): spirv-val ran in a build without it: {msg}")
                    }
                    Error::InvalidSpirv(_) => "InvalidSpirv",
                    Error::ValidationUnavailable if !VALIDATOR => "ValidationUnavailable",
                    Error::UnsupportedCapability { .. } => "UnsupportedCapability",
                    Error::WorkgroupSize { .. } => "WorkgroupSize",
                    Error::PushConstants { .. } => "PushConstants",
                    Error::BindingMismatch { .. } => "BindingMismatch",
                    other => panic!("case {case} ({what}): unexpected error {other:?}"),
                };
                *errors.entry(kind).or_default() += 1;
            }
        }
        assert_eq!(
            device.validation_message_count(),
            0,
            "case {case} ({what}): validation messages {:#?}",
            device.validation_messages()
        );
    }
    eprintln!(
        "{cases} cases in {:?}: {ok} kernels ({} dispatched, {unsafe_loops} not dispatched as their loop may not \
         end, {dispatch_err} dispatch errors, {checked_output} checked against the CPU), errors {errors:?}",
        started.elapsed(),
        dispatched.len()
    );
    if VALIDATOR {
        assert!(ok > 0 && dispatched.len() > 1 && checked_output == 1, "the fuzz must create and dispatch kernels");
        assert!(errors["InvalidSpirv"] > cases / 2);
    } else {
        assert_eq!(ok, 0);
        assert!(errors["ValidationUnavailable"] > cases / 2, "{errors:?}");
    }
    finish(device);
}
